"""kernbench's H200 machine against NCCL measured on 2 and 4 H200s: time per size, error, calibration and held out.

`benchmarks/anchors/nccl_allreduce_h200x4_nv18.json` holds the measurement
(its README says how it was taken: torch.distributed.all_reduce of fp16 on
4 x H200 joined by NVSwitch, NCCL 2.28.9, each time a loop of calls back to
back, so it includes the per-call launch cost). This script runs the same
sizes on `topology/h200x4.yaml` with the shipped `ccl.yaml` (so `algorithm:
auto`: the tuner picks algorithm and channels per size), one timing-only
all-reduce per size, each rank's tensor made as ordinary code makes it (no
DPPolicy), so laid out by the topology's default rule: h200x4 interleaves it
over every cube and PE, as the GPU interleaves memory over its stacks. It
prints per size the measured and simulated time (the record's `time_ps`:
the call's time in a host loop, adr/0010 "Host cost of a call"), the error
and what the tuner ran.

Sizes below 1 MiB are printed but not scored: there the measured times are
the host's cost of a call, which this host loop saw lower than the other
4-GPU hosts did, and which scatters with no trend in size. This table ends
with `geomean_abs_error_ge_1MiB: X` and `max_abs_error_ge_1MiB: Y`, as
percentages.

`--held-out` first holds the same machine description against collectives
no parameter was set from: all_gather, reduce_scatter and broadcast measured
on 4 x H100 with the same NVLink 4 / NVSwitch fabric
(`anchors/nccl_collectives_h100x4_nv18.json`, taken by
`anchors/measure_nccl.py`), printing per collective
`held_out_<collective>_geomean_abs_error_ge_1MiB: X`. That is a few minutes
more, which a first line on stderr says before it starts.

By default the script then holds the model against this project's own
measurements on 2, 3 and 4 H200s (`anchors/nccl_h200x2_nv18.json`,
`anchors/nccl_h200x4_nv18.json`, `anchors/nccl_h200x2_fine_nv18.json` from a
second 2-GPU host, and `anchors/nccl_h200x{4,3}_fine_nv18.json` and
`anchors/nccl_h200x2_fine_host3_nv18.json` from a third host, taken by
`anchors/measure_nccl.py`), each timing apart: the host loop against the
record's `time_ps`, the CUDA graph (what the device spends per call, no host
work between calls) against its `device_ps`; each run on
`topology/h200x4.yaml` cut to the measurement's GPU count (only
`system.sips.count` changed). A row NCCL ran with `NCCL_ALGO=Ring
NCCL_PROTO=π` runs here with ccl.yaml's `candidates: [ring]` and `protocol:
π`; the others with the shipped ccl.yaml. A row measured twice (`repeat`) is
scored against the mean. Calibration, which set the protocols' launch,
exchange and step latencies (`topology/h200x4.yaml`): the 4-GPU Ring rows
forced to each protocol, every collective, and the first host's 4-GPU
send/recv. Held out, decided before anything was set from the files: NCCL's
own choice of every other collective on 4 GPUs, everything on 3 GPUs (a
count nothing was set on) and everything on 2, from three hosts. A host's
cost of a call is the host machine's (anchors/README.md): the second 2-GPU
host spends 30-50 us a call and the third host about 50 us on 2, 3 and 4
GPUs alike, so their host-loop points below 16 MiB measure the host: they
are printed and summed apart (`held_out_second_host`; the third host's as
`<set>_host_bound`). Per collective, GPU count and protocol (`auto`: NCCL's
choice), then per set, per set and GPU count, and timing
`<set>_<timing>_geomean_abs_error_ge_1MiB` and `..._max_...`, the held-out
lines last. send/recv is scored from 1 to 16 MiB (a 1 GiB send is tens of
thousands of simulated messages), forced rows up to 128 MiB (16 MiB on the
second and third hosts). `--quick` skips this part; `--own` runs it alone,
`--gpus 3` (or `2,4`) only its sets of those GPU counts.

Run as `python benchmarks/fidelity_nccl.py` from the repository root
(a few minutes of host CPU: the 1 GiB cases are each many thousands of
simulated messages).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from kernbench.ccl.install import SHIPPED_CCL_PATH  # noqa: E402
from kernbench.session import Session  # noqa: E402
from kernbench.topology import load_topology  # noqa: E402
from kernbench.topology.loader import resolve_topology_path  # noqa: E402

ANCHOR = Path(__file__).resolve().parent / "anchors" / "nccl_allreduce_h200x4_nv18.json"
HELD_OUT = Path(__file__).resolve().parent / "anchors" / "nccl_collectives_h100x4_nv18.json"
SCORED_FROM_BYTES = 1 << 20
HELD_OUT_COLLECTIVES = ("all_gather", "reduce_scatter", "broadcast")
ANCHORS = Path(__file__).resolve().parent / "anchors"
OWN_SIZES = [mib << 20 for mib in (1, 2, 4, 8, 16, 64, 256, 1024)]
FINE_SIZES = [int(mib * (1 << 20)) for mib in (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 64, 256, 1024)]
EVERY_SIZE = None  # a set that scores NCCL's own choice at every size its file has
SEND_MAX_BYTES = 16 << 20  # a 1 GiB send is 4,096 messages on each of 16 channels: minutes of host time
# (set, GPUs, file, sizes NCCL chose for, largest forced row scored, which rows the set takes, host loop below this
# many bytes summed apart as the host's): the held-out sets last. A forced row is (collective, "Ring", protocol);
# NCCL's own choice is (collective, "auto", "auto"). The split was decided before anything was set from the files.
OWN = (
    ("calibration", 4, ANCHORS / "nccl_h200x4_nv18.json", OWN_SIZES, 128 << 20,
     lambda collective, algo: algo == "Ring" or collective == "send_recv", 0),
    ("calibration", 4, ANCHORS / "nccl_h200x4_fine_nv18.json", EVERY_SIZE, 16 << 20,
     lambda collective, algo: algo == "Ring", 16 << 20),
    ("held_out", 4, ANCHORS / "nccl_h200x4_nv18.json", OWN_SIZES, 0,
     lambda collective, algo: algo == "auto" and collective != "send_recv", 0),
    ("held_out", 4, ANCHORS / "nccl_h200x4_fine_nv18.json", EVERY_SIZE, 0,
     lambda collective, algo: algo == "auto", 16 << 20),
    ("held_out", 3, ANCHORS / "nccl_h200x3_fine_nv18.json", EVERY_SIZE, 16 << 20, lambda collective, algo: True,
     16 << 20),
    ("held_out", 2, ANCHORS / "nccl_h200x2_nv18.json", OWN_SIZES, 128 << 20, lambda collective, algo: True, 0),
    ("held_out", 2, ANCHORS / "nccl_h200x2_fine_host3_nv18.json", EVERY_SIZE, 0, lambda collective, algo: True,
     16 << 20),
    ("held_out_second_host", 2, ANCHORS / "nccl_h200x2_fine_nv18.json", FINE_SIZES, 16 << 20,
     lambda collective, algo: True, 0),
)


# One call of each collective on `n` fp16 elements in nccl-tests' sense (the whole buffer: all_gather's
# output, reduce_scatter's input), tensors made by `empty(count)`, over p ranks.
CALLS = {
    "all_reduce": lambda dist, empty, n, p: dist.all_reduce(empty(n)),
    "all_gather": lambda dist, empty, n, p: dist.all_gather_into_tensor(empty(n), empty(n // p)),
    "reduce_scatter": lambda dist, empty, n, p: dist.reduce_scatter_tensor(empty(n // p), empty(n)),
    "broadcast": lambda dist, empty, n, p: dist.broadcast(empty(n), 0),
}


def cut_to(gpus: int, name: str = "h200x4"):
    """The shipped topology `name` with `system.sips.count` set to `gpus` and nothing else changed: the file
    describes one GPU and its links, so any count of them is the same file (adr/0010, "Protocols")."""
    text = resolve_topology_path(name).read_text()
    cut, found = re.subn(r"sips: \{count: \d+\}", f"sips: {{count: {gpus}}}", text, count=1)
    if not found:
        raise SystemExit(f"fidelity_nccl: {name}: no `sips: {{count: N}}` line to cut")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        handle.write(cut)
    try:
        return load_topology(handle.name)
    finally:
        os.unlink(handle.name)


def simulate(nbytes: int, collective: str = "all_reduce", topology="h200x4", gpus: int = 4,
             protocol: str | None = None) -> tuple[dict, str]:
    """One `collective` of `nbytes` of fp16 over `gpus` ranks of `topology`; (its record, what ran): the
    record's `time_ps` is the call's time in a host loop, its `device_ps` the device's span (adr/0010, "Host
    cost of a call"). send_recv is rank 0 sending the buffer to rank 1. `protocol`: the ring forced to that
    protocol, as `NCCL_ALGO=Ring NCCL_PROTO=...` forces NCCL (None: the shipped ccl.yaml)."""
    session = Session(topology, ccl=None if protocol is None else forced_ring(protocol), timing_only=True)
    torch = session.torch
    n = max(gpus, nbytes // 2 // gpus * gpus)

    def bench(torch):
        dist = torch.distributed
        dist.init_process_group(backend="ahbm")

        def worker(rank):
            torch.ahbm.set_device(rank)
            empty = lambda count: torch.empty(count, dtype=torch.float16)  # noqa: E731
            if collective != "send_recv":
                CALLS[collective](dist, empty, n, gpus)
            elif rank < 2:
                (dist.send if rank == 0 else dist.recv)(empty(nbytes // 2), 1 - rank)
            torch.ahbm.synchronize()

        torch.multiprocessing.spawn(worker, nprocs=gpus)
        dist.destroy_process_group()

    session.run(bench, torch)
    (record,) = session.ctx.collectives
    ran = record["algorithm"] + (f" x{record['channels']}" if record["channels"] > 1 else "")
    return record, ran + (f" {record['protocol']}" if record.get("protocol") else "")


TIMINGS = {"host_loop": ("time_us", "time_ps"), "graph": ("graph_us", "device_ps")}  # measured key, record key


def forced_ring(protocol: str) -> dict:
    """The shipped ccl.yaml with `auto` choosing among the ring alone, under `protocol`."""
    config = yaml.safe_load(SHIPPED_CCL_PATH.read_text())
    config["defaults"].update(candidates=["ring"], protocol=protocol)
    return config


def _scored_rows(path: Path, sizes: list[int] | None, forced_max: int, takes) -> list[dict]:
    """The rows of `path` a set scores, >= 1 MiB: NCCL's own choice at `sizes` (None: every size; send/recv to
    `SEND_MAX_BYTES`), Ring forced to a protocol up to `forced_max`; only those `takes` keeps."""
    rows = []
    for row in json.loads(path.read_text())["rows"]:
        collective, algo, nbytes = row["collective"], row["nccl_algo"], row["bytes"]
        if nbytes < SCORED_FROM_BYTES or algo not in ("auto", "Ring") or not takes(collective, algo):
            continue
        if algo == "auto" and (sizes is None or nbytes in sizes) \
                and (collective != "send_recv" or nbytes <= SEND_MAX_BYTES) or algo == "Ring" and nbytes <= forced_max:
            rows.append(row)
    return rows


def measured(row: dict, key: str) -> float:
    """A row's time under `key`, the mean with its `repeat` (the same size measured again in a second process)
    where the file has one."""
    again = row.get("repeat", {}).get(key)
    return row[key] if again is None else (row[key] + again) / 2


def own_measurements(gpu_counts: set[int] | None = None) -> None:
    """Calibration and held-out points of this project's 2-, 3- and 4-GPU measurements, >= 1 MiB, each timing:
    the host loop against the record's time, the CUDA graph against its device span. Per point, per set,
    GPU count, collective and protocol, then the summaries, the held-out lines last. `gpu_counts`: only the
    sets of those GPU counts (None: all). A set's host-loop points below its host-bound size are the host's
    cost of a call on that host (anchors/README.md) and are summed apart, as `<set>_host_bound_host_loop`."""
    print(f"{'set':>20} {'gpus':>4} {'collective':>14} {'NCCL':>6} {'bytes':>13} {'loop us':>8} {'sim us':>7} "
          f"{'error':>7} {'graph us':>8} {'sim us':>7} {'error':>7}  ran")
    scored = {}
    for which, gpus, path, sizes, forced_max, takes, host_bound in OWN:
        if gpu_counts is not None and gpus not in gpu_counts:
            continue
        topology = cut_to(gpus)
        groups = {}
        for row in _scored_rows(path, sizes, forced_max, takes):
            groups.setdefault((row["collective"], row["nccl_proto"]), []).append(row)
        for (collective, proto), rows in groups.items():
            errors = {timing: [] for timing in TIMINGS}
            for row in sorted(rows, key=lambda row: row["bytes"]):
                record, ran = simulate(row["bytes"], collective, topology, gpus, None if proto == "auto" else proto)
                cells = []
                for timing, (measured_key, simulated_key) in TIMINGS.items():
                    real, simulated = measured(row, measured_key), record[simulated_key] / 1e6
                    error = (simulated - real) / real
                    if timing == "host_loop" and row["bytes"] < host_bound:
                        scored.setdefault((f"{which}_host_bound", timing), []).append(abs(error))
                    else:
                        errors[timing].append(abs(error))
                    cells.append(f"{real:>8.1f} {simulated:>7.1f} {error:>+7.1%}")
                print(f"{which:>20} {gpus:>4} {collective:>14} {proto:>6} {row['bytes']:>13,} {' '.join(cells)}  "
                      f"{ran}", flush=True)
            print(f"{which}_{gpus}gpu_{collective}_{proto}: " + ", ".join(
                f"{timing} geomean {geomean(e):.1%} max {max(e):.1%}" for timing, e in errors.items() if e),
                flush=True)
            for timing, e in errors.items():
                scored.setdefault((which, timing), []).extend(e)
                scored.setdefault((f"{which}_{gpus}gpu", timing), []).extend(e)
    for (which, timing), errors in sorted(scored.items(), key=lambda item: item[0][0].startswith("held_out")):
        if errors:
            print(f"{which}_{timing}_geomean_abs_error_ge_1MiB: {geomean(errors):.1%}")
            print(f"{which}_{timing}_max_abs_error_ge_1MiB: {max(errors):.1%}")


def held_out() -> None:
    """The other collectives, measured on 4 x H100 (the same NVLink/NVSwitch fabric; its all-reduce is within
    3% of the anchor's from 8 MiB up) and never used to set a parameter: per size >= 1 MiB and per collective
    the error, then its geomean."""
    rows = json.loads(HELD_OUT.read_text())["rows"]
    print(f"{'collective':>14} {'bytes':>11} {'NCCL us':>10} {'kernbench us':>13} {'error':>8}  ran")
    for collective in HELD_OUT_COLLECTIVES:
        errors = []
        for point in rows:
            if point["collective"] != collective or point["bytes"] < SCORED_FROM_BYTES:
                continue
            record, ran = simulate(point["bytes"], collective)
            simulated_ps = record["time_ps"]
            error = (simulated_ps / 1e6 - point["time_us"]) / point["time_us"]
            errors.append(abs(error))
            print(f"{collective:>14} {point['bytes']:>11,} {point['time_us']:>10.1f} {simulated_ps / 1e6:>13.1f} "
                  f"{error:>+8.1%}  {ran}", flush=True)
        print(f"held_out_{collective}_geomean_abs_error_ge_1MiB: {geomean(errors):.1%}")


def held_out_note() -> str:
    """The line said before `--held-out`, which runs a few minutes before the all-reduce table starts."""
    rows = json.loads(HELD_OUT.read_text())["rows"]
    calls = sum(row["collective"] in HELD_OUT_COLLECTIVES and row["bytes"] >= SCORED_FROM_BYTES for row in rows)
    return (f"fidelity_nccl: --held-out first simulates {calls} collectives ({', '.join(HELD_OUT_COLLECTIVES)} from "
            "1 MiB up) before the all-reduce table: a few minutes of host CPU, the 512 MiB ones each many thousands "
            "of simulated messages")


def geomean(errors: list[float]) -> float:
    return math.exp(sum(math.log(max(e, 1e-6)) for e in errors) / len(errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", action="store_true",
                        help="first the other collectives of the held-out measurement (a few minutes more)")
    parser.add_argument("--quick", action="store_true",
                        help="the 4 x H200 all-reduce anchor alone, not this project's 2-, 3- and 4-GPU measurements")
    parser.add_argument("--own", action="store_true", help="this project's measurements alone, not the anchor first")
    parser.add_argument("--gpus", help="this project's measurements of these GPU counts alone (comma-separated)")
    args = parser.parse_args()
    counts = None if args.gpus is None else {int(count) for count in args.gpus.split(",")}
    if args.own:
        own_measurements(counts)
        return 0
    if args.held_out:
        print(held_out_note(), file=sys.stderr, flush=True)
        held_out()
    anchor = json.loads(ANCHOR.read_text())
    print(f"{'bytes':>11} {'NCCL us':>10} {'kernbench us':>13} {'error':>8}  ran")
    errors = []
    for point in anchor:
        nbytes, measured_us = point["bytes"], point["time_us"]
        record, ran = simulate(nbytes)
        simulated_us = record["time_ps"] / 1e6
        error = (simulated_us - measured_us) / measured_us
        scored = nbytes >= SCORED_FROM_BYTES
        if scored:
            errors.append(abs(error))
        print(f"{nbytes:>11,} {measured_us:>10.1f} {simulated_us:>13.1f} {error:>+8.1%}  {ran}"
              + ("" if scored else "   (not scored: launch-bound)"), flush=True)
    print(f"geomean_abs_error_ge_1MiB: {geomean(errors):.1%}")
    print(f"max_abs_error_ge_1MiB: {max(errors):.1%}")
    if not args.quick:
        own_measurements(counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
