"""`torch.nn.functional.scaled_dot_product_attention` as the fused attention kernel a GPU library runs
(adr/0016-device-ops.md, "Attention").

On a GPU, PyTorch runs attention as one fused kernel (cuDNN's, FlashAttention-2's or the memory-efficient one):
a program per block of query rows reads its Q block once, streams the keys and values past it, keeps the scores
and the online softmax on chip and writes its O rows and their logsumexp; under `is_causal` the key blocks past
the diagonal are skipped, not computed and masked. The backward is a program per block of keys: it reads its K
and V block once, streams the queries, their output gradient and logsumexp past it, recomputes the scores,
writes dK and dV, and adds its part of dQ into an fp32 accumulator with atomics, which a second launch converts
to dQ. Both run here as such programs over every PE of the SIP in waves, through the launch path of every device
op; their values are numpy's on what their DMAs loaded. A float `attn_mask` that requires grad, and host tensors,
take the unfused composite of the table's rows (batched matmul, mask, softmax, dropout, batched matmul).
"""

from __future__ import annotations

import math
from math import prod

import numpy as np

from kernbench.dtypes import float32
from kernbench.kernels.kept_values import KeptValues, MemoBudget
from kernbench.numerics import device_arithmetic
from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.launch.kernel_launch import place_programs
from kernbench.runtime_api.ops.device_ops import (
    accumulator_type, broadcast_shape, check_same_device, generate, run_tiles)
from kernbench.runtime_api.ops.elementwise import masked_fill, result_maker
from kernbench.runtime_api.ops.functional import dropout, softmax
from kernbench.runtime_api.ops.library_gemm import block_selector, load_block, sum_partials
from kernbench.runtime_api.ops.linalg import matmul
from kernbench.runtime_api.ops.overrides import overridable
from kernbench.runtime_api.ops.positional import triangle

# Query rows of a forward program and key rows of a backward program (cuDNN's and FlashAttention-2's Hopper
# tiles for head dims up to 128), and the streamed rows a program loads before its first MMA.
BLOCK_M = 128
BLOCK_N = 128
STAGE = 64
# Vector-unit passes over each score element: the forward's online softmax (scale, running max, exponential,
# sum, rescale, conversion of P for the second MMA); the backward's recomputed exponential, dP's dropout and
# difference with the row's dO·O, dS, and the conversions of P and dS. The exponential runs on an SM's
# special-function units at a fraction of its FP32 lanes' rate, so these are model terms set by the anchor
# (benchmarks/anchors/sdpa_h200.json), as ADR 0010's collective terms are.
FORWARD_PASSES = 9
BACKWARD_PASSES = 24
# With dropout, the passes that draw each score's number in the kernel, forward and again backward: a counter-based
# Philox-4x32-10 draw is ten rounds of two 32-bit multiplies (a quarter of the lanes' rate) and four adds or xors
# for four numbers, 30 lane cycles a number, and the compare and scale make 32.
DROPOUT_PASSES = 32


@overridable
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False):
    """softmax(Q Kᵀ · scale + mask) V over the last two dims (scale 1/√E by default): `is_causal` masks the
    upper triangle, a bool `attn_mask` keeps where it is True, a float one is added; dropout with `dropout_p`;
    `enable_gqa` shares each key and value head among a group of query heads. One fused kernel, as cuDNN's and
    FlashAttention's: a program per 128 query rows reads Q, K and V once and keeps the scores on chip (4·L·S·E
    flops a head, the softmax's vector passes over the scores; causal skips the blocks past the diagonal); its
    backward a program per 128 keys (2.5 times the flops) and a conversion of the fp32 dQ."""
    if is_causal and attn_mask is not None:
        raise TensorError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise TensorError(f"scaled_dot_product_attention: query {query.shape}, key {key.shape} and value "
                          f"{value.shape} need at least two dims (sequence, embedding)")
    if not query.dtype == key.dtype == value.dtype:
        raise TensorError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                          f"{query.dtype.name} key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name} "
                          f"instead.")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise TensorError(f"scaled_dot_product_attention: query {query.shape}, key {key.shape} and value "
                          f"{value.shape} do not fit (query and key share E, key and value share S)")
    if not 0.0 <= dropout_p <= 1.0:
        raise TensorError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    repeat = 1
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        if query.shape[-3] % key.shape[-3] or key.shape[-3] != value.shape[-3]:
            raise TensorError(f"scaled_dot_product_attention: enable_gqa needs the query heads "
                              f"({query.shape[-3]}) a multiple of the key and value heads ({key.shape[-3]}, "
                              f"{value.shape[-3]})")
        repeat = query.shape[-3] // key.shape[-3]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    tensors = [query, key, value] + ([attn_mask] if attn_mask is not None else [])
    check_same_device(tensors, "scaled_dot_product_attention")
    if query.device.is_host or (attn_mask is not None and autograd.requires_grad(attn_mask)):
        if repeat > 1:
            key, value = _repeat_heads(key, repeat), _repeat_heads(value, repeat)
        return _composite(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return _fused(query, key, value, attn_mask, dropout_p, is_causal, scale, repeat)


def _composite(query, key, value, attn_mask, dropout_p: float, is_causal: bool, scale: float):
    """The unfused attention, each step a device op of the table with its own derivative."""
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


class _Attention:
    """One call's operands and the rules its forward and backward programs share."""

    def __init__(self, query, key, value, attn_mask, dropout_p: float, is_causal: bool, scale: float, repeat: int):
        self.q, self.k, self.v, self.causal, self.scale, self.repeat = query, key, value, is_causal, scale, repeat
        self.length, self.width = query.shape[-2:]
        self.keys, self.value_width = key.shape[-2], value.shape[-1]
        heads = lambda t: (*t.shape[:-3], t.shape[-3] * repeat) if t.ndim >= 3 else t.shape[:-2]  # noqa: E731
        self.batch = broadcast_shape([query.shape[:-2], heads(key), heads(value)], "scaled_dot_product_attention")
        if attn_mask is not None and attn_mask.ndim < 2:
            attn_mask = attn_mask.expand(self.length, self.keys)
        if attn_mask is not None:
            broadcast_shape([attn_mask.shape, (*self.batch, self.length, self.keys)], "scaled_dot_product_attention")
        self.mask, self.dropout_p = attn_mask, dropout_p
        self.compute = accumulator_type(query.dtype).numpy
        self.ctx, self.new = query._ctx, result_maker((query,))
        # The dropout's uniform draws over (*batch, L, S), made by the first program with values from the calling
        # rank's generator of the device and kept in float32, as the unfused dropout draws and keeps them.
        self.rng = self.ctx.rng_for(None, query.device) if dropout_p > 0.0 else None
        self.draws = None

    def coords(self, index: int):
        """The batch coordinates of batch entry `index`, and those of its key and value head."""
        coords = tuple(int(c) for c in np.unravel_index(index, self.batch)) if self.batch else ()
        if self.repeat == 1:
            return coords, coords
        return coords, (*coords[:-1], coords[-1] // self.repeat)

    def load(self, p, plans, tensor, coords, rows: range, cols: range, window: int | None = None) -> np.ndarray:
        """tensor[*coords, rows, cols] loaded by `p` in the compute dtype, its selector kept in `plans`."""
        key = (id(tensor), coords, rows.start, rows.stop, cols.start, cols.stop)
        values = load_block(p, plans, tensor, key, coords, rows, cols, window)
        return values.astype(self.compute, copy=False) if p.data else values

    def stream(self, p, plans, tensor, coords, rows: range, width: int) -> np.ndarray:
        """tensor[*coords, rows, :width] streamed past a program after its first stage: one load of the rows, or
        under `is_causal`, where programs stream ranges of different lengths, one load per aligned power-of-two
        run of them (`aligned_runs`), so that programs streaming the same rows read the same blocks, which an L2
        then holds as it holds a block every program of a wave reads."""
        window = self.stream_window(width)
        runs = aligned_runs(rows) if self.causal else [rows]
        parts = [self.load(p, plans, tensor, coords, run, range(width), window) for run in runs]
        return np.concatenate(parts) if len(parts) > 1 and p.data else parts[0]  # timing-only: no values to join

    def stream_window(self, width: int) -> int:
        """The L2 window of a streamed operand: one stage of it, which the programs of a wave read in step."""
        return STAGE * width * self.q.dtype.itemsize

    def mask_block(self, p, plans, coords, rows: range, cols: range) -> np.ndarray | None:
        """The given mask over (rows, cols), loaded by `p` (None without one)."""
        if self.mask is None:
            return None
        key = (id(self.mask), coords, rows.start, rows.stop, cols.start, cols.stop)
        return load_block(p, plans, self.mask, key, coords, rows, cols, None)

    def scores(self, queries, rows: range, keys, cols: range, mask: np.ndarray | None) -> np.ndarray:
        """scale · Q Kᵀ over (rows, cols), the causal or given mask applied."""
        scores = (queries @ keys.T) * self.scale
        if self.causal:
            scores[np.arange(rows.start, rows.stop)[:, None] < np.arange(cols.start, cols.stop)[None, :]] = -np.inf
        elif mask is not None:
            scores = scores + mask.astype(self.compute) if self.mask.dtype.is_floating_point else \
                np.where(mask, scores, -np.inf)
        return scores

    def passes(self, softmax: int) -> int:
        """Vector passes over each score: the softmax's (`softmax`), and the dropout's draws when it has any."""
        return softmax + (DROPOUT_PASSES if self.dropout_p > 0.0 else 0)

    def kept(self, coords, rows: range, cols: range) -> np.ndarray | float:
        """The dropout's scale of each kept score (0 where dropped) over (rows, cols); 1.0 without dropout."""
        if self.dropout_p == 0.0:
            return 1.0
        if self.draws is None:
            self.draws = self.rng.random((*self.batch, self.length, self.keys)).astype(np.float32)
        draws = self.draws[coords][rows.start:rows.stop, cols.start:cols.stop]
        return np.where(draws >= self.dropout_p, 1.0 / (1.0 - self.dropout_p), 0.0)

    def tiles(self, tensors, n_programs: int) -> list[int]:
        """The tile each program number runs, so that each PE takes the tiles a GPU's persistent attention kernel
        gives its SM: tile t (a batch entry's blocks in order, entry after entry) to SM t mod P, in order.

        The launch gives each PE a run of program numbers (`place_programs`);
        the runs' lengths are the round robin's counts, so each run takes one
        SM's tiles, runs and SMs of a count paired in order. A causal grid's
        long and short blocks then fall on a PE as they fall on an SM.
        """
        runs = sorted((programs for _, programs in place_programs(self.ctx, tensors, self.q.device.index,
                                                                   n_programs)), key=len, reverse=True)
        sms = len(runs)
        shares = sorted((range(sm, n_programs, sms) for sm in range(sms)), key=len, reverse=True)
        tiles = [0] * n_programs
        for programs, share in zip(runs, shares):
            for number, tile in zip(programs, share):
                tiles[number] = tile
        return tiles

    def fresh_plans(self) -> KeptValues:
        """The blocks one launch's programs keep (their selectors and DMAs), dropped by its `release` when they
        end."""
        return KeptValues(MemoBudget(self.ctx.access_plan_pool))


def _fused(query, key, value, attn_mask, dropout_p: float, is_causal: bool, scale: float, repeat: int):
    op = _Attention(query, key, value, attn_mask, dropout_p, is_causal, scale, repeat)
    out, lse = _forward(op)
    return autograd.record(out, "scaled_dot_product_attention", (query, key, value),
                           lambda grad: _backward(op, grad, out, lse))


def _forward(op: _Attention):
    """O and the logsumexp of each query row: a program per batch entry and block of `BLOCK_M` query rows loads
    its Q block, its key and value rows (up to the diagonal under `is_causal`: later blocks are skipped) — the
    first `STAGE` rows, then the rest beside its MMAs — runs Q Kᵀ, the softmax's `FORWARD_PASSES` vector passes
    over the scores and P V, and stores its O rows and their logsumexp."""
    q, k, v, length = op.q, op.k, op.v, op.length
    out = op.new((*op.batch, length, op.value_width), q.dtype, q.device, "scaled_dot_product_attention")
    lse = op.new((*op.batch, length), float32, q.device, "attention.logsumexp")
    blocks = -(-length // BLOCK_M)
    plans = op.fresh_plans()
    inputs = [q, k, v] + ([op.mask] if op.mask is not None else [])
    tiles = op.tiles([*inputs, out], prod(op.batch) * blocks)

    def program(p) -> None:
        index, block = divmod(tiles[p.number], blocks)
        coords, kv = op.coords(index)
        rows = range(block * BLOCK_M, min(length, (block + 1) * BLOCK_M))
        end = min(op.keys, rows.stop) if op.causal else op.keys
        stages = (range(0, min(end, STAGE)), range(min(end, STAGE), end))
        queries = op.load(p, plans, q, coords, rows, range(op.width))
        loaded = [None, None]

        def load(stage: int) -> None:
            cols = stages[stage]
            if stage == 0:
                loaded[0] = (op.load(p, plans, k, kv, cols, range(op.width)),
                             op.load(p, plans, v, kv, cols, range(op.value_width)))
            else:
                loaded[1] = (op.stream(p, plans, k, kv, cols, op.width), op.stream(p, plans, v, kv, cols,
                                                                                  op.value_width))

        load(0)
        mask = op.mask_block(p, plans, coords, rows, range(end))
        loader = p.ctx.engine.spawn(lambda: load(1), name=f"attention program {p.number} loads") \
            if len(stages[1]) else None
        p.gemm(len(rows), end, op.width, q.dtype)
        p.vector("attention softmax", op.passes(FORWARD_PASSES) * len(rows) * end, float32, unit=p.pe.matrix)
        p.gemm(len(rows), op.value_width, end, q.dtype)
        if loader is not None:
            p.ctx.engine.wait(loader)
        values = np.empty((len(rows), op.value_width), dtype=out.dtype.numpy)
        sums = np.empty(len(rows), dtype=np.float32)
        if p.data:
            keys, vals = (np.concatenate(parts) for parts in zip(*(part for part in loaded if part is not None)))
            with device_arithmetic():
                scores = op.scores(queries, rows, keys, range(end), mask)
                peak = scores.max(axis=1, keepdims=True)
                shifted = np.exp(scores - peak)
                total = shifted.sum(axis=1, keepdims=True)
                probs = shifted / total * op.kept(coords, rows, range(end))
                values = probs @ vals
                sums = (peak + np.log(total))[:, 0]
        p.store(out, block_selector(out, coords, rows, range(op.value_width))[0], values.reshape(-1))
        p.store(lse, slice(index * length + rows.start, index * length + rows.stop), sums)

    run_tiles(op.ctx, inputs, out, prod(op.batch) * blocks, "scaled_dot_product_attention", program,
              finished=plans.release, also_written=(lse,))
    return out, lse


def _backward(op: _Attention, grad, out, lse):
    """dQ, dK, dV: a program per batch entry and block of `BLOCK_N` keys loads its K and V block, the query rows
    that see it (from the block's first key on under `is_causal`) with their dO, O and logsumexp — `STAGE` rows,
    then the rest beside its MMAs — recomputes the scores and P, runs the five products (S, dP, dV, dK and its
    part of dQ) and `BACKWARD_PASSES` vector passes over the scores (and one over dO·O), adds its part of dQ into
    a zeroed fp32 accumulator with atomics issued beside those products, and stores its dK and dV rows; a second
    launch converts the accumulator to dQ. Key and value heads shared under `enable_gqa` sum their group's
    gradients."""
    q, k, v, length, keys_count = op.q, op.k, op.v, op.length, op.keys
    width, value_width = op.width, op.value_width
    accumulator = op.new((1, *op.batch, length, width), float32, q.device, "attention.dq_accumulator")
    generate("zeros", lambda count: np.zeros(count, dtype=np.float32), accumulator)
    grad_k = op.new((*op.batch, keys_count, width), k.dtype, k.device, "attention.grad_key")
    grad_v = op.new((*op.batch, keys_count, value_width), v.dtype, v.device, "attention.grad_value")
    blocks = -(-keys_count // BLOCK_N)
    plans = op.fresh_plans()
    inputs = [grad, q, k, v, out, lse, accumulator] + ([op.mask] if op.mask is not None else [])
    tiles = op.tiles([*inputs, grad_k], prod(op.batch) * blocks)

    def program(p) -> None:
        index, block = divmod(tiles[p.number], blocks)
        coords, kv = op.coords(index)
        cols = range(block * BLOCK_N, min(keys_count, (block + 1) * BLOCK_N))
        first = min(length, cols.start) if op.causal else 0
        stages = (range(first, min(length, first + STAGE)), range(min(length, first + STAGE), length))
        keys = op.load(p, plans, k, kv, cols, range(width))
        vals = op.load(p, plans, v, kv, cols, range(value_width))
        loaded = [None, None]

        def load(stage: int) -> None:
            rows = stages[stage]
            if not len(rows):
                return
            sums = p.load(lse, slice(index * length + rows.start, index * length + rows.stop))
            if stage == 0:
                loaded[0] = (op.load(p, plans, q, coords, rows, range(width)),
                             op.load(p, plans, grad, coords, rows, range(value_width)),
                             op.load(p, plans, out, coords, rows, range(value_width)), sums)
            else:
                loaded[1] = (op.stream(p, plans, q, coords, rows, width),
                             op.stream(p, plans, grad, coords, rows, value_width),
                             op.stream(p, plans, out, coords, rows, value_width), sums)

        load(0)
        mask = op.mask_block(p, plans, coords, range(first, length), cols)
        loader = p.ctx.engine.spawn(lambda: load(1), name=f"attention backward program {p.number} loads") \
            if len(stages[1]) else None
        queries = length - first
        # dQ's atomic adds go out as its query blocks are done, beside the products of the later ones; the L2
        # resolves them, so they take the time of the accumulator's rows read through it.
        adder = p.ctx.engine.spawn(lambda: op.stream(p, plans, accumulator, (0, *coords), range(first, length), width),
                                   name=f"attention backward program {p.number} adds dQ") if queries else None
        for inner in (width, value_width, value_width, width, width):  # S, dP, dV, dK, dQ
            p.gemm(queries, len(cols), inner, q.dtype)
        elements = op.passes(BACKWARD_PASSES) * queries * len(cols) + queries * value_width
        p.vector("attention backward", elements, float32, unit=p.pe.matrix)
        if loader is not None:
            p.ctx.engine.wait(loader)
        blank = np.zeros if p.data else np.empty  # a block no query sees has zero gradients; timing-only, none
        dk = blank((len(cols), width), dtype=grad_k.dtype.numpy)
        dv = blank((len(cols), value_width), dtype=grad_v.dtype.numpy)
        dq = blank((queries, width), dtype=np.float32)
        if p.data and queries:
            qs, gs, os_, sums = (np.concatenate(parts) for parts in zip(*(part for part in loaded if part is not None)))
            rows = range(first, length)
            with device_arithmetic():
                probs = np.exp(op.scores(qs, rows, keys, cols, mask) - sums[:, None])
                kept = op.kept(coords, rows, cols)
                dv = (probs * kept).T @ gs
                grad_probs = (gs @ vals.T) * kept
                grad_scores = probs * (grad_probs - (gs * os_).sum(axis=1, keepdims=True))
                dk = grad_scores.T @ qs * op.scale
                dq = grad_scores @ keys * op.scale
        p.store(grad_k, block_selector(grad_k, coords, cols, range(width))[0], np.asarray(dk).reshape(-1))
        p.store(grad_v, block_selector(grad_v, coords, cols, range(value_width))[0], np.asarray(dv).reshape(-1))
        if adder is not None:
            p.ctx.engine.wait(adder)
            dq_rows = block_selector(accumulator, (0, *coords), range(first, length), range(width))[0]
            p.add_now(accumulator, dq_rows, np.asarray(dq).reshape(-1))

    run_tiles(op.ctx, inputs, grad_k, prod(op.batch) * blocks, "scaled_dot_product_attention_backward", program,
              finished=plans.release, also_written=(grad_v, accumulator))
    grad_q = op.new((*op.batch, length, width), q.dtype, q.device, "attention.grad_query")
    sum_partials(op.ctx, accumulator, grad_q, "scaled_dot_product_attention_backward", None)
    return grad_q, _group_sum(grad_k, op.repeat), _group_sum(grad_v, op.repeat)


def aligned_runs(rows: range) -> list[range]:
    """`rows` cut into runs each of a power-of-two length that its start is a multiple of, longest first from
    the start: [64, 1152) is [64, 128), [128, 256), [256, 512), [512, 1024), [1024, 1152)."""
    runs, start = [], rows.start
    while start < rows.stop:
        size = 1 << (rows.stop - start).bit_length()
        while size > 1 and (start % size or start + size > rows.stop):
            size //= 2
        runs.append(range(start, start + size))
        start += size
    return runs


def _group_sum(grad, repeat: int):
    """A key or value head's gradient: the sum over the query heads of its group (`enable_gqa`)."""
    if repeat == 1:
        return grad
    shape = grad.shape
    return grad.reshape(*shape[:-3], shape[-3] // repeat, repeat, *shape[-2:]).sum(-3)
