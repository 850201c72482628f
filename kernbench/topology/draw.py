"""`kernbench topo --draw`: a diagram of one SIP's cube mesh and of how the SIPs are linked.

Drawn with matplotlib's object API (a bare `Figure`, no pyplot), so no
global backend state is touched and no display is needed; matplotlib is a
pure wheel, unlike graphviz, which needs a system binary (adr/0002).
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

from kernbench.errors import KernbenchError
from kernbench.topology.model import Topology
from kernbench.topology.summary import format_bandwidth, format_bytes, format_time, plural

DRAWING_SUFFIXES = (".png", ".svg")

# Colour-blind-safe (Okabe-Ito) colours, one per corner.
_CORNER_COLOURS = {"nw": "#0072B2", "ne": "#D55E00", "sw": "#009E73", "se": "#CC79A7"}
_CUBE = 1.0
_GAP = 0.55


def draw_topology(topology: Topology, out: str | Path) -> Path:
    """Write the diagram to `out` (.png or .svg, chosen by suffix) and return its path."""
    out = Path(out)
    if out.suffix.lower() not in DRAWING_SUFFIXES:
        raise KernbenchError(
            f"{out}: cannot draw to a {out.suffix or 'suffix-less'} file; expected a name ending in .png or .svg"
        )
    mesh = topology.sip.cube_mesh
    figure = Figure(figsize=(2.2 * mesh.w + 2.0 * max(1.9, 0.6 * mesh.w), 1.9 + 2.2 * mesh.h), layout="constrained")
    mesh_axes, sips_axes = figure.subplots(1, 2, width_ratios=[1.15 * mesh.w, max(1.9, 0.6 * mesh.w)])
    _draw_mesh(mesh_axes, topology)
    _draw_sip_links(sips_axes, topology)
    figure.suptitle(
        f"{topology.source.name}: {plural(topology.n_sips, 'SIP')} x {topology.cubes_per_sip} cubes x "
        f"{topology.pes_per_cube} PEs = {topology.total_pes} PEs",
        fontsize=13,
    )
    try:
        figure.savefig(out, dpi=150)
    except OSError as error:
        raise KernbenchError(f"{out}: cannot write the drawing: {error.strerror or error}") from None
    return out


def _cube_origin(topology: Topology, cube: int) -> tuple[float, float]:
    """Lower-left corner of a cube's square; row 0 at the top, so 'nw' is up and to the left."""
    x, y = topology.cube_xy(cube)
    return x * (_CUBE + _GAP), (topology.sip.cube_mesh.h - 1 - y) * (_CUBE + _GAP)


def _pe_position(left: float, bottom: float, corner: str, k: int, per_corner: int) -> tuple[float, float]:
    """PEs of a corner sit just inside it, spread along the cube's top or bottom edge towards the middle."""
    spacing = min(0.13, 0.36 / per_corner)
    inset = 0.12
    x = left + inset + k * spacing if corner.endswith("w") else left + _CUBE - inset - k * spacing
    y = bottom + _CUBE - inset if corner.startswith("n") else bottom + inset
    return x, y


def _draw_mesh(axes, topology: Topology) -> None:
    layout = topology.cube.pe_layout
    noc = topology.sip.noc
    mesh = topology.sip.cube_mesh
    for cube in range(topology.cubes_per_sip):
        x, y = topology.cube_xy(cube)
        left, bottom = _cube_origin(topology, cube)
        # One double-headed arrow per neighbour pair: the NoC has a link each way.
        if x + 1 < mesh.w:
            start, end = (left + _CUBE, bottom + _CUBE / 2), (left + _CUBE + _GAP, bottom + _CUBE / 2)
            axes.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "<|-|>", "color": "#555555", "lw": 1.6})
        if y + 1 < mesh.h:
            start, end = (left + _CUBE / 2, bottom), (left + _CUBE / 2, bottom - _GAP)
            axes.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "<|-|>", "color": "#555555", "lw": 1.6})
    for cube in range(topology.cubes_per_sip):
        left, bottom = _cube_origin(topology, cube)
        axes.add_patch(
            FancyBboxPatch(
                (left, bottom),
                _CUBE,
                _CUBE,
                boxstyle="round,pad=0,rounding_size=0.06",
                facecolor="#F2F2F2",
                edgecolor="#333333",
                lw=1.2,
            )
        )
        axes.text(
            left + _CUBE / 2,
            bottom + _CUBE / 2 + 0.07,
            f"cube {cube}",
            ha="center",
            va="center",
            fontsize=10,
            weight="bold",
        )
        axes.text(
            left + _CUBE / 2,
            bottom + _CUBE / 2 - 0.09,
            f"HBM {format_bytes(topology.cube.hbm.capacity_bytes)}",
            ha="center",
            va="center",
            fontsize=7.5,
            color="#444444",
        )
        for pe in range(layout.pes_per_cube):
            corner = layout.corner_of(pe)
            x, y = _pe_position(left, bottom, corner, pe % layout.pe_per_corner, layout.pe_per_corner)
            axes.add_patch(
                Circle((x, y), 0.045, facecolor=_CORNER_COLOURS[corner], edgecolor="white", lw=0.6, zorder=3)
            )
            label_y = y - 0.1 if corner.startswith("n") else y + 0.1
            axes.text(x, label_y, str(pe), ha="center", va="center", fontsize=6.5, zorder=3)
    for corner in layout.corners:
        axes.plot([], [], "o", color=_CORNER_COLOURS[corner], label=f"{corner} PEs")
    axes.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.01),
        ncol=len(layout.corners),
        frameon=False,
        fontsize=8,
        title="PEs by corner, numbered within their cube",
        title_fontsize=8,
    )
    axes.set_title(
        f"one SIP: {mesh.w} x {mesh.h} cube mesh, {topology.pes_per_sip} PEs\n"
        f"NoC {format_bandwidth(noc.link_bandwidth_bytes_per_s)} per link, "
        f"{format_time(noc.hop_latency_ps)} per hop (XY)",
        fontsize=10,
    )
    pitch = _CUBE + _GAP
    axes.set_xlim(-0.15, mesh.w * pitch - _GAP + 0.15)
    axes.set_ylim(-0.15, mesh.h * pitch - _GAP + 0.15)
    axes.set_aspect("equal")
    axes.axis("off")


def _draw_sip_links(axes, topology: Topology) -> None:
    count = topology.n_sips
    shape = topology.system.inter_sip.shape
    radius = 1.0
    node = min(0.13, 1.6 / max(count, 1))
    angles = [math.pi / 2 - 2 * math.pi * sip / count for sip in range(count)]
    where = {
        f"sip{sip}": (radius * math.cos(a), radius * math.sin(a)) if count > 1 else (0.0, 0.0)
        for sip, a in enumerate(angles)
    }
    where["switch"] = (0.0, 0.0)
    drawn = set()
    for link in topology.all_inter_sip_links():
        pair = frozenset((link.src, link.dst))
        if pair in drawn:
            continue
        drawn.add(pair)
        (x0, y0), (x1, y1) = where[link.src], where[link.dst]
        axes.plot(
            [x0, x1],
            [y0, y1],
            color="#555555",
            lw=1.4 if count <= 8 else 0.6,
            alpha=0.8 if count <= 8 else 0.5,
            zorder=1,
        )
    if shape == "switch" and count > 1:
        axes.add_patch(Rectangle((-0.17, -0.1), 0.34, 0.2, facecolor="#FFE9A8", edgecolor="#333333", zorder=2))
        axes.text(0, 0, "switch", ha="center", va="center", fontsize=8, zorder=3)
    for sip in range(count):
        x, y = where[f"sip{sip}"]
        axes.add_patch(
            Circle((x, y), node, facecolor="#0072B2" if sip == 0 else "#9EC9E2", edgecolor="#333333", zorder=2)
        )
        axes.text(
            x,
            y,
            str(sip),
            ha="center",
            va="center",
            fontsize=max(5.5, min(10, 80 * node)),
            color="white" if sip == 0 else "black",
            zorder=3,
        )
    link = topology.system.inter_sip
    links = len(topology.all_inter_sip_links())
    if links:
        title = (
            f"{plural(count, 'SIP')}, {shape.replace('_', ' ')}, {links} directed links\n"
            f"{format_bandwidth(link.bandwidth_bytes_per_s)}, {format_time(link.latency_ps)} per link\n"
            "(dark: the SIP drawn left)"
        )
    else:
        title = "1 SIP: no inter-SIP links"
    axes.set_title(title, fontsize=10)
    reach = radius + node + 0.05
    axes.set_xlim(-reach, reach)
    axes.set_ylim(-reach, reach)
    axes.set_aspect("equal")
    axes.axis("off")
