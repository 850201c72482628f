"""What a run cost in simulated time: totals, per device, per link class, busiest resources, collectives.

`run_report` builds a plain dict (what `--json` writes); `format_report` turns
that dict, and nothing else, into text, so the two can never disagree.
"""

from __future__ import annotations

BUSIEST_SHOWN = 8
COLLECTIVES_SHOWN = 24  # the text report's rows; --json carries every collective
LINK_CLASSES = ("host", "hbm", "noc", "inter_sip")


def run_report(ctx) -> dict:
    """The report of a finished run, as plain data (ints in ps and bytes, floats for ratios)."""
    machine = ctx.machine
    total_ps = ctx.engine.now
    devices: dict[str, dict] = {}
    for record in machine.oplog:
        entry = devices.setdefault(record.device, {"first_ps": record.start, "last_ps": record.end, "ops": 0})
        entry["first_ps"] = min(entry["first_ps"], record.start)
        entry["last_ps"] = max(entry["last_ps"], record.end)
        entry["ops"] += 1
    moved = machine.bytes_by_link_kind()
    busiest = sorted(
        ({"resource": name, "kind": machine.channel_kind(name), "busy_ps": channel.busy_ps,
          "bytes": channel.bytes_moved, "utilization": channel.busy_ps / total_ps if total_ps else 0.0}
         for name, channel in machine.channels.items() if channel.busy_ps),
        key=lambda row: (-row["busy_ps"], row["resource"]))[:BUSIEST_SHOWN]
    return {
        "topology": str(ctx.topology.source),
        "timing_only": ctx.timing_only,
        "total_time_ps": total_ps,
        "devices": {name: {**entry, "active_ps": entry["last_ps"] - entry["first_ps"]}
                    for name, entry in sorted(devices.items())},
        "bytes_by_link_class": {kind: moved.get(kind, 0) for kind in LINK_CLASSES},
        "busiest_resources": busiest,
        "ops": len(machine.oplog),
        "collectives": [dict(record) for record in ctx.collectives],
        "hazards": [hazard.as_dict() for hazard in ctx.hazards],
    }


def format_report(report: dict) -> str:
    lines = [f"simulated time: {format_ps(report['total_time_ps'])}  ({report['ops']} ops"
             + (", timing only)" if report["timing_only"] else ")")]
    if report["devices"]:
        lines.append("per device:")
        for name, entry in report["devices"].items():
            lines.append(f"  {name:<8} busy from {format_ps(entry['first_ps'])} to {format_ps(entry['last_ps'])}"
                         f"  ({entry['ops']} ops)")
    lines.append("bytes moved per link class:")
    for kind, nbytes in report["bytes_by_link_class"].items():
        lines.append(f"  {kind:<10} {nbytes:>14,d} B")
    if report["busiest_resources"]:
        lines.append("busiest resources:")
        for row in report["busiest_resources"]:
            lines.append(f"  {row['resource']:<28} busy {format_ps(row['busy_ps']):>12}  "
                         f"{100 * row['utilization']:5.1f}%  {row['bytes']:>12,d} B")
    if report["collectives"]:
        lines.append("collectives (size per rank; busbw uses nccl-tests' factors):")
        shown = report["collectives"][:COLLECTIVES_SHOWN]
        width = max(len("label"), *(len(row["label"]) for row in shown))
        lines.append(f"  {'label':<{width}} {'algorithm':<17} {'ranks':>5} {'size':>14} {'type':>5} {'op':>7} "
                     f"{'time':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}")
        for row in shown:
            lines.append(f"  {row['label']:<{width}} {row['algorithm']:<17} {row['world_size']:>5} {row['bytes']:>12,d} B "
                         f"{row['dtype']:>5} {row['op'] or '-':>7} {format_ps(row['time_ps']):>12} "
                         f"{row['algbw_gb_per_s']:>11.3f} {row['busbw_gb_per_s']:>11.3f}")
        hidden = len(report["collectives"]) - COLLECTIVES_SHOWN
        if hidden > 0:
            lines.append(f"  ... and {hidden} more (every one is in the --json report)")
    lines += [f"hazard: {hazard['message']}" for hazard in report.get("hazards", ())]
    return "\n".join(lines)


def format_ps(ps: int) -> str:
    """A simulated duration in picoseconds, in the largest unit it reaches (3 decimals)."""
    for unit, scale in (("s", 10**12), ("ms", 10**9), ("us", 10**6), ("ns", 10**3)):
        if ps >= scale:
            return f"{ps / scale:.3f} {unit}"
    return f"{ps} ps"
