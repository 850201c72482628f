"""A Megatron-style tensor-parallel transformer layer: self-attention and MLP over the parallel linear layers.

Megatron's `TransformerLayer` with its submodule names: `input_layernorm`,
`self_attention` (`linear_qkv`: column parallel h → 3h, the core attention
per local head, `linear_proj`: row parallel h → h), `pre_mlp_layernorm`,
`mlp` (`linear_fc1`: column parallel h → ffn, fused bias-GELU, `linear_fc2`:
row parallel ffn → h), with residual connections. Activations are
[sequence, batch, hidden]; with sequence parallelism the layer norms and
residuals work on this rank's slice of the sequence and the linears gather
and reduce-scatter it (the mappings' job).

Everything is device work: the linears are the Triton kernels of
`kernbench.tp.kernels`, the attention core and the norms are device ops
(ADR 0016), and autograd (ADR 0017) makes `loss.backward()` a simulated
backward pass with its GEMMs and collectives. The attention core is the
unfused one (scores, causal mask, softmax, weighted sum) that Megatron runs
without flash attention; dropout is off (a training step is timed, not
regularized).
"""

from __future__ import annotations

import math

import numpy as np

from kernbench.tp import parallel_state
from kernbench.tp.config import config_value
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.fusions import bias_gelu_impl
from kernbench.tp.layers import ColumnParallelLinear, RowParallelLinear


class ParallelMLP:
    """Megatron's MLP: `linear_fc1` (column parallel, bias fused into GELU), `linear_fc2` (row parallel)."""

    def __init__(self, hidden_size: int, ffn_hidden_size: int, *, config, seed: int = 0):
        self.linear_fc1 = ColumnParallelLinear(hidden_size, ffn_hidden_size, config=config, skip_bias_add=True,
                                               seed=seed, name="linear_fc1")
        self.linear_fc2 = RowParallelLinear(ffn_hidden_size, hidden_size, config=config, input_is_parallel=True,
                                            skip_bias_add=True, seed=seed + 1, name="linear_fc2")

    def __call__(self, hidden):
        intermediate, bias = self.linear_fc1(hidden)
        return self.linear_fc2(bias_gelu_impl(intermediate, bias))

    def parameters(self) -> list:
        return [p for layer in (self.linear_fc1, self.linear_fc2) for p in (layer.weight, layer.bias)]


class ParallelSelfAttention:
    """Megatron's self-attention: QKV column parallel, causal attention over this rank's heads, output row parallel."""

    def __init__(self, hidden_size: int, num_attention_heads: int, *, config, seed: int = 0):
        tp = parallel_state.get_tensor_model_parallel_world_size()
        if hidden_size % num_attention_heads or num_attention_heads % tp:
            raise ModelParallelError(f"self-attention: hidden_size {hidden_size} must split into "
                                     f"{num_attention_heads} heads, and the heads over the tensor-parallel size {tp}")
        self.heads_per_rank = num_attention_heads // tp
        self.head_dim = hidden_size // num_attention_heads
        self.linear_qkv = ColumnParallelLinear(hidden_size, 3 * hidden_size, config=config, seed=seed,
                                               name="linear_qkv")
        self.linear_proj = RowParallelLinear(hidden_size, hidden_size, config=config, input_is_parallel=True,
                                             skip_bias_add=True, seed=seed + 1, name="linear_proj")
        self._masks: dict[int, object] = {}

    def __call__(self, hidden):
        qkv, _ = self.linear_qkv(hidden)                      # [s, b, 3·h/tp], Megatron's per-head [q k v] layout
        s, b, _ = qkv.shape
        n, d = self.heads_per_rank, self.head_dim
        q, k, v = (t.permute(1, 2, 0, 3).reshape(b * n, s, d) for t in qkv.view(s, b, n, 3 * d).split(d, dim=-1))
        scores = (q @ k.mT) * (1.0 / math.sqrt(d))           # [b·n, s, s]
        probs = scores.masked_fill(self._causal_mask(s, hidden), float("-inf")).softmax(-1)
        context = (probs @ v).view(b, n, s, d).permute(2, 0, 1, 3).reshape(s, b, n * d)
        return self.linear_proj(context)

    def _causal_mask(self, s: int, like):
        """True above the diagonal (keys after the query), made once per sequence length, as Megatron's mask."""
        mask = self._masks.get(s)
        if mask is None:
            torch = parallel_state.get_torch_namespace()
            mask = self._masks[s] = torch.tensor(np.triu(np.ones((s, s), dtype=bool), 1), device=like.device)
        return mask

    def parameters(self) -> list:
        return [p for layer in (self.linear_qkv, self.linear_proj) for p in (layer.weight, layer.bias)]


class TransformerLayer:
    """Pre-norm transformer layer: x + attn(ln(x)), then + mlp(ln(·)); `forward` takes [s, b, h] (this rank's slice)."""

    def __init__(self, config, *, seed: int = 0):
        torch = parallel_state.get_torch_namespace()
        hidden = config.hidden_size  # a TransformerConfig: the model's shape is not optional
        ffn = config.ffn_hidden_size or 4 * hidden
        dtype = config_value(config, "params_dtype")
        self.eps = config.layernorm_epsilon
        self.hidden_size = hidden
        sequence_parallel = bool(config_value(config, "sequence_parallel"))
        self.input_layernorm = _layer_norm_parameters(torch, hidden, dtype, "input_layernorm", sequence_parallel)
        self.self_attention = ParallelSelfAttention(hidden, config.num_attention_heads, config=config, seed=seed)
        self.pre_mlp_layernorm = _layer_norm_parameters(torch, hidden, dtype, "pre_mlp_layernorm", sequence_parallel)
        self.mlp = ParallelMLP(hidden, ffn, config=config, seed=seed + 2)

    def __call__(self, hidden):
        torch = parallel_state.get_torch_namespace()
        attention, bias = self.self_attention(self._norm(torch, hidden, self.input_layernorm))
        hidden = hidden + attention + bias
        mlp, bias = self.mlp(self._norm(torch, hidden, self.pre_mlp_layernorm))
        return hidden + mlp + bias

    forward = __call__

    def _norm(self, torch, hidden, parameters):
        weight, bias = parameters
        return torch.nn.functional.layer_norm(hidden, (self.hidden_size,), weight, bias, self.eps)

    def parameters(self) -> list:
        return [*self.input_layernorm, *self.self_attention.parameters(), *self.pre_mlp_layernorm,
                *self.mlp.parameters()]


def _layer_norm_parameters(torch, hidden: int, dtype, name: str, sequence_parallel: bool) -> tuple:
    """A norm's weight and bias, replicated over the tensor-parallel group; with sequence parallelism each rank
    sees a slice of the sequence, so their gradients are partial sums (marked, as Megatron marks them, for
    `finalize_model_grads`)."""
    weight = torch.nn.Parameter(torch.ones(hidden, dtype=dtype, name=f"{name}.weight"))
    bias = torch.nn.Parameter(torch.zeros(hidden, dtype=dtype, name=f"{name}.bias"))
    weight.sequence_parallel = bias.sequence_parallel = sequence_parallel
    return weight, bias
