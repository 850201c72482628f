"""The language features the bridge supports, one behaviour per test."""

import importlib.util

import numpy as np
import pytest
import triton
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import (
    add_kernel,
    autotuned_add_kernel,
    cumsum_kernel,
    custom_reduce_kernel,
    dot_out_dtype_kernel,
    elementwise_kernel,
    full_and_zeros_kernel,
    heuristic_add_kernel,
    nested_call_kernel,
    program_ids_kernel,
    reduce_rows_kernel,
    static_range_kernel,
)

from kernbench.kernels import UnsupportedKernelError, prepare_launch
from kernbench.numerics import assert_close


def launch_and_run(kernel, grid, args, kwargs=None, memory=None):
    port = FlatPort(memory)
    launch = prepare_launch(kernel, grid, args, kwargs or {})
    run_grid(launch, port)
    return launch, port


@pytest.mark.quick
def test_adr0007_t4_program_id_and_num_programs_cover_a_3d_grid():
    memory = FlatMemory()
    grid = (3, 2, 2)
    out = memory.zeros("out", (12, 6), "i32")
    launch_and_run(program_ids_kernel, grid, (out,), memory=memory)

    expected = [(x, y, z, *grid) for z in range(2) for y in range(2) for x in range(3)]
    assert out.numpy().tolist() == [list(row) for row in expected]


@pytest.mark.quick
def test_adr0007_t5_elementwise_math_and_casts_match_numpy():
    rng = np.random.default_rng(5)
    n = 50
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    y = rng.uniform(0.5, 2.0, n).astype(np.float32)
    memory = FlatMemory()
    X, Y = memory.from_numpy("x", x, "f32"), memory.from_numpy("y", y, "f32")
    out = memory.zeros("out", (9, n), "f32")
    launch_and_run(elementwise_kernel, (1,), (X, Y, out, n), {"BLOCK": 64}, memory)

    expected = [x + y, x - y, x * y, x / y, np.exp(x), np.sqrt(y), np.maximum(x, y), np.where(x > y, x, y),
                x.astype(np.float16).astype(np.float32)]
    assert_close(out.numpy(), np.stack(expected), "f32")


@pytest.mark.quick
def test_adr0007_t6_reductions_along_an_axis_match_numpy():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    memory = FlatMemory()
    X = memory.from_numpy("x", x, "f32")
    sums, maxima = memory.zeros("sums", (8,), "f32"), memory.zeros("maxima", (16,), "f32")
    launch_and_run(reduce_rows_kernel, (1,), (X, sums, maxima), {"COLS": 16, "ROWS": 8}, memory)

    assert_close(sums.numpy(), x.sum(axis=1), "f32")
    assert_close(maxima.numpy(), x.max(axis=0), "f32")


def test_adr0007_t7_full_and_zeros_fill_a_block():
    memory = FlatMemory()
    out = memory.zeros("out", (32,), "f32")
    launch_and_run(full_and_zeros_kernel, (1,), (out,), {"BLOCK": 32, "VALUE": 2.5}, memory)
    assert out.numpy().tolist() == [2.5] * 32


def test_adr0007_t8_static_range_and_range_loops_run_in_python():
    memory = FlatMemory()
    out = memory.zeros("out", (1,), "i32")
    launch_and_run(static_range_kernel, (1,), (out,), {"STEPS": 5}, memory)
    assert out.numpy().tolist() == [sum(range(5)) + 5]


def test_adr0007_t9_dot_honours_out_dtype():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    memory = FlatMemory()
    A, B, C = memory.from_numpy("a", a, "f16"), memory.from_numpy("b", b, "f16"), memory.zeros("c", (16, 16), "f16")
    _, port = launch_and_run(dot_out_dtype_kernel, (1,), (A, B, C), {"N": 16}, memory)
    assert port.calls["dot"] == 1
    assert_close(C.numpy(), a.astype(np.float64) @ b.astype(np.float64), "f16")


def test_adr0007_t10_jit_helpers_defaults_and_keyword_arguments_work():
    x = np.arange(8, dtype=np.float32)
    memory = FlatMemory()
    X, out = memory.from_numpy("x", x, "f32"), memory.zeros("out", (8,), "f32")
    launch_and_run(nested_call_kernel, (1,), (), {"x_ptr": X, "out_ptr": out, "BLOCK": 8}, memory)
    assert out.numpy().tolist() == (x * 0.5 * 4.0).tolist()


def test_adr0007_t11_heuristics_compute_meta_parameters():
    x, y = np.arange(20, dtype=np.float32), np.ones(20, dtype=np.float32)
    memory = FlatMemory()
    X, Y, out = memory.from_numpy("x", x, "f32"), memory.from_numpy("y", y, "f32"), memory.zeros("out", (20,), "f32")
    launch_and_run(heuristic_add_kernel, (1,), (X, Y, out, 20), memory=memory)
    assert out.numpy().tolist() == (x + y).tolist()


def test_adr0007_t12_autotune_runs_its_first_config():
    n = 100
    x, y = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    memory = FlatMemory()
    X, Y, out = memory.from_numpy("x", x, "f32"), memory.from_numpy("y", y, "f32"), memory.zeros("out", (n,), "f32")
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    launch, _ = launch_and_run(autotuned_add_kernel, grid, (X, Y, out, n), memory=memory)
    assert launch.grid == (triton.cdiv(n, 32), 1, 1)
    assert out.numpy().tolist() == (x + y).tolist()


def test_adr0007_t13_every_op_reaches_the_port_once():
    n = 1000
    memory = FlatMemory()
    X, Y = memory.from_numpy("x", np.ones(n), "f32"), memory.from_numpy("y", np.ones(n), "f32")
    out = memory.zeros("out", (n,), "f32")
    launch, port = launch_and_run(add_kernel, (4,), (X, Y, out, n), {"BLOCK_SIZE": 256}, memory)

    assert port.calls["load"] == 2 * 4 and port.calls["store"] == 4
    # Per program: arange, the scalar pid * BLOCK_SIZE, the block offset add,
    # the mask compare, three pointer adds and the x + y add.
    assert port.vector_ops == {"arange": 4 * 256, "mul": 4, "add": 4 * 2 * 256, "cmp": 4 * 256, "addptr": 4 * 3 * 256}
    assert [p.name for p in launch.pointer_args] == ["x_ptr", "y_ptr", "output_ptr"]
    assert [p.address for p in launch.pointer_args] == [X.address, Y.address, out.address]


def test_adr0007_t32_custom_combine_functions_and_argmax_reduce():
    x = np.array([1.5, -2.0, 3.0, 0.5, 2.0, -1.0, 1.0], dtype=np.float32)
    memory = FlatMemory()
    X = memory.from_numpy("x", np.pad(x, (0, 1), constant_values=1.0), "f32")
    product, argmax = memory.zeros("product", (1,), "f32"), memory.zeros("argmax", (1,), "i32")
    launch_and_run(custom_reduce_kernel, (1,), (X, product, argmax), {"N": 8}, memory)

    assert_close(product.numpy(), [np.prod(x)], "f32")
    assert argmax.numpy().tolist() == [int(np.argmax(x))]


def test_adr0007_t33_unsupported_ops_name_the_kernel():
    memory = FlatMemory()
    x = memory.from_numpy("x", np.ones(8), "f32")
    with pytest.raises(UnsupportedKernelError, match="cumsum_kernel.*associative_scan"):
        launch_and_run(cumsum_kernel, (1,), (x,), {"N": 8}, memory)


EDITED_KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def _scale(x):
    return x * 2.0


@triton.jit
def doubled(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, _scale(tl.load(x_ptr + offsets)))
'''


def test_adr0007_t115_a_kernel_runs_the_source_it_was_defined_with_though_its_file_changed_since(tmp_path):
    """Edited after the import, before the first launch (lines added above, the bodies changed): the kernel and
    the jit function it calls run the code the module was imported with, as Triton compiles it."""
    path = tmp_path / "edited_kernels.py"
    path.write_text(EDITED_KERNELS)
    spec = importlib.util.spec_from_file_location("edited_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path.write_text("# edited\n" * 5 + EDITED_KERNELS.replace("x * 2.0", "x * 3.0").replace(
        "_scale(tl.load(x_ptr + offsets))", "tl.load(x_ptr + offsets) + 1.0"))
    memory = FlatMemory()
    x = memory.from_numpy("x", np.arange(8, dtype=np.float32), "f32")
    out = memory.zeros("out", (8,), "f32")
    run_grid(prepare_launch(module.doubled, (1,), (x, out), {"BLOCK": 8}), FlatPort(memory))
    assert out.numpy().tolist() == [2.0 * i for i in range(8)]
