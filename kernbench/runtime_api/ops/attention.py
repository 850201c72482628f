"""`torch.nn.functional.scaled_dot_product_attention`, written as a composite of the table's rows: a batched
matmul, a scale, the causal or given mask as a masked fill (or an add), softmax, dropout, and a batched matmul.

Each step is its own device op with its own derivative, so the time is that
of an unfused attention (the scores go through HBM between the steps), not
of a fused flash-attention kernel.
"""

from __future__ import annotations

import math

from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.ops.elementwise import masked_fill
from kernbench.runtime_api.ops.functional import dropout, softmax
from kernbench.runtime_api.ops.linalg import matmul
from kernbench.runtime_api.ops.positional import triangle
from kernbench.runtime_api.ops.overrides import overridable


@overridable
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False):
    """softmax(Q Kᵀ · scale + mask) V over the last two dims (scale 1/√E by default): `is_causal` masks the
    upper triangle, a bool `attn_mask` keeps where it is True, a float one is added; dropout with `dropout_p`."""
    if is_causal and attn_mask is not None:
        raise TensorError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise TensorError(f"scaled_dot_product_attention: query {query.shape}, key {key.shape} and value "
                          f"{value.shape} do not fit (query and key share E, key and value share S)")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key, value = _repeat_heads(key, repeat), _repeat_heads(value, repeat)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, key.mT) * scale
    if is_causal:
        rows, cols = query.shape[-2], key.shape[-2]
        scores = masked_fill(scores, triangle(scores, rows, cols, 1, False, "causal_mask"), -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype.is_floating_point:
            scores = scores + attn_mask
        else:
            scores = masked_fill(scores, attn_mask.logical_not(), -math.inf)
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, value)


def _repeat_heads(x, repeat: int):
    """Each head of dim −3 repeated `repeat` times in place (grouped-query attention): a view, then a copy."""
    shape = x.shape
    return x.unsqueeze(-3).expand(*shape[:-2], repeat, *shape[-2:]).reshape(*shape[:-3], shape[-3] * repeat,
                                                                            *shape[-2:])
