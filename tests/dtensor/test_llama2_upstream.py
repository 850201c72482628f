"""ADR 0021: pytorch/examples' tensor-parallel Llama 2 model (`distributed/tensor_parallelism/llama2_model.py`) runs
as written — opt-in.

Set KERNBENCH_PYTORCH_EXAMPLES to a pytorch/examples checkout to run it; it
skips otherwise (nothing of pytorch/examples is in this repository). The
file is imported from the checkout as a bench module is (its `import torch`
gives kernbench's torch) and used unchanged: the model is built on the
default device, moved with `.to("cuda")` (the device name is the only thing
the tests choose), trained one step of forward, cross-entropy backward and
AdamW on one device against a float64 numpy model of the same file, and on
four ranks under the TP tutorial's plan (fsdp_tp_example.py's, without FSDP)
against the one-device run.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from kernbench.cli.bench_loader import bench_module, load_bench
from kernbench.session import Session
from tests.dtensor.test_dtensor import BENCH, WORLD, _adamw, _spawned, assert_close

CHECKOUT = os.environ.get("KERNBENCH_PYTORCH_EXAMPLES")
MODEL = Path("distributed") / "tensor_parallelism" / "llama2_model.py"
ARGS = {"dim": 32, "n_layers": 2, "n_heads": 4, "vocab_size": 64, "max_seq_len": 8, "multiple_of": 16}
BATCH, SEQ, LR, EPS = 2, 8, 3e-3, 1e-5
ADAMW_EPS = 1e-8  # torch.optim.AdamW's default eps
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="set KERNBENCH_PYTORCH_EXAMPLES to a pytorch/examples "
                                                          "checkout to run its tensor-parallel Llama 2")


def _model_file() -> str:
    path = Path(CHECKOUT) / MODEL
    assert path.is_file(), f"KERNBENCH_PYTORCH_EXAMPLES={CHECKOUT}: no {MODEL} there"
    return str(path)


def _train_step(torch, model, tokens, targets) -> tuple:
    """One step as the tutorial's loop takes it (forward, backward, AdamW with foreach=True), the loss by
    cross-entropy: the loss, the gradients and the parameters after, whole."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, foreach=True)
    logits = model(torch.tensor(tokens, device="cuda"))
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.tensor(targets, device="cuda").flatten())
    loss.backward()
    whole = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t  # noqa: E731
    grads = {name: whole(p.grad).numpy() for name, p in model.named_parameters()}
    optimizer.step()
    return loss.item(), grads, {name: whole(p).detach().numpy() for name, p in model.named_parameters()}


def _build(torch):
    llama = bench_module(_model_file())
    torch.manual_seed(0)
    return llama.Transformer.from_model_args(llama.ModelArgs(**ARGS)).to("cuda")


def _tutorial_plan(model, mesh) -> None:
    """fsdp_tp_example.py's plan for the tp dimension: the bench's sequence-parallel block plan (T8's), its
    attention taking the file's two inputs (x, freqs_cis) where the bench's block takes three (x, cos, sin)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    parallelize_module(model, mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())})
    attention = PrepareModuleInput(input_layouts=(Shard(1), Replicate()), desired_input_layouts=(Replicate(),) * 2)
    for block in model.layers:
        parallelize_module(block, mesh, {**load_bench(str(BENCH)).__globals__["tutorial_plan"](True),
                                         "attention": attention})


def _numpy_loss(p: dict, tokens, targets) -> float:
    """The model's cross-entropy in float64 numpy, its rotary embedding with numpy's complex numbers."""
    dim, heads = ARGS["dim"], ARGS["n_heads"]
    head = dim // heads
    norm = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w  # noqa: E731
    inverse = 1.0 / 10000.0 ** (np.arange(0, head, 2)[: head // 2] / head)
    cis = np.exp(1j * np.outer(np.arange(SEQ), inverse))[None, :, None, :]

    def rotate(t):
        pairs = t.reshape(*t.shape[:-1], -1, 2)
        turned = (pairs[..., 0] + 1j * pairs[..., 1]) * cis
        return np.stack([turned.real, turned.imag], -1).reshape(t.shape)

    h = p["tok_embeddings.weight"][tokens]
    for layer in range(ARGS["n_layers"]):
        w = {k.split(".", 2)[2]: v for k, v in p.items() if k.startswith(f"layers.{layer}.")}
        a = norm(h, w["attention_norm.weight"])
        q, k, v = (((a @ w[f"attention.{n}.weight"].T).reshape(BATCH, SEQ, heads, head)) for n in ("wq", "wk", "wv"))
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (rotate(q), rotate(k), v))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head)
        scores = np.where(np.tril(np.ones((SEQ, SEQ), bool)), scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        h = h + (weights @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, dim) @ w["attention.wo.weight"].T
        f = norm(h, w["ffn_norm.weight"])
        gate = f @ w["feed_forward.w1.weight"].T
        h = h + (gate / (1 + np.exp(-gate)) * (f @ w["feed_forward.w3.weight"].T)) @ w["feed_forward.w2.weight"].T
    logits = (norm(h, p["norm.weight"]) @ p["output.weight"].T).reshape(-1, ARGS["vocab_size"])
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    return float(-logp[np.arange(logits.shape[0]), targets.reshape(-1)].mean())


def _data():
    rng = np.random.default_rng(22)
    return rng.integers(0, ARGS["vocab_size"], (BATCH, SEQ)), rng.integers(0, ARGS["vocab_size"], (BATCH, SEQ))


def _one_device():
    tokens, targets = _data()
    session = Session("single_sip")

    def single(torch):
        model = _build(torch)
        initial = {name: p.detach().numpy() for name, p in model.named_parameters()}
        return initial, *_train_step(torch, model, tokens, targets)
    return session.run(single, session.torch)


@needs_checkout
def test_adr0021_t23_the_tutorials_llama2_model_trains_as_written_on_one_device_as_numpy_does():
    """Loss as numpy's; each parameter's gradient against float64 central differences of numpy's loss along a
    random direction; the parameters after the step as AdamW (PyTorch's defaults) moves them."""
    tokens, targets = _data()
    initial, loss, grads, after = _one_device()
    params = {k: v.astype(np.float64) for k, v in initial.items()}
    assert loss == pytest.approx(_numpy_loss(params, tokens, targets), rel=1e-5)
    rng = np.random.default_rng(23)
    for name, value in params.items():
        direction = rng.standard_normal(value.shape)
        step = 1e-5
        ahead = _numpy_loss({**params, name: value + step * direction}, tokens, targets)
        behind = _numpy_loss({**params, name: value - step * direction}, tokens, targets)
        assert float((grads[name] * direction).sum()) == pytest.approx((ahead - behind) / (2 * step), rel=2e-4,
                                                                       abs=1e-6), name
        assert_close(after[name], _adamw(value, grads[name].astype(np.float64), {}, lr=LR), atol=1e-6)


@needs_checkout
def test_adr0021_t24_the_tutorials_llama2_model_under_its_tp_plan_on_4_ranks_matches_one_device():
    """The tutorial's plan (sequence-parallel norms, colwise q/k/v and w1/w3 with DTensor outputs through the
    complex rotary embedding, rowwise wo/w2, PrepareModuleInput): each rank's loss, whole gradients and whole
    parameters after AdamW are the one-device run's."""
    tokens, targets = _data()
    _, loss, grads, after = _one_device()

    def parallel(torch, rank):
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cuda", (WORLD,))
        model = _build(torch)
        _tutorial_plan(model, mesh)
        return _train_step(torch, model, tokens, targets)

    for rank_loss, rank_grads, rank_after in _spawned(parallel).values():
        assert rank_loss == pytest.approx(loss, rel=1e-5)
        for name in grads:
            assert_close(rank_grads[name], grads[name], atol=1e-6)
            # AdamW's first step moves an element by lr·g/(|g| + eps): where |g| is under its eps the step follows
            # rounding-level differences of g (1e-11 here) magnified lr/eps times, so there the runs agree to the
            # step's size, and everywhere else to 1e-6.
            settled = np.abs(grads[name]) > ADAMW_EPS
            assert_close(rank_after[name][settled], after[name][settled], atol=1e-6)
            assert np.abs(rank_after[name] - after[name]).max() <= LR
