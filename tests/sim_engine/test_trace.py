"""Chrome / Perfetto trace export, checked against the trace event format (adr/0003-engine.md)."""

from __future__ import annotations

import io
import json

import pytest

from kernbench.sim_engine import OpLog, chrome_trace_events, write_chrome_trace
from kernbench.sim_engine.trace import _EVENTS_PER_WRITE

REQUIRED = {
    "X": {"name", "ph", "ts", "dur", "pid", "tid"},
    "M": {"name", "ph", "pid", "args"},
    "s": {"name", "ph", "ts", "pid", "tid", "id", "cat"},
    "t": {"name", "ph", "ts", "pid", "tid", "id", "cat"},
    "f": {"name", "ph", "ts", "pid", "tid", "id", "cat"},
}


def validate(trace: dict) -> list[str]:
    """Problems with `trace` under the JSON trace event format's rules, as messages."""
    problems = []
    if set(trace) != {"traceEvents", "displayTimeUnit"} or trace["displayTimeUnit"] not in ("ms", "ns"):
        problems.append(f"bad top level: {sorted(trace)}")
    named_pids, named_threads, used = set(), set(), set()
    for event in trace["traceEvents"]:
        ph = event.get("ph")
        if ph not in REQUIRED:
            problems.append(f"unknown phase {ph!r}")
            continue
        if missing := REQUIRED[ph] - set(event):
            problems.append(f"{ph} event lacks {sorted(missing)}: {event}")
            continue
        if not (isinstance(event["pid"], int) and isinstance(event.get("tid", 0), int)):
            problems.append(f"pid/tid not ints: {event}")
        if ph == "M":
            if event["name"] == "process_name":
                named_pids.add(event["pid"])
            elif event["name"] == "thread_name":
                named_threads.add((event["pid"], event["tid"]))
            if not isinstance(event["args"].get("name"), str):
                problems.append(f"metadata without a name: {event}")
            continue
        if not isinstance(event["ts"], float) or event["ts"] < 0:
            problems.append(f"ts not a non-negative float: {event}")
        if ph == "X" and (not isinstance(event["dur"], float) or event["dur"] < 0):
            problems.append(f"dur not a non-negative float: {event}")
        if ph == "f" and event.get("bp") != "e":
            problems.append(f"flow end not bound to its enclosing slice: {event}")
        used.add((event["pid"], event["tid"]))
    for pid, tid in sorted(used):
        if pid not in named_pids:
            problems.append(f"pid {pid} has no process_name")
        if (pid, tid) not in named_threads:
            problems.append(f"pid {pid} tid {tid} has no thread_name")
    return problems


def sample_log() -> OpLog:
    log = OpLog()
    log.append("dma", "sip10", "cube0.pe1.dma0", "gemm", 3, 4096, 0, 0, 1_500_000)
    log.append("gemm", "sip2", "cube1.pe3.mxu", "gemm", 4, 0, 524288, 1_500_000, 2_000_001)
    log.append("ipcq_send", "sip2", "sip2->sip10", "all_reduce", None, 1024, 0, 2_000_000, 2_600_000, {"flow_id": 9})
    log.append("ipcq_recv", "sip10", "sip2->sip10", "all_reduce", None, 1024, 0, 2_600_000, 2_600_000, {"flow_id": 9})
    return log


def test_adr0003_t20_trace_follows_the_trace_event_format(tmp_path):
    path = tmp_path / "trace.json"
    write_chrome_trace(sample_log(), path)
    trace = json.loads(path.read_text())
    assert validate(trace) == []
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == 4
    gemm = slices[1]
    assert (gemm["ts"], gemm["dur"]) == (1.5, 0.500001)  # ps -> µs, exact for these values
    assert gemm["args"] == {"bytes": 0, "flops": 524288, "program": 4, "label": "gemm"}
    names = {(e["pid"], e["args"]["name"]) for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {(1, "sip2"), (2, "sip10")}  # natural order: sip2 before sip10


def test_adr0003_t21_flow_events_link_a_send_to_its_receive():
    events = chrome_trace_events(sample_log())
    flows = [e for e in events if e["ph"] in "stf"]
    assert [(e["ph"], e["id"], e["ts"]) for e in flows] == [("s", "9", 2.0), ("f", "9", 2.6)]
    send, recv = (next(e for e in events if e["ph"] == "X" and e["cat"] == kind) for kind in ("ipcq_send", "ipcq_recv"))
    assert (flows[0]["pid"], flows[0]["tid"]) == (send["pid"], send["tid"])
    assert (flows[1]["pid"], flows[1]["tid"]) == (recv["pid"], recv["tid"])
    assert chrome_trace_events(sample_log()) == events


@pytest.mark.parametrize("ops", [0, 1, _EVENTS_PER_WRITE - 11, 2 * _EVENTS_PER_WRITE + 5])
def test_adr0003_t112_the_trace_is_written_in_chunks_as_json_dump_writes_the_whole_document(tmp_path, ops):
    """No event, fewer than a chunk, exactly one chunk (3 metadata events, the ops, and 8 flow events for the first
    8 ops, two flows of 4 hops), and several: the file is json.dump's, byte for byte, written to an open file or to
    a path."""
    log = OpLog()
    for op in range(ops):
        log.append("ipcq_send" if op % 2 else "dma", "sip0", f"unit{op % 2}", "run", op % 7, 64, 0, op, op + 3,
                   {"flow_id": op // 4} if op < 8 else None)
    events = chrome_trace_events(log)
    assert ops != _EVENTS_PER_WRITE - 11 or len(events) == _EVENTS_PER_WRITE
    expected = io.StringIO()
    json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, expected)
    streamed = io.StringIO()
    write_chrome_trace(log, streamed)
    write_chrome_trace(log, tmp_path / "trace.json")
    assert streamed.getvalue() == expected.getvalue() == (tmp_path / "trace.json").read_text()
