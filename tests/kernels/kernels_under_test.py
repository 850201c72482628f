"""Kernels the bridge must run unchanged: Triton tutorials 01-03 and feature probes.

Written after the tutorials' shapes (vector add, row-per-program fused
softmax, grouped-ordering matmul with fp32 accumulation and a masked K
tail); nothing here knows about kernbench.
"""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    row = tl.load(input_ptrs, mask=col_offsets < n_cols, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=col_offsets < n_cols)


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def matmul_grid(meta):
    return (triton.cdiv(meta["M"], meta["BLOCK_SIZE_M"]) * triton.cdiv(meta["N"], meta["BLOCK_SIZE_N"]),)


@triton.jit
def dot_out_dtype_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs[:, None] * N + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * N + offs[None, :])
    c = tl.dot(a, b, out_dtype=tl.float16)
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], c)


@triton.jit
def program_ids_kernel(out_ptr):
    """Writes (pid0, pid1, pid2, nprog0, nprog1, nprog2) at its flat position."""
    pid0 = tl.program_id(0)
    pid1 = tl.program_id(1)
    pid2 = tl.program_id(2)
    n0 = tl.num_programs(0)
    n1 = tl.num_programs(1)
    flat = (pid2 * n1 + pid1) * n0 + pid0
    base = out_ptr + flat * 6
    tl.store(base + 0, pid0)
    tl.store(base + 1, pid1)
    tl.store(base + 2, pid2)
    tl.store(base + 3, n0)
    tl.store(base + 4, n1)
    tl.store(base + 5, tl.num_programs(2))


@triton.jit
def elementwise_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Rows of `out`: x+y, x-y, x*y, x/y, exp(x), sqrt(y), maximum(x,y), where(x>y,x,y), fp16 cast back."""
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = tl.load(y_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + 0 * n + offs, x + y, mask=mask)
    tl.store(out_ptr + 1 * n + offs, x - y, mask=mask)
    tl.store(out_ptr + 2 * n + offs, x * y, mask=mask)
    tl.store(out_ptr + 3 * n + offs, x / y, mask=mask)
    tl.store(out_ptr + 4 * n + offs, tl.exp(x), mask=mask)
    tl.store(out_ptr + 5 * n + offs, tl.sqrt(y), mask=mask)
    tl.store(out_ptr + 6 * n + offs, tl.maximum(x, y), mask=mask)
    tl.store(out_ptr + 7 * n + offs, tl.where(x > y, x, y), mask=mask)
    tl.store(out_ptr + 8 * n + offs, x.to(tl.float16).to(tl.float32), mask=mask)


@triton.jit
def reduce_rows_kernel(x_ptr, sum_ptr, max_ptr, COLS: tl.constexpr, ROWS: tl.constexpr):
    """Per-row sums and per-column maxima of a ROWS x COLS block."""
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, COLS)
    block = tl.load(x_ptr + rows[:, None] * COLS + cols[None, :])
    tl.store(sum_ptr + rows, tl.sum(block, axis=1))
    tl.store(max_ptr + cols, tl.max(block, axis=0))


@triton.jit
def full_and_zeros_kernel(out_ptr, BLOCK: tl.constexpr, VALUE: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full((BLOCK,), VALUE, tl.float32) + tl.zeros((BLOCK,), tl.float32))


@triton.jit
def static_range_kernel(out_ptr, STEPS: tl.constexpr):
    acc = 0
    for i in tl.static_range(STEPS):
        acc += i
    for i in range(STEPS):
        acc += 1
    tl.store(out_ptr, acc)


@triton.jit
def _halve(x):
    return x * 0.5


@triton.jit
def nested_call_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, SCALE: tl.constexpr = 4.0):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _halve(tl.load(x_ptr + offs)) * SCALE)


@triton.jit
def atomic_add_kernel(counter_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(counter_ptr + offs % 2, tl.load(values_ptr + offs))


@triton.jit
def atomic_max_kernel(out_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_max(out_ptr + offs * 0, tl.load(values_ptr + offs))


@triton.jit
def atomic_cas_kernel(lock_ptr, old_ptr):
    old = tl.atomic_cas(lock_ptr, 0, tl.program_id(0) + 1)
    tl.store(old_ptr + tl.program_id(0), old)


@triton.jit
def branch_on_load_kernel(flag_ptr, out_ptr):
    if tl.load(flag_ptr) > 0:
        tl.store(out_ptr, 1.0)


@triton.jit
def loop_bound_from_load_kernel(count_ptr, out_ptr):
    acc = 0.0
    for i in range(tl.load(count_ptr)):
        acc += 1.0
    tl.store(out_ptr, acc)


@triton.jit
def gather_kernel(index_ptr, table_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    index = tl.load(index_ptr + offs)
    tl.store(out_ptr + offs, tl.load(table_ptr + index))


@triton.heuristics(values={"BLOCK_SIZE": lambda args: triton.next_power_of_2(args["n_elements"])})
@triton.jit
def heuristic_add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 32}), triton.Config({"BLOCK_SIZE": 64})], key=["n_elements"])
@triton.jit
def autotuned_add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _product_combine(a, b):
    return a * b


@triton.jit
def custom_reduce_kernel(x_ptr, prod_ptr, argmax_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(prod_ptr, tl.reduce(x, 0, _product_combine))
    tl.store(argmax_ptr, tl.argmax(x, axis=0))


@triton.jit
def cumsum_kernel(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), axis=0))


@triton.jit
def mask_from_load_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, ACCESS: tl.constexpr):
    """Masks one access (ACCESS: "load", "store" or "atomic") by a comparison of loaded values."""
    offs = tl.arange(0, BLOCK)
    positive = tl.load(x_ptr + offs) > 0
    if ACCESS == "load":
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=positive))
    elif ACCESS == "store":
        tl.store(out_ptr + offs, 1.0, mask=positive)
    else:
        tl.atomic_add(out_ptr + offs, 1.0, mask=positive)
