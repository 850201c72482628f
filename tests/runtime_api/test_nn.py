"""ADR 0020: torch.nn — modules with PyTorch's semantics, their layers, init and losses, checked against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.cli.bench_loader import load_bench
from kernbench.errors import KernbenchError
from kernbench.numerics import assert_close
from kernbench.session import Session
from tests.cli import REPO_ROOT, run_kernbench_in_process

GPT_BENCH = REPO_ROOT / "kernbench" / "benches" / "gpt_train.py"


def _run(fn, topology: str = "default"):
    session = Session(topology)
    out = {}
    session.run(lambda torch: out.update(value=fn(torch)), session.torch)
    return out["value"]


# ---- numpy references ----------------------------------------------------------------------------------
_erf = np.vectorize(math.erf)


def np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_layer_norm(x, weight=None, bias=None, eps=1e-5):
    centered = x - x.mean(-1, keepdims=True)
    out = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + eps)
    out = out if weight is None else out * weight
    return out if bias is None else out + bias


def np_log_softmax(x, axis=-1):
    shifted = x - x.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def np_softmax(x, axis=-1):
    return np.exp(np_log_softmax(x, axis))


def np_cross_entropy(logits, targets, ignore_index=-100, weight=None, reduction="mean", label_smoothing=0.0):
    logp = np_log_softmax(logits)
    classes = logits.shape[-1]
    valid = targets != ignore_index
    safe = np.where(valid, targets, 0)
    w = np.ones(classes) if weight is None else weight
    picked = np.take_along_axis(logp, safe[:, None], 1)[:, 0] * w[safe] * valid
    losses = -picked * (1 - label_smoothing) - label_smoothing / classes * (logp * w).sum(-1) * valid
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / (w[safe] * valid).sum()


def np_attention(q, k, v, causal=False, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    return np_softmax(scores) @ v


def np_gpt_loss(params: dict, idx, targets, n_layer: int, n_head: int):
    """The loss of the bench's GPT (no biases, no dropout) in float64, from its state dict."""
    b, t = idx.shape
    x = params["transformer.wte.weight"][idx] + params["transformer.wpe.weight"][np.arange(t)]
    c = x.shape[-1]

    def heads(y):
        return y.reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)
    for layer in range(n_layer):
        p = f"transformer.h.{layer}."
        q, k, v = np.split(np_layer_norm(x, params[p + "ln_1.weight"]) @ params[p + "attn.c_attn.weight"].T, 3, -1)
        y = np_attention(heads(q), heads(k), heads(v), causal=True).transpose(0, 2, 1, 3).reshape(b, t, c)
        x = x + y @ params[p + "attn.c_proj.weight"].T
        h = np_gelu(np_layer_norm(x, params[p + "ln_2.weight"]) @ params[p + "mlp.c_fc.weight"].T)
        x = x + h @ params[p + "mlp.c_proj.weight"].T
    logits = np_layer_norm(x, params["transformer.ln_f.weight"]) @ params["lm_head.weight"].T
    return np_cross_entropy(logits.reshape(b * t, -1), targets.reshape(-1), ignore_index=-1)


# ---- modules ---------------------------------------------------------------------------------------------
@pytest.mark.quick
def test_adr0020_t1_attributes_register_parameters_buffers_and_submodules_in_pytorchs_order():
    def bench(torch):
        nn = torch.nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(3))
                self.register_buffer("steps", torch.zeros(1))
                self.register_buffer("scratch", torch.zeros(2), persistent=False)
                self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3, bias=False))
                self.heads = nn.ModuleDict({"a": nn.Linear(3, 2)})
                self.tied = nn.Linear(3, 4)
                self.tied.weight = self.body[0].weight
                self.note = "a plain attribute"

        net = Net()
        plain = torch.randn(2)
        p = torch.nn.Parameter(plain)
        return dict(
            names=[n for n, _ in net.named_parameters()],
            modules=[n for n, _ in net.named_modules()],
            children=[type(m).__name__ for m in net.children()],
            buffers=[n for n, _ in net.named_buffers()],
            state=list(net.state_dict()),
            count=sum(q.numel() for q in net.parameters()),
            kinds=(isinstance(net.scale, nn.Parameter), isinstance(p, torch.Tensor), p.is_leaf, p.requires_grad,
                   type(p * 2).__name__, isinstance(plain, nn.Parameter)),
            same=(p.data_ptr() == plain.data_ptr(), net.note, net.tied.weight is net.body[0].weight),
        )

    got = _run(bench)
    assert got["names"] == ["scale", "body.0.weight", "body.0.bias", "body.2.weight", "heads.a.weight",
                            "heads.a.bias", "tied.bias"]
    assert got["modules"] == ["", "body", "body.0", "body.1", "body.2", "heads", "heads.a", "tied"]
    assert got["children"] == ["Sequential", "ModuleDict", "Linear"]
    assert got["buffers"] == ["steps", "scratch"]
    assert got["state"] == ["scale", "steps", "body.0.weight", "body.0.bias", "body.2.weight", "heads.a.weight",
                            "heads.a.bias", "tied.weight", "tied.bias"]
    assert got["count"] == 3 + 12 + 4 + 12 + 6 + 2 + 4
    assert got["kinds"] == (True, True, True, True, "Tensor", False)
    assert got["same"] == (True, "a plain attribute", True)


@pytest.mark.quick
def test_adr0020_t2_a_state_dict_loads_into_a_fresh_module_and_gives_the_same_outputs():
    def bench(torch):
        nn = torch.nn
        torch.manual_seed(0)
        first = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
        torch.manual_seed(1)
        second = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
        x = torch.randn(3, 4)
        before = second(x).numpy()
        result = second.load_state_dict(first.state_dict())
        partial = dict(first.state_dict())
        partial.pop("3.bias")
        with pytest.raises(KernbenchError, match="Missing key\\(s\\) in state_dict: '3.bias'") as missing:
            second.load_state_dict(partial)
        loose = second.load_state_dict(partial, strict=False)
        return first(x).numpy(), second(x).numpy(), before, tuple(result), loose.missing_keys, str(missing.value)

    expected, loaded, before, result, loose, message = _run(bench)
    assert_close(loaded, expected, "f32")
    assert not np.allclose(before, expected)
    assert result == ([], []) and loose == ["3.bias"] and "\n" not in message


@pytest.mark.quick
def test_adr0020_t3_train_eval_apply_zero_grad_and_forward_hooks_behave_as_pytorchs():
    def bench(torch):
        nn = torch.nn
        net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
        x = torch.ones(2, 4)
        net.eval()
        modes = [m.training for m in net.modules()]
        same = np.array_equal(net(x).numpy(), net[0](x).numpy())
        net.train()
        dropped = (net(x).numpy() == 0).any()
        seen = []
        net.apply(lambda m: seen.append(type(m).__name__))
        calls = []
        pre = net[0].register_forward_pre_hook(lambda m, args: (args[0] * 0,))
        post = net[0].register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
        hooked = net[0](x).numpy()
        pre.remove()
        post.remove()
        unhooked = net[0](x).numpy()
        net[0](x).sum().backward()
        had = net[0].weight.grad is not None
        net.zero_grad(set_to_none=False)
        zeros = net[0].weight.grad.numpy()
        net.zero_grad()
        bias = net[0].bias.numpy()
        return modes, same, dropped, seen, calls, hooked, bias, unhooked, had, zeros, net[0].weight.grad

    modes, same, dropped, seen, calls, hooked, bias, unhooked, had, zeros, grad = _run(bench)
    assert modes == [False, False, False] and same and dropped
    assert seen == ["Linear", "Dropout", "Sequential"]
    assert calls == [(2, 4)]
    assert_close(hooked, np.broadcast_to(bias + 1, (2, 4)), "f32")
    assert not np.allclose(unhooked, hooked)
    assert had and not zeros.any() and grad is None


@pytest.mark.quick
def test_adr0020_t4_parameters_are_made_on_the_default_device_and_to_keeps_the_objects():
    def bench(torch):
        nn = torch.nn
        torch.set_default_device("cuda:1")
        made_default = nn.Linear(2, 3).weight.device
        torch.set_default_device("cuda:0")
        on_host = nn.Linear(2, 3, device="cpu")
        weight = on_host.weight
        values = weight.numpy().copy()
        moved = on_host.to("cuda")
        half = nn.LayerNorm(4).half()
        return (str(made_default), str(weight.device), moved is on_host, on_host.weight is weight,
                np.array_equal(weight.numpy(), values), half.weight.dtype.name, weight.is_leaf, weight.requires_grad)

    assert _run(bench) == ("ahbm:1", "ahbm:0", True, True, True, "f16", True, True)


@pytest.mark.quick
def test_adr0020_t5_layers_forward_and_backward_match_numpy():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    ids = np.array([[1, 4, 1], [0, 2, 4]])

    def bench(torch):
        nn = torch.nn
        lin, norm, rms = nn.Linear(6, 5), nn.LayerNorm(5), nn.RMSNorm(5, eps=1e-6)
        emb = nn.Embedding(5, 3, padding_idx=0)
        model = nn.Sequential(lin, nn.Tanh(), norm, rms, nn.SiLU(), nn.Identity(), nn.Softmax(dim=-1))
        t = torch.tensor(x, requires_grad=True)
        out = model(t)
        (out * torch.arange(5.0)).sum().backward()
        rows = emb(torch.tensor(ids))
        rows.sum().backward()
        acts = [m(torch.tensor(x)).numpy() for m in (nn.ReLU(), nn.GELU(), nn.GELU(approximate="tanh"),
                                                         nn.LogSoftmax(dim=1), nn.Sequential(nn.Unflatten(1, (2, 3)),
                                                                                             nn.Flatten()))]
        return (lin.weight.numpy(), lin.bias.numpy(), out.numpy(), t.grad.numpy(), lin.weight.grad.numpy(),
                emb.weight.numpy(), rows.numpy(), emb.weight.grad.numpy(), acts)

    w, b, out, dx, dw, table, rows, dtable, (relu, gelu, gelu_tanh, log_probs, flat) = _run(bench)
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731

    def forward(v, weight):
        h = np_layer_norm(np.tanh(v @ weight.T + b))
        h = h / np.sqrt((h ** 2).mean(-1, keepdims=True) + 1e-6)
        return np_softmax(silu(h))

    assert_close(out, forward(x.astype(np.float64), w.astype(np.float64)), "f32")
    step, loss = 1e-6, lambda v, weight: (forward(v, weight) * np.arange(5.0)).sum()
    numeric_dx = np.array([(loss(x + step * e, w) - loss(x - step * e, w)) / (2 * step)
                           for e in np.eye(x.size).reshape(-1, *x.shape)]).reshape(x.shape)
    numeric_dw = np.array([(loss(x, w + step * e) - loss(x, w - step * e)) / (2 * step)
                           for e in np.eye(w.size).reshape(-1, *w.shape)]).reshape(w.shape)
    assert_close(dx, numeric_dx, "f32")
    assert_close(dw, numeric_dw, "f32")
    assert not table[0].any() and np.array_equal(rows, table[ids])
    assert_close(dtable, np.array([0, 2, 1, 0, 2])[:, None] * np.ones(3), "f32")
    assert_close(relu, np.maximum(x, 0), "f32")
    assert_close(log_probs, np_log_softmax(x.astype(np.float64), 1), "f32")
    assert np.array_equal(flat, x)
    assert_close(gelu, np_gelu(x.astype(np.float64)), "f32")
    k = math.sqrt(2 / math.pi)
    assert_close(gelu_tanh, 0.5 * x * (1 + np.tanh(k * (x + 0.044715 * x ** 3))), "f32")


@pytest.mark.quick
def test_adr0020_t6_init_functions_follow_pytorchs_bounds_and_deviations():
    def bench(torch):
        init = torch.nn.init
        w = torch.nn.Parameter(torch.empty(256, 128))
        out = {}
        for name, fill in (("kaiming_uniform", lambda: init.kaiming_uniform_(w, a=math.sqrt(5))),
                           ("xavier_uniform", lambda: init.xavier_uniform_(w, gain=2.0)),
                           ("uniform", lambda: init.uniform_(w, -0.5, 0.25)),
                           ("kaiming_normal", lambda: init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")),
                           ("xavier_normal", lambda: init.xavier_normal_(w)),
                           ("normal", lambda: init.normal_(w, 1.0, 0.02)),
                           ("trunc_normal", lambda: init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)),
                           ("constant", lambda: init.constant_(w, 0.3)), ("zeros", lambda: init.zeros_(w)),
                           ("ones", lambda: init.ones_(w))):
            assert fill() is w
            out[name] = w.numpy().copy()
        return out, w.is_leaf and w.grad_fn is None

    values, still_leaf = _run(bench)
    assert still_leaf
    fan_in, fan_out = 128, 256
    for name, bound in (("kaiming_uniform", math.sqrt(3) * math.sqrt(2 / 6) / math.sqrt(fan_in)),
                        ("xavier_uniform", 2.0 * math.sqrt(6 / (fan_in + fan_out)))):
        v = values[name]
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.98 * bound, name
        assert abs(v.std() - bound / math.sqrt(3)) < 0.02 * bound, name
    assert values["uniform"].min() >= -0.5 and values["uniform"].max() < 0.25
    for name, mean, std in (("kaiming_normal", 0.0, math.sqrt(2 / fan_out)),
                            ("xavier_normal", 0.0, math.sqrt(2 / (fan_in + fan_out))), ("normal", 1.0, 0.02)):
        assert abs(values[name].mean() - mean) < 0.02 * std + 1e-3 * abs(mean) and \
            abs(values[name].std() - std) < 0.02 * std, name
    assert np.abs(values["trunc_normal"]).max() <= 0.5 and values["trunc_normal"].std() > 0.25
    assert (values["constant"] == np.float32(0.3)).all() and not values["zeros"].any() and (values["ones"] == 1).all()


# ---- functional ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["plain", "ignore_index", "weight", "sum", "none", "smoothing"])
def test_adr0020_t7_cross_entropy_and_its_gradient_match_numpy(case):
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((6, 5))
    targets = np.array([0, 4, -1, 2, 2, 1]) if case == "ignore_index" else np.array([0, 4, 3, 2, 2, 1])
    weight = np.array([1.0, 2.0, 0.5, 1.0, 3.0]) if case == "weight" else None
    kwargs = {"ignore_index": -1} if case == "ignore_index" else {"reduction": case} if case in ("sum", "none") \
        else {"label_smoothing": 0.1} if case == "smoothing" else {}

    def bench(torch):
        x = torch.tensor(logits, dtype=torch.float32, requires_grad=True)
        w = None if weight is None else torch.tensor(weight, dtype=torch.float32)
        loss = torch.nn.functional.cross_entropy(x, torch.tensor(targets), weight=w, **kwargs)
        loss.sum().backward()
        module = torch.nn.CrossEntropyLoss(weight=w, **kwargs)(x, torch.tensor(targets))
        return loss.numpy(), x.grad.numpy(), module.numpy()

    loss, grad, module = _run(bench)

    def reference(v):
        return np_cross_entropy(v, targets, weight=weight, **kwargs)
    assert_close(loss, reference(logits), "f32")
    assert_close(module, loss, "f32")
    step = 1e-6
    numeric = np.array([(np.sum(reference(logits + step * e)) - np.sum(reference(logits - step * e))) / (2 * step)
                        for e in np.eye(logits.size).reshape(-1, *logits.shape)]).reshape(logits.shape)
    assert_close(grad, numeric, "f32")


def test_adr0020_t8_cross_entropy_takes_classes_in_dim_1_and_probabilities_and_mse_and_nll_match_numpy():
    rng = np.random.default_rng(8)
    logits = rng.standard_normal((2, 4, 3))  # (N, C, d)
    targets = rng.integers(0, 4, (2, 3))
    probabilities = np_softmax(rng.standard_normal((5, 4)))
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def bench(torch):
        F = torch.nn.functional
        x = torch.tensor(logits, dtype=torch.float32)
        soft_in = torch.tensor(logits[0].T.copy(), dtype=torch.float32)
        ta, tb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
        return (F.cross_entropy(x, torch.tensor(targets)).item(),
                F.cross_entropy(soft_in[:3].contiguous(), torch.tensor(probabilities[:3], dtype=torch.float32)).item(),
                F.nll_loss(F.log_softmax(ta, -1), torch.tensor([0, 3, 1]), reduction="sum").item(),
                F.mse_loss(ta, tb).item(), torch.nn.MSELoss(reduction="sum")(ta, tb).item())

    dim1, soft, nll, mse, mse_sum = _run(bench)
    flat = np.moveaxis(logits, 1, -1).reshape(-1, 4)
    assert_close(dim1, np_cross_entropy(flat, targets.reshape(-1)), "f32")
    assert_close(soft, -(probabilities[:3] * np_log_softmax(logits[0].T[:3])).sum(-1).mean(), "f32")
    assert_close(nll, -np_log_softmax(a)[np.arange(3), [0, 3, 1]].sum(), "f32")
    assert_close(mse, ((a - b) ** 2).mean(), "f32")
    assert_close(mse_sum, ((a - b) ** 2).sum(), "f32")


def test_adr0020_t9_scaled_dot_product_attention_matches_numpy_with_each_mask_and_its_gradient():
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((1, 2, 4, 3)) for _ in range(3))
    keep = rng.random((4, 4)) > 0.3
    keep[:, 0] = True
    bias = rng.standard_normal((4, 4))

    def bench(torch):
        F = torch.nn.functional
        tq, tk, tv = (torch.tensor(a, dtype=torch.float32) for a in (q, k, v))
        tq.requires_grad_()
        causal = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        (causal * torch.arange(3.0)).sum().backward()
        masked = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(keep))
        added = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(bias, dtype=torch.float32))
        return causal.numpy(), masked.numpy(), added.numpy(), tq.grad.numpy()

    causal, masked, added, grad = _run(bench)
    assert_close(causal, np_attention(q, k, v, causal=True), "f32")
    assert_close(masked, np_attention(q, k, v, mask=keep), "f32")
    assert_close(added, np_attention(q, k, v, mask=bias), "f32")
    step = 1e-6
    loss = lambda a: (np_attention(a, k, v, causal=True) * np.arange(3.0)).sum()  # noqa: E731
    numeric = np.array([(loss(q + step * e) - loss(q - step * e)) / (2 * step)
                        for e in np.eye(q.size).reshape(-1, *q.shape)]).reshape(q.shape)
    assert_close(grad, numeric, "f32")


def test_adr0020_t10_masks_padding_and_joins_match_numpy():
    x = np.arange(1.0, 13.0).reshape(3, 4)

    def bench(torch):
        t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
        padded = torch.nn.functional.pad(t, (1, 2, -1, 1), value=7.0)
        (padded * torch.arange(7.0)).sum().backward()
        return (torch.tril(t).numpy(), torch.triu(t, 1).numpy(), t.tril(-1).numpy(), padded.numpy(), t.grad.numpy(),
                torch.vstack([t[0], t]).numpy(), [p.numpy() for p in torch.tensor_split(t, 3, dim=1)],
                [p.shape for p in torch.tensor_split(t, [1, 3])], torch.reshape(t, (2, 6)).numpy(),
                torch.randn(size=(2, 5)).shape, t.movedim(0, 1).shape,
                torch.nn.functional.one_hot(torch.tensor([[2, 0], [1, 2]])).numpy(), torch.linspace(-1, 2, 7).numpy())

    tril, triu, below, padded, grad, stacked, thirds, at, reshaped, size, moved, hot, spaced = _run(bench)
    assert_close(spaced, np.linspace(-1, 2, 7), "f32")
    assert hot.dtype == np.int64 and np.array_equal(hot, np.eye(3, dtype=np.int64)[[[2, 0], [1, 2]]])
    assert np.array_equal(tril, np.tril(x)) and np.array_equal(triu, np.triu(x, 1))
    assert np.array_equal(below, np.tril(x, -1))
    expected = np.pad(x[1:], ((0, 1), (1, 2)), constant_values=7.0)
    assert np.array_equal(padded, expected)
    assert np.array_equal(grad, np.vstack([np.zeros(4), np.tile(np.arange(1.0, 5.0), (2, 1))]))
    assert np.array_equal(stacked, np.vstack([x[0], x]))
    assert all(np.array_equal(a, b) for a, b in zip(thirds, np.array_split(x, 3, axis=1)))
    assert at == [(1, 4), (2, 4), (0, 4)] and np.array_equal(reshaped, x.reshape(2, 6))
    assert size == (2, 5) and moved == (4, 3)


def test_adr0020_t18_tensor_helpers_model_code_uses_match_numpy():
    x = np.arange(6.0).reshape(2, 3)

    def bench(torch):
        t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
        tiled = t.repeat(2, 1, 2)
        (tiled * torch.arange(6.0)).sum().backward()
        zeros, ones = t.new_zeros(2, 2), t.new_ones((3,), dtype=torch.int64)
        full = t.new_full((2,), 7.0)
        return (tiled.numpy(), t.grad.numpy(), t.view_as(torch.empty(3, 2)).shape, t.unflatten(1, (3, 1)).shape,
                t.is_floating_point(), torch.arange(3).is_floating_point(), zeros.numpy(), ones.numpy(),
                full.numpy(), str(zeros.device), zeros.requires_grad)

    tiled, grad, viewed, unflat, floating, integral, zeros, ones, full, device, needs_grad = _run(bench)
    assert np.array_equal(tiled, np.tile(x, (2, 1, 2)))
    assert np.array_equal(grad, np.tile(np.arange(6.0), (2, 1, 2)).sum(0).reshape(2, 2, 3).sum(1))
    assert viewed == (3, 2) and unflat == (2, 3, 1) and floating and not integral
    assert not zeros.any() and ones.dtype == np.int64 and (ones == 1).all() and (full == 7).all()
    assert device == "ahbm:0" and not needs_grad


def test_adr0020_t11_clip_grad_norm_scales_every_gradient_by_the_joint_norm():
    rng = np.random.default_rng(11)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]

    def bench(torch):
        params = [torch.nn.Parameter(torch.zeros(g.shape)) for g in grads]
        for p, g in zip(params, grads):
            (p * torch.tensor(g, dtype=torch.float32)).sum().backward()
        total = torch.nn.utils.clip_grad_norm_(params, 1.5)
        inf_params = [torch.nn.Parameter(torch.zeros(2))]
        (inf_params[0] * torch.tensor([3.0, -4.0])).sum().backward()
        inf_total = torch.nn.utils.clip_grad_norm_(inf_params, 1.0, norm_type="inf")
        return total.item(), [p.grad.numpy() for p in params], inf_total.item(), inf_params[0].grad.numpy()

    total, clipped, inf_total, inf_clipped = _run(bench)
    norm = math.sqrt(sum((g ** 2).sum() for g in grads))
    assert_close(total, norm, "f32")
    for got, g in zip(clipped, grads):
        assert_close(got, g * min(1.0, 1.5 / (norm + 1e-6)), "f32")
    assert_close(inf_total, 4.0, "f32")
    assert_close(inf_clipped, np.array([3.0, -4.0]) / (4.0 + 1e-6), "f32")


def test_adr0020_t16_topk_and_multinomial_select_rows_as_numpy():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((3, 9))
    weights = np.array([[0.0, 1.0, 0.0, 3.0], [2.0, 0.0, 0.0, 0.0]])

    def bench(torch):
        t = torch.tensor(x, dtype=torch.float32)
        top = torch.topk(t, 4)
        low = t.topk(2, dim=0, largest=False)
        w = torch.tensor(weights, dtype=torch.float32)
        drawn = torch.multinomial(w, 400, replacement=True)
        once = torch.multinomial(w[0], 2)
        return top.values.numpy(), top.indices.numpy(), low.indices.numpy(), drawn.numpy(), sorted(once.tolist())

    values, indices, low, drawn, once = _run(bench)
    order = np.argsort(-x, axis=1, kind="stable")[:, :4]
    assert np.array_equal(indices, order) and np.array_equal(values, np.take_along_axis(x, order, 1).astype(np.float32))
    assert np.array_equal(low, np.argsort(x, axis=0, kind="stable")[:2])
    assert set(drawn[0]) == {1, 3} and abs((drawn[0] == 3).mean() - 0.75) < 0.1 and set(drawn[1]) == {0}
    assert once == [1, 3]


# ---- a model written as GPT training files are written ----------------------------------------------------
@pytest.mark.parametrize("flash", [True, False])
def test_adr0020_t12_a_nanogpt_style_model_runs_forward_backward_and_adamw_as_written(flash):
    """The shipped gpt_train bench's model (nanoGPT's style, nothing kernbench-specific), loaded as a bench file:
    its loss, its gradients and one AdamW step equal a float64 numpy GPT's."""
    module = load_bench(str(GPT_BENCH)).__globals__
    rng = np.random.default_rng(12)
    idx = rng.integers(0, 16, (2, 6))
    targets = rng.integers(0, 16, (2, 6))
    targets[0, 2] = -1

    def bench(torch):
        torch.manual_seed(3)
        config = module["GPTConfig"](block_size=8, vocab_size=16, n_layer=2, n_head=2, n_embd=8, flash=flash)
        model = module["GPT"](config).to("cuda")
        optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=1e-2, betas=(0.9, 0.95),
                                               device_type="cuda")
        names = {id(p): name for name, p in model.named_parameters()}
        before = {name: value.numpy().astype(np.float64) for name, value in model.state_dict().items()}
        _, loss = model(torch.tensor(idx), torch.tensor(targets))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = {name: p.grad.numpy() for name, p in model.named_parameters()}
        optimizer.step()
        after = {name: p.numpy() for name, p in model.named_parameters()}
        decays = {names[id(p)]: group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
        generated = model.generate(torch.tensor(idx[:, :2]), 3, top_k=1)
        greedy = [int(model(generated[:, :t])[0][i, -1].argmax()) for t in (2, 3, 4) for i in range(2)]
        return (loss.item(), before, grads, after, decays, (generated.shape, generated[:, 2:].numpy().T.reshape(-1),
                                                            greedy), torch.is_grad_enabled())

    loss, before, grads, after, decays, (shape, sampled, greedy), grad_mode = _run(bench)
    assert shape == (2, 5) and list(sampled) == greedy and grad_mode  # top_k=1 samples the argmax
    assert_close(loss, np_gpt_loss(before, idx, targets, 2, 2), "f32")
    step = 1e-6
    assert "lm_head.weight" not in grads  # tied: named once, as the embedding (PyTorch's first name for it)
    for name in ("transformer.wte.weight", "transformer.h.1.attn.c_attn.weight", "transformer.ln_f.weight"):
        flat = before[name].reshape(-1)
        for i in np.linspace(0, flat.size - 1, 5).astype(int):
            shifted = [dict(before, **{name: (flat + sign * step * (np.arange(flat.size) == i)).reshape(
                before[name].shape)}) for sign in (1, -1)]
            if name == "transformer.wte.weight":  # tied: the output head is the same tensor
                for params in shifted:
                    params["lm_head.weight"] = params[name]
            numeric = (np_gpt_loss(shifted[0], idx, targets, 2, 2) - np_gpt_loss(shifted[1], idx, targets, 2, 2)) \
                / (2 * step)
            assert_close(grads[name].reshape(-1)[i], numeric, "f32")
    for name, g in grads.items():  # one AdamW step from zero state: p·(1 − lr·wd) − lr·m̂/(√v̂ + eps)
        m, v = 0.1 * g, 0.05 * g * g
        expected = before[name] * (1 - 1e-2 * decays[name]) - 1e-2 * (m / 0.1) / (np.sqrt(v / 0.05) + 1e-8)
        assert_close(after[name], expected, "f32")


# ---- bad input ---------------------------------------------------------------------------------------------
def test_adr0020_t13_bad_module_input_is_one_line_in_pytorchs_words():
    def bench(torch):
        nn = torch.nn

        class NoForward(nn.Module):
            pass

        messages = []
        for call in (lambda: nn.Linear(3, 8)(torch.randn(4, 5)), lambda: NoForward()(torch.ones(1)),
                     lambda: torch.optim.SGD([torch.ones(2, requires_grad=True) * 2], lr=0.1),
                     lambda: nn.Linear(2, 2).load_state_dict({"weight": torch.ones(3, 2), "bias": torch.ones(2)}),
                     lambda: nn.Linear(2, 2, device="cpu")(torch.ones(1, 2))):
            with pytest.raises(KernbenchError) as raised:
                call()
            messages.append(str(raised.value))
        return messages

    shapes, forward, leaf, size, device = _run(bench)
    assert shapes == "mat1 and mat2 shapes cannot be multiplied (4x5 and 3x8)"
    assert forward == 'Module [NoForward] is missing the required "forward" function'
    assert leaf == "can't optimize a non-leaf Tensor"
    assert "size mismatch for weight: copying a param with shape (3, 2) from checkpoint, the shape in current model " \
           "is (2, 2)" in size
    assert "expected all tensors to be on the same device" in device
    assert all("\n" not in m for m in (shapes, forward, leaf, size, device))


def test_adr0020_t14_kernbench_run_of_a_module_without_forward_exits_2_with_one_line(tmp_path):
    bench = tmp_path / "no_forward.py"
    bench.write_text("import torch\n\nclass Net(torch.nn.Module):\n    pass\n\n\ndef run(torch):\n"
                     "    Net()(torch.ones(2))\n")
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == 'kernbench: error: Module [Net] is missing the required "forward" function'


@pytest.mark.parametrize("timing_only", [False, True])
def test_adr0020_t15_the_gpt_train_bench_prints_each_steps_loss_and_simulated_time(tmp_path, timing_only):
    result = run_kernbench_in_process("run", "gpt_train", *(["--timing-only"] if timing_only else []), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    steps = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert len(steps) == 3 and all(line.endswith("us simulated") for line in steps)
    assert all(("loss " in line) != timing_only for line in steps)


def test_adr0020_t34_a_module_cast_right_after_it_is_built_holds_its_initial_values_cast():
    """`.half()` / `.to(dtype)` on a module whose initialization is still in flight on the device (init fills, a
    buffer an op computes) gives the initial values cast: ops in flight write the storage and dtype their tensors
    had when they were launched, as a kernel writes through the pointer it was given, not through what the
    tensor object holds after `.data =` rebinds it."""
    def bench(torch):
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(8, 4)
                self.register_buffer("angles", torch.outer(torch.arange(4).float(), torch.ones(3) * 0.5))
                self.register_buffer("cis", torch.polar(torch.ones(4, 3), self.angles))

        torch.manual_seed(0)
        reference = Model()
        values = {name: tensor.detach().numpy().copy() for name, tensor in reference.state_dict().items()}
        torch.manual_seed(0)
        model = Model().half()
        torch.manual_seed(0)
        wide = Model().to(torch.float64)
        return values, {name: tensor.numpy() for name, tensor in model.state_dict().items()}, \
            {name: tensor.numpy() for name, tensor in wide.state_dict().items()}

    values, half, wide = _run(bench)
    for name, value in values.items():
        expected = value if name == "cis" else value.astype(np.float16)  # half() leaves complex buffers alone
        np.testing.assert_array_equal(half[name], expected, err_msg=name)
        np.testing.assert_array_equal(wide[name], value.real.astype(np.float64) if name == "cis" else value,
                                      err_msg=name)  # to(dtype) casts complex ones too: their real parts, as torch's
