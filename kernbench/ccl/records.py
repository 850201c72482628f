"""What a finished collective cost, the way nccl-tests reports it: size, time, algbw and busbw.

`algbw` is the size over the time. `busbw` scales it by the fraction of the
data each rank must move over its own link for that collective, so one
number compares algorithms and world sizes against the link bandwidth
(nccl-tests' doc/PERFORMANCE.md): all-reduce 2(n−1)/n, all-gather and
reduce-scatter (n−1)/n, broadcast, reduce and send 1. The size is the
per-rank buffer nccl-tests names: the tensor for all-reduce, broadcast,
reduce and send, the gathered output for all-gather, the input for
reduce-scatter.
"""

from __future__ import annotations

PS_PER_S = 10**12


def bus_factor(kind: str, n: int) -> float:
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def collective_record(*, label: str, kind: str, algorithm: str, reduce_op: str | None, dtype: str, count: int,
                      nbytes: int, ranks: tuple[int, ...], start_ps: int, end_ps: int) -> dict:
    """One report row (plain data: ints in ps and bytes, bandwidths in GB/s)."""
    time_ps = end_ps - start_ps
    algbw = nbytes * PS_PER_S / time_ps / 1e9 if time_ps else 0.0
    return {
        "label": label, "collective": kind, "algorithm": algorithm, "op": reduce_op, "dtype": dtype,
        "count": count, "bytes": nbytes, "ranks": list(ranks), "world_size": len(ranks),
        "start_ps": start_ps, "end_ps": end_ps, "time_ps": time_ps,
        "algbw_gb_per_s": algbw, "busbw_gb_per_s": algbw * bus_factor(kind, len(ranks)),
    }
