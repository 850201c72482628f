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

_EVENTS_PER_WRITE = 4096  # events written at a time: a chunk's text, not the log's, is held at once


def _natural_key(text) -> list:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", str(text))]


def _us(ps: int) -> float:
    return ps / PS_PER_US


def chrome_trace_events(oplog: OpLog) -> list[dict]:
    """The trace events for `oplog`: metadata first, then ops in log order, then flows."""
    return json.loads("[" + ", ".join(_event_texts(oplog)) + "]")


def _event_texts(oplog: OpLog):
    """Each trace event as the text `json.dumps` gives it, made as the log is read (none held).

    An op's event is filled into a template: its strings and its own args are
    encoded by `json.dumps` once per distinct value and kept, its numbers are
    formatted as `json.dumps` formats them (`repr` of a float, digits of an
    int); args with a key of the template's own `args` (which would take
    that key's place) or a key that is not a string are encoded whole.
    """
    pairs = {row[1:3] for row in oplog.rows()}  # (device, unit): the log is read twice, not once per device
    devices = sorted({device for device, _ in pairs}, key=_natural_key)
    pids = {device: i + 1 for i, device in enumerate(devices)}
    tids: dict[tuple, int] = {}
    for device in devices:
        units = sorted((unit for owner, unit in pairs if owner == device), key=_natural_key)
        tids.update({(device, unit): i + 1 for i, unit in enumerate(units)})

    for device in devices:
        yield json.dumps({"name": "process_name", "ph": "M", "pid": pids[device], "tid": 0,
                          "args": {"name": str(device)}})
    for (device, unit), tid in tids.items():
        yield json.dumps({"name": "thread_name", "ph": "M", "pid": pids[device], "tid": tid,
                          "args": {"name": str(unit)}})

    where = {key: (pids[key[0]], tid) for key, tid in tids.items()}
    encoded: dict = {None: "null"}  # a string (or None) -> its JSON text
    args_text: dict[tuple, str | None] = {((), ()): ""}  # (args, value types) -> ", key: value" each; None: whole
    flows: dict[object, list[tuple[int, int, int, int]]] = {}
    for index, (kind, device, unit, label, program, nbytes, flops, start, end, args) in enumerate(oplog.rows()):
        pid, tid = where[device, unit]
        rest = args or ()
        flow = _UNSEEN  # none yet: a flow id may be any value, None included
        if rest and rest[0][0] == "flow_id":  # a message's id leads its args (`OpLog.append_pairs`)
            flow, rest = rest[0][1], rest[1:]
        text = _kept_pairs_text(rest, args_text)
        if text is None:  # args the template cannot hold (a flow id not first among them is such)
            yield _event_text_whole(kind, label, program, nbytes, flops, start, end, args, pid, tid)
            flow = dict(args).get("flow_id", _UNSEEN)
        else:
            name, cat, label_text = (encoded.get(value) or encoded.setdefault(value, json.dumps(value))
                                     for value in (label or kind, kind, label))
            flow_text = "" if flow is _UNSEEN else f', "flow_id": {json.dumps(flow)}'
            yield (f'{{"name": {name}, "cat": {cat}, "ph": "X", "ts": {_us(start)!r}, '
                   f'"dur": {_us(end - start)!r}, "pid": {pid}, "tid": {tid}, "args": {{"bytes": {nbytes}, '
                   f'"flops": {flops}, "program": {"null" if program is None else program}, "label": {label_text}'
                   f'{flow_text}{text}}}}}')
        if flow is not _UNSEEN:
            flows.setdefault(flow, []).append((start, index, pid, tid))

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
            yield json.dumps(event)


_UNSEEN = object()
_TEMPLATE_ARGS = frozenset(("bytes", "flops", "program", "label", "flow_id"))


def _kept_pairs_text(pairs: tuple, kept: dict) -> str | None:
    """`_pairs_text(pairs)`, worked out once per distinct args tuple of the log (a queue's messages share one).
    Distinct by its values' types too: `("src", 0)` equals `("src", False)` and hashes alike, but is written `0`."""
    key = (pairs, tuple(value.__class__ for _, value in pairs))
    try:
        text = kept.get(key, _UNSEEN)
    except TypeError:  # an unhashable value (a list): worked out each time
        return _pairs_text(pairs)
    if text is _UNSEEN:
        text = kept[key] = _pairs_text(pairs)
    return text


def _pairs_text(pairs: tuple) -> str | None:
    """`, "key": value` for each pair, as `json.dumps` writes them inside an object; None where the template
    cannot hold them (a key the template's args already have, a repeated key, a key that is not a string)."""
    keys = [key for key, _ in pairs]
    if any(key.__class__ is not str or key in _TEMPLATE_ARGS for key in keys) or len(set(keys)) < len(keys):
        return None
    return "".join(f", {json.dumps(key)}: {json.dumps(value)}" for key, value in pairs)


def _event_text_whole(kind, label, program, nbytes, flops, start, end, args, pid, tid) -> str:
    """An op's event built as a dict and encoded by `json.dumps`: for args the template cannot hold."""
    event_args = {"bytes": nbytes, "flops": flops, "program": program, "label": label}
    event_args.update(args or ())
    return json.dumps({"name": label or kind, "cat": kind, "ph": "X", "ts": _us(start), "dur": _us(end - start),
                       "pid": pid, "tid": tid, "args": event_args})


def write_chrome_trace(oplog: OpLog, path_or_file) -> None:
    """Write `{"traceEvents": [...], "displayTimeUnit": "ns"}` for `oplog` to a path or an open text file.

    The text is what `json.dump` of the whole document writes (T112), made
    event by event as the log is read (`_event_texts`) and written in chunks:
    no list of every event is held. An open file gets the chunks as they are
    made (`kernbench run --trace` passes a temporary file that replaces the
    target only once complete); a path is opened only once the whole text is
    made, so a failure never leaves half a file there.
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
    events, separator = _event_texts(oplog), ""
    while chunk := list(islice(events, _EVENTS_PER_WRITE)):
        file.write(separator + ", ".join(chunk))
        separator = ", "
    file.write('], "displayTimeUnit": "ns"}')
