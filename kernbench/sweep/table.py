"""The sweep's table: one row per finished point, written as CSV (and Parquet, with pyarrow) and summarized.

Columns, in this order:

- `point` (its position in the sweep), then one column per axis, named as
  the sweep file names it (`topology.system.inter_sip.bandwidth_gb_per_s`,
  `ccl.defaults.algorithm`, `--n`);
- `status` (ok, failed, timeout, crashed) and, from the run report,
  `total_time_ps`, `ops`, `bytes.<link class>`, `hazards`;
- for each collective row of the report, by its label: `<label>.algorithm`,
  `.world_size`, `.bytes`, `.time_ps`, `.algbw_gb_per_s`, `.busbw_gb_per_s`
  (`all_reduce#0.busbw_gb_per_s`);
- for each kernel, its launches' totals over every device:
  `kernel.<name>.launches`, `.time_ps`, `.bytes`, `.flops`, `.roofline_ps`,
  and `.of_roofline` (roofline time over measured time);
- `metric.<name>` for each figure the bench printed (`point_process.py`);
- `wall_s`, `exit_status`, `error`, `host`, and `key` (the input hash).

A column a row lacks is empty. Rows are in the sweep's order, whatever
order the points finished in.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from kernbench.report.run_report import LINK_CLASSES, format_ps
from kernbench.sweep.derive import PointTask
from kernbench.sweep.files import replace_file, replace_text
from kernbench.sweep.point_process import KERNEL_TOTALS

CSV_NAME = "results.csv"
PARQUET_NAME = "results.parquet"
ROW_FIGURES = ("algorithm", "world_size", "bytes", "time_ps", "algbw_gb_per_s", "busbw_gb_per_s")
KERNEL_FIGURES = (*KERNEL_TOTALS, "of_roofline")
REPORT_TOTALS = ("total_time_ps", "ops", *(f"bytes.{kind}" for kind in LINK_CLASSES), "hazards")
RECORD_FIELDS = ("wall_s", "exit_status", "error", "host", "key")
SUMMARY_LABELS = 3   # collectives whose busbw the printed summary shows; the CSV has every one
SUMMARY_METRICS = 4
ERROR_WIDTH = 100


def table_rows(tasks: list[PointTask], latest: dict[str, dict]) -> list[dict[str, Any]]:
    """One row per task that has a record in the journal, in the sweep's order."""
    return [row_of(task, latest[task.key]) for task in tasks if task.key in latest]


def row_of(task: PointTask, record: dict) -> dict[str, Any]:
    row: dict[str, Any] = {"point": task.index, **dict(task.values), "status": record.get("status")}
    report = record.get("report") or {}
    if report:
        row["total_time_ps"] = report.get("total_time_ps")
        row["ops"] = report.get("ops")
        for kind, nbytes in (report.get("bytes_by_link_class") or {}).items():
            row[f"bytes.{kind}"] = nbytes
        row["hazards"] = report.get("hazards")
        for entry in report.get("collectives") or ():
            for figure in ROW_FIGURES:
                if figure in entry:
                    row[f"{entry.get('label')}.{figure}"] = entry[figure]
        for name, totals in (report.get("kernels") or {}).items():
            for figure in KERNEL_TOTALS:
                row[f"kernel.{name}.{figure}"] = totals.get(figure)
            if totals.get("time_ps"):
                row[f"kernel.{name}.of_roofline"] = totals.get("roofline_ps", 0) / totals["time_ps"]
    for name, value in (record.get("metrics") or {}).items():
        row[f"metric.{name}"] = value
    for name in RECORD_FIELDS:
        row[name] = record.get(name)
    return row


def columns_every_run_has(axis_names: list[str]) -> list[str]:
    """The columns known before any point runs: the point, the axes, the run report's totals, the record's fields.

    A collective's, a kernel's and a metric's columns are named by what the runs report, known only after.
    """
    return ["point", *axis_names, "status", *REPORT_TOTALS, *RECORD_FIELDS]


def columns_of(rows: list[dict]) -> list[str]:
    """Every column any row has, in the order they first appear."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def write_csv(folder: Path, rows: list[dict]) -> Path:
    """Write the CSV, replaced whole; returns its path."""
    replace_text(folder / CSV_NAME, csv_text(rows))
    return folder / CSV_NAME


def write_tables(folder: Path, rows: list[dict]) -> list[Path]:
    """Write the CSV, and the Parquet file when pyarrow imports; each replaced whole. Returns what was written."""
    written = [write_csv(folder, rows)]
    try:
        import pyarrow  # noqa: F401  (optional: Parquet only where it is installed)
    except ImportError:
        return written
    written.append(folder / PARQUET_NAME)
    replace_file(written[1], lambda path: _write_parquet(path, rows))
    return written


def csv_text(rows: list[dict]) -> str:
    columns = columns_of(rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell_text(row.get(column)) for column in columns])
    return buffer.getvalue()


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _write_parquet(path: Path, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for column in columns_of(rows):
        values = [row.get(column) for row in rows]
        try:
            arrays[column] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            # A column whose rows disagree in type (a number here, a word there) is kept as text.
            arrays[column] = pa.array([None if v is None else cell_text(v) for v in values], type=pa.string())
    pq.write_table(pa.table(arrays), path)


def short_names(names: list[str]) -> dict[str, str]:
    """Each name's shortest dotted tail that no other name ends with: `bandwidth_gb_per_s`, `algorithm`."""
    short = {}
    for name in names:
        parts = name.split(".")
        for size in range(1, len(parts) + 1):
            tail = ".".join(parts[-size:])
            if not any(other != name and (other == tail or other.endswith("." + tail)) for other in names):
                short[name] = tail
                break
        else:
            short[name] = name
    return short


def format_summary(rows: list[dict], axis_names: list[str]) -> str:
    """The table as aligned text: axes, status, simulated time, a few collectives' busbw, kernels' times
    and metrics, wall time; then the error of each point that is not ok."""
    if not rows:
        return "no finished points"
    columns = columns_of(rows)
    busbw = [c for c in columns if c.endswith(".busbw_gb_per_s")][:SUMMARY_LABELS]
    kernels = [c for c in columns if c.startswith("kernel.") and c.endswith(".time_ps")][:SUMMARY_LABELS]
    metrics = [c for c in columns if c.startswith("metric.")][:SUMMARY_METRICS]
    short = short_names(axis_names)
    header = ["#", *(short[name] for name in axis_names), "status", "sim time",
              *(f"{c.removesuffix('.busbw_gb_per_s')} busbw GB/s" for c in busbw),
              *(f"{c.removeprefix('kernel.').removesuffix('.time_ps')} time" for c in kernels), *metrics, "wall s"]
    body = []
    for row in rows:
        ok = row.get("status") == "ok"
        body.append([str(row["point"]), *(cell_text(row.get(name)) for name in axis_names), str(row.get("status")),
                     format_ps(row["total_time_ps"]) if ok and row.get("total_time_ps") is not None else "-",
                     *(_number(row.get(c)) for c in busbw),
                     *(format_ps(row[c]) if row.get(c) is not None else "-" for c in kernels),
                     *(_number(row.get(c)) for c in metrics),
                     f"{row.get('wall_s') or 0:.1f}"])
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(line, widths)) for line in [header, *body]]
    lines += [f"point {row['point']}: {row.get('status')}: {_clip(row.get('error') or '')}"
              for row in rows if row.get("status") != "ok"]
    return "\n".join(lines)


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return cell_text(value)


def _clip(text: str) -> str:
    return text if len(text) <= ERROR_WIDTH else text[:ERROR_WIDTH - 3] + "..."
