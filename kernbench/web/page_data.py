"""What the page shows, as one JSON document: the machine, a run's utilization on it, its report and its timeline.

Inputs are the files `kernbench run` writes — the report (`--json`) and the
trace (`--trace`), told apart by their content and checked for the fields
read here (`input_shapes`) — or neither, for the bare machine. The topology
drawn is `--topology`, else the shipped topology the report names, else the
shipped default: the only files read are those named on the command line
and the shipped ones, so a report cannot make the server read (and an error
quote) a file of its choosing. Utilization comes from the report — every
resource it measures, by name: HBM stacks, SRAM, L2, links, and PEs, whose
TCM, DMA and IPCQ engines are parts of the PE — or, with only a trace, from
the trace's PE units (links and memories do not appear in a trace). Each is
coloured on one scale (`utilization_scale`), which the legend draws. The
timeline is the trace's ops, one row per device and unit; with only a
report, its kernel launches and collectives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from kernbench.report.natural_sort import natural_key
from kernbench.web.input_shapes import WebInputError, check_report, check_trace, shortened
from kernbench.web.utilization_scale import colour, ink, legend
from kernbench.web.machine_model import machine_model

MAX_TIMELINE_OPS = 400_000  # a page draws this many ops smoothly; a larger trace is cut, and says so
PS_PER_US = 10**6


class RunFiles(NamedTuple):
    """What `kernbench web` was given: a run report and a trace (None when not given), and the report's file."""

    report: dict | None
    trace: dict | None
    report_source: str | None


def read_inputs(paths: list[Path]) -> RunFiles:
    """Up to one report and one trace, told apart by content, each checked for the fields read here."""
    report = trace = report_source = None
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise WebInputError(f"{path}: cannot read it: {error.strerror or error}") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            problem = "nested too deeply" if isinstance(error, RecursionError) else error
            raise WebInputError(f"{path}: not a JSON file ({problem}); expected a run report (kernbench run --json) "
                                "or a trace (kernbench run --trace)") from None
        if isinstance(data, dict) and "traceEvents" in data:
            kind = "trace"
        elif isinstance(data, dict) and "total_time_ps" in data and "devices" in data:
            kind = "report"
        else:
            raise WebInputError(f"{path}: neither a run report (kernbench run --json) nor a trace "
                                "(kernbench run --trace)")
        if (report if kind == "report" else trace) is not None:
            raise WebInputError(f"{path}: a second {kind}; expected at most one report and one trace")
        if kind == "report":
            check_report(data, str(path))
            report, report_source = data, str(path)
        else:
            check_trace(data, str(path))
            trace = data
    return RunFiles(report, trace, report_source)


def topology_for(files: RunFiles, topology_arg: str | None):
    """The topology to draw: the argument, else the shipped topology the report was made on, else the shipped
    default. A report made on a file of the user's own needs `--topology`: its path is never read."""
    from kernbench.topology import load_topology
    from kernbench.topology.loader import SHIPPED_DIR, shipped_topology_names

    named = files.report.get("topology") if files.report is not None else None
    if topology_arg is not None or not named:
        return load_topology(topology_arg)
    source = Path(named)
    # A shipped file as any checkout or install has it: .../configs/topology/NAME.yaml of a shipped NAME.
    if source.stem in shipped_topology_names() and source.parent.parts[-2:] == SHIPPED_DIR.parts[-2:]:
        return load_topology(source.stem)
    raise WebInputError(f"{files.report_source}: topology: the run was on {shortened(repr(named), 200)}, not a shipped "
                        "topology, and kernbench web reads only the files named on its command line; name the "
                        "machine with --topology FILE")


def page_data(topology, report: dict | None = None, trace: dict | None = None) -> dict:
    """The page's one JSON document (see the module docstring)."""
    machine = machine_model(topology)
    timeline = trace_timeline(trace) if trace is not None else report_timeline(report) if report else None
    total = report["total_time_ps"] if report else (timeline["end_ps"] if timeline else 0)
    return {"machine": machine, "report": report, "timeline": timeline,
            "utilization": _utilization(report, trace, total), "scale": legend()}


MEMORY_KINDS = {"hbm": "HBM", "sram": "SRAM", "l2": "L2"}  # painted on the cube, its SRAM box, the SIP's L2 box
PE_UNIT_KINDS = {"tcm", "dma", "ipcq_engine"}  # a PE's own resources: in its tooltip; its colour is the report's PE row
PE_UNITS = ("matrix", "vector", "dma", "tcm")  # the report's PE row: busy ps of each; the PE is its busiest


def _utilization(report: dict | None, trace: dict | None, total_ps: int) -> dict:
    """{"links": {name: paint}, "memories": {name: paint}, "pes": {name: paint}}: every resource the report
    measures (with a trace alone, the PEs its units' ops keep busy), each painted with its `utilization` in
    [0, 1], its `fill` on the one scale, the `ink` of a label on it and a tooltip line."""
    links, memories, pes = {}, {}, {}
    if report is not None:
        ipcq = {}
        for row in report.get("resources", report.get("busiest_resources", [])):
            name, kind, use = row["resource"], row.get("kind"), row["utilization"]
            line = f"busy {100 * use:.1f}%, moved {row['bytes']:,} B"
            if kind in MEMORY_KINDS:
                memories[name] = _paint(use, f"{MEMORY_KINDS[kind]} {line}")
            elif kind == "ipcq_engine":
                ipcq[name.rsplit(".", 1)[0]] = use
            elif kind not in PE_UNIT_KINDS:
                links[name] = _paint(use, line)
        for row in report.get("pes", []):
            units = [(unit, row[f"{unit}_busy_ps"] / total_ps) for unit in PE_UNITS] if total_ps else []
            units += [("ipcq engine", ipcq[row["pe"]])] if row["pe"] in ipcq else []
            parts = ", ".join(f"{unit} {100 * use:.1f}%" for unit, use in units)
            pes[row["pe"]] = _paint(row["utilization"], f"busy {100 * row['utilization']:.1f}% ({parts})")
    elif trace is not None and total_ps:
        for name, (busy, unit) in _pe_busy_from_trace(trace).items():
            pes[name] = _paint(busy / total_ps, f"busy {100 * busy / total_ps:.1f}% (busiest unit: {unit})")
    return {"links": links, "memories": memories, "pes": pes}


def _paint(utilization: float, tip: str) -> dict:
    fill = colour(utilization)
    return {"utilization": utilization, "fill": fill, "ink": ink(fill), "tip": tip}


def _pe_busy_from_trace(trace: dict) -> dict[str, tuple[int, str]]:
    """PE name -> (busy ps of its busiest unit, that unit) from the trace's `sipS` / `cubeC.peP.*` threads."""
    processes, threads, spans = {}, {}, {}
    for event in trace.get("traceEvents", ()):
        phase = event.get("ph")
        if phase == "M" and event.get("name") == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        elif phase == "M" and event.get("name") == "thread_name":
            threads[event["pid"], event["tid"]] = event["args"]["name"]
        elif phase == "X":
            spans.setdefault((event["pid"], event["tid"]), []).append(
                (round(event["ts"] * PS_PER_US), round((event["ts"] + event["dur"]) * PS_PER_US)))
    busiest: dict[str, tuple[int, str]] = {}
    for key, intervals in spans.items():
        unit = threads.get(key, "")
        pieces = unit.split(".")
        if len(pieces) < 3 or not pieces[0].startswith("cube") or not pieces[1].startswith("pe"):
            continue
        name = f"{processes.get(key[0], '')}.{pieces[0]}.{pieces[1]}"
        busy = _union(intervals)
        if busy > busiest.get(name, (-1, ""))[0]:
            busiest[name] = (busy, ".".join(pieces[2:]))
    return busiest


def _union(intervals: list[tuple[int, int]]) -> int:
    busy, cover_start, cover_end = 0, None, None
    for start, end in sorted(intervals):
        if cover_end is None or start > cover_end:
            if cover_end is not None:
                busy += cover_end - cover_start
            cover_start, cover_end = start, end
        else:
            cover_end = max(cover_end, end)
    return busy + (cover_end - cover_start if cover_end is not None else 0)


def trace_timeline(trace: dict) -> dict:
    """Rows of `[start_ps, end_ps, label index]` per (device, unit), in natural order; labels shared."""
    processes, threads = {}, {}
    rows: dict[tuple, list] = {}
    labels: dict[str, int] = {}
    total = kept = 0
    for event in trace.get("traceEvents", ()):
        phase = event.get("ph")
        if phase == "M" and event.get("name") == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        elif phase == "M" and event.get("name") == "thread_name":
            threads[event["pid"], event["tid"]] = event["args"]["name"]
        elif phase == "X":
            total += 1
            if kept >= MAX_TIMELINE_OPS:
                continue
            kept += 1
            start = round(event["ts"] * PS_PER_US)
            label = labels.setdefault(str(event.get("name", "")), len(labels))
            rows.setdefault((event["pid"], event["tid"]), []).append(
                [start, start + round(event["dur"] * PS_PER_US), label])
    named = [(f"{processes.get(pid, pid)} {threads.get((pid, tid), tid)}", ops) for (pid, tid), ops in rows.items()]
    return _timeline(named, list(labels), total, kept)


def report_timeline(report: dict) -> dict | None:
    """Kernel launches per device and collectives, from a report alone (no trace given)."""
    rows: dict[str, list] = {}
    labels: dict[str, int] = {}
    for section, name_key, row_of in _REPORT_ROWS:
        for row in report.get(section, []):
            label = labels.setdefault(row[name_key], len(labels))
            rows.setdefault(row_of(row), []).append([row["start_ps"], row["end_ps"], label])
    if not rows:
        return None
    count = sum(len(ops) for ops in rows.values())
    return _timeline(list(rows.items()), list(labels), count, count)


# What a report alone puts on the timeline: (its section, the key naming an op, the row an op goes on).
_REPORT_ROWS = (
    ("kernels", "kernel", lambda row: f"{row['device']} kernels"),
    ("collectives", "label", lambda row: "collectives"),
)


def _timeline(named: list[tuple[str, list]], labels: list[str], total: int, kept: int) -> dict:
    named.sort(key=lambda item: natural_key(item[0]))
    for _, ops in named:
        ops.sort()
    end = max((op[1] for _, ops in named for op in ops), default=0)
    return {"rows": [{"name": name, "ops": ops} for name, ops in named], "labels": labels,
            "end_ps": end, "ops_total": total, "ops_shown": kept}
