"""The text summary `kernbench topo` prints: the machine at a glance, in aligned tables.

Numbers are shown in human units (GiB, GB/s, ns, TFLOP/s) with four
significant digits; `--json` is there for exact values.
"""

from __future__ import annotations

from kernbench.topology.model import Topology

_BINARY = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))
_RATE = ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"), (1, ""))
_TIME = ((10**6, "us"), (10**3, "ns"), (1, "ps"))


def _scaled(value: int, scales: tuple[tuple[int, str], ...], suffix: str = "") -> str:
    for factor, name in scales:
        if value >= factor:
            return f"{value / factor:.4g} {name}{suffix}"
    return f"0 {scales[-1][1]}{suffix}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def format_bytes(count: int) -> str:
    return _scaled(count, _BINARY)


def format_bandwidth(bytes_per_s: int) -> str:
    return _scaled(bytes_per_s, _RATE, "B/s")


def format_time(ps: int) -> str:
    return _scaled(ps, _TIME)


def format_flops(flops_per_s: int) -> str:
    return _scaled(flops_per_s, _RATE, "FLOP/s")


def _table(align: str, title: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Columns aligned per `align` ('l' or 'r' each): numbers right so their units line up, words left."""
    widths = [max(len(row[i]) for row in [title, *rows]) for i in range(len(title))]
    lines = []
    for row in [title, *rows]:
        cells = [cell.ljust(w) if a == "l" else cell.rjust(w) for cell, w, a in zip(row, widths, align, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def format_summary(topology: Topology) -> str:
    t = topology
    layout = t.cube.pe_layout
    inter_sip = t.system.inter_sip
    noc = t.sip.noc
    hbm, sram, tcm = t.cube.hbm, t.cube.sram, t.pe.tcm
    lines = [f"topology {t.source}", ""]
    lines += _table(
        "lrl",
        ("machine", "count", "made of"),
        [
            (
                "system",
                plural(t.n_sips, "SIP"),
                f"{inter_sip.shape} inter-SIP links, {len(t.all_inter_sip_links())} directed",
            ),
            ("SIP", f"{t.cubes_per_sip} cubes", f"{t.sip.cube_mesh.w} x {t.sip.cube_mesh.h} mesh, XY-routed NoC"),
            ("cube", f"{t.pes_per_cube} PEs", f"{layout.pe_per_corner} at each corner of {' '.join(layout.corners)}"),
            (
                "PE",
                f"{t.pe.clock_hz / 1e9:g} GHz",
                f"{t.pe.dma.engines} DMA engines, {t.pe.vector_unit.lanes} vector lanes",
            ),
            ("total", f"{t.total_pes} PEs", f"{t.pes_per_sip} per SIP"),
        ],
    )
    lines.append("")
    lines += _table(
        "lrrr",
        ("memory", "capacity", "bandwidth", "latency"),
        [
            (
                "HBM per cube",
                format_bytes(hbm.capacity_bytes),
                format_bandwidth(hbm.bandwidth_bytes_per_s),
                format_time(hbm.latency_ps),
            ),
            (
                "HBM per SIP",
                format_bytes(t.hbm_bytes_per_sip),
                format_bandwidth(hbm.bandwidth_bytes_per_s * t.cubes_per_sip),
                "",
            ),
            (
                "HBM in system",
                format_bytes(t.hbm_bytes_per_sip * t.n_sips),
                format_bandwidth(hbm.bandwidth_bytes_per_s * t.cubes_per_sip * t.n_sips),
                "",
            ),
            *([(
                "L2 per SIP",
                format_bytes(t.sip.l2.capacity_bytes),
                format_bandwidth(t.sip.l2.bandwidth_bytes_per_s),
                format_time(t.sip.l2.latency_ps),
            )] if t.sip.l2 is not None else []),
            (
                "SRAM per cube",
                format_bytes(sram.capacity_bytes),
                format_bandwidth(sram.bandwidth_bytes_per_s),
                format_time(sram.latency_ps),
            ),
            (
                "TCM per PE",
                format_bytes(tcm.capacity_bytes),
                format_bandwidth(tcm.bandwidth_bytes_per_s),
                format_time(tcm.latency_ps),
            ),
        ],
    )
    lines.append("")
    lines += _table(
        "lrrl",
        ("link", "bandwidth", "latency", "for one"),
        [
            (
                "NoC",
                format_bandwidth(noc.link_bandwidth_bytes_per_s),
                format_time(noc.hop_latency_ps),
                "NoC hop, each direction",
            ),
            (
                "inter-SIP",
                format_bandwidth(inter_sip.payload_bytes_per_s),
                format_time(inter_sip.latency_ps),
                f"{inter_sip.shape} link, each direction"
                + ("" if inter_sip.payload_efficiency == 1 else
                   f" (payload: {float(inter_sip.payload_efficiency):.0%} of "
                   f"{format_bandwidth(inter_sip.bandwidth_bytes_per_s)} raw)"),
            ),
            (
                "host",
                format_bandwidth(t.system.host_link.bandwidth_bytes_per_s),
                format_time(t.system.host_link.latency_ps),
                "host-SIP link, each direction",
            ),
            ("DMA", format_bandwidth(t.pe.dma.bandwidth_bytes_per_s), "", "DMA engine"),
            (
                "IPCQ",
                f"{t.ipcq.depth} x {format_bytes(t.ipcq.max_slot_bytes)}",
                format_time(t.ipcq.message_overhead_ps),
                "queue: slots x largest slot; overhead per message",
            ),
            *([] if t.ipcq.engine_bandwidth_bytes_per_s is None else [
                ("IPCQ engine", format_bandwidth(t.ipcq.engine_bandwidth_bytes_per_s), "",
                 "one PE's messages, all its queues together")]),
            *((f"  {p.name}", f"{float(p.bandwidth_efficiency):.0%} of rate", format_time(p.launch_latency_ps),
               f"protocol: launch; + {format_time(p.exchange_latency_ps)} an exchange, "
               f"{format_time(p.step_latency_ps)} a step, {format_time(p.message_overhead_ps)} a message")
              for p in t.ipcq.protocols),
        ],
    )
    lines.append("")
    lines += _table(
        "lrrr",
        ("peak matrix", "per PE", "per SIP", "system"),
        [
            (
                dtype,
                format_flops(t.pe_peak_flops(dtype)),
                format_flops(t.sip_peak_flops(dtype)),
                format_flops(t.system_peak_flops(dtype)),
            )
            for dtype in t.dtypes
        ],
    )
    return "\n".join(lines)
