"""ADR 0020, issue 39: ops on zero-size tensors give torch's results, as model code and benches meet them.

Issue 39 met an elementwise op on a zero-size tensor failing inside the
device ops, reached from a bench's `dist.barrier()`. Elementwise ops,
broadcasts, sums over an empty extent (0 for every output, as torch), a
collective over no elements and a barrier run; an extreme over no elements
is torch's one-line error.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.runtime_api.errors import TensorError
from kernbench.session import Session
from tests.ccl.test_distributed import run_world


def test_adr0020_t32_ops_on_zero_size_tensors_give_torchs_results_and_an_empty_extreme_is_one_line():
    session = Session("default")

    def bench(torch):
        results = {
            "add": (torch.ones(0) + torch.ones(0), np.ones(0) + np.ones(0)),
            "broadcast": (torch.ones(0, 4) * torch.ones(4), np.ones((0, 4))),
            "exp": (torch.empty(0).exp(), np.empty(0)),
            "in place": (torch.ones(0).add_(1), np.ones(0)),
            "sum all": (torch.ones(0).sum(), np.float32(0)),
            "sum over an empty dim": (torch.zeros(0, 3).sum(0), np.zeros(3)),
            "sum of empty rows": (torch.zeros(3, 0).sum(1), np.zeros(3)),
            "sum keeping an empty dim": (torch.zeros(0, 3).sum(1), np.zeros(0)),
            "prod over an empty dim": (torch.zeros(0, 3).prod(0), np.ones(3)),
        }
        for name, (got, want) in results.items():
            assert got.shape == want.shape, name
            np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
        for call, message in [(lambda: torch.zeros(0, 3).amax(0), "amax(): Expected reduction dim 0 to have non-zero"),
                              (lambda: torch.zeros(3, 0).argmin(1), "argmin(): Expected reduction dim 1 to have non"),
                              (lambda: torch.zeros(0).amax(), "amax(): Expected reduction dim to be specified for"),
                              (lambda: torch.zeros(0, 2).max(0), "max(): Expected reduction dim 0 to have non-zero"),
                              (lambda: torch.zeros(0).min(), "min(): Expected reduction dim to be specified for")]:
            with pytest.raises(TensorError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
                call()
            assert "\n" not in str(error.value)

    session.run(bench, session.torch)

    def collective(torch, rank):
        empty = torch.ones(0)
        torch.distributed.all_reduce(empty)
        torch.distributed.barrier()
        return empty.shape

    assert set(run_world(Session("default"), collective).values()) == {(0,)}
