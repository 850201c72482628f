"""Time one training step of a tensor-parallel transformer layer on real GPUs: the anchor
`benchmarks/fidelity_tp_layer.py` holds `kernbench run tp_layer` to.

Run on a machine with CUDA GPUs, PyTorch and NCCL (not on kernbench's torch):

    python benchmarks/anchors/measure_tp_layer.py OUT.json --tp 1 [--tp 2 ...]

The layer is kernbench's (`kernbench/tp/transformer.py`, Megatron's layer
without flash attention) written in plain PyTorch, one process per GPU of the
tensor-parallel group: pre-norm (LayerNorm with weight and bias), QKV
column-parallel (h -> 3h/tp with bias, Megatron's per-head [q k v] layout),
unfused causal attention per local head (q @ k^T / sqrt(d), the upper triangle
masked to -inf, softmax, @ v), output projection row-parallel (h/tp -> h,
its bias added after the all-reduce), a residual, the pre-MLP LayerNorm, fc1
column-parallel (h -> 4h/tp) with its bias fused into tanh-GELU (Megatron's
`bias_gelu_impl`: forward and backward each one kernel, compiled by
`torch.compile` as Megatron's `jit_fuser` compiles them), fc2
row-parallel (4h/tp -> h, bias after the all-reduce), a residual. Every
parameter and activation is fp16; the step is forward, the loss
`out.float().square().mean()` and `loss.backward()` (the column-parallel
inputs' gradients all-reduced over the group, as Megatron's
`copy_to_tensor_model_parallel_region` does). Sequence parallelism and the
overlap are off; data parallelism is 1 (no gradient all-reduce).

Per configuration (hidden 2048, 4096, 8192 with heads of 128; sequence 1024
and 2048; batch 1), 5 warm-up steps, then 20 steps each timed by CUDA events
on rank 0 between two barriers-and-synchronizes; `time_us` is their median.
The file records the GPUs and software versions.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HIDDEN = (2048, 4096, 8192)
SEQUENCE = (1024, 2048)
HEAD_DIM = 128
WARMUP, STEPS = 5, 20


def _summed_over_group(x):
    """x all-reduced (summed) over the tensor-parallel group; x itself on a group of one."""
    if dist.get_world_size() > 1:
        x = x.contiguous()
        dist.all_reduce(x)
    return x


class _CopyToGroup(torch.autograd.Function):
    """Identity forward; the gradient summed over the group (Megatron's copy_to_tensor_model_parallel_region)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return _summed_over_group(grad)


class _ReduceFromGroup(torch.autograd.Function):
    """Summed over the group forward; identity backward (reduce_from_tensor_model_parallel_region)."""

    @staticmethod
    def forward(ctx, x):
        return _summed_over_group(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


def _bias_gelu(bias, y):
    """tanh-GELU of y + bias (Megatron's fused_bias_gelu forward)."""
    x = y + bias
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _bias_gelu_back(grad, bias, y):
    """grad times the tanh-GELU's slope at y + bias (Megatron's fused backward)."""
    x = y + bias
    t = torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x))
    return grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608 * (1.0 + 3 * 0.044715 * x * x))


class _BiasGelu(torch.autograd.Function):
    """Megatron's bias_gelu_impl: forward and backward each one fused kernel (compiled, as Megatron's jit_fuser
    compiles them)."""

    forward_kernel = torch.compile(_bias_gelu)
    backward_kernel = torch.compile(_bias_gelu_back)

    @staticmethod
    def forward(ctx, y, bias):
        ctx.save_for_backward(y, bias)
        return _BiasGelu.forward_kernel(bias, y)

    @staticmethod
    def backward(ctx, grad):
        y, bias = ctx.saved_tensors
        grad_y = _BiasGelu.backward_kernel(grad, bias, y)
        return grad_y, grad_y.reshape(-1, grad_y.shape[-1]).sum(0)


def _parameter(*shape, scale=0.02):
    return torch.nn.Parameter(torch.randn(*shape, device="cuda", dtype=torch.float16) * scale)


class Layer(torch.nn.Module):
    """This rank's share of the layer."""

    def __init__(self, hidden: int, heads: int, tp: int):
        super().__init__()
        self.hidden, self.heads, self.d = hidden, heads // tp, hidden // heads
        ffn = 4 * hidden
        self.ln1_w, self.ln1_b = (torch.nn.Parameter(torch.ones(hidden, device="cuda", dtype=torch.float16)),
                                  torch.nn.Parameter(torch.zeros(hidden, device="cuda", dtype=torch.float16)))
        self.ln2_w, self.ln2_b = (torch.nn.Parameter(torch.ones(hidden, device="cuda", dtype=torch.float16)),
                                  torch.nn.Parameter(torch.zeros(hidden, device="cuda", dtype=torch.float16)))
        self.qkv_w, self.qkv_b = _parameter(3 * hidden // tp, hidden), _parameter(3 * hidden // tp)
        self.proj_w, self.proj_b = _parameter(hidden, hidden // tp), _parameter(hidden)
        self.fc1_w, self.fc1_b = _parameter(ffn // tp, hidden), _parameter(ffn // tp)
        self.fc2_w, self.fc2_b = _parameter(hidden, ffn // tp), _parameter(hidden)
        self.mask = None

    def attention(self, x):
        qkv = F.linear(_CopyToGroup.apply(x), self.qkv_w, self.qkv_b)
        s, b, _ = qkv.shape
        n, d = self.heads, self.d
        q, k, v = (t.permute(1, 2, 0, 3).reshape(b * n, s, d) for t in qkv.view(s, b, n, 3 * d).split(d, dim=-1))
        if self.mask is None or self.mask.shape[0] != s:
            self.mask = torch.triu(torch.ones(s, s, device="cuda", dtype=torch.bool), 1)
        scores = (q @ k.mT) * (1.0 / math.sqrt(d))
        probs = scores.masked_fill(self.mask, float("-inf")).softmax(-1)
        context = (probs @ v).view(b, n, s, d).permute(2, 0, 1, 3).reshape(s, b, n * d)
        return _ReduceFromGroup.apply(F.linear(context, self.proj_w)) + self.proj_b

    def mlp(self, x):
        intermediate = F.linear(_CopyToGroup.apply(x), self.fc1_w)
        return _ReduceFromGroup.apply(F.linear(_BiasGelu.apply(intermediate, self.fc1_b), self.fc2_w)) + self.fc2_b

    def forward(self, hidden):
        hidden = hidden + self.attention(F.layer_norm(hidden, (self.hidden,), self.ln1_w, self.ln1_b))
        return hidden + self.mlp(F.layer_norm(hidden, (self.hidden,), self.ln2_w, self.ln2_b))


def _step_us(layer, hidden) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dist.barrier()
    torch.cuda.synchronize()
    start.record()
    layer(hidden).float().square().mean().backward()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0


def _worker(rank: int, tp: int, results) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=tp, device_id=torch.device("cuda", rank))
    torch.manual_seed(rank)
    for hidden in HIDDEN:
        for seq in SEQUENCE:
            layer = Layer(hidden, hidden // HEAD_DIM, tp)
            x = torch.randn(seq, 1, hidden, device="cuda", dtype=torch.float16, requires_grad=True)
            times = [_step_us(layer, x) for _ in range(WARMUP + STEPS)][WARMUP:]
            if rank == 0:
                point = {"tp": tp, "hidden": hidden, "heads": hidden // HEAD_DIM, "seq": seq, "batch": 1,
                         "sp": False, "overlap": False, "time_us": sorted(times)[len(times) // 2]}
                results.append(point)
                print(json.dumps(point), flush=True)
            del layer, x
            torch.cuda.empty_cache()
    dist.destroy_process_group()


def environment() -> dict:
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "gpus": torch.cuda.device_count(), "sms": props.multi_processor_count,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "python": platform.python_version(),
            "timer": f"CUDA events on rank 0 around one step, median of {STEPS} after {WARMUP} warm-up steps"}


def main(out: str, sizes: list[int]) -> None:
    with mp.Manager() as manager:
        results = manager.list()
        for tp in sizes:
            mp.spawn(_worker, args=(tp, results), nprocs=tp)
        points = list(results)
    with open(out, "w") as f:
        json.dump({"environment": environment(), "points": points}, f, indent=1)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(arguments[0], [int(arguments[i + 1]) for i, a in enumerate(arguments) if a == "--tp"] or [1])
