"""What a finished collective cost, the way nccl-tests reports it: size, time, algbw and busbw.

`algbw` is the size over the time. `busbw` scales it by the fraction of the
data each rank must move over its own link for that collective, so one
number compares algorithms and world sizes against the link bandwidth
(nccl-tests' doc/PERFORMANCE.md and its scatter, gather and alltoall
tests): all-reduce 2(n−1)/n, all-gather, reduce-scatter, scatter, gather
and all-to-all (n−1)/n, broadcast, reduce and send 1. The size is the
per-rank buffer nccl-tests names: the tensor for all-reduce, broadcast,
reduce and send, the gathered output for all-gather, the input for
reduce-scatter and all-to-all, the root's whole buffer for scatter and
gather. A barrier is a one-element all-reduce.
"""

from __future__ import annotations

from kernbench.sim_engine.simtime import PS_PER_S

_BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    **{kind: (lambda n: (n - 1) / n) for kind in ("all_gather", "reduce_scatter", "scatter", "gather", "all_to_all")},
}


def bus_factor(kind: str, n: int) -> float:
    return _BUS_FACTORS.get(kind, lambda n: 1.0)(n)


def record_count(kind: str, input_count: int, output_count: int, n: int) -> int:
    """The elements nccl-tests counts for one call, from a rank's input and output counts (a scatter's or
    gather's counts being one rank's share)."""
    if kind == "all_gather":
        return output_count
    if kind in ("scatter", "gather"):
        return input_count * n
    return input_count


def collective_record(*, label: str, kind: str, algorithm: str, reduce_op: str | None, dtype: str, count: int,
                      nbytes: int, ranks: tuple[int, ...], start_ps: int, end_ps: int, collective: str | None = None,
                      configured: str | None = None, channels: int = 1, symmetric: bool = False,
                      protocol: str | None = None, host_ps: int = 0) -> dict:
    """One report row (plain data: ints in ps and bytes, bandwidths in GB/s).

    `collective` is the call the script made (`barrier`, `all_to_all_single`;
    default `kind`); `algorithm` the schedule that ran and `configured` the
    one ccl.yaml picked, which differ where the configured one has no
    schedule for the collective and its fallback ran, or where ccl.yaml says
    `auto` and the tuner chose (ADR 0010); `channels` how many channels ran it;
    `symmetric` whether rank 0 alone was simulated and the others logged as
    its rotations (ADR 0010, "Symmetric collectives"); `protocol` NCCL's protocol it ran under, where the
    topology gives protocols (ADR 0010, "Protocols"), else None.

    `time_ps` is the call's time as nccl-tests and a host loop measure it,
    calls issued back to back: its device span (`end_ps - start_ps`,
    `device_ps`), or the host's time to issue a call (`host_ps`) where that
    is longer, the device then idling between calls (ADR 0010, "Host cost of
    a call"). The bandwidths are of that time.
    """
    device_ps = end_ps - start_ps
    time_ps = max(device_ps, host_ps)
    algbw = nbytes * PS_PER_S / time_ps / 1e9 if time_ps else 0.0
    return {
        "label": label, "collective": collective or kind, "algorithm": algorithm,
        "configured_algorithm": configured or algorithm, "channels": channels, "symmetric": symmetric,
        "protocol": protocol,
        "op": reduce_op, "dtype": dtype,
        "count": count, "bytes": nbytes, "ranks": list(ranks), "world_size": len(ranks),
        "start_ps": start_ps, "end_ps": end_ps, "device_ps": device_ps, "host_ps": host_ps, "time_ps": time_ps,
        "algbw_gb_per_s": algbw, "busbw_gb_per_s": algbw * bus_factor(kind, len(ranks)),
    }
