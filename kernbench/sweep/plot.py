"""`--plot METRIC --x AXIS [--hue AXIS]`: one column of the table drawn against one or two axes.

Names may be shortened to a dotted tail no other column ends with
(`busbw_gb_per_s` for `all_reduce#0.busbw_gb_per_s`, `bandwidth_gb_per_s`
for `topology.system.inter_sip.bandwidth_gb_per_s`, `n` for the bench
option `--n`). One line per value of the hue axis; when other axes vary
too, one line per combination of them, labelled with their values, so no
two points are ever averaged into one. A numeric x axis spanning a factor
of 8 or more is drawn on a log2 scale (sizes, bandwidths); a non-numeric one
is categorical, in sweep order. Only `ok` rows are drawn.

A misspelt METRIC is refused before any point runs (`check_metric`), as
far as the name can be judged then: which collectives, kernels and bench
figures the table has is known only once points have run.

Drawn with matplotlib's object API (a bare `Figure`, no pyplot, no display),
imported only when a plot is asked for.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kernbench.sweep.errors import SweepError
from kernbench.sweep.files import replace_file
from kernbench.sweep.table import (KERNEL_FIGURES, ROW_FIGURES, cell_text, columns_every_run_has, columns_of,
                                   short_names)
from kernbench.topology.kinds import suggestion

LOG_SPAN = 8
MAX_TICKS = 12


def resolve_column(flag: str, name: str, columns: list[str]) -> str:
    """The column `name` means: itself, the one column ending with `.name`, `--name` or `metric.name`."""
    matches = resolve_tail(name, columns)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise SweepError(f"{flag} {name}: names several columns ({', '.join(matches)}); expected one of them")
    raise SweepError(f"{flag} {name}: no such column; expected one of: {', '.join(columns)}")


def check_metric(metric: str, axis_names: list[str], bench_text: str) -> None:
    """Refuse, before any point runs, a `--plot` name that no column of the sweep's table can have.

    Accepted: a column every run has or an axis (or a tail of one, as `resolve_column` takes it); a name
    whose last part is a collective's or a kernel's figure (`busbw_gb_per_s`, `kernel.add.time_ps`);
    `metric.NAME`; and a name the bench's text has as a quoted string, since the metrics line a bench
    prints names its figures so. `draw_plot` resolves the name against the finished table.
    """
    known = columns_every_run_has(axis_names)
    figures = (*ROW_FIGURES, *KERNEL_FIGURES)
    if resolve_tail(metric, known) or metric.startswith("metric.") or metric.rpartition(".")[2] in figures:
        return
    if re.search(f"""["']{re.escape(metric)}["']""", bench_text):
        return
    tails = list(dict.fromkeys([*(name.rpartition(".")[2] for name in known), *figures]))
    raise SweepError(
        f"--plot {metric}: no column of the table can have that name{suggestion(metric, tails)}; expected an axis, "
        f"a column every run has ({', '.join(n for n in known if n not in axis_names)}), a collective's or "
        f"kernel's column ending in a figure ({', '.join(dict.fromkeys(figures))}), or metric.NAME for a figure "
        "the bench prints")


def resolve_tail(name: str, columns: list[str]) -> list[str]:
    """The columns `name` may stand for: itself, or those ending with `.name`, `--name` or `metric.name`."""
    if name in columns:
        return [name]
    return [c for c in columns if c.endswith("." + name) or c in (f"--{name}", f"metric.{name}")]


def plot_path(folder: Path, metric: str, x: str) -> Path:
    """`FOLDER/plot-<metric>-vs-<x>.png`, with the names made safe for a file name."""
    def safe(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip("-")) or "value"
    return folder / f"plot-{safe(metric)}-vs-{safe(x)}.png"


def draw_plot(rows: list[dict], axis_names: list[str], metric: str, x: str, hue: str | None, out: Path) -> Path:
    """Draw `metric` against axis `x` (one line per `hue` and other varying axes) into `out`; return `out`."""
    columns = columns_of(rows) if rows else ["point", *axis_names]
    metric = resolve_column("--plot", metric, columns)
    x = resolve_column("--x", x, axis_names)
    hue = resolve_column("--hue", hue, axis_names) if hue is not None else None
    if hue == x:
        raise SweepError(f"--hue {hue}: is the x axis; expected another axis")
    drawn = [row for row in rows if row.get("status") == "ok" and _is_number(row.get(metric))]
    if not drawn:
        raise SweepError(f"--plot {metric}: no finished point has a number in that column; nothing to draw")
    others = [name for name in axis_names if name not in (x, hue)
              and len({cell_text(row.get(name)) for row in drawn}) > 1]
    grouping = ([hue] if hue else []) + others
    lines: dict[tuple, list[dict]] = {}
    for row in drawn:
        lines.setdefault(tuple(cell_text(row.get(name)) for name in grouping), []).append(row)
    numeric_x = all(_is_number(row.get(x)) for row in drawn)
    categories = list(dict.fromkeys(cell_text(row.get(x)) for row in drawn))
    short = short_names([*axis_names, metric])

    from matplotlib.figure import Figure  # about a second to import: only a plot pays for it

    figure = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = figure.add_subplot()
    for key, members in lines.items():
        if numeric_x:
            members = sorted(members, key=lambda row: row[x])
            xs = [row[x] for row in members]
        else:
            xs = [categories.index(cell_text(row[x])) for row in members]
        label = (key[0] if len(grouping) == 1
                 else ", ".join(f"{short[name]}={value}" for name, value in zip(grouping, key)) or None)
        ax.plot(xs, [row[metric] for row in members], marker="o", label=label)
    if numeric_x:
        values = [row[x] for row in drawn]
        if min(values) > 0 and max(values) / min(values) >= LOG_SPAN:
            ax.set_xscale("log", base=2)
        ticks = sorted(set(values))
        if len(ticks) <= MAX_TICKS:  # the swept values themselves, not 2^5 ... 2^8
            ax.set_xticks(ticks, [cell_text(t) for t in ticks])
            ax.minorticks_off()
    else:
        ax.set_xticks(range(len(categories)), categories)
    ax.set_xlabel(x)
    ax.set_ylabel(metric)
    ax.set_title(f"{short[metric]} against {short[x]}")
    ax.grid(True, alpha=0.3)
    if grouping:
        ax.legend(title=None if len(grouping) > 1 else short[grouping[0]], fontsize="small")
    replace_file(out, lambda path: figure.savefig(path, dpi=120), suffix=out.suffix)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
