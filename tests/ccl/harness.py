"""Driving `run_collective` directly: tensors on a Session's devices, members, one engine run."""

from __future__ import annotations

import numpy as np

from kernbench.ccl.collective import CollectiveRequest, Member, Region, run_collective
from kernbench.ccl.members import whole
from kernbench.dtypes import resolve_dtype
from kernbench.session import Session
from kernbench.sim_engine import ProcessFailed

ALGORITHMS = {
    "ring": ("kernbench.ccl.algorithms.ring", "ring_1d"),
    "tree": ("kernbench.ccl.algorithms.tree", "binary_tree"),
    "direct": ("kernbench.ccl.algorithms.direct", "full"),
    "halving_doubling": ("kernbench.ccl.algorithms.halving_doubling", "hypercube"),
}


def config(algorithm: str = "ring", **overrides) -> dict:
    """A resolved ccl config as the lead's loader passes it (defaults merged with the algorithm's entry)."""
    module, wiring = ALGORITHMS[algorithm]
    base = {"algorithm": algorithm, "module": module, "wiring": wiring, "buffer_kind": "sram",
            "backpressure": "sleep", "n_slots": 4, "slot_size": 4096, "poll_interval_ps": 20_000}
    return {**base, **overrides}


def device_tensor(session: Session, sip: int, values: np.ndarray, dtype: str, name: str | None = None):
    """A tensor on SIP `sip` (cube 0, PE 0) holding `values`, written straight into its memory (no timed copy)."""
    tensor = session.torch.empty(*values.shape, dtype=dtype, device=f"ahbm:{sip}", name=name)
    tensor._allocation.storage.typed(resolve_dtype(dtype).numpy)[:] = values.reshape(-1)
    return tensor


def region(tensor, indices: np.ndarray | None = None) -> Region:
    """The tensor's elements `indices`, or the whole tensor as `torch.distributed` passes it (a range, no array)."""
    if indices is None:
        return whole(tensor)
    return Region(tensor._allocation, tensor.dtype.numpy, np.asarray(indices, dtype=np.int64))


def values_of(tensor) -> np.ndarray:
    return tensor._allocation.storage.typed(tensor.dtype.numpy).copy()


def member(rank: int, sip: int, input_region: Region, output_region: Region | None = None, *, cube=0, pe=0) -> Member:
    return Member(rank, sip, cube, pe, input_region, input_region if output_region is None else output_region)


def run(session: Session, kind: str, members, cfg: dict, **request) -> int:
    """Run one collective on an idle engine; return its simulated duration in ps (a failure re-raised as is)."""
    return run_schedule(session, kind, members, cfg, **request)[0]


def run_schedule(session: Session, kind: str, members, cfg: dict, *, op: str | None = "sum", root: int | None = None,
                 label: str = "test#1", timing_only: bool = False, splits=None,
                 premul_factor: float | None = None) -> tuple[int, str]:
    """`run`, also returning the name of the algorithm whose schedule ran (what `run_collective` returns)."""
    request = CollectiveRequest(kind, op, tuple(members), root, cfg, label, timing_only, splits, premul_factor)
    results = []

    def driver():
        began = session.engine.now
        ran = run_collective(session.ctx.machine, request)
        results.append((session.engine.now - began, ran.algorithm))

    session.engine.spawn(driver, name="driver")
    try:
        session.engine.run()
    except ProcessFailed as failure:
        raise failure.__cause__ from None
    return results[0]
