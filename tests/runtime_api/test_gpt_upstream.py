"""ADR 0020: karpathy's nanoGPT `model.py` and minGPT's `mingpt/model.py` with its `mingpt/trainer.py` run as
written — opt-in.

Set KERNBENCH_NANOGPT to a nanoGPT checkout and KERNBENCH_MINGPT to a minGPT
checkout to run them; each test skips otherwise (nothing of either
repository is in this repository). The files are imported from the checkout
as a bench module is (their `import torch` gives kernbench's torch; minGPT's
`from mingpt.utils import CfgNode` finds the checkout's package) and used
unchanged; only the device name ("cuda") and the sizes are the tests' own.
What is checked against numpy: the first loss and the loss after training (a
float64 numpy GPT-2 forward of the same parameters and tokens), the first
step's gradients (central differences of that loss) and its AdamW update,
and greedy decoding (the model's
`generate` at `top_k=1` / `do_sample=False` against numpy's argmax); what is
checked of training: that a few AdamW steps reduce the loss.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from kernbench.cli.bench_loader import bench_module
from kernbench.session import Session
from tests.dtensor.test_dtensor import _adamw

NANOGPT = os.environ.get("KERNBENCH_NANOGPT")
MINGPT = os.environ.get("KERNBENCH_MINGPT")
VOCAB, BLOCK, LAYERS, HEADS, EMBD, BATCH = 32, 8, 2, 2, 16, 4
EPS = 1e-5
needs_nanogpt = pytest.mark.skipif(not NANOGPT, reason="set KERNBENCH_NANOGPT to a nanoGPT checkout to run its "
                                                       "model.py")
needs_mingpt = pytest.mark.skipif(not MINGPT, reason="set KERNBENCH_MINGPT to a minGPT checkout to run its model "
                                                     "and trainer")


def _file(checkout: str, name: str) -> str:
    path = Path(checkout) / name
    assert path.is_file(), f"{checkout}: no {name} there"
    return str(path)


@pytest.fixture
def mingpt(monkeypatch):
    """minGPT's model and trainer modules, its package importable from the checkout for their own imports."""
    monkeypatch.syspath_prepend(MINGPT)
    yield bench_module(_file(MINGPT, "mingpt/model.py")), bench_module(_file(MINGPT, "mingpt/trainer.py"))
    for name in [name for name in sys.modules if name == "mingpt" or name.startswith("mingpt.")]:
        del sys.modules[name]  # its modules hold kernbench's torch: no later import finds them


def _gelu(x, exact: bool):
    if exact:  # nn.GELU(): x * Phi(x)
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _numpy_logits(p: dict, tokens: np.ndarray, exact_gelu: bool) -> np.ndarray:
    """A GPT-2 forward in float64 numpy over parameters named as both files name them (`lm_head.weight` given)."""
    def norm(x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + EPS) * p[f"{name}.weight"] + p.get(f"{name}.bias", 0.0)

    def linear(x, name):
        return x @ p[f"{name}.weight"].T + p.get(f"{name}.bias", 0.0)

    b, t = tokens.shape
    head = EMBD // HEADS
    x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][:t]
    for layer in range(LAYERS):
        h = f"transformer.h.{layer}"
        q, k, v = np.split(linear(norm(x, f"{h}.ln_1"), f"{h}.attn.c_attn"), 3, axis=-1)
        q, k, v = (m.reshape(b, t, HEADS, head).transpose(0, 2, 1, 3) for m in (q, k, v))
        scores = np.where(np.tril(np.ones((t, t), bool)), q @ k.transpose(0, 1, 3, 2) / math.sqrt(head), -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        x = x + linear((weights @ v).transpose(0, 2, 1, 3).reshape(b, t, EMBD), f"{h}.attn.c_proj")
        x = x + linear(_gelu(linear(norm(x, f"{h}.ln_2"), f"{h}.mlp.c_fc"), exact_gelu), f"{h}.mlp.c_proj")
    return norm(x, "transformer.ln_f") @ p["lm_head.weight"].T


def _numpy_loss(p: dict, tokens, targets, exact_gelu: bool) -> float:
    logits = _numpy_logits(p, tokens, exact_gelu).reshape(-1, VOCAB)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    return float(-logp[np.arange(logits.shape[0]), targets.reshape(-1)].mean())


def _numpy_greedy(p: dict, prompt: np.ndarray, steps: int, exact_gelu: bool) -> np.ndarray:
    tokens = prompt
    for _ in range(steps):
        tokens = np.concatenate([tokens, _numpy_logits(p, tokens[:, -BLOCK:], exact_gelu)[:, -1].argmax(-1)[:, None]],
                                axis=1)
    return tokens


def _first_step(model) -> tuple[dict, dict]:
    """Each parameter's gradient (after any clipping) and value after the optimizer step, by parameter name."""
    return ({name: p.grad.numpy().astype(np.float64) for name, p in model.named_parameters()},
            {name: p.detach().numpy().astype(np.float64) for name, p in model.named_parameters()})


def _check_first_step(initial: dict, grads: dict, after: dict, loss_of, decayed, lr: float, betas) -> None:
    """Each gradient against float64 central differences of numpy's loss along a random direction (one common
    factor for all of them: gradient clipping's, 1 when nothing is clipped, else making the norm 1), and each
    parameter after the step as AdamW (PyTorch's formula) moves it with its group's weight decay."""
    rng = np.random.default_rng(6)
    ratios = []
    for name, value in grads.items():
        direction = rng.standard_normal(value.shape)
        step = 1e-5
        ahead = loss_of({**initial, name: initial[name] + step * direction})
        behind = loss_of({**initial, name: initial[name] - step * direction})
        ratios.append(float((value * direction).sum()) / ((ahead - behind) / (2 * step)))
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    assert ratios == pytest.approx([1.0 if norm < 1 - 1e-4 else ratios[0]] * len(ratios), rel=3e-4)
    assert norm < 1 + 1e-4 or ratios[0] == pytest.approx(1.0, rel=3e-4)
    for name, value in after.items():
        expected = _adamw(initial[name], grads[name], {}, lr=lr, betas=betas, weight_decay=0.1 * decayed(name))
        np.testing.assert_allclose(value, expected, rtol=0, atol=1e-6, err_msg=name)


def _float64(model) -> dict:
    return {name: value.detach().numpy().astype(np.float64) for name, value in model.state_dict().items()}


def _tokens(seed: int, shape) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, shape)


@needs_nanogpt
def test_adr0020_t35_nanogpts_model_file_trains_generates_and_estimates_mfu_as_written():
    """nanoGPT's GPT (weight tying, SDPA attention, exact GELU): the first and the trained loss are numpy's, the
    first step's gradients are numpy's central differences and its fused AdamW (`configure_optimizers`: two
    weight-decay groups) moves each parameter as PyTorch's formula, five steps on one batch reduce the loss,
    `generate` at top_k=1 is numpy's greedy decoding and at top_k=5 repeats under manual_seed, `estimate_mfu` is
    PaLM's formula over the model's own parameter count."""
    nanogpt = bench_module(_file(NANOGPT, "model.py"))
    tokens, targets = _tokens(1, (BATCH, BLOCK)), _tokens(2, (BATCH, BLOCK))
    prompt = _tokens(3, (1, 3))
    session = Session("single_sip")

    def train(torch):
        torch.manual_seed(0)
        config = nanogpt.GPTConfig(block_size=BLOCK, vocab_size=VOCAB, n_layer=LAYERS, n_head=HEADS, n_embd=EMBD,
                                   dropout=0.0, bias=True)
        model = nanogpt.GPT(config).to("cuda")
        assert model.lm_head.weight is model.transformer.wte.weight
        initial = _float64(model)
        optimizer = model.configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cuda")
        x, y = torch.tensor(tokens, device="cuda"), torch.tensor(targets, device="cuda")
        losses, first = [], None
        for _ in range(5):
            _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            first = first or _first_step(model)
        model.eval()
        with torch.no_grad():
            trained_loss = model(x, y)[1].item()
        greedy = model.generate(torch.tensor(prompt, device="cuda"), 4, top_k=1).numpy()
        torch.manual_seed(7)
        sampled = [model.generate(torch.tensor(prompt, device="cuda"), 4, top_k=5).numpy() for _ in range(2)]
        torch.manual_seed(7)
        again = model.generate(torch.tensor(prompt, device="cuda"), 4, top_k=5).numpy()
        mfu = model.estimate_mfu(fwdbwd_per_iter=BATCH, dt=0.5)
        return (initial, optimizer, losses, first, trained_loss, greedy, sampled, again, mfu, _float64(model),
                model.get_num_params())

    (initial, optimizer, losses, first, trained_loss, greedy, sampled, again, mfu, trained,
     n_params) = session.run(train, session.torch)
    tied = lambda p: {**p, "lm_head.weight": p["transformer.wte.weight"]}  # noqa: E731
    _check_first_step(initial, *first, lambda p: _numpy_loss(tied(p), tokens, targets, exact_gelu=True),
                      lambda name: initial[name].ndim >= 2, lr=1e-2, betas=(0.9, 0.95))
    assert losses[0] == pytest.approx(_numpy_loss(initial, tokens, targets, exact_gelu=True), rel=1e-5)
    assert trained_loss == pytest.approx(_numpy_loss(trained, tokens, targets, exact_gelu=True), rel=1e-5)
    assert losses[-1] < losses[0] - 0.1 and all(b < a for a, b in zip(losses, losses[1:]))
    assert optimizer.defaults.get("fused") is True
    assert [group["weight_decay"] for group in optimizer.param_groups] == [0.1, 0.0]
    np.testing.assert_array_equal(greedy, _numpy_greedy(trained, prompt, 4, exact_gelu=True))
    assert sampled[0].shape == (1, 7) and ((0 <= sampled[0]) & (sampled[0] < VOCAB)).all()
    np.testing.assert_array_equal(sampled[0], again)
    non_embedding = sum(v.size for k, v in initial.items() if k != "lm_head.weight") - BLOCK * EMBD
    assert n_params == non_embedding
    flops = (6 * non_embedding + 12 * LAYERS * HEADS * (EMBD // HEADS) * BLOCK) * BLOCK * BATCH
    assert mfu == pytest.approx(flops / 0.5 / 312e12)


@needs_mingpt
def test_adr0020_t36_mingpts_trainer_trains_its_model_over_a_dataloader_as_written(mingpt):
    """minGPT's Trainer (a DataLoader over a RandomSampler with replacement, four workers, pinned memory, batches
    moved with `.to("cuda")`, grad-norm clipping, AdamW from the model's `configure_optimizers`) trains its GPT
    (tanh GELU, explicit masked attention) over a Dataset of our own: the first loss is numpy's on the first batch
    the loader drew, the first step's clipped gradients are numpy's central differences scaled by one factor and
    its AdamW (weight decay on the Linear weights only) moves each parameter as PyTorch's formula, later losses
    fall, the trained model's loss over all the data is numpy's, and `generate(do_sample=False)` is numpy's greedy
    decoding."""
    model_file, trainer_file = mingpt
    data = _tokens(4, (64, BLOCK + 1))
    prompt = _tokens(5, (1, 3))
    session = Session("single_sip")

    def train(torch):
        from torch.utils.data import Dataset

        class Sequences(Dataset):
            """Next-token pairs of fixed token rows, recording the indices the loader asks for."""

            def __init__(self):
                self.asked = []

            def __len__(self):
                return len(data)

            def __getitem__(self, index):
                self.asked.append(index)
                row = torch.from_numpy(data[index])
                return row[:-1], row[1:]

        torch.manual_seed(0)
        config = model_file.GPT.get_default_config()
        config.merge_from_dict(dict(model_type=None, n_layer=LAYERS, n_head=HEADS, n_embd=EMBD, vocab_size=VOCAB,
                                    block_size=BLOCK, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0))
        model = model_file.GPT(config)
        settings = trainer_file.Trainer.get_default_config()
        settings.merge_from_dict(dict(max_iters=30, batch_size=BATCH, learning_rate=5e-3))
        dataset = Sequences()
        trainer = trainer_file.Trainer(settings, model, dataset)
        initial = _float64(trainer.model)
        losses, first = [], []
        trainer.add_callback("on_batch_end", lambda t: losses.append(t.loss.item()))
        trainer.add_callback("on_batch_end", lambda t: first or first.append(_first_step(t.model)))
        trainer.run()
        model.eval()
        with torch.no_grad():
            trained_loss = model(*(torch.tensor(part, device="cuda") for part in (data[:, :-1], data[:, 1:])))[1]
        greedy = model.generate(torch.tensor(prompt, device="cuda"), 4, do_sample=False).numpy()
        return (trainer.device, initial, losses, first[0], dataset.asked, trained_loss.item(), greedy,
                _float64(model))

    device, initial, losses, first, asked, trained_loss, greedy, trained = session.run(train, session.torch)
    assert device == "cuda" and len(losses) == 30 and len(asked) == 30 * BATCH
    rows = data[asked[:BATCH]]
    loss_of = lambda p: _numpy_loss(p, rows[:, :-1], rows[:, 1:], exact_gelu=False)  # noqa: E731
    assert losses[0] == pytest.approx(loss_of(initial), rel=1e-5)
    linear = lambda name: initial[name].ndim == 2 and ".wte." not in name and ".wpe." not in name  # noqa: E731
    _check_first_step(initial, *first, loss_of, linear, lr=5e-3, betas=(0.9, 0.95))
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.1
    assert trained_loss == pytest.approx(_numpy_loss(trained, data[:, :-1], data[:, 1:], exact_gelu=False), rel=1e-5)
    np.testing.assert_array_equal(greedy, _numpy_greedy(trained, prompt, 4, exact_gelu=False))
