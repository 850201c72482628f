"""What a run cost in simulated time: totals, per device, per link class, busiest resources, kernels, collectives.

`run_report` builds a plain dict (what `--json` writes); `format_report` turns
that dict, and nothing else, into text, so the two can never disagree.
Devices, resources and PEs are in natural order (`sip2` before `sip10`).
Beyond what the text shows, the dict carries every resource that moved
bytes and every PE that worked, with their busy time — what `kernbench web`
paints on the machine.
"""

from __future__ import annotations

from kernbench.report.kernels import kernel_rows
from kernbench.report.natural_sort import natural_key

BUSIEST_SHOWN = 8
COLLECTIVES_SHOWN = 24  # the text report's rows; --json carries every collective
KERNELS_SHOWN = 24  # likewise for kernel launches
LINK_CLASSES = ("host", "hbm", "noc", "inter_sip")
SYMMETRIC_MARK = "*"  # after a collective's algorithm: rank 0 simulated, the others its copies (ADR 0010)


def run_report(ctx) -> dict:
    """The report of a finished run, as plain data (ints in ps and bytes, floats for ratios)."""
    machine = ctx.machine
    total_ps = ctx.engine.now
    devices = {device: {"first_ps": first, "last_ps": last, "ops": ops}
               for device, (first, last, ops) in machine.oplog.device_spans().items()}
    moved = machine.bytes_by_link_kind()
    resources = sorted(
        ({"resource": name, "kind": machine.channel_kind(name), "device": channel.device, "busy_ps": channel.busy_ps,
          "bytes": channel.bytes_moved, "utilization": channel.busy_ps / total_ps if total_ps else 0.0}
         for name, channel in machine.channels.items() if channel.busy_ps),
        key=lambda row: natural_key(row["resource"]))
    busiest = sorted(resources, key=lambda row: -row["busy_ps"])[:BUSIEST_SHOWN]  # stable: ties stay in name order
    collectives = [dict(record) for record in ctx.collectives]
    return {
        "topology": str(ctx.topology.source),
        "timing_only": ctx.timing_only,
        "total_time_ps": total_ps,
        "devices": {name: {**entry, "active_ps": entry["last_ps"] - entry["first_ps"]}
                    for name, entry in sorted(devices.items(), key=lambda item: natural_key(item[0]))},
        "bytes_by_link_class": {kind: moved.get(kind, 0) for kind in LINK_CLASSES},
        "busiest_resources": busiest,
        "ops": len(machine.oplog),
        "kernels": kernel_rows(machine.oplog, ctx.topology, {row["label"] for row in collectives}),
        "collectives": collectives,
        "hazards": [hazard.as_dict() for hazard in ctx.hazards],
        "resources": resources,
        "pes": [_pe_row(pe, total_ps) for pe in machine.pes()],
    }


def _pe_row(pe, total_ps: int) -> dict:
    """A PE's busy time per unit; its utilization is its busiest unit's (DMA engines each count alone)."""
    busy = {"matrix_busy_ps": pe.matrix.busy_ps, "vector_busy_ps": pe.vector.busy_ps,
            "dma_busy_ps": max((engine.busy_ps for engine in pe.dma_engines), default=0),
            "tcm_busy_ps": pe.tcm.busy_ps}
    return {"pe": f"sip{pe.sip}.cube{pe.cube}.pe{pe.pe}", **busy,
            "utilization": max(busy.values()) / total_ps if total_ps else 0.0}


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
    lines += _capped_table(
        "kernels (achieved against the SIP's roofline: HBM of every cube, matrix peak):", report.get("kernels", ()),
        KERNELS_SHOWN, "kernel",
        lambda w: (f"  {'kernel':<{w}} {'device':<7} {'programs':>8} {'time':>12} {'bytes':>14} "
                   f"{'GB/s':>9} {'TFLOP/s':>8} {'bound':>7} {'of roofline':>11}"),
        lambda row, w: (f"  {row['kernel']:<{w}} {row['device']:<7} {row['programs']:>8,d} "
                        f"{format_ps(row['time_ps']):>12} {row['bytes']:>12,d} B {row['gb_per_s']:>9.1f} "
                        f"{row['tflop_per_s']:>8.3f} {row['bound']:>7} {100 * row['of_roofline']:>10.1f}%"))
    lines += _capped_table(
        "collectives (size per rank; busbw uses nccl-tests' factors):", report["collectives"],
        COLLECTIVES_SHOWN, "label",
        lambda w: (f"  {'label':<{w}} {'algorithm':<17} {'ranks':>5} {'size':>14} {'type':>5} {'op':>7} "
                   f"{'time':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}"),
        lambda row, w: (f"  {row['label']:<{w}} {_algorithm_ran(row):<17} {row['world_size']:>5} "
                        f"{row['bytes']:>12,d} B {row['dtype']:>5} {row['op'] or '-':>7} "
                        f"{format_ps(row['time_ps']):>12} {row['algbw_gb_per_s']:>11.3f} "
                        f"{row['busbw_gb_per_s']:>11.3f}"))
    if any(row.get("symmetric") for row in report["collectives"][:COLLECTIVES_SHOWN]):
        lines.append(f"  {SYMMETRIC_MARK} rank 0 simulated, the others logged as its rotations (ccl.yaml symmetric; "
                     "adr/0010, \"Symmetric collectives\"; in a replicated spawn, adr/0022)")
    lines += [f"hazard: {hazard['message']}" for hazard in report.get("hazards", ())]
    return "\n".join(lines)


def _capped_table(title: str, rows, limit: int, name_key: str, header, row_line) -> list[str]:
    """Title, header and the first `limit` rows (names padded to the longest shown), then how many are left out."""
    if not rows:
        return []
    shown = rows[:limit]
    width = max(len(name_key), *(len(row[name_key]) for row in shown))
    lines = [title, header(width), *(row_line(row, width) for row in shown)]
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more (every one is in the --json report)")
    return lines


def format_ps(ps: int) -> str:
    """A simulated duration in picoseconds, in the largest unit it reaches (3 decimals)."""
    for unit, scale in (("s", 10**12), ("ms", 10**9), ("us", 10**6), ("ns", 10**3)):
        if ps >= scale:
            return f"{ps / scale:.3f} {unit}"
    return f"{ps} ps"


def _algorithm_ran(row: dict) -> str:
    """The schedule that ran, with its channels where more than one, marked where the tuner chose it
    (`auto`) or where it is the configured algorithm's fallback, where one rank stood for all, and the protocol
    where the topology gives protocols (ADR 0010)."""
    configured = row.get("configured_algorithm", row["algorithm"])
    channels = row.get("channels", 1)
    ran = row["algorithm"] + (f" x{channels}" if channels > 1 else "")
    ran += SYMMETRIC_MARK if row.get("symmetric") else ""
    ran += f" {row['protocol']}" if row.get("protocol") else ""
    if configured == row["algorithm"]:
        return ran
    return f"{ran} (auto)" if configured == "auto" else f"{ran} (fallback)"
