"""Chrome / Perfetto trace export, checked against the trace event format (adr/0003-engine.md)."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernbench.sim_engine import OpLog, chrome_trace_events, write_chrome_trace
from kernbench.sim_engine.trace import _EVENTS_PER_WRITE, _natural_key

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


@pytest.mark.quick
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


def reference_trace(log: OpLog) -> str:
    """The trace as ADR 0003 ("Trace format") describes it, built the plain way (a dict per event, every event
    held, one `json.dumps`): the oracle the written file must equal byte for byte."""
    records = list(log)
    devices = sorted({r.device for r in records}, key=_natural_key)
    pids = {device: i + 1 for i, device in enumerate(devices)}
    tids = {}
    for device in devices:
        units = sorted({r.unit for r in records if r.device == device}, key=_natural_key)
        tids.update({(device, unit): i + 1 for i, unit in enumerate(units)})
    events = [{"name": "process_name", "ph": "M", "pid": pids[d], "tid": 0, "args": {"name": d}} for d in devices]
    events += [{"name": "thread_name", "ph": "M", "pid": pids[d], "tid": tid, "args": {"name": u}}
               for (d, u), tid in tids.items()]
    flows = {}
    for index, r in enumerate(records):
        pid, tid = pids[r.device], tids[(r.device, r.unit)]
        args = {"bytes": r.nbytes, "flops": r.flops, "program": r.program, "label": r.label, **(r.args or {})}
        events.append({"name": r.label or r.kind, "cat": r.kind, "ph": "X", "ts": r.start / 1e6,
                       "dur": (r.end - r.start) / 1e6, "pid": pid, "tid": tid, "args": args})
        if r.args and "flow_id" in r.args:
            flows.setdefault(r.args["flow_id"], []).append((r.start, index, pid, tid))
    for flow_id, hops in flows.items():
        hops.sort()
        for position, (start, _, pid, tid) in enumerate(hops if len(hops) > 1 else []):
            phase = "s" if position == 0 else ("f" if position == len(hops) - 1 else "t")
            events.append({"name": "flow", "cat": "flow", "ph": phase, "id": str(flow_id), "ts": start / 1e6,
                           "pid": pid, "tid": tid, **({"bp": "e"} if phase == "f" else {})})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ns"})


def written(log: OpLog) -> str:
    streamed = io.StringIO()
    write_chrome_trace(log, streamed)
    return streamed.getvalue()


@pytest.mark.parametrize("ops", [0, 1, _EVENTS_PER_WRITE - 11, 2 * _EVENTS_PER_WRITE + 5])
def test_adr0003_t112_the_trace_is_written_in_chunks_as_json_dump_writes_the_whole_document(tmp_path, ops):
    """No event, fewer than a chunk, exactly one chunk (3 metadata events, the ops, and 8 flow events for the first
    8 ops, two flows of 4 hops), and several: the file is the plain encoding's, byte for byte, written to an open
    file or to a path; `chrome_trace_events` gives the same events."""
    log = OpLog()
    for op in range(ops):
        kind, unit = ("ipcq_send", "sip0->sip1") if op % 2 else ("dma", "cube0.pe0.dma")
        log.append_pairs(kind, "sip0", unit, "run", op % 7, 64, 0, op, op + 3, (("src", "a"),),
                         flow_id=op // 4 if op < 8 else -1)
    assert ops != _EVENTS_PER_WRITE - 11 or len(chrome_trace_events(log)) == _EVENTS_PER_WRITE
    write_chrome_trace(log, tmp_path / "trace.json")
    assert written(log) == reference_trace(log) == (tmp_path / "trace.json").read_text()
    assert chrome_trace_events(log) == json.loads(reference_trace(log))["traceEvents"]


_KEYS = st.sampled_from(["src", "dst", "flow_id", "label", "bytes", "elements", "naïve", 'q"uote', 7])
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=6),
                    st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=3))
_RECORDS = st.lists(st.tuples(
    st.sampled_from(["dma", "gemm", "ipcq_send", "ipcq_recv"]), st.sampled_from(["sip0", "sip2", "sip10", "host"]),
    st.sampled_from(["cube0.pe1.dma", "cube0.pe10.dma", "mxu", "sip2->sip10"]),
    st.one_of(st.none(), st.text(max_size=5)),
    st.one_of(st.none(), st.integers(0, 300)), st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 10**15),
    st.integers(0, 10**9), st.one_of(st.none(), st.lists(st.tuples(_KEYS, _VALUES), max_size=4).filter(
        lambda pairs: all(key != "flow_id" or not isinstance(value, list) for key, value in pairs))),  # ids hash
    st.integers(-1, 5)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(_RECORDS)
@example([("dma", "sip0", "mxu", None, None, 0, 0, 0, 0, [("src", False)], 0),
          ("dma", "sip0", "mxu", None, None, 0, 0, 0, 0, [("src", 0)], 0)])  # equal args, not alike: 0 is no false
def test_adr0003_t112_any_log_is_written_as_its_plain_encoding(records):
    """Records with no args, with shared or unhashable args, a flow id first (a message's) or anywhere, args
    naming the template's own keys, keys repeated or not strings, any label or program, compacted or not: byte for
    byte the plain encoding's."""
    log = OpLog()
    for index, (kind, device, unit, label, program, nbytes, flops, start, duration, pairs, flow) in enumerate(records):
        if index == len(records) // 2:
            log.seal()  # the first half read back from columns, the rest as appended
        if pairs is None or flow >= 0:
            log.append_pairs(kind, device, unit, label, program, nbytes, flops, start, start + duration,
                             None if pairs is None else tuple(pairs), flow_id=flow)
        else:
            log.append(kind, device, unit, label, program, nbytes, flops, start, start + duration, dict(pairs))
    assert written(log) == reference_trace(log)
