"""What `--trace` adds to a transformer layer's run: the trace's wall time beside the simulation's.

`kernbench run --trace FILE` writes the op log as Chrome / Perfetto trace
events (ADR 0003, "Trace format"). This simulates one timing-only `tp_layer`
step on the `large` machine (tp 8, sequence parallelism, overlap; hidden
1024 by default, about 265 000 ops), timing the simulation, then writes its
trace with `write_chrome_trace` to a file `--rounds` times (best kept) and
checks the file parses back to one event per op plus metadata and flows.
The last line is the trace's wall time over the simulation's.

Run as `python benchmarks/trace_write.py` from the repository root
(`--hidden 512` for a quicker run of about 90 000 ops).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.benches import tp_layer  # noqa: E402
from kernbench.session import Session  # noqa: E402
from kernbench.sim_engine import write_chrome_trace  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=1024, help="tp_layer's --hidden (heads: hidden / 64)")
    parser.add_argument("--rounds", type=int, default=2, help="writes of the trace (best kept)")
    options = parser.parse_args()
    session = Session("large", timing_only=True)
    began = time.perf_counter()
    session.run(tp_layer.run, session.torch, [
        "--hidden", str(options.hidden), "--heads", str(max(1, options.hidden // 64)), "--seq", "256",
        "--tp", "8", "--dp", "1", "--sp", "on", "--overlap", "on"])
    simulation = time.perf_counter() - began
    oplog = session.ctx.machine.oplog
    walls = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        for _ in range(options.rounds):
            began = time.perf_counter()
            with open(path, "w") as file:
                write_chrome_trace(oplog, file)
            walls.append(time.perf_counter() - began)
        size = path.stat().st_size
        slices = sum(event["ph"] == "X" for event in json.loads(path.read_text())["traceEvents"])
    assert slices == len(oplog), f"{slices} op events for {len(oplog)} ops"
    trace = min(walls)
    print(f"{len(oplog)} ops, trace {size / 1e6:.1f} MB")
    print(f"{'simulation':<12} {simulation:>7.2f} s")
    print(f"{'trace':<12} {trace:>7.2f} s  ({trace / len(oplog) * 1e6:.1f} us an op)")
    print(f"trace_write_over_simulation: {trace / simulation:.2f}")


if __name__ == "__main__":
    main()
