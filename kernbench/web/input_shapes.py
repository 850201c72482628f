"""What `kernbench web` reads of a run report and a trace, checked once where the files are read.

The files are JSON that anyone may have edited or made; a field of the
wrong type (a string where the page data divides, a list where it looks a
name up) would be a `TypeError` deep in `page_data`. Every field the page
data reads is checked here first, so such a file is one `WebInputError`
naming the file and the field: `run.json: pes[3].utilization: found 'busy'
(a string); expected a finite number`. Fields the page data does not read
are passed through to the page as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from kernbench.errors import KernbenchError
from kernbench.topology.kinds import describe

FOUND_WIDTH = 60  # a description of a bad value is cut to this many characters: the line stays one line


class WebInputError(KernbenchError):
    """A file `kernbench web` cannot show: unreadable, not JSON, or neither a run report nor a trace."""


@dataclass(frozen=True)
class Kind:
    """A kind of value the page data needs: what to call it in a message, the test a value must pass, and whether
    a row may leave it out."""

    what: str
    holds: Callable[[Any], bool]
    optional: bool = False


# A finite number (not a bool): what the page data adds, divides and rounds; an id keys its tables.
NUMBER = Kind("a finite number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
TEXT = Kind("a string", lambda v: isinstance(v, str))
OPTIONAL_TEXT = Kind("a string", lambda v: v is None or isinstance(v, str), optional=True)
ID = Kind("a number or a string", lambda v: isinstance(v, (int, float, str)) and not isinstance(v, bool))
_BUSY = {f"{unit}_busy_ps": NUMBER for unit in ("matrix", "vector", "dma", "tcm")}
_RESOURCE_ROW = {"resource": TEXT, "kind": OPTIONAL_TEXT, "utilization": NUMBER, "bytes": NUMBER}
# A report's fields the page data reads: a kind of value, or the keys of each row of a list of rows.
REPORT_FIELDS = {
    "total_time_ps": NUMBER,
    "resources": _RESOURCE_ROW,
    "busiest_resources": _RESOURCE_ROW,
    "pes": {"pe": TEXT, "utilization": NUMBER, **_BUSY},
    "kernels": {"kernel": TEXT, "device": TEXT, "start_ps": NUMBER, "end_ps": NUMBER},
    "collectives": {"label": TEXT, "start_ps": NUMBER, "end_ps": NUMBER},
}
# A trace event's fields the page data reads, by its phase: metadata names a process or thread, "X" is an op.
EVENT_FIELDS = {"M": {"pid": ID, "tid": ID}, "X": {"pid": ID, "tid": ID, "ts": NUMBER, "dur": NUMBER}}


def check_report(report: dict, source: str) -> None:
    """`WebInputError` naming `source` and the field, for the first field the page data reads that is amiss."""
    for field, kind in REPORT_FIELDS.items():
        if field not in report:
            continue
        if isinstance(kind, dict):
            _check_rows(report[field], kind, source, field)
        elif not kind.holds(report[field]):
            raise _wrong(source, field, report[field], kind.what)
    topology = report.get("topology")
    if topology is not None and not isinstance(topology, str):
        raise _wrong(source, "topology", topology, "a topology's name or path")


def check_trace(trace: dict, source: str) -> None:
    """As `check_report`, for a trace's `traceEvents`."""
    events = trace["traceEvents"]
    if not isinstance(events, list):
        raise _wrong(source, "traceEvents", events, "a list of events")
    for index, event in enumerate(events):
        where = f"traceEvents[{index}]"
        if not isinstance(event, dict):
            raise _wrong(source, where, event, "an event (a mapping)")
        _check_row(event, EVENT_FIELDS.get(event.get("ph"), {}), source, where)
        if event.get("ph") == "M" and event.get("name") in ("process_name", "thread_name"):
            args = event.get("args")
            if not isinstance(args, dict) or not isinstance(args.get("name"), str):
                raise _wrong(source, f"{where}.args", args, "a mapping with a name (a string)")


def _check_rows(rows: Any, keys: dict, source: str, field: str) -> None:
    if not isinstance(rows, list):
        raise _wrong(source, field, rows, "a list of rows")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise _wrong(source, f"{field}[{index}]", row, "a row (a mapping)")
        _check_row(row, keys, source, f"{field}[{index}]")


def _check_row(row: dict, keys: dict, source: str, where: str) -> None:
    for key, kind in keys.items():
        if key not in row and kind.optional:
            continue
        if key not in row:
            raise WebInputError(f"{source}: {where}: missing {key!r}; expected {kind.what}")
        if not kind.holds(row[key]):
            raise _wrong(source, f"{where}.{key}", row[key], kind.what)


def shortened(text: str, limit: int) -> str:
    """`text` cut to `limit` characters: a value from a file is quoted in one line, whatever its size."""
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def _wrong(source: str, field: str, value: Any, expected: str) -> WebInputError:
    return WebInputError(f"{source}: {field}: found {shortened(describe(value), FOUND_WIDTH)}; expected {expected}")
