"""Tensor descriptors and block pointers run on the bridge as masked loads and stores (ADR 0007)."""

import numpy as np
import pytest
import triton
import triton.language as tl
from flat_port import FlatMemory, FlatPort, run_grid
from triton.tools.tensor_descriptor import TensorDescriptor

from kernbench.kernels import DescriptorError, KernelFault, TimingOnlyRefusal, prepare_launch
from kernbench.session import Session


@triton.jit
def descriptor_scale(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    y_desc.store([row, col], x_desc.load([row, col]) * 2)


@triton.jit
def descriptor_block_sum(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, PADDING: tl.constexpr):
    """out[pid] = sum of the block at (pid * BM, 0), padding included."""
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN],
                                       padding_option=PADDING)
    block = x_desc.load([tl.program_id(0) * BM, 0])
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.sum(block, axis=1), axis=0))


@triton.jit
def descriptor_argument_scale(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    y_desc.store([row, col], x_desc.load([row, col]) * 2)


@triton.jit
def block_pointer_add_one(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Each program walks its row block left to right with `tl.advance`, both dimensions checked."""
    x_block = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(tl.program_id(0) * BM, 0),
                                block_shape=(BM, BN), order=(1, 0))
    y_block = tl.make_block_ptr(y_ptr, shape=(M, N), strides=(N, 1), offsets=(tl.program_id(0) * BM, 0),
                                block_shape=(BM, BN), order=(1, 0))
    for _ in range(0, N, BN):
        tile = tl.load(x_block, boundary_check=(0, 1), padding_option="zero")
        tl.store(y_block, tile + 1, boundary_check=(0, 1))
        x_block = tl.advance(x_block, (0, BN))
        y_block = y_block.advance((0, BN))


@triton.jit
def block_pointer_padded_sum(x_ptr, out_ptr, N, BN: tl.constexpr, CHECK: tl.constexpr):
    x_block = tl.make_block_ptr(x_ptr, shape=(N,), strides=(1,), offsets=(0,), block_shape=(BN,), order=(0,))
    tl.store(out_ptr, tl.sum(tl.load(x_block, boundary_check=CHECK, padding_option="nan"), axis=0))


def _run(kernel, grid, args, meta, memory):
    port = FlatPort(memory)
    launch = prepare_launch(kernel, grid, args, meta)
    run_grid(launch, port)
    return port


def test_adr0007_t40_descriptor_loads_pad_outside_the_tensor_with_zeros_and_stores_skip_it():
    m, n = 20, 24  # neither a multiple of the 8 x 16 block
    x = np.arange(m * n, dtype=np.float32).reshape(m, n)
    memory = FlatMemory()
    X, Y = memory.from_numpy("x", x, "f32"), memory.zeros("y", (m, n), "f32")
    sums = memory.zeros("sums", (3,), "f32")

    _run(descriptor_scale, (3, 2), (X, Y, m, n), {"BM": 8, "BN": 16}, memory)
    _run(descriptor_block_sum, (3,), (X, sums, m, n), {"BM": 8, "BN": 32, "PADDING": "zero"}, memory)

    # A store past the tensor would fault on the flat port's guard pages; none did.
    np.testing.assert_array_equal(Y.numpy(), 2 * x)
    np.testing.assert_array_equal(sums.numpy(), [x[r:r + 8].sum() for r in (0, 8, 16)])


def test_adr0007_t41_a_nan_padded_descriptor_fills_outside_lanes_with_nan():
    x = np.ones((4, 8), dtype=np.float32)
    memory = FlatMemory()
    X, sums = memory.from_numpy("x", x, "f32"), memory.zeros("sums", (2,), "f32")

    _run(descriptor_block_sum, (2,), (X, sums, 4, 8), {"BM": 4, "BN": 16, "PADDING": "nan"}, memory)

    assert np.isnan(sums.numpy()).all()


@triton.jit
def descriptor_load_at(x_ptr, out_ptr, M, N, BN: tl.constexpr, COL: tl.constexpr):
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[1, BN])
    tl.store(out_ptr + tl.arange(0, BN)[None, :], x_desc.load([0, COL]))


def test_adr0007_t42_descriptors_breaking_tritons_alignment_rules_are_refused():
    memory = FlatMemory()
    X, out = memory.from_numpy("x", np.zeros((8, 12), np.float32), "f32"), memory.zeros("out", (4,), "f32")
    _run(descriptor_load_at, (1,), (X, out, 8, 12), {"BN": 4, "COL": 4}, memory)  # 48-byte rows, 16-byte offset
    with pytest.raises(DescriptorError, match="multiples of 16 bytes"):
        _run(descriptor_load_at, (1,), (X, out, 8, 10), {"BN": 4, "COL": 4}, memory)  # 40-byte rows
    with pytest.raises(DescriptorError, match="innermost offset"):
        _run(descriptor_load_at, (1,), (X, out, 8, 12), {"BN": 4, "COL": 2}, memory)  # 8-byte offset


def test_adr0007_t43_block_pointers_check_bounds_pad_and_advance():
    m, n = 20, 40
    x = np.arange(m * n, dtype=np.float32).reshape(m, n)
    memory = FlatMemory()
    X, Y = memory.from_numpy("x", x, "f32"), memory.zeros("y", (m, n), "f32")
    out = memory.zeros("out", (1,), "f32")

    _run(block_pointer_add_one, (3,), (X, Y, m, n), {"BM": 8, "BN": 16}, memory)
    _run(block_pointer_padded_sum, (1,), (memory.from_numpy("v", np.ones(5, np.float32), "f32"), out, 5),
         {"BN": 8, "CHECK": (0,)}, memory)

    np.testing.assert_array_equal(Y.numpy(), x + 1)
    assert np.isnan(out.numpy()[0])


def test_adr0007_t44_a_block_pointer_accesses_unchecked_dimensions_as_addressed():
    memory = FlatMemory()
    V, out = memory.from_numpy("v", np.ones(5, np.float32), "f32"), memory.zeros("out", (1,), "f32")
    with pytest.raises(KernelFault) as fault:
        _run(block_pointer_padded_sum, (1,), (V, out, 5), {"BN": 8, "CHECK": ()}, memory)
    assert (fault.value.tensor, fault.value.offset) == ("v", 20)


def _scale_through_host_descriptors(torch, m, n, block):
    x = torch.arange(m * n, dtype=torch.float32).reshape(m, n)
    y = torch.zeros((m, n), dtype=torch.float32)
    x_desc = TensorDescriptor.from_tensor(x, block)
    y_desc = TensorDescriptor(y, shape=[m, n], strides=[n, 1], block_shape=block)
    grid = (triton.cdiv(m, block[0]), triton.cdiv(n, block[1]))
    descriptor_argument_scale[grid](x_desc, y_desc, BM=block[0], BN=block[1])
    return y.numpy()


def test_adr0007_t45_a_host_tensor_descriptor_is_a_kernel_argument_and_moves_only_inside_bytes():
    session = Session("default")
    m, n, block = 24, 40, [16, 32]
    y = session.run(_scale_through_host_descriptors, session.torch, m, n, block)

    np.testing.assert_array_equal(y, 2 * np.arange(m * n, dtype=np.float32).reshape(m, n))
    dmas = session.ctx.machine.oplog.select(kind="dma", label="descriptor_argument_scale")
    # Each element is read once and written once; padded lanes move nothing.
    assert sum(op.nbytes for op in dmas) == 2 * m * n * 4


def test_adr0007_t46_descriptor_offsets_from_loaded_values_are_refused_timing_only():
    @triton.jit
    def offset_from_memory(x_ptr, rows_ptr, N, BN: tl.constexpr):
        desc = tl.make_tensor_descriptor(x_ptr, shape=[N, BN], strides=[BN, 1], block_shape=[1, BN])
        desc.store([tl.load(rows_ptr), 0], tl.zeros([1, BN], dtype=tl.float32))

    memory = FlatMemory()
    X, rows = memory.zeros("x", (4, 8), "f32"), memory.zeros("rows", (1,), "i32")
    launch = prepare_launch(offset_from_memory, (1,), (X, rows, 4), {"BN": 8}, timing_only=True)
    with pytest.raises(TimingOnlyRefusal, match="descriptor store"):
        run_grid(launch, FlatPort(memory))
