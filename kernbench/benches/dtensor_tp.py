"""One training step of PyTorch's TP-tutorial Llama block under parallelize_module, beside Megatron's layer.

The block is written as PyTorch's tensor-parallel tutorial writes its model
(pytorch/examples' `llama2_model.py`): RMSNorm, attention with `wq`, `wk`,
`wv`, `wo`, rotary positions and causal `scaled_dot_product_attention`,
RMSNorm and a SwiGLU feed-forward (`w1`, `w2`, `w3`, hidden size
⌈8h/3⌉ rounded up to a multiple of 256), in float16 — rotary positions in
their real (rotate-half) form: the same angles, turning the two halves of
a head where the file's complex form turns adjacent pairs (that form runs
too: adr/0021, T23 and T24). For each
tensor-parallel size (`--tp`, default every divisor of the SIP count) and
sequence parallelism off and on (`--sp`), every rank (one per SIP) builds
the block, parallelizes it with the tutorial's plan (`ColwiseParallel` for
wq/wk/wv/w1/w3, `RowwiseParallel` for wo/w2; with sequence parallelism
`SequenceParallel` norms, `PrepareModuleInput` gathering the sequence and
the row-parallel outputs reduce-scattered to it), and runs forward,
`loss.backward()` and an AdamW step. Rank 0 reports:

- forward + backward: simulated time between two events on its stream
  around `loss.backward()` and the forward before it; AdamW: the
  optimizer's step after it;
- exposed communication: the DTensor collectives rank 0 took part in
  during the step (DTensor issues them on the current stream, so none
  hides under computation);
- Megatron: `tp_layer`'s step (forward, backward, finalize_model_grads —
  no optimizer; LayerNorm and a GELU MLP of 4h; its Triton kernels) for
  the same hidden size, heads, sequence, batch, tensor-parallel size and
  sequence parallelism, with no overlap and no data parallelism.

Options: --hidden H --heads N --seq S --batch B --tp 1,2,4 --sp off,on.
With --timing-only nothing is computed and the table is the same.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)

from kernbench.benches import tp_layer
from kernbench.cli.bench_options import add_layer_arguments, parse_bench_options
from kernbench.errors import KernbenchError


class DTensorBenchError(KernbenchError):
    """An option dtensor_tp cannot use: one line, status 2."""


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(head_dim, seq):
    """cos and sin of each position's rotary angles, (seq, head_dim), each frequency twice (rotate-half form)."""
    inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.arange(seq).float().unsqueeze(1) * inverse.unsqueeze(0)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        output = F.scaled_dot_product_attention(rotate(xq, cos, sin), rotate(xk, cos, sin), xv, is_causal=True)
        return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, ffn_hidden):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, n_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, ffn_hidden)

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


def ffn_hidden(dim: int, multiple_of: int = 256) -> int:
    """Llama's SwiGLU width: two thirds of 4·dim, rounded up to a multiple of `multiple_of`."""
    hidden = int(2 * 4 * dim / 3)
    return multiple_of * math.ceil(hidden / multiple_of)


def tutorial_plan(sequence_parallel: bool) -> dict:
    """The TP tutorial's plan for one block (with sequence parallelism), or its plain tensor-parallel half."""
    if not sequence_parallel:  # the attention's inputs as replicated DTensors, so the rotary tables meet DTensors
        return {"attention": PrepareModuleInput(input_layouts=(Replicate(),) * 3,
                                                desired_input_layouts=(Replicate(),) * 3),
                "attention.wq": ColwiseParallel(use_local_output=False),
                "attention.wk": ColwiseParallel(use_local_output=False),
                "attention.wv": ColwiseParallel(use_local_output=False),
                "attention.wo": RowwiseParallel(), "feed_forward.w1": ColwiseParallel(),
                "feed_forward.w2": RowwiseParallel(), "feed_forward.w3": ColwiseParallel()}
    return {"attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), Replicate(), Replicate()),
                                            desired_input_layouts=(Replicate(), Replicate(), Replicate())),
            "attention.wq": ColwiseParallel(use_local_output=False),
            "attention.wk": ColwiseParallel(use_local_output=False),
            "attention.wv": ColwiseParallel(use_local_output=False),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel()}


def run(_torch, argv=()):
    options = options_of(argv)
    rows = []
    for tp in options.tp:
        for sp in options.sp:
            if sp and tp == 1:
                continue
            measured = {}
            torch.multiprocessing.spawn(_worker, args=(options, tp, sp, measured), nprocs=tp)
            megatron = _megatron_step(options, tp, sp)
            rows.append((tp, sp, measured, megatron))
    _print_table(options, rows)


add_arguments = add_layer_arguments  # the bench's options: the layer's shape, tp sizes and sp, as tp_layer's


def options_of(argv):
    """The bench's options from `argv`, checked against the machine and the block's shape."""
    options = parse_bench_options("dtensor_tp", add_arguments, argv, error_type=DTensorBenchError)
    world = torch.ahbm.device_count()
    options.tp = options.tp or [d for d in range(1, world + 1) if world % d == 0]
    for tp in options.tp:
        if world % tp or options.heads % tp or options.hidden % options.heads or options.seq % tp:
            raise DTensorBenchError(f"dtensor_tp: --tp {tp} must divide the {world} SIPs, the {options.heads} heads "
                                    f"and --seq {options.seq}, and --heads must divide --hidden {options.hidden}")
    return options


def _worker(rank, options, tp, sp, measured):
    mesh = torch.distributed.init_device_mesh("cuda", (tp,))
    torch.manual_seed(0)
    block = TransformerBlock(options.hidden, options.heads, ffn_hidden(options.hidden)).half()
    parallelize_module(block, mesh, tutorial_plan(sp) if tp > 1 else {})
    optimizer = torch.optim.AdamW(block.parameters(), lr=1e-3, foreach=True)
    cos, sin = (table.half() for table in rotary_tables(options.hidden // options.heads, options.seq))
    rows = options.seq // tp if sp else options.seq
    x = torch.randn(options.batch, rows, options.hidden, dtype=torch.float16).requires_grad_()
    records = x._ctx.collectives  # the run's collective records (start and end in ps, ranks)
    torch.ahbm.synchronize()
    torch.distributed.barrier()
    start, middle, end = (torch.ahbm.Event(enable_timing=True) for _ in range(3))
    first = len(records)
    start.record()
    block(x, cos, sin).float().square().mean().backward()
    middle.record()
    optimizer.step()
    end.record()
    end.synchronize()
    torch.distributed.barrier()
    if rank == 0:
        communication = sum(r["end_ps"] - r["start_ps"] for r in records[first:]
                            if 0 in r["ranks"] and r["collective"] != "barrier")
        measured.update(step=middle.time_ps - start.time_ps, adamw=end.time_ps - middle.time_ps,
                        communication=communication)
    torch.distributed.destroy_process_group()


def _megatron_step(options, tp: int, sp: bool) -> dict:
    """tp_layer's step for the same shape, tensor-parallel size and sequence parallelism (no overlap, no dp)."""
    megatron = tp_layer.options_of(torch, ["--hidden", str(options.hidden), "--heads", str(options.heads),
                                           "--seq", str(options.seq), "--batch", str(options.batch),
                                           "--tp", str(tp), "--dp", "1", "--sp", "on" if sp else "off",
                                           "--overlap", "off"])
    (*_, measured), = tp_layer.steps(torch, megatron)
    return measured


def _print_table(options, rows) -> None:
    print(f"dtensor_tp: Llama block hidden={options.hidden} heads={options.heads} ffn={ffn_hidden(options.hidden)} "
          f"seq={options.seq} batch={options.batch} f16, one training step (forward, backward, AdamW), rank 0; "
          f"Megatron's layer (tp_layer) of the same shape beside it")
    print(f"{'tp':>3} {'sp':>4} {'fwd+bwd':>12} {'AdamW':>12} {'exposed comm':>13} {'megatron step':>14} "
          f"{'megatron comm':>14}")
    for tp, sp, measured, megatron in rows:
        print(f"{tp:>3} {'on' if sp else 'off':>4} {measured['step'] / 1e6:>9.3f} us "
              f"{measured['adamw'] / 1e6:>9.3f} us {measured['communication'] / 1e6:>10.3f} us "
              f"{(megatron['compute'] + megatron['communication']) / 1e6:>11.3f} us "
              f"{megatron['communication'] / 1e6:>11.3f} us")
