"""ADR 0020, issue 39: complex tensors through every collective, as PyTorch runs them over NCCL.

PyTorch views a complex tensor as real pairs for NCCL: a sum reduces real
and imaginary parts separately, the bytes moved are the pairs', and ops with
no meaning on complex numbers (max, min, product, bitwise) are refused
before anything moves. Values are checked against numpy, times against the
same collective over float32 data of twice the elements.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.ccl.errors import CollectiveError
from kernbench.session import Session
from tests.ccl.test_distributed import run_world
from tests.ccl.test_distributed_api import COLLECTIVES, KIND, call, expected

WORLD, SIZE, ROOT = 4, 37, 3


def run_collective(collective: str, inputs: list[np.ndarray]):
    """Each rank's result and the collective's simulated time on the default topology."""
    session = Session("default")

    def fn(torch, rank):
        result = call(torch, collective, torch.tensor(inputs[rank]), WORLD, ROOT)
        return None if result is None else result.numpy()

    results = run_world(session, fn)
    [row] = session.ctx.collectives
    return results, row["time_ps"]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["complex64", "complex128"])
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_adr0020_t26_complex_tensors_go_through_every_collective_as_pairs_of_reals(collective, dtype):
    rng = np.random.default_rng([WORLD, len(collective)])
    parts = [rng.integers(-8, 9, (2, WORLD * SIZE)) for _ in range(WORLD)]
    inputs = [(real + 1j * imag).astype(dtype) for real, imag in parts]
    results, time_ps = run_collective(collective, inputs)
    for rank, want in enumerate(expected(KIND.get(collective, collective), inputs, ROOT)):
        if want is not None:
            assert results[rank].dtype == dtype
            np.testing.assert_array_equal(results[rank], want)
    if dtype is np.complex64:  # the bytes of the real view: float32 pairs, in order
        pairs = [np.ascontiguousarray(x).view(np.float32) for x in inputs]
        assert run_collective(collective, pairs)[1] == time_ps


@pytest.mark.parametrize("op", ["MAX", "MIN", "PRODUCT", "BAND"])
def test_adr0020_t27_a_reduce_op_without_meaning_on_complex_numbers_is_one_line(op):
    session = Session("default")

    def fn(torch, rank):
        x = torch.ones(8, dtype=torch.cfloat)
        torch.distributed.all_reduce(x, op=getattr(torch.distributed.ReduceOp, op))

    with pytest.raises(CollectiveError, match=f"all_reduce does not support ReduceOp.{op} on complex tensors") as err:
        run_world(session, fn)
    assert "\n" not in str(err.value)
