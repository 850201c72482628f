"""Wall time of writing `--trace` for a transformer layer's op log, chunked against one `json.dump`.

`kernbench run --trace FILE` writes the op log as Chrome / Perfetto trace
events (ADR 0003, "Trace format"). This simulates one timing-only `tp_layer`
step on the `large` machine (tp 8, sequence parallelism, overlap; hidden
1024 by default, about 265 000 ops), then writes its trace the way
`write_chrome_trace` does — chunks of events encoded by `json.dumps` as
they are made — and the way it did before: every event built into one list,
then `json.dump` of the whole document. Both write the same bytes (checked).
The two take turns `--rounds` times (best kept); the last line is the ratio
of the best wall times, chunked over whole.

Run as `python benchmarks/trace_write.py` from the repository root
(`--hidden 512` for a quicker run of about 48 000 ops).
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
from kernbench.sim_engine import chrome_trace_events, write_chrome_trace  # noqa: E402


def whole_document(oplog, file) -> None:
    """The former writer: every event in one list, then the Python encoder of `json.dump` over the document."""
    json.dump({"traceEvents": chrome_trace_events(oplog), "displayTimeUnit": "ns"}, file)


def timed(write, oplog, path: Path) -> float:
    began = time.perf_counter()
    with open(path, "w") as file:
        write(oplog, file)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=1024, help="tp_layer's --hidden (heads: hidden / 64)")
    parser.add_argument("--rounds", type=int, default=2, help="writes of each kind, taking turns (best kept)")
    options = parser.parse_args()
    session = Session("large", timing_only=True)
    session.run(tp_layer.run, session.torch, [
        "--hidden", str(options.hidden), "--heads", str(max(1, options.hidden // 64)), "--seq", "256",
        "--tp", "8", "--dp", "1", "--sp", "on", "--overlap", "on"])
    oplog = session.ctx.machine.oplog
    walls = {"chunked": [], "whole": []}
    with tempfile.TemporaryDirectory() as folder:
        paths = {"chunked": Path(folder) / "chunked.json", "whole": Path(folder) / "whole.json"}
        for _ in range(options.rounds):
            walls["chunked"].append(timed(write_chrome_trace, oplog, paths["chunked"]))
            walls["whole"].append(timed(whole_document, oplog, paths["whole"]))
        assert paths["chunked"].read_bytes() == paths["whole"].read_bytes(), "the two writers differ"
        size = paths["chunked"].stat().st_size
    chunked, whole = min(walls["chunked"]), min(walls["whole"])
    print(f"{len(oplog)} ops, trace {size / 1e6:.1f} MB")
    print(f"{'writer':<26} {'wall':>8}")
    print(f"{'chunks of json.dumps':<26} {chunked:>7.2f} s")
    print(f"{'one list, json.dump':<26} {whole:>7.2f} s")
    print(f"trace_write_chunked_over_whole: {chunked / whole:.2f}")


if __name__ == "__main__":
    main()
