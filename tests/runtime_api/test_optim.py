"""ADR 0020: torch.optim — each optimizer's steps equal PyTorch's formulas written in numpy, and are device work."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.session import Session

RNG = np.random.default_rng(20)
START = RNG.standard_normal((3, 4))
GRADS = [RNG.standard_normal((3, 4)) for _ in range(3)]


def _steps(make_optimizer, session: Session | None = None):
    """The parameter after each of three steps with the gradients GRADS, and the session it ran in."""
    session = session or Session("default")
    out = {}

    def bench(torch):
        p = torch.nn.Parameter(torch.tensor(START, dtype=torch.float32))
        optimizer = make_optimizer(torch, [p])
        values = []
        for g in GRADS:
            optimizer.zero_grad()
            (p * torch.tensor(g, dtype=torch.float32)).sum().backward()
            optimizer.step()
            values.append(p.numpy().copy())
        out.update(values=values, leaf=p.is_leaf and p.grad_fn is None)

    session.run(bench, session.torch)
    return out["values"], out["leaf"], session


def np_sgd(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    p, buf, out = START.copy(), None, []
    for g in GRADS:
        g = -g if maximize else g
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p)
    return out


def np_adam(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False, grads=GRADS):
    p, m, v, vmax, out = START.copy(), 0.0, 0.0, 0.0, []
    for step, g in enumerate(grads, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        vmax = np.maximum(vmax, v)
        second = vmax if amsgrad else v
        denom = np.sqrt(second) / math.sqrt(1 - betas[1] ** step) + eps
        p = p - lr / (1 - betas[0] ** step) * m / denom
        out.append(p)
    return out


@pytest.mark.parametrize("settings", [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.05, momentum=0.9, dampening=0.5),
                                      dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.01),
                                      dict(lr=0.1, weight_decay=0.1, maximize=True)])
def test_adr0020_t20_sgd_steps_are_pytorchs_formula(settings):
    _assert_steps("SGD", settings, np_sgd(**settings))


def _assert_steps(name: str, settings: dict, expected: list) -> None:
    """Three steps of `torch.optim.<name>(**settings)` give `expected`, and the parameter stays a leaf."""
    values, leaf, _ = _steps(lambda torch, params: getattr(torch.optim, name)(params, **settings))
    for got, want in zip(values, expected):
        assert_close(got, want, "f32")
    assert leaf


@pytest.mark.parametrize("name, settings", [("Adam", dict(lr=0.01)), ("Adam", dict(lr=0.01, weight_decay=0.1)),
                                            ("Adam", dict(lr=0.01, amsgrad=True, betas=(0.8, 0.9))),
                                            ("AdamW", dict(lr=0.01)),
                                            ("AdamW", dict(lr=0.01, weight_decay=0.2, fused=True, foreach=False))])
def test_adr0020_t21_adam_and_adamw_steps_are_pytorchs_formulas(name, settings):
    reference = {k: v for k, v in settings.items() if k not in ("fused", "foreach")}
    if name == "AdamW":
        reference.setdefault("weight_decay", 0.01)
    _assert_steps(name, settings, np_adam(**reference, decoupled=name == "AdamW"))


def np_rmsprop(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    p, square, mean, buf, out = START.copy(), 0.0, 0.0, 0.0, []
    for g in GRADS:
        g = g + weight_decay * p
        square = alpha * square + (1 - alpha) * g * g
        mean = alpha * mean + (1 - alpha) * g
        avg = np.sqrt(square - mean * mean if centered else square) + eps
        buf = momentum * buf + g / avg
        p = p - lr * (buf if momentum else g / avg)
        out.append(p)
    return out


@pytest.mark.parametrize("settings", [dict(lr=0.01), dict(lr=0.01, alpha=0.9, weight_decay=0.1),
                                      dict(lr=0.01, momentum=0.9, centered=True)])
def test_adr0020_t25_rmsprop_steps_are_pytorchs_formula(settings):
    _assert_steps("RMSprop", settings, np_rmsprop(**settings))


def test_adr0020_t22_param_groups_zero_grad_and_state_dict_continue_as_pytorchs():
    def bench(torch):
        a = torch.nn.Parameter(torch.tensor(START, dtype=torch.float32))
        b = torch.nn.Parameter(torch.tensor(START, dtype=torch.float32))
        optimizer = torch.optim.AdamW([{"params": [a]}, {"params": [b], "lr": 0.1, "weight_decay": 0.0}], lr=0.01)
        settings = [(g["lr"], g["weight_decay"], g["betas"]) for g in optimizer.param_groups]
        (a * torch.tensor(GRADS[0], dtype=torch.float32)).sum().backward()
        (b * torch.tensor(GRADS[0], dtype=torch.float32)).sum().backward()
        optimizer.step()
        saved = optimizer.state_dict()
        twin_a = torch.nn.Parameter(a.detach().clone())
        twin_b = torch.nn.Parameter(b.detach().clone())
        twin = torch.optim.AdamW([{"params": [twin_a]}, {"params": [twin_b]}], lr=0.5)
        twin.load_state_dict(saved)
        optimizer.zero_grad()
        for params, opt in (((a, b), optimizer), ((twin_a, twin_b), twin)):
            for p in params:
                (p * torch.tensor(GRADS[1], dtype=torch.float32)).sum().backward()
            opt.step()
        optimizer.zero_grad(set_to_none=False)
        zeroed = not a.grad.numpy().any()
        optimizer.zero_grad()
        return (settings, sorted(saved["state"]), saved["param_groups"][1]["params"], saved["state"][0]["step"],
                a.numpy(), twin_a.numpy(), b.numpy(), twin_b.numpy(), zeroed, a.grad)

    session = Session("default")
    got = {}
    session.run(lambda torch: got.update(v=bench(torch)), session.torch)
    settings, indices, group_params, step, a, twin_a, b, twin_b, zeroed, grad = got["v"]
    assert settings == [(0.01, 0.01, (0.9, 0.999)), (0.1, 0.0, (0.9, 0.999))]
    assert indices == [0, 1] and group_params == [1] and step == 1
    assert np.array_equal(a, twin_a) and np.array_equal(b, twin_b)
    assert zeroed and grad is None
    assert_close(a, np_adam(lr=0.01, weight_decay=0.01, decoupled=True, grads=GRADS[:2])[1], "f32")
    assert_close(b, np_adam(lr=0.1, decoupled=True, grads=GRADS[:2])[1], "f32")


@pytest.mark.parametrize("name", ["LambdaLR", "CosineAnnealingLR", "StepLR"])
def test_adr0020_t23_schedulers_set_pytorchs_learning_rates(name):
    def bench(torch):
        p = torch.nn.Parameter(torch.zeros(2))
        optimizer = torch.optim.SGD([{"params": [p]}, {"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.5}],
                                    lr=0.1)
        scheduler = {"LambdaLR": lambda: torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: 1 / (e + 1)),
                     "CosineAnnealingLR": lambda: torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 4, 0.01),
                     "StepLR": lambda: torch.optim.lr_scheduler.StepLR(optimizer, 2, 0.5)}[name]()
        lrs = [scheduler.get_last_lr()]
        for _ in range(5):
            optimizer.step()
            scheduler.step()
            lrs.append([g["lr"] for g in optimizer.param_groups])
        return lrs

    session = Session("single_sip")
    got = {}
    session.run(lambda torch: got.update(v=bench(torch)), session.torch)
    rule = {"LambdaLR": lambda base, e: base / (e + 1),
            "CosineAnnealingLR": lambda base, e: 0.01 + (base - 0.01) * (1 + math.cos(math.pi * e / 4)) / 2,
            "StepLR": lambda base, e: base * 0.5 ** (e // 2)}[name]
    assert np.allclose(got["v"], [[rule(0.1, e), rule(0.5, e)] for e in range(6)], rtol=1e-12, atol=0)


def test_adr0020_t24_an_optimizer_step_is_device_work_with_the_same_picoseconds_in_a_timing_only_run():
    def records(timing_only: bool):
        session = Session("default", timing_only=timing_only)
        out = {}

        def bench(torch):
            p = torch.nn.Parameter(torch.zeros(64, 64))
            p.grad = torch.ones(64, 64)
            optimizer = torch.optim.AdamW([p], lr=0.01)
            torch.ahbm.synchronize()
            first = len(session.ctx.machine.oplog)
            optimizer.step()
            torch.ahbm.synchronize()
            out["records"] = [(r.kind, r.label, r.start, r.end) for r in list(session.ctx.machine.oplog)[first:]]
        session.run(bench, session.torch)
        return out["records"]

    data, timing = records(False), records(True)
    assert data == timing
    labels = {label for kind, label, _, _ in data if kind == "vector"}
    assert {"mul", "add", "sqrt", "div"} <= labels
