"""A probe's result as text: the route, then one row per size in the shape of nccl-tests' tables."""

from __future__ import annotations

from pathlib import Path

from kernbench.probe.measure import ProbeResult
from kernbench.probe.sizes import format_size
from kernbench.report.run_report import format_ps


def format_probe(result: ProbeResult) -> str:
    lines = [f"probe {result.src} -> {result.dst} on {Path(result.topology).name}",
             f"route, {len(result.route)} hops:"]
    width = max(len(hop.name) for hop in result.route)
    for number, hop in enumerate(result.route, 1):
        latency = format_ps(hop.latency_ps) if hop.latency_ps else "-"
        lines.append(f"  {number:>2}  {hop.name:<{width}}  {hop.kind:<9} {_bandwidth(hop.bandwidth_bytes_per_s):>12}"
                     f"  {latency:>10}")
    slowest = min(result.route, key=lambda hop: hop.bandwidth_bytes_per_s)
    lines.append(f"closed form: time = sum of latencies ({format_ps(result.predicted_latency_ps)}) "
                 f"+ bytes / slowest hop ({slowest.name}, {_bandwidth(slowest.bandwidth_bytes_per_s)})")
    lines.append(f"latency (0 B): {format_ps(result.latency_ps)} simulated, "
                 f"{format_ps(result.predicted_latency_ps)} closed form")
    lines.append("")
    lines.append(f"{'size':>10} {'bytes':>14} {'time':>12} {'closed form':>12} {'GB/s':>9} {'closed form':>12}")
    for row in result.sizes:
        lines.append(_line(format_size(row["bytes"]), row))
    if result.contention:
        lines.append("")
        lines.append("contention: k transfers issued together (a PE's DMA engines dealt round-robin); "
                     "their makespan and aggregate bandwidth")
        lines.append(f"{'k x size':>10} {'bytes':>14} {'makespan':>12} {'closed form':>12} {'GB/s':>9} "
                     f"{'closed form':>12}")
        for row in result.contention:
            lines.append(_line(f"{row['transfers']} x {format_size(row['bytes'])}", row,
                               total=row["transfers"] * row["bytes"]))
    return "\n".join(lines)


def _line(label: str, row: dict, total: int | None = None) -> str:
    moved = row["bytes"] if total is None else total
    return (f"{label:>10} {moved:>14,d} {format_ps(row['time_ps']):>12} {format_ps(row['predicted_ps']):>12} "
            f"{row['gb_per_s']:>9.2f} {row['predicted_gb_per_s']:>12.2f}")


def _bandwidth(bytes_per_s: int) -> str:
    return f"{bytes_per_s / 1e9:g} GB/s"
