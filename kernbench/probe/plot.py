"""A probe's bandwidth against size: simulated points on the closed form's line (matplotlib, no display)."""

from __future__ import annotations

from kernbench.probe.measure import ProbeResult
from kernbench.probe.sizes import format_size

def draw_probe(result: ProbeResult, path) -> None:
    """Write the plot to `path` (format from its suffix); matplotlib is imported only here."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = figure.subplots()
    rows = [row for row in result.sizes if row["bytes"]]
    sizes = [row["bytes"] for row in rows]
    ax.plot(sizes, [row["predicted_gb_per_s"] for row in rows], color="C0", linewidth=1, label="closed form")
    ax.plot(sizes, [row["gb_per_s"] for row in rows], "o", color="C0", markersize=4, label="simulated")
    for index, k in enumerate(dict.fromkeys(row["transfers"] for row in result.contention), 1):
        line = [row for row in result.contention if row["transfers"] == k and row["bytes"]]
        ax.plot([row["bytes"] for row in line], [row["gb_per_s"] for row in line], "s--", markersize=3,
                color=f"C{index % 10}", label=f"{k} together (aggregate)")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: format_size(int(round(value))).replace(" ", "")))
    ax.set_xlabel("transfer size")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_title(f"{result.src} -> {result.dst}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    figure.savefig(path, dpi=120)
