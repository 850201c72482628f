"""Export the op log as a Chrome / Perfetto trace (the JSON trace event format).

One trace process (pid) per device and one thread (tid) per unit, each named
by a metadata event; one complete event ("X") per op, with `ts`/`dur` in
microseconds (float, from integer ps); flow events ("s", "t", "f") chain the
ops that share `args["flow_id"]`, in time order, e.g. a send to its receive.
Devices and units are numbered in natural order ("sip2" before "sip10"), so
the same log always gives the same file.
"""

from __future__ import annotations

import json
import re

from kernbench.sim_engine.op_log import OpLog
from kernbench.sim_engine.simtime import PS_PER_US


def _natural_key(text) -> list:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", str(text))]


def _us(ps: int) -> float:
    return ps / PS_PER_US


def chrome_trace_events(oplog: OpLog) -> list[dict]:
    """The trace events for `oplog`: metadata first, then ops in log order, then flows."""
    devices = sorted({r.device for r in oplog}, key=_natural_key)
    pids = {device: i + 1 for i, device in enumerate(devices)}
    tids: dict[tuple, int] = {}
    for device in devices:
        units = sorted({r.unit for r in oplog if r.device == device}, key=_natural_key)
        tids.update({(device, unit): i + 1 for i, unit in enumerate(units)})

    events: list[dict] = []
    for device in devices:
        events.append({"name": "process_name", "ph": "M", "pid": pids[device], "tid": 0, "args": {"name": str(device)}})
    for (device, unit), tid in tids.items():
        events.append({"name": "thread_name", "ph": "M", "pid": pids[device], "tid": tid, "args": {"name": str(unit)}})

    flows: dict[object, list[tuple[int, int, dict]]] = {}
    for index, r in enumerate(oplog):
        pid, tid = pids[r.device], tids[(r.device, r.unit)]
        args = {"bytes": r.nbytes, "flops": r.flops, "program": r.program, "label": r.label}
        if r.args:
            args.update(r.args)
        events.append({
            "name": r.label or r.kind, "cat": r.kind, "ph": "X",
            "ts": _us(r.start), "dur": _us(r.end - r.start),
            "pid": pid, "tid": tid, "args": args,
        })
        if r.args and "flow_id" in r.args:
            flows.setdefault(r.args["flow_id"], []).append((r.start, index, {"pid": pid, "tid": tid}))

    for flow_id, hops in flows.items():
        if len(hops) < 2:
            continue
        hops.sort(key=lambda hop: hop[:2])
        for position, (start, _, where) in enumerate(hops):
            phase = "s" if position == 0 else ("f" if position == len(hops) - 1 else "t")
            event = {"name": "flow", "cat": "flow", "ph": phase, "id": str(flow_id), "ts": _us(start), **where}
            if phase == "f":
                event["bp"] = "e"
            events.append(event)
    return events


def write_chrome_trace(oplog: OpLog, path_or_file) -> None:
    """Write `{"traceEvents": [...], "displayTimeUnit": "ns"}` for `oplog` to a path or an open text file.

    The events are built before the file is touched, so a failure while
    building them never leaves a half-written file. `kernbench run --trace`
    passes a temporary file that replaces the target only once complete.
    """
    trace = {"traceEvents": chrome_trace_events(oplog), "displayTimeUnit": "ns"}
    if hasattr(path_or_file, "write"):
        json.dump(trace, path_or_file)
        return
    with open(path_or_file, "w") as f:
        json.dump(trace, f)
