"""Triton's random numbers (`tl.rand`, `tl.randn`, `tl.randint`, Philox, `tl.umulhi`) on the bridge.

`triton.language.random` is Triton's own jit code: Philox4x32-10 over the
counter (offset low word, offset high word, 0, 0) and the key (seed low
word, seed high word), its first word as the `randint`, that word read as
an int32, complemented when negative and scaled below 1 as the `rand`, and
Box-Muller over the first two words as the `randn`. The bridge runs it as
it runs any kernel, so the only op it adds is `umulhi`. The reference
(`tests.philox_reference`) is checked against Random123's known-answer
vectors; the constants in `MEASURED` are what Triton 3.6 computed on an
NVIDIA H200 for the same seeds and offsets.
"""

from __future__ import annotations

import numpy as np
import pytest
import triton
import triton.language as tl
from flat_port import FlatMemory, FlatPort, run_grid

from kernbench.kernels import prepare_launch
from kernbench.numerics import assert_close
from tests.philox_reference import PHILOX_KNOWN_ANSWERS, philox4x32_10, reference_blocks

# Triton 3.6 on an NVIDIA H200: seed -> (offsets, randint, rand, randn) of the kernel `random_blocks`.
MEASURED = {
    123: ((0, 1, 2, 3, 2**31 - 1, -5, 77777777),
          (287538396, -1547692978, 739990181, 510055638, 1269687861, -146504695, -886922141),
          (0.13389548659324646, 0.7207006216049194, 0.34458476305007935, 0.23751315474510193,
           0.5912443995475769, 0.0682215541601181, 0.4130052626132965),
          (0.6753042936325073, 0.8019989728927612, -1.459712028503418, 0.0042341710068285465,
           -1.0246111154556274, 2.3155839443206787, -0.8829553723335266)),
    2**40 + 7: ((0, 1, 2, 3, 2**31 - 1, -5, 77777777),
                (871882489, 1577213254, 1275043110, -1974409255, -1878668207, -1263277780, -289379863),
                (0.40600189566612244, 0.7344471216201782, 0.5937381386756897, 0.9194058775901794,
                 0.8748229742050171, 0.5882595181465149, 0.13475298881530762),
                (1.1494414806365967, 0.7271011471748352, 0.14179378747940063, 0.3328939378261566,
                 0.42722856998443604, -0.4952080547809601, 1.7713629007339478)),
}


@triton.jit
def philox_block(counter_ptr, out_ptr, seed, N: tl.constexpr):
    idx = tl.arange(0, N)
    c0, c1, c2, c3 = tl.philox(seed, tl.load(counter_ptr + idx), tl.load(counter_ptr + N + idx),
                               tl.load(counter_ptr + 2 * N + idx), tl.load(counter_ptr + 3 * N + idx))
    tl.store(out_ptr + idx, c0)
    tl.store(out_ptr + N + idx, c1)
    tl.store(out_ptr + 2 * N + idx, c2)
    tl.store(out_ptr + 3 * N + idx, c3)


@triton.jit
def umulhi_block(a_ptr, b_ptr, out_ptr, N: tl.constexpr, UNSIGNED: tl.constexpr):
    idx = tl.arange(0, N)
    a, b = tl.load(a_ptr + idx), tl.load(b_ptr + idx)
    if UNSIGNED:  # kernbench tensors are signed: the kernel reads their bits as unsigned
        unsigned = tl.uint32 if a.dtype == tl.int32 else tl.uint64
        a, b = a.to(unsigned, bitcast=True), b.to(unsigned, bitcast=True)
    tl.store(out_ptr + idx, tl.umulhi(a, b))


@triton.jit
def random_blocks(offset_ptr, int_ptr, uniform_ptr, normal_ptr, seed, N: tl.constexpr):
    idx = tl.arange(0, N)
    offsets = tl.load(offset_ptr + idx)
    tl.store(int_ptr + idx, tl.randint(seed, offsets))
    tl.store(uniform_ptr + idx, tl.rand(seed, offsets))
    tl.store(normal_ptr + idx, tl.randn(seed, offsets))


def run_random_blocks(seed: int, offsets: np.ndarray):
    memory = FlatMemory()
    n = offsets.size
    offsets_in = memory.from_numpy("offsets", offsets.astype(np.int32), "i32")
    outs = memory.zeros("randint", (n,), "i32"), memory.zeros("rand", (n,), "f32"), memory.zeros("randn", (n,), "f32")
    port = FlatPort(memory)
    run_grid(prepare_launch(random_blocks, (1,), (offsets_in, *outs, seed), {"N": n}), port)
    return [out.numpy() for out in outs], port


def test_adr0007_t117_philox_on_the_bridge_gives_random123s_known_answers():
    for counter, key, expected in PHILOX_KNOWN_ANSWERS:
        assert philox4x32_10(counter, key) == expected  # the reference itself
    n = 4  # a power of two, as `tl.arange` needs: the last column repeats the first
    counters = np.array([answer[0] for answer in PHILOX_KNOWN_ANSWERS[:3] + PHILOX_KNOWN_ANSWERS[:1]],
                        dtype=np.uint32).T.copy()
    for row, (_, key, expected) in enumerate(PHILOX_KNOWN_ANSWERS):
        memory = FlatMemory()
        counter_in = memory.from_numpy("counter", counters.view(np.int32), "i32")  # philox reads their bits
        out = memory.zeros("out", (4, n), "i32")
        seed = key[1] << 32 | key[0]
        run_grid(prepare_launch(philox_block, (1,), (counter_in, out, seed), {"N": n}), FlatPort(memory))
        assert tuple(int(word) for word in out.numpy().view(np.uint32)[:, row]) == expected


@pytest.mark.parametrize("unsigned", [False, True], ids=["signed", "unsigned"])
@pytest.mark.parametrize("dtype_name", ["i32", "i64"])
def test_adr0007_t118_umulhi_is_the_high_half_of_the_unsigned_product(dtype_name, unsigned):
    bits = 64 if dtype_name == "i64" else 32
    rng = np.random.default_rng(118)
    words = rng.integers(0, 1 << bits, size=(2, 64), dtype=np.uint64)
    words[:, :4] = [[0, 1, (1 << bits) - 1, (1 << bits) - 1], [5, (1 << bits) - 1, (1 << bits) - 1, 2]]
    a, b = (row.astype(f"uint{bits}").view(f"int{bits}") for row in words)
    memory = FlatMemory()
    a_in, b_in = memory.from_numpy("a", a, dtype_name), memory.from_numpy("b", b, dtype_name)
    out = memory.zeros("out", (64,), dtype_name)
    port = FlatPort(memory)
    run_grid(prepare_launch(umulhi_block, (1,), (a_in, b_in, out), {"N": 64, "UNSIGNED": unsigned}), port)
    expected = [(int(x) * int(y)) >> bits for x, y in zip(words[0], words[1])]
    assert [int(word) for word in out.numpy().view(f"uint{bits}")] == expected
    assert port.vector_ops["umulhi"] == 64


@pytest.mark.parametrize("seed", sorted(MEASURED))
def test_adr0007_t119_rand_randn_and_randint_equal_triton_on_a_gpu_and_cost_vector_work(seed):
    offsets, measured_int, measured_uniform, measured_normal = MEASURED[seed]
    (randint, uniform, normal), _ = run_random_blocks(seed, np.array(offsets + (0,)))  # 8 lanes, one repeated
    np.testing.assert_array_equal(randint[:7], np.array(measured_int, dtype=np.int32))
    np.testing.assert_array_equal(uniform[:7], np.array(measured_uniform, dtype=np.float32))
    assert_close(normal[:7], np.array(measured_normal), "f32")  # the GPU's log and cos are not numpy's to the last bit

    block = np.concatenate([np.arange(1021), [2**31 - 1, -(2**31), -1]])
    (randint, uniform, normal), port = run_random_blocks(seed, block)
    expected_int, expected_uniform, expected_normal = reference_blocks(seed, block)
    np.testing.assert_array_equal(randint, expected_int)
    np.testing.assert_array_equal(uniform, expected_uniform)
    assert_close(normal, expected_normal, "f32")
    assert ((uniform >= 0) & (uniform < 1)).all()
    # Philox is ALU work: 10 rounds of two umulhi per generated block, each charged over the block.
    assert port.vector_ops["umulhi"] == 3 * 10 * 2 * block.size
