"""Export the op log as a Chrome / Perfetto trace (the JSON trace event format).

One trace process (pid) per device and one thread (tid) per unit, each named
by a metadata event; one complete event ("X") per op, with `ts`/`dur` in
microseconds (float, from integer ps); flow events ("s", "t", "f") chain the
ops that share `args["flow_id"]`, in time order, e.g. a send to its receive.
Devices and units are numbered in natural order ("sip2" before "sip10"), so
the same log always gives the same file.
"""

from __future__ import annotations

import io
import json
import re
from itertools import islice

from kernbench.sim_engine.op_log import OpLog
from kernbench.sim_engine.simtime import PS_PER_US

_EVENTS_PER_WRITE = 4096  # events encoded per json.dumps call: a chunk's text, not the log's, is held at once


def _natural_key(text) -> list:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", str(text))]


def _us(ps: int) -> float:
    return ps / PS_PER_US


def chrome_trace_events(oplog: OpLog) -> list[dict]:
    """The trace events for `oplog`: metadata first, then ops in log order, then flows."""
    return list(_events(oplog))


def _events(oplog: OpLog):
    """`chrome_trace_events` one event at a time: the op events are made as the log is read, not all held."""
    pairs = {(r.device, r.unit) for r in oplog}  # one pass: a log of millions of ops is read twice, not per device
    devices = sorted({device for device, _ in pairs}, key=_natural_key)
    pids = {device: i + 1 for i, device in enumerate(devices)}
    tids: dict[tuple, int] = {}
    for device in devices:
        units = sorted((unit for owner, unit in pairs if owner == device), key=_natural_key)
        tids.update({(device, unit): i + 1 for i, unit in enumerate(units)})

    for device in devices:
        yield {"name": "process_name", "ph": "M", "pid": pids[device], "tid": 0, "args": {"name": str(device)}}
    for (device, unit), tid in tids.items():
        yield {"name": "thread_name", "ph": "M", "pid": pids[device], "tid": tid, "args": {"name": str(unit)}}

    flows: dict[object, list[tuple[int, int, int, int]]] = {}
    for index, r in enumerate(oplog):
        pid, tid = pids[r.device], tids[(r.device, r.unit)]
        args = {"bytes": r.nbytes, "flops": r.flops, "program": r.program, "label": r.label}
        if r.args:
            args.update(r.args)
            if "flow_id" in r.args:
                flows.setdefault(r.args["flow_id"], []).append((r.start, index, pid, tid))
        yield {"name": r.label or r.kind, "cat": r.kind, "ph": "X", "ts": _us(r.start), "dur": _us(r.end - r.start),
               "pid": pid, "tid": tid, "args": args}

    for flow_id, hops in flows.items():
        if len(hops) < 2:
            continue
        hops.sort(key=lambda hop: hop[:2])
        for position, (start, _, pid, tid) in enumerate(hops):
            phase = "s" if position == 0 else ("f" if position == len(hops) - 1 else "t")
            event = {"name": "flow", "cat": "flow", "ph": phase, "id": str(flow_id), "ts": _us(start), "pid": pid,
                     "tid": tid}
            if phase == "f":
                event["bp"] = "e"
            yield event


def write_chrome_trace(oplog: OpLog, path_or_file) -> None:
    """Write `{"traceEvents": [...], "displayTimeUnit": "ns"}` for `oplog` to a path or an open text file.

    The text is what `json.dump` of the whole document writes, made in chunks
    of events as they are read from the log, each encoded by `json.dumps` (the
    C encoder; `json.dump` runs the Python one): a few times faster, and no
    list of every event. An open file gets the chunks as they are made
    (`kernbench run --trace` passes a temporary file that replaces the target
    only once complete); a path is opened only once the whole text is made,
    so a failure never leaves half a file there.
    """
    if hasattr(path_or_file, "write"):
        _write_trace(oplog, path_or_file)
        return
    text = io.StringIO()
    _write_trace(oplog, text)
    with open(path_or_file, "w") as file:
        file.write(text.getvalue())


def _write_trace(oplog: OpLog, file) -> None:
    file.write('{"traceEvents": [')
    events, separator = _events(oplog), ""
    while chunk := list(islice(events, _EVENTS_PER_WRITE)):
        file.write(separator + json.dumps(chunk)[1:-1])
        separator = ", "
    file.write('], "displayTimeUnit": "ns"}')


