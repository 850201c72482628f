"""The Triton kernels tensor-parallel layers run. Imports only triton.

Like `kernbench.kernels.library`, this file runs unchanged on a real GPU with
torch tensors, so the simulator's numerics can be cross-checked there. Each
launcher takes its output tensor from the caller: allocating is the layers'
job (they know the run's `torch` namespace), computing is this file's.

- `linear`: `y = x @ w.T (+ b)`, Megatron's weight layout (out_features,
  in_features) read through strides, fp16 operands, fp32 accumulation, the
  bias added in fp32 before the one rounding to the output type.
- `bias_gelu`: `gelu(x + b)` with the tanh approximation of Megatron's fused
  `bias_gelu` (what the MLP runs between its two linears).
- `add_bias`: `x + b` per row, for a row-parallel layer's bias, which must be
  added once, after the all-reduce.
- `copy_chunks`: moves column blocks between a (rows, chunks x cols) layout
  and a (chunks x rows, cols) one: the layout change around collectives that
  only concatenate along dim 0.
"""

import triton
import triton.language as tl

# Globals a jit function reads must be constexprs (Triton refuses plain floats).
GELU_SQRT_2_OVER_PI = tl.constexpr(0.79788456)
GELU_CUBIC = tl.constexpr(0.044715)


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr, M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN: tl.constexpr,
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    # w is (N, K); reading it with swapped strides gives the (K, N) tile of w.T.
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
    row_ok = offs_m[:, None] < M
    col_ok = offs_n[None, :] < N

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN:  # every tile whole: no bounds to check (the EVEN_K specialization of production kernels)
            x = tl.load(x_ptrs)
            w = tl.load(w_ptrs)
        else:
            k_left = K - k * BLOCK_K
            x = tl.load(x_ptrs, mask=row_ok & (offs_k[None, :] < k_left), other=0.0)
            w = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & col_ok, other=0.0)
        accumulator = tl.dot(x, w, accumulator)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        accumulator += bias[None, :].to(tl.float32)

    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, accumulator.to(y_ptr.dtype.element_ty), mask=row_ok & col_ok)


@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    x += tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0).to(tl.float32)
    inner = GELU_SQRT_2_OVER_PI * x * (1.0 + GELU_CUBIC * x * x)
    # tanh through exp(-2|z|), which never overflows (Triton has no portable tanh).
    decay = tl.exp(-2.0 * tl.abs(inner))
    magnitude = (1.0 - decay) / (1.0 + decay)
    tanh = tl.where(inner >= 0, magnitude, -magnitude)
    tl.store(y_ptr + offsets, (x * 0.5 * (1.0 + tanh)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_bias_kernel(x_ptr, bias_ptr, y_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offsets, (x + bias).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def copy_chunks_kernel(
    src_ptr, dst_ptr, n_rows, n_cols, src_first_chunk,
    src_chunk_stride, src_row_stride, dst_chunk_stride, dst_row_stride,
    BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr,
):
    # Program (i, c) copies rows [i*BLOCK_ROWS, ...) of chunk c: src chunk src_first_chunk + c to dst chunk c.
    rows = tl.program_id(axis=0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    chunk = tl.program_id(axis=1)
    src_base = src_ptr + (src_first_chunk + chunk) * src_chunk_stride + rows[:, None] * src_row_stride
    dst_base = dst_ptr + chunk * dst_chunk_stride + rows[:, None] * dst_row_stride
    for c in range(0, tl.cdiv(n_cols, BLOCK_COLS)):
        cols = c * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        values = tl.load(src_base + cols[None, :], mask=mask)
        tl.store(dst_base + cols[None, :], values, mask=mask)


LINEAR_TILE = (64, 128, 64)  # (BLOCK_M, BLOCK_N, BLOCK_K) unless the caller picks larger
ELEMENTWISE_BLOCK = 1024  # bias_gelu's and add_bias's BLOCK_SIZE unless the caller picks larger


def linear(x, weight, bias, out, block_m: int = LINEAR_TILE[0], block_n: int = LINEAR_TILE[1],
           block_k: int = LINEAR_TILE[2]):
    """out[..., N] = x[..., K] @ weight[N, K].T (+ bias[N] when bias is not None); returns out.

    x and out are contiguous with any number of leading dims (Megatron's [sequence, batch, hidden]),
    read as (M, K) and (M, N) matrices with M the product of the leading dims.
    """
    K = x.shape[-1]
    M = x.numel() // K
    N = weight.shape[0]
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    linear_kernel[grid](
        x, weight, bias, out, M, N, K,
        K * x.stride(-1), x.stride(-1), weight.stride(0), weight.stride(1), N * out.stride(-1), out.stride(-1),
        HAS_BIAS=bias is not None, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        EVEN=M % block_m == 0 and N % block_n == 0 and K % block_k == 0,
    )
    return out


def bias_gelu(x, bias, out, block_size: int = ELEMENTWISE_BLOCK):
    """out = gelu_tanh(x + bias), bias broadcast over the rows of x; returns out."""
    n = x.numel()
    bias_gelu_kernel[(triton.cdiv(n, block_size),)](x, bias, out, n, bias.numel(), BLOCK_SIZE=block_size)
    return out


def add_bias(x, bias, out, block_size: int = ELEMENTWISE_BLOCK):
    """out = x + bias, bias broadcast over the rows of x (out may be x); returns out."""
    n = x.numel()
    add_bias_kernel[(triton.cdiv(n, block_size),)](x, bias, out, n, bias.numel(), BLOCK_SIZE=block_size)
    return out


def columns_to_chunks(src, dst, n_chunks: int, first_chunk: int = 0, block_rows: int = 32, block_cols: int = 64):
    """dst[c*R:(c+1)*R, :] = src[:, (first_chunk+c)*C:(first_chunk+c+1)*C] for c < n_chunks.

    src is (R, W) with W a multiple of C = dst's column count; dst is (n_chunks*R, C).
    """
    n_rows, width = src.numel() // src.shape[-1], src.shape[-1]
    n_cols = dst.shape[-1]
    _copy_chunks(src, dst, n_rows, n_cols, first_chunk, n_chunks,
                 src_chunk_stride=n_cols, src_row_stride=width,
                 dst_chunk_stride=n_rows * n_cols, dst_row_stride=n_cols,
                 block_rows=block_rows, block_cols=block_cols)
    return dst


def chunks_to_columns(src, dst, n_chunks: int, block_rows: int = 32, block_cols: int = 64):
    """dst[:, c*C:(c+1)*C] = src[c*R:(c+1)*R, :] for c < n_chunks: the inverse of `columns_to_chunks`.

    src is (n_chunks*R, C); dst is (R, n_chunks*C). C is read from dst: a 1-D src (R = 1) is (n_chunks*C,), whose
    last dim is not C.
    """
    n_cols = dst.shape[-1] // n_chunks
    n_rows = src.numel() // (n_chunks * n_cols)
    _copy_chunks(src, dst, n_rows, n_cols, 0, n_chunks,
                 src_chunk_stride=n_rows * n_cols, src_row_stride=n_cols,
                 dst_chunk_stride=n_cols, dst_row_stride=n_chunks * n_cols,
                 block_rows=block_rows, block_cols=block_cols)
    return dst


def _copy_chunks(src, dst, n_rows, n_cols, first_chunk, n_chunks, *, src_chunk_stride, src_row_stride,
                 dst_chunk_stride, dst_row_stride, block_rows, block_cols):
    grid = (triton.cdiv(n_rows, block_rows), n_chunks)
    copy_chunks_kernel[grid](
        src, dst, n_rows, n_cols, first_chunk,
        src_chunk_stride, src_row_stride, dst_chunk_stride, dst_row_stride,
        BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols,
    )
