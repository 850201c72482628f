"""gpt_train's small GPT, its attention and MLP split over ranks by kernbench.tp's layers, trained AdamW steps.

The model is gpt_train's, with Megatron's split of its blocks: the
attention's QKV projection and the MLP's first linear are
`ColumnParallelLinear` (each rank holds its heads' q, k and v, and its
share of the hidden units), the two output projections
`RowParallelLinear` (a partial sum all-reduced over the tensor-parallel
group); embeddings, norms and the tied head are replicated, and their
gradients are equal on every rank because the layers' mappings all-reduce
the input gradients. These layers are `torch.nn` Modules with registered
parameters, so `model.parameters()` finds them and the same AdamW trains
them. Gradient clipping takes the norm over the whole model as Megatron's
does: the squares of this rank's shards and of the replicated parameters
(counted once) summed over the group.

For each tensor-parallel size (`--tp`, default every divisor of the SIP
count that divides the heads) the bench spawns that many ranks, one per
SIP. Every rank seeds as
gpt_train does, builds gpt_train's GPT, draws the same batch, and loads its
partition of that model's weights into the parallel one, so each step's
loss is the single-device run's, whatever the size. Rank 0 prints, per
step, the loss and the simulated time of the whole step (forward, backward,
clipping and the update, collectives included). In a timing-only run only
the times are printed. Options: --tp 1,2 --steps N.
"""

import torch
import torch.nn as nn
from torch.nn import functional as F

from kernbench.cli.bench_loader import bench_module
from kernbench.cli.bench_options import parse_bench_options
from kernbench.errors import KernbenchError
from kernbench.tp import parallel_state
from kernbench.tp.layers import ColumnParallelLinear, RowParallelLinear
from kernbench.tp.param_attributes import param_is_not_tensor_parallel_duplicate

STEPS = 3
_single = bench_module("gpt_train")  # the shipped single-device bench: the model and batch size are its own
BATCH, GPTConfig = _single.BATCH, _single.GPTConfig
Block, GPT, LayerNorm = _single.Block, _single.GPT, _single.LayerNorm


class GptTpBenchError(KernbenchError):
    """An option gpt_train_tp cannot use: one line, status 2."""


class ParallelSelfAttention(nn.Module):
    """gpt_train's causal self-attention with this rank's heads: QKV column parallel, the projection row parallel."""

    def __init__(self, config, tp):
        super().__init__()
        self.c_attn = ColumnParallelLinear(config.n_embd, 3 * config.n_embd, bias=config.bias,
                                           params_dtype=torch.float32, name="c_attn")
        self.c_proj = RowParallelLinear(config.n_embd, config.n_embd, bias=config.bias, input_is_parallel=True,
                                        params_dtype=torch.float32, name="c_proj")
        self.n_head = config.n_head // tp
        self.n_embd = config.n_embd // tp

    def forward(self, x):
        B, T, _ = x.size()
        q, k, v = self.c_attn(x)[0].split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, self.n_embd // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, self.n_embd // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.n_embd // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, self.n_embd)
        return self.c_proj(y)[0]


class ParallelMLP(nn.Module):
    """gpt_train's MLP: the up projection column parallel, GELU on this rank's units, the down projection row
    parallel."""

    def __init__(self, config):
        super().__init__()
        self.c_fc = ColumnParallelLinear(config.n_embd, 4 * config.n_embd, bias=config.bias,
                                         params_dtype=torch.float32, name="c_fc")
        self.gelu = nn.GELU()
        self.c_proj = RowParallelLinear(4 * config.n_embd, config.n_embd, bias=config.bias, input_is_parallel=True,
                                        params_dtype=torch.float32, name="c_proj")

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)[0]))[0]


class ParallelBlock(Block):
    """gpt_train's block (its forward) over the parallel attention and MLP."""

    def __init__(self, config, tp):
        nn.Module.__init__(self)
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = ParallelSelfAttention(config, tp)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = ParallelMLP(config)


class ParallelGPT(GPT):
    """gpt_train's GPT with tensor-parallel blocks; its forward, optimizer groups and head are GPT's own."""

    def __init__(self, config, tp):
        nn.Module.__init__(self)
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([ParallelBlock(config, tp) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def load_from(self, model, tp):
        """Copy `model`'s weights (a GPT of the same config) on the device: replicated ones whole, parallel ones
        this rank's part, the QKV weight's as Megatron lays out its fused QKV (this rank's heads' q, k and v)."""
        rank, own = parallel_state.get_tensor_model_parallel_rank(), dict(self.named_parameters())
        with torch.no_grad():
            for name, weight in model.named_parameters():
                layer = self.get_submodule(name.rsplit(".", 1)[0])
                if name.endswith("c_attn.weight"):
                    share = weight.shape[0] // 3 // tp
                    weight = torch.cat([qkv[rank * share:(rank + 1) * share] for qkv in weight.chunk(3)])
                elif isinstance(layer, (ColumnParallelLinear, RowParallelLinear)):
                    weight = weight.chunk(tp, dim=layer.partition_axis)[rank]
                own[name].copy_(weight)


def clip_grad_norm_tp(parameters, max_norm, group):
    """torch's clip_grad_norm_ over the whole model, as Megatron computes it: every rank's shards and rank 0's
    replicas squared and summed over the tensor-parallel group."""
    grads = [p.grad for p in parameters if p.grad is not None]
    squares = sum(p.grad.square().sum() for p in parameters
                  if p.grad is not None and param_is_not_tensor_parallel_duplicate(p))
    torch.distributed.all_reduce(squares, group=group)
    total = squares.sqrt()
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale)
    return total


def add_arguments(parser) -> None:
    parser.add_argument("--tp", default=None, help="tensor-parallel sizes, comma-separated (default: every divisor "
                                                   "of the SIP count that divides the heads)")
    parser.add_argument("--steps", default=STEPS, type=int, help=f"training steps (default {STEPS})")


def run(torch, argv=()):
    options = parse_bench_options("gpt_train_tp", add_arguments, argv, error_type=GptTpBenchError)
    config, world = GPTConfig(), torch.ahbm.device_count()
    sizes = [d for d in range(1, world + 1) if world % d == 0 and config.n_head % d == 0] if options.tp is None \
        else [_size(value, world, config) for value in options.tp.split(",")]
    if options.steps < 1:
        raise GptTpBenchError(f"gpt_train_tp: --steps must be a positive whole number, got {options.steps}")
    for tp in sizes:
        print(f"tp {tp}: GPT {config.n_layer} layers, {config.n_head} heads ({config.n_head // tp} a rank), "
              f"{config.n_embd} wide; batch {BATCH} x {config.block_size} tokens, one rank a SIP")
        torch.multiprocessing.spawn(_worker, args=(torch, config, tp, options.steps), nprocs=tp)


def _size(value, world, config) -> int:
    tp = int(value) if value.strip().isdigit() else 0
    if tp < 1 or world % tp or config.n_head % tp:
        raise GptTpBenchError(f"gpt_train_tp: --tp {value} must be a positive divisor of the {world} SIPs and of "
                              f"the {config.n_head} heads")
    return tp


def _worker(rank, torch, config, tp, steps):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm")
    parallel_state.initialize_model_parallel(tp)
    torch.manual_seed(1337)  # as gpt_train: the same weights and the same batch on every rank and every size
    reference = GPT(config).to("cuda")
    data = torch.randint(config.vocab_size, (BATCH, config.block_size + 1), device="cuda")
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    model = ParallelGPT(config, tp).to("cuda")
    model.load_from(reference, tp)
    del reference
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=6e-4, betas=(0.9, 0.95), device_type="cuda")
    group = parallel_state.get_tensor_model_parallel_group()
    for step in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_grad_norm_tp(list(model.parameters()), 1.0, group)
        optimizer.step()
        end.record()
        end.synchronize()
        if rank == 0:
            said = "" if torch.is_timing_only() else f"loss {loss.item():.4f}, "
            print(f"  step {step}: {said}{start.elapsed_time(end) * 1e3:.1f} us simulated")
    parallel_state.destroy_model_parallel()
