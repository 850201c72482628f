"""ADR 0021: PyTorch's native tensor parallelism — DeviceMesh, DTensor, parallelize_module — against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.cli.bench_loader import load_bench
from kernbench.dtensor import DTensorError, Replicate, Shard
from kernbench.session import Session
from tests.cli import REPO_ROOT, run_kernbench_in_process
from tests.spawned import run_ranks

WORLD = 4  # the default topology's SIPs, one rank each


def assert_close(actual, expected, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=rtol, atol=atol)


def _spawned(fn, world: int = WORLD) -> dict:
    """`fn(torch, rank)` on `world` spawned ranks of the default machine; results by rank (a rank's error
    re-raised as itself)."""
    session = Session("default")
    results = {}

    def worker(rank, torch):
        results[rank] = fn(torch, rank)

    def bench(torch):
        torch.multiprocessing.spawn(worker, args=(torch,), nprocs=world)

    run_ranks(session, bench)
    return results


def _collectives_of(torch, step):
    """`step()`'s result and the records of the collectives it issued on every rank (barriers left out), taken
    between barriers once the device work before and after has finished."""
    records = torch.tensor(0.0)._ctx.collectives  # the run's collective records, in order
    torch.ahbm.synchronize()
    torch.distributed.barrier()
    first = len(records)
    result = step()
    torch.ahbm.synchronize()
    torch.distributed.barrier()
    return result, [r for r in records[first:] if r["collective"] != "barrier"]


def _kinds(records) -> list:
    return [(r["collective"], r["bytes"]) for r in records]


def _toy_model(torch):
    """pytorch/examples' tensor-parallel toy model: Linear(10, 32), ReLU, Linear(32, 5)."""
    nn = torch.nn

    class ToyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj = nn.Linear(10, 32)
            self.relu = nn.ReLU()
            self.out_proj = nn.Linear(32, 5)

        def forward(self, x):
            return self.out_proj(self.relu(self.in_proj(x)))
    return ToyModel().to("cuda")


def _adamw(param, grad, state, lr=0.25, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    state["step"] = state.get("step", 0) + 1
    param = param * (1 - lr * weight_decay)
    state["m"] = betas[0] * state.get("m", 0) + (1 - betas[0]) * grad
    state["v"] = betas[1] * state.get("v", 0) + (1 - betas[1]) * grad * grad
    m_hat = state["m"] / (1 - betas[0] ** state["step"])
    v_hat = state["v"] / (1 - betas[1] ** state["step"])
    return param - lr * m_hat / (np.sqrt(v_hat) + eps)


def _mlp_reference(params: dict, inputs: list) -> tuple[list, dict]:
    """Outputs of each step and the parameters after, for loss = output.sum() and AdamW, in float64. As in the
    examples, gradients are never zeroed: each step's gradient adds to the ones before."""
    params = {k: v.astype(np.float64) for k, v in params.items()}
    states = {k: {} for k in params}
    total = {k: 0.0 for k in params}
    outputs = []
    for x in inputs:
        w1, b1, w2, b2 = (params[k] for k in ("in_proj.weight", "in_proj.bias", "out_proj.weight", "out_proj.bias"))
        a = x @ w1.T + b1
        h = np.maximum(a, 0)
        y = h @ w2.T + b2
        outputs.append(y)
        gy = np.ones_like(y)
        gh = (gy @ w2) * (a > 0)
        grads = {"in_proj.weight": gh.T @ x, "in_proj.bias": gh.sum(0), "out_proj.weight": gy.T @ h,
                 "out_proj.bias": gy.sum(0)}
        total = {k: total[k] + grads[k] for k in params}
        params = {k: _adamw(params[k], total[k], states[k]) for k in params}
    return outputs, params


def _train_toy(sequence_parallel: bool, steps: int = 2):
    def program(torch, rank):
        from torch.distributed._tensor import Shard
        from torch.distributed._tensor.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = init_device_mesh("cuda", mesh_shape=(WORLD,))
        model = _toy_model(torch)
        initial = {name: p.detach().numpy() for name, p in model.named_parameters()}
        plan = {"in_proj": ColwiseParallel(input_layouts=Shard(0)), "out_proj": RowwiseParallel(
            output_layouts=Shard(0))} if sequence_parallel else {"in_proj": ColwiseParallel(),
                                                                 "out_proj": RowwiseParallel()}
        model = parallelize_module(module=model, device_mesh=mesh, parallelize_plan=plan)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.25, foreach=True)
        inputs, outputs = [], []
        for i in range(steps):
            if not sequence_parallel:
                torch.manual_seed(i)
            inp = torch.rand(20, 10, device="cuda")
            output = model(inp)
            output.sum().backward()
            optimizer.step()
            inputs.append(inp.numpy())
            outputs.append(output.numpy())
        after = {name: p.full_tensor().numpy() for name, p in model.named_parameters()}
        return {"rank": mesh.get_rank(), "initial": initial, "inputs": inputs, "outputs": outputs, "after": after}
    return _spawned(program)


def test_adr0021_t1_the_tensor_parallel_example_trains_as_an_unsharded_mlp():
    results = _train_toy(sequence_parallel=False)
    outputs, params = _mlp_reference(results[0]["initial"], [x.astype(np.float64) for x in results[0]["inputs"]])
    for rank in range(WORLD):
        assert results[rank]["rank"] == rank
        for got, expected in zip(results[rank]["outputs"], outputs):
            assert_close(got, expected, rtol=1e-4, atol=1e-4)
        for name, value in params.items():
            assert_close(results[rank]["after"][name], value, rtol=1e-4, atol=1e-4)


def test_adr0021_t2_the_sequence_parallel_example_trains_as_an_unsharded_mlp_on_the_whole_batch():
    results = _train_toy(sequence_parallel=True)
    whole = [np.concatenate([results[r]["inputs"][i] for r in range(WORLD)]).astype(np.float64) for i in range(2)]
    outputs, params = _mlp_reference(results[0]["initial"], whole)
    for i, expected in enumerate(outputs):
        assert_close(np.concatenate([results[r]["outputs"][i] for r in range(WORLD)]), expected, rtol=1e-4,
                     atol=1e-4)
    for name, value in params.items():
        assert_close(results[1]["after"][name], value, rtol=1e-4, atol=1e-4)


@pytest.mark.quick
@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_adr0021_t3_a_column_then_row_mlp_issues_megatrons_collectives(sequence_parallel):
    tokens, hidden = 16, 8

    def program(torch, rank):
        from torch.distributed.tensor import Shard
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = torch.distributed.device_mesh.init_device_mesh("cuda", (WORLD,))
        nn = torch.nn
        model = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.ReLU(), nn.Linear(4 * hidden, hidden)).to("cuda")
        layout = {"input_layouts": Shard(0)} if sequence_parallel else {}
        out_layout = {"output_layouts": Shard(0)} if sequence_parallel else {}
        parallelize_module(model, mesh, {"0": ColwiseParallel(**layout), "2": RowwiseParallel(**out_layout)})
        rows = tokens // WORLD if sequence_parallel else tokens
        x = torch.randn(rows, hidden, device="cuda").requires_grad_()
        y, forward = _collectives_of(torch, lambda: model(x))
        _, backward = _collectives_of(torch, lambda: y.sum().backward())
        return sorted(_kinds(forward)), sorted(_kinds(backward))

    forward, backward = _spawned(program)[0]
    whole = tokens * hidden * 4  # the activation (float32) the MLP takes and gives
    if sequence_parallel:
        assert forward == [("all_gather", whole), ("reduce_scatter", whole)]
        assert backward == [("all_gather", whole), ("reduce_scatter", whole)]
    else:
        assert forward == [("all_reduce", whole)]
        assert backward == [("all_reduce", whole)]


def test_adr0021_t4_a_2d_mesh_slices_by_name_into_the_groups_of_its_dimensions():
    def program(torch, rank):
        mesh = torch.distributed.device_mesh.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
        tp, dp = mesh["tp"], mesh["dp"]
        return {"shape": mesh.shape, "ndim": mesh.ndim, "size": mesh.size(), "tp": tp.mesh.tolist(),
                "dp": dp.mesh.tolist(), "tp_rank": mesh.get_local_rank("tp"), "dp_rank": mesh.get_local_rank(0),
                "tp_group": torch.distributed.get_process_group_ranks(mesh.get_group("tp")),
                "tp_local": tp.get_local_rank(), "device": torch.ahbm.current_device(),
                "alias": torch.distributed.DeviceMesh is torch.distributed.tensor.DeviceMesh}

    results = _spawned(program)
    for rank, got in results.items():
        assert got["shape"] == (2, 2) and got["ndim"] == 2 and got["size"] == 4 and got["alias"]
        assert got["tp"] == [2 * (rank // 2), 2 * (rank // 2) + 1] and got["dp"] == [rank % 2, rank % 2 + 2]
        assert (got["dp_rank"], got["tp_rank"], got["tp_local"]) == (rank // 2, rank % 2, rank % 2)
        assert got["tp_group"] == got["tp"] and got["device"] == rank


def test_adr0021_t5_uneven_shards_and_redistribution_keep_the_global_value():
    full = np.arange(10 * 6, dtype=np.float32).reshape(10, 6)

    def program(torch, rank):
        from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        rows = distribute_tensor(torch.tensor(full, device="cuda"), mesh, [Shard(0)])
        cols = rows.redistribute(mesh, [Shard(1)])
        partial = torch.distributed.tensor.DTensor.from_local(torch.tensor(full, device="cuda") * (rank + 1),
                                                              mesh, [Partial()])
        return {"rows": rows.to_local().numpy(), "cols": cols.to_local().numpy(), "shape": rows.shape,
                "whole": cols.full_tensor().numpy(), "sum": partial.redistribute(mesh, [Replicate()]).to_local()
                .numpy(), "scattered": partial.redistribute(mesh, [Shard(0)]).to_local().numpy()}

    results = _spawned(program)
    bounds = [(0, 3), (3, 6), (6, 9), (9, 10)]  # torch.chunk's split of 10 rows over 4 ranks
    for rank, got in results.items():
        start, stop = bounds[rank]
        assert got["shape"] == (10, 6)
        assert_close(got["rows"], full[start:stop])
        assert_close(got["cols"], full[:, 2 * rank:2 * rank + 2] if rank < 3 else full[:, 6:])
        assert_close(got["whole"], full)
        assert_close(got["sum"], full * 10)
        assert_close(got["scattered"], full[start:stop] * 10)


def test_adr0021_t6_ops_on_sharded_sequences_and_heads_match_numpy_with_their_gradients():
    rng = np.random.default_rng(21)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    gamma = (1 + 0.1 * rng.standard_normal(16)).astype(np.float32)

    def program(torch, rank):
        from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        weight = torch.nn.Parameter(distribute_tensor(torch.tensor(gamma, device="cuda"), mesh, [Replicate()]))
        seq = DTensor.from_local(torch.tensor(x[:, 2 * rank:2 * rank + 2], device="cuda"), mesh, [Shard(1)])
        normed = torch.nn.functional.layer_norm(seq, (16,), weight)
        heads = normed.redistribute(mesh, [Replicate()]).view(2, 8, 4, 4).transpose(1, 2)
        heads = heads.redistribute(mesh, [Shard(1)])
        scores = torch.softmax(heads @ heads.transpose(-2, -1), dim=-1)
        out = scores.sum()
        out.backward()
        return {"normed": normed.full_tensor().numpy(), "scores": scores.full_tensor().numpy(),
                "placements": scores.placements, "grad": weight.grad.to_local().numpy(), "out": out.item()}

    results = _spawned(program)
    x64 = x.astype(np.float64)
    hat = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    normed = hat * gamma
    heads = normed.reshape(2, 8, 4, 4).transpose(0, 2, 1, 3)
    logits = heads @ heads.transpose(0, 1, 3, 2)
    scores = np.exp(logits - logits.max(-1, keepdims=True))
    scores /= scores.sum(-1, keepdims=True)
    for got in results.values():
        assert_close(got["normed"], normed, rtol=1e-4, atol=1e-4)
        assert_close(got["scores"], scores, rtol=1e-4, atol=1e-4)
        assert got["out"] == pytest.approx(scores.sum(), rel=1e-5)
        assert got["placements"][0].is_shard(1)
        assert_close(got["grad"], np.zeros(16), atol=1e-3)  # softmax rows sum to 1: no gradient reaches gamma


def test_adr0021_t7_bad_input_is_one_line_in_pytorchs_words(tmp_path):
    def mixed(torch, rank):
        from torch.distributed.tensor import Replicate, distribute_tensor
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        pair = torch.distributed.device_mesh.DeviceMesh("cuda", [0, 1] if rank < 2 else [2, 3])
        a = distribute_tensor(torch.ones(4, 4, device="cuda"), mesh, [Replicate()])
        if rank < 2:
            b = distribute_tensor(torch.ones(4, 4, device="cuda"), pair, [Replicate()])
            return a + b
        return None

    with pytest.raises(DTensorError, match="DTensor does not support cross-mesh operation yet!"):
        _spawned(mixed)

    def plain(torch, rank):
        from torch.distributed.tensor import Replicate, distribute_tensor
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        return distribute_tensor(torch.ones(4, device="cuda"), mesh, [Replicate()]) + torch.ones(4, device="cuda")

    with pytest.raises(DTensorError, match="got mixed torch.Tensor and DTensor"):
        _spawned(plain)

    bench = tmp_path / "big_mesh.py"
    bench.write_text("import torch\nfrom torch.distributed.device_mesh import init_device_mesh\n\n\n"
                     "def worker(rank):\n    init_device_mesh('cuda', (8,))\n\n\n"
                     "def run(_torch):\n    torch.multiprocessing.spawn(worker, nprocs=4)\n")
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith(
        "Mesh should not be bigger than default world size 4, but found 8 ranks!")


BENCH = REPO_ROOT / "kernbench" / "benches" / "dtensor_tp.py"
DIM, HEADS, VOCAB, BATCH, SEQ = 32, 4, 64, 2, 8


def _llama(torch, bench):
    """The TP tutorial's model around the bench's block: embedding, one block, final norm, output projection."""
    nn = torch.nn

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(VOCAB, DIM)
            self.layers = nn.ModuleList([bench["TransformerBlock"](DIM, HEADS, 2 * DIM)])
            self.norm = bench["RMSNorm"](DIM)
            self.output = nn.Linear(DIM, VOCAB, bias=False)
            cos, sin = bench["rotary_tables"](DIM // HEADS, SEQ)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers:
                h = layer(h, self.cos, self.sin)
            return self.output(self.norm(h))
    return Transformer()


def _llama_numpy_loss(params: dict, tokens, targets) -> float:
    """The model's cross-entropy loss in float64 numpy."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    norm = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w  # noqa: E731
    head = DIM // HEADS
    inverse = 1.0 / 10000 ** (np.arange(0, head, 2) / head)
    angles = np.arange(SEQ)[:, None] * inverse[None]
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))
    rotate = lambda x: x * cos + np.concatenate([-x[..., head // 2:], x[..., :head // 2]], -1) * sin  # noqa: E731
    x = p["tok_embeddings.weight"][tokens]
    a = norm(x, p["layers.0.attention_norm.weight"])
    split = lambda t: t.reshape(BATCH, SEQ, HEADS, head).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (split(a @ p[f"layers.0.attention.{w}.weight"].T) for w in ("wq", "wk", "wv"))
    scores = rotate(q) @ rotate(k).transpose(0, 1, 3, 2) / np.sqrt(head)
    scores = np.where(np.tril(np.ones((SEQ, SEQ), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, DIM)
    h = x + context @ p["layers.0.attention.wo.weight"].T
    f = norm(h, p["layers.0.ffn_norm.weight"])
    gate = f @ p["layers.0.feed_forward.w1.weight"].T
    h = h + (gate / (1 + np.exp(-gate)) * (f @ p["layers.0.feed_forward.w3.weight"].T)) @ \
        p["layers.0.feed_forward.w2.weight"].T
    logits = (norm(h, p["norm.weight"]) @ p["output.weight"].T).reshape(-1, VOCAB)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    return float(-logp[np.arange(logits.shape[0]), targets.reshape(-1)].mean())


def test_adr0021_t8_the_tp_tutorials_llama_with_sequence_parallelism_and_loss_parallel_matches_one_device():
    bench = load_bench(str(BENCH)).__globals__
    rng = np.random.default_rng(8)
    tokens, targets = rng.integers(0, VOCAB, (BATCH, SEQ)), rng.integers(0, VOCAB, (BATCH, SEQ))

    def parallel(torch, rank):
        from torch.distributed.tensor import Replicate, Shard
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                       loss_parallel, parallelize_module)
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        torch.manual_seed(0)
        model = _llama(torch, bench)
        parallelize_module(model, mesh, {
            "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "output": ColwiseParallel(input_layouts=Shard(1), use_local_output=False)})
        for block in model.layers:
            parallelize_module(block, mesh, bench["tutorial_plan"](True))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        logits = model(torch.tensor(tokens, device="cuda"))
        with loss_parallel():
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.tensor(targets).flatten(0, 1))
            loss.backward()
        grads = {name: p.grad.full_tensor().numpy() for name, p in model.named_parameters()}
        optimizer.step()
        return loss.item(), grads, {name: p.full_tensor().numpy() for name, p in model.named_parameters()}

    def single(torch):
        torch.manual_seed(0)
        model = _llama(torch, bench)
        initial = {name: p.detach().numpy() for name, p in model.named_parameters()}
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(tokens)).flatten(0, 1),
                                                 torch.tensor(targets).flatten(0, 1))
        loss.backward()
        grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
        optimizer.step()
        return initial, loss.item(), grads, {name: p.detach().numpy() for name, p in model.named_parameters()}

    session = Session("single_sip")
    initial, loss, grads, after = session.run(single, session.torch)
    assert loss == pytest.approx(_llama_numpy_loss(initial, tokens, targets), rel=1e-5)
    for rank, (rank_loss, rank_grads, rank_after) in _spawned(parallel).items():
        assert rank_loss == pytest.approx(loss, rel=1e-5)
        for name in grads:
            assert_close(rank_grads[name], grads[name], atol=1e-6)
            assert_close(rank_after[name], after[name], atol=1e-6)


def test_adr0021_t9_loss_parallel_is_cross_entropy_with_three_all_reduces_and_none_in_backward():
    rng = np.random.default_rng(9)
    logits = rng.standard_normal((6, 16)).astype(np.float32)
    targets = np.array([0, 5, 15, 7, -100, 12])

    def program(torch, rank):
        from torch.distributed.tensor import Shard, distribute_tensor
        from torch.distributed.tensor.parallel import loss_parallel
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        sharded = distribute_tensor(torch.tensor(logits, device="cuda"), mesh, [Shard(1)]).requires_grad_()
        labels = torch.tensor(targets, device="cuda")
        with loss_parallel():
            loss, forward = _collectives_of(torch, lambda: torch.nn.functional.cross_entropy(sharded, labels))
            _, backward = _collectives_of(torch, loss.backward)
        return (loss.item(), loss.placements, sharded.grad.full_tensor().numpy(),
                sorted(r["op"] for r in forward if r["collective"] == "all_reduce"), _kinds(backward))

    valid = targets != -100
    shifted = logits - logits.max(-1, keepdims=True)
    softmax = np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)
    expected = -np.log(softmax[np.arange(6), np.where(valid, targets, 0)])[valid].mean()
    onehot = np.eye(16)[np.where(valid, targets, 0)] * valid[:, None]
    gradient = (softmax - onehot) * valid[:, None] / valid.sum()
    for loss, placements, grad, forward, backward in _spawned(program).values():
        assert loss == pytest.approx(expected, rel=1e-5)
        assert placements[0].is_replicate()
        assert_close(grad, gradient, atol=1e-6)
        assert forward == ["max", "sum", "sum"] and backward == []


def test_adr0021_t10_the_dtensor_tp_bench_prints_its_table_beside_megatrons_and_the_same_timing_only(tmp_path):
    arguments = ("run", "dtensor_tp", "--tp", "2", "--hidden", "64", "--heads", "4", "--seq", "32")
    runs = [run_kernbench_in_process(*arguments, *extra, cwd=tmp_path) for extra in ((), ("--timing-only",))]
    tables = []
    for result in runs:
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["tp", "sp"])
        tables.append(lines[header + 1:header + 3])
    assert [row.split()[:2] for row in tables[0]] == [["2", "off"], ["2", "on"]]
    assert all(float(row.split()[6]) > 0 for row in tables[0])  # exposed communication, rank 0
    assert tables[0] == tables[1]


def test_adr0021_t11_2d_layouts_factories_distribute_module_and_embedding_styles_keep_the_global_value():
    table = np.arange(12 * 8, dtype=np.float32).reshape(12, 8) / 10
    ids = np.array([[0, 3, 11], [7, 7, 2]])

    def program(torch, rank):
        from torch.distributed.tensor import Replicate, Shard, distribute_module, distribute_tensor, ones
        from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleOutput, RowwiseParallel,
                                                       parallelize_module)
        mesh = torch.distributed.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
        grid = distribute_tensor(torch.tensor(table, device="cuda"), mesh, [Shard(0), Shard(1)])
        made = ones(12, 8, device_mesh=mesh, placements=[Shard(0), Replicate()])
        tp = mesh["tp"]
        by_rows, by_cols = (torch.nn.Embedding(12, 8).to("cuda") for _ in range(2))
        for embedding in (by_rows, by_cols):
            with torch.no_grad():
                embedding.weight.copy_(torch.tensor(table, device="cuda"))
        parallelize_module(by_rows, tp, RowwiseParallel(input_layouts=Replicate()))
        parallelize_module(by_cols, tp, ColwiseParallel(output_layouts=Replicate()))
        tokens = torch.tensor(ids, device="cuda")
        replicated = distribute_module(torch.nn.Linear(8, 8).to("cuda"), tp)
        relaid = PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(0)).apply(
            torch.nn.Identity(), tp)
        return {"grid": grid.to_local().numpy(), "whole": grid.full_tensor().numpy(), "made": made.to_local().numpy(),
                "rows": by_rows(tokens).numpy(), "cols": by_cols(tokens).numpy(),
                "replicated": replicated.weight.placements, "relaid": relaid(torch.ones(4, 2, device="cuda")).shape}

    for rank, got in _spawned(program).items():
        dp, tp = divmod(rank, 2)
        assert_close(got["grid"], table[6 * dp:6 * dp + 6, 4 * tp:4 * tp + 4])
        assert_close(got["whole"], table)
        assert_close(got["made"], np.ones((6, 8)))
        assert_close(got["rows"], table[ids])
        assert_close(got["cols"], table[ids])
        assert got["replicated"] == (Replicate(),) and got["relaid"] == (2, 2)


def test_adr0021_t12_splits_comparisons_and_clipping_of_dtensors_match_numpy():
    x = np.arange(4 * 8 * 12, dtype=np.float32).reshape(4, 8, 12)

    def program(torch, rank):
        from torch.distributed.tensor import Shard, distribute_tensor
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        d = distribute_tensor(torch.tensor(x, device="cuda"), mesh, [Shard(0)])
        pieces = [*d.split(4, dim=2), *d.chunk(2, dim=1), d.unbind(1)[3], d.split(2, dim=0)[1]]
        model = parallelize_module(_toy_model(torch), mesh, {"in_proj": ColwiseParallel(),
                                                             "out_proj": RowwiseParallel()})
        torch.manual_seed(0)
        model(torch.rand(20, 10, device="cuda")).sum().backward()
        before = [p.grad.full_tensor().numpy() for p in model.parameters()]
        norm, clipping = _collectives_of(torch, lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        clipping = {r["collective"] for r in clipping}
        close = torch.allclose(d, torch.tensor(x, device="cuda")) and torch.equal(d, d)  # compared whole
        return ([p.full_tensor().numpy() for p in pieces], pieces[0].placements, pieces[-1].placements, before,
                norm.full_tensor().item(), [p.grad.full_tensor().numpy() for p in model.parameters()], close,
                clipping)

    pieces, kept, gathered, before, norm, after, close, clipping = _spawned(program)[2]
    assert close and clipping == {"all_reduce"}  # each sharded gradient's norm term, not the gradient gathered
    for got, expected in zip(pieces, [x[..., :4], x[..., 4:8], x[..., 8:], x[:, :4], x[:, 4:], x[:, 3], x[2:4]]):
        assert_close(got, expected)
    assert kept[0].is_shard(0) and gathered[0].is_replicate()
    total = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in before))
    assert norm == pytest.approx(total, rel=1e-5)
    for got, grad in zip(after, before):
        assert_close(got, grad / (total + 1e-6), rtol=1e-5)


def test_adr0021_t13_elementwise_ops_keep_a_partial_value_only_where_they_are_linear_in_it():
    def program(torch, rank):
        from torch.distributed.tensor import DTensor, Partial
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        p = DTensor.from_local(torch.full((2,), float(rank + 1), device="cuda"), mesh, [Partial()])  # the value 10
        outs = [p + 1, 1 + p, p * 3, p / 2, 2 / p, p + p, p - p, -p, p * p, p.relu()]
        return [(float(o.full_tensor().numpy()[0]), o.placements[0].is_partial()) for o in outs]

    expected = [(11, False), (11, False), (30, True), (5, True), (0.2, False), (20, True), (0, True), (-10, True),
                (100, False), (10, False)]
    for got in _spawned(program).values():
        assert [(pytest.approx(v), partial) for v, partial in expected] == got


def test_adr0021_t14_a_batch_sharded_matmul_chunks_its_whole_operand_and_sums_a_broadcast_ones_gradient():
    rng = np.random.default_rng(14)
    a, b = rng.standard_normal((2, 4, 8, 6)).astype(np.float32), rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    c = rng.standard_normal((6, 5)).astype(np.float32)

    def program(torch, rank):
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        heads = distribute_tensor(torch.tensor(a, device="cuda"), mesh, [Shard(1)]).requires_grad_()
        whole, shared = (distribute_tensor(torch.tensor(t, device="cuda"), mesh, [Replicate()]).requires_grad_()
                         for t in (b, c))
        y, z = heads @ whole, heads @ shared
        (y.sum() + z.sum()).backward()
        return [t.full_tensor().numpy() for t in (y, z, heads.grad, whole.grad, shared.grad)], y.placements

    (y, z, grad_a, grad_b, grad_c), placements = _spawned(program)[3]
    ones = np.ones((2, 4, 8, 5))
    assert placements[0].is_shard(1)
    assert_close(y, a @ b, atol=1e-5)
    assert_close(z, a @ c, atol=1e-5)
    assert_close(grad_a, ones @ b.transpose(0, 1, 3, 2) + ones @ c.T, atol=1e-5)
    assert_close(grad_b, a.transpose(0, 1, 3, 2) @ ones, atol=1e-5)
    assert_close(grad_c, (a.transpose(0, 1, 3, 2) @ ones).sum((0, 1)), atol=1e-5)


def test_adr0021_t15_a_parallelized_module_moves_to_half_precision_keeping_its_dtensor_parameters():
    def program(torch, rank):
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        model = parallelize_module(_toy_model(torch), mesh, {"in_proj": ColwiseParallel(),
                                                             "out_proj": RowwiseParallel()})
        weight = model.in_proj.weight
        whole = weight.full_tensor().numpy()
        model.half()
        model(torch.rand(4, 10, device="cuda", dtype=torch.float16)).sum().backward()
        return (model.in_proj.weight is weight, weight.dtype, weight.placements, weight.to_local().shape,
                weight.full_tensor().numpy(), whole, weight.grad.dtype)

    same, dtype, placements, local, half, whole, grad = _spawned(program)[1]
    assert same and dtype.name == "f16" and grad.name == "f16"
    assert placements[0].is_shard(0) and tuple(local) == (8, 10)
    assert_close(half, whole.astype(np.float16), atol=0)


def test_adr0021_t16_host_tensors_and_a_partition_fn_as_the_dtensor_readme_writes_them():
    rng = np.random.default_rng(16)
    big, x = rng.standard_normal((10, 6)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32)

    def program(torch, rank):
        from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module, distribute_tensor
        nn = torch.nn
        mesh = torch.distributed.tensor.init_device_mesh("cuda", (WORLD,))
        rows = distribute_tensor(torch.tensor(big), mesh, [Shard(dim=0)])  # a host tensor, moved to the rank

        def shard_params(mod_name, mod, mesh):
            if isinstance(mod, nn.Linear):
                for name, param in mod.named_parameters():
                    mod.register_parameter(name, nn.Parameter(distribute_tensor(param, mesh, [Shard(0)])))

        torch.manual_seed(0)
        module = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).to("cuda")
        names = [name for name, _ in module.named_parameters()]
        weight, bias = (p.detach().numpy() for p in module.parameters())
        distribute_module(module, mesh, partition_fn=shard_params)
        out = module(DTensor.from_local(torch.tensor(x), mesh, [Replicate()]))
        return (str(rows.device), rows.to_local().numpy(), names == [n for n, _ in module.named_parameters()],
                out.full_tensor().numpy(), np.maximum(x @ weight.T + bias, 0), out.placements)

    for rank, (device, local, same_order, out, expected, placements) in _spawned(program).items():
        start, stop = [(0, 3), (3, 6), (6, 9), (9, 10)][rank]
        assert device == f"ahbm:{rank}" and same_order and placements[0].is_shard(1)
        assert_close(local, big[start:stop])
        assert_close(out, expected, atol=1e-5)


def test_adr0021_t17_an_even_shard_to_shard_move_is_one_all_to_all_both_ways():
    x = np.arange(8 * 12 * 4, dtype=np.float32).reshape(8, 12, 4)

    def program(torch, rank):
        from torch.distributed.tensor import Shard, distribute_tensor
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        rows = distribute_tensor(torch.tensor(x, device="cuda"), mesh, [Shard(0)]).requires_grad_()
        cols, moves = _collectives_of(torch, lambda: rows.redistribute(mesh, [Shard(1)]))
        _, back = _collectives_of(torch, lambda: (cols * cols).sum().backward())
        return cols.to_local().numpy(), rows.grad.to_local().numpy(), [r["collective"] for r in moves + back]

    for rank, (cols, grad, collectives) in _spawned(program).items():
        assert_close(cols, x[:, 3 * rank:3 * rank + 3])
        assert_close(grad, 2 * x[2 * rank:2 * rank + 2])
        assert collectives == ["all_to_all", "all_to_all"]


def test_adr0021_t18_the_tutorials_sequence_parallel_block_issues_megatrons_collectives():
    bench = load_bench(str(BENCH)).__globals__
    tokens, batch = 16, 2

    def program(torch, rank):
        from torch.distributed.tensor.parallel import parallelize_module
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        block = bench["TransformerBlock"](DIM, HEADS, 2 * DIM).to("cuda")
        parallelize_module(block, mesh, bench["tutorial_plan"](True))
        cos, sin = (table.to("cuda") for table in bench["rotary_tables"](DIM // HEADS, tokens))
        x = torch.randn(batch, tokens // WORLD, DIM, device="cuda").requires_grad_()
        y, forward = _collectives_of(torch, lambda: block(x, cos, sin))
        _, backward = _collectives_of(torch, lambda: y.sum().backward())
        return _kinds(forward), _kinds(backward)

    forward, backward = _spawned(program)[0]
    whole = batch * tokens * DIM * 4  # the block's activation (float32), gathered or reduce-scattered
    pair = [("all_gather", whole), ("reduce_scatter", whole)]
    assert forward == pair * 2  # attention: gather the sequence, reduce-scatter wo's; the same for the MLP
    assert backward == pair * 2 + [("all_reduce", DIM * 4)] * 2  # and the two norm weights' Partial gradients


def test_adr0021_t19_prepare_module_input_lays_out_keyword_inputs_through_a_keyword_pre_hook():
    def program(torch, rank):
        from torch.distributed.tensor import Replicate, Shard
        from torch.distributed.tensor.parallel import PrepareModuleInput, parallelize_module
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))

        class Pair(torch.nn.Module):
            def forward(self, x, *, bias=None):
                return x, bias

        pair = parallelize_module(Pair(), mesh, PrepareModuleInput(
            input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),),
            input_kwarg_layouts={"bias": Shard(0)}, desired_input_kwarg_layouts={"bias": Replicate()}))
        x, bias = pair(torch.full((2, 3), float(rank), device="cuda"), bias=torch.full((1,), rank + 1.0, device="cuda"))
        return x.to_local().numpy(), bias.to_local().numpy(), x.placements, bias.placements

    for x, bias, x_placements, bias_placements in _spawned(program).values():
        assert_close(x, np.repeat(np.arange(WORLD, dtype=np.float32), 2)[:, None].repeat(3, 1))
        assert_close(bias, np.arange(1, WORLD + 1, dtype=np.float32))
        assert x_placements[0].is_replicate() and bias_placements[0].is_replicate()


def test_adr0021_t20_comm_debug_mode_counts_dtensors_collectives_per_module_forward_and_backward():
    def program(torch, rank):
        from torch.distributed.tensor.debug import CommDebugMode
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = torch.distributed.init_device_mesh("cuda", (WORLD,))
        model = parallelize_module(_toy_model(torch), mesh, {"in_proj": ColwiseParallel(),
                                                             "out_proj": RowwiseParallel()})
        x = torch.rand(4, 10, device="cuda").requires_grad_()
        comm_mode = CommDebugMode()
        with comm_mode:
            model(x).sum().backward()
        return (comm_mode.get_comm_counts(), comm_mode.get_total_counts(), comm_mode.get_sharding_info(),
                comm_mode.generate_comm_debug_tracing_table(noise_level=1))

    counts, total, sharding, table = _spawned(program)[1]
    assert counts == {"c10d_functional.all_reduce": 2} and total == 2
    assert sharding["ToyModel.in_proj.weight"][0].is_shard(0) and sharding["ToyModel.out_proj.weight"][0].is_shard(1)
    assert sharding["ToyModel.out_proj.bias"][0].is_replicate()
    lines = table.splitlines()
    assert lines[:5] == ["Global", "  FORWARD PASS", "    *c10d_functional.all_reduce: 1", "  BACKWARD PASS",
                         "    *c10d_functional.all_reduce: 1"]
    out_proj = [line.strip() for line in lines].index("ToyModel.out_proj")  # its type, parameters, then its counts
    assert [line.strip() for line in lines[out_proj + 1:out_proj + 7]] == [
        "*module type: class kernbench.runtime_api.nn.layers.Linear", "*Parameter List",
        "*weight: (Shard(dim=1),)", "*bias: (Replicate(),)", "FORWARD PASS", "*c10d_functional.all_reduce: 1"]


def test_adr0021_t21_a_mesh_of_several_ranks_outside_spawned_workers_is_one_line(tmp_path):
    """Every rank of a DTensor's mesh needs a worker of its own: code run in no spawned worker stops at its first
    collective with one line saying how to spawn them, not with a wait for ranks that never come."""
    bench = tmp_path / "unspawned_mesh.py"
    bench.write_text("def run(torch):\n"
                     "    from torch.distributed.device_mesh import init_device_mesh\n"
                     "    from torch.distributed.tensor import Shard, distribute_tensor\n"
                     "    mesh = init_device_mesh('cuda', (2,))\n"
                     "    distribute_tensor(torch.randn(8, 8, device='cuda'), mesh, [Shard(0)])\n")
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == ("kernbench: error: scatter over a mesh of 2 ranks: this code runs in no spawned worker, "
                             "so the other ranks never join; run it under torch.multiprocessing.spawn(fn, nprocs=2), "
                             "one worker per rank, as torchrun starts a process per rank\n")


def test_adr0021_t22_a_rotary_embedding_with_complex_numbers_on_head_sharded_dtensors_matches_numpy():
    """The rotary embedding as Llama-style files write it (polar, view_as_complex, multiply, view_as_real, flatten)
    on a query sharded by heads over 4 ranks, its cis table replicated: the whole output is numpy's rotation, each
    rank's input gradient its heads of the rotation back, and no collective runs."""
    from tests.runtime_api.test_complex_views import _rotary, _rotary_reference
    rng = np.random.default_rng(22)
    x, c = rng.standard_normal((2, 5, WORLD, 8)), rng.standard_normal((2, 5, WORLD, 8))

    def program(torch, rank):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Replicate, Shard
        mesh = init_device_mesh("cuda", (WORLD,))
        cis, rotate = _rotary(torch)
        local = torch.tensor(x[:, :, rank:rank + 1], dtype=torch.float32, device="cuda").requires_grad_()
        freqs = DTensor.from_local(cis(8, 16)[0:5], mesh, [Replicate()])

        def step():
            out = rotate(DTensor.from_local(local, mesh, [Shard(2)]), freqs)
            (out.to_local() * torch.tensor(c[:, :, rank:rank + 1], dtype=torch.float32, device="cuda")).sum().backward()
            return out
        out, records = _collectives_of(torch, step)
        return out.placements, out.full_tensor().numpy(), local.grad.numpy(), records

    expected, expected_grad = _rotary_reference(x, c)
    for rank, (placements, out, grad, records) in _spawned(program).items():
        assert placements == (Shard(2),) and records == []
        assert_close(out, expected, rtol=1e-5, atol=1e-5)
        assert_close(grad, expected_grad[:, :, rank:rank + 1], rtol=1e-5, atol=1e-5)


def test_adr0021_t25_dtensor_random_ops_draw_alike_on_replicas_and_apart_on_shards_through_the_rng_tracker():
    """PyTorch's offset-based RNG tracker: made at a rank's first random op on a DTensor, it broadcasts rank 0's
    device stream (ranks seeded apart then draw alike); dropout on a Replicate DTensor keeps the same elements on
    every rank, on a Shard(0) one each shard its own — together the mask of the whole tensor from the same stream
    state —, a Shard(1) `rand` DTensor is the same whole on every rank, and every rank's stream is the same after
    (a plain draw agrees). `manual_seed(seed, mesh)` makes the tracker without the broadcast."""
    def program(torch, rank):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        from torch.distributed.tensor._random import get_rng_tracker, manual_seed
        mesh = init_device_mesh("cuda", (WORLD,))
        torch.manual_seed(rank)  # apart on purpose: the tracker's broadcast of rank 0's stream brings them together
        ones = torch.ones(8, 6, device="cuda")
        replicated, sharded = distribute_tensor(ones, mesh, [Replicate()]), distribute_tensor(ones, mesh, [Shard(0)])
        first, records = _collectives_of(torch, lambda: torch.nn.functional.dropout(replicated, 0.5).to_local())
        state = torch.cuda.get_rng_state()
        whole = torch.nn.functional.dropout(replicated, 0.5).to_local()
        torch.cuda.set_rng_state(state)  # the sharded dropout draws from the stream the replicated one drew from
        part = torch.nn.functional.dropout(sharded, 0.5).full_tensor()
        table = torch.distributed.tensor.rand(8, 6, device_mesh=mesh, placements=[Shard(1)]).full_tensor()
        plain = torch.rand(5, device="cuda")
        _, seeded = _collectives_of(torch, lambda: manual_seed(7, mesh))
        again = torch.nn.functional.dropout(replicated, 0.5).to_local()
        return (_kinds(records), whole.numpy(), part.numpy(), first.numpy(), table.numpy(),
                plain.numpy(), seeded, again.numpy(), type(get_rng_tracker()).__name__)

    results = _spawned(program)
    first = results[0]
    assert first[0] == [("broadcast", 45)]
    assert set(np.unique(first[1])) == {0.0, 2.0} and 0.2 < (first[1] == 0).mean() < 0.8
    for rank, (kinds, whole, part, before, table, plain, seeded, again, tracker) in results.items():
        assert kinds == first[0] and seeded == [] and tracker == "OffsetBasedRNGTracker"
        np.testing.assert_array_equal(before, first[3])  # ranks seeded apart: alike once the tracker is made
        np.testing.assert_array_equal(whole, first[1])  # a Replicate tensor: the same mask on every rank
        np.testing.assert_array_equal(part, whole)  # the shards' masks, together, are the whole tensor's
        np.testing.assert_array_equal(table, first[4])
        np.testing.assert_array_equal(plain, first[5])
        np.testing.assert_array_equal(again, first[7])
    shards = [first[2][2 * rank:2 * rank + 2] for rank in range(WORLD)]
    assert all(not np.array_equal(shards[0], other) for other in shards[1:])  # the shards' masks differ
