"""Wall time of a simulated all-reduce: values computed against timing only, and per IPCQ message.

Runs the same ring all-reduce (4 ranks, one per SIP of the default
topology, f16, 16 MiB per rank, the shipped ccl.yaml) twice in this process,
once computing values and once `timing_only`, and takes the best of a few
repetitions of each. Both runs must report the same simulated time. Prints
the wall times, the IPCQ messages the collective sent and the wall time per
message; the last line is `timing_only_speedup: X.XX` (data / timing only),
the factor a sweep gains from `--timing-only`.

Run as `python benchmarks/collective_wall.py` from the repository root.
"""

from __future__ import annotations

import time

from kernbench.session import Session

RANKS = 4
ELEMENTS = 8 << 20  # 16 MiB of f16 per rank
REPEATS = 3


def bench(torch):
    torch.distributed.init_process_group(backend="ahbm")
    torch.multiprocessing.spawn(_worker, args=(torch,), nprocs=RANKS)


def _worker(rank, torch):
    torch.ahbm.set_device(rank)
    x = torch.full((1, ELEMENTS), rank + 1, dtype=torch.float16)
    torch.distributed.all_reduce(x)
    torch.ahbm.synchronize()


def one_run(timing_only: bool) -> tuple[float, int, int]:
    """(wall seconds of the run, simulated ps of the collective, IPCQ messages sent)."""
    session = Session("default", timing_only=timing_only)
    began = time.perf_counter()
    session.run(bench, session.torch)
    wall = time.perf_counter() - began
    (record,) = session.ctx.collectives
    messages = len(session.ctx.machine.oplog.select(kind="ipcq_send"))
    return wall, record["time_ps"], messages


def main() -> None:
    best = {}
    for timing_only in (False, True):
        runs = [one_run(timing_only) for _ in range(REPEATS)]
        best[timing_only] = min(runs)
    (data_wall, data_ps, messages), (timing_wall, timing_ps, _) = best[False], best[True]
    assert data_ps == timing_ps, f"simulated times differ: {data_ps} ps with values, {timing_ps} ps without"
    print(f"ring all_reduce, {RANKS} ranks x {ELEMENTS * 2 >> 20} MiB f16, simulated {data_ps / 1e6:.3f} us")
    print(f"IPCQ messages          : {messages}")
    print(f"wall, values computed  : {data_wall * 1e3:8.1f} ms  ({data_wall / messages * 1e6:6.1f} us per message)")
    print(f"wall, timing only      : {timing_wall * 1e3:8.1f} ms  ({timing_wall / messages * 1e6:6.1f} us per message)")
    print(f"timing_only_speedup: {data_wall / timing_wall:.2f}")


if __name__ == "__main__":
    main()
