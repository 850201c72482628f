"""The machine as the page draws it: every SIP, cube, memory, PE and directed link, placed, with its tooltip.

The layout is computed here, not in the browser, so it is the same on every
page and testable without one. SIPs stand in a row under the host, each its
cube mesh; a cube is drawn as its HBM stack, with its SRAM a box inside it,
and a SIP's L2, where it has one, is a box in the SIP's title row; PEs sit
at their cube's corners, `pe_per_corner` along each corner; each direction
of a link is its own line (the two directions side by side). Each carries
the name the run report gives its resource (`sipS.cubeC.hbm`,
`sipS.cubeC.sram`, `sipS.l2`, a link's name, a PE's), so utilization is
painted by name. Inter-SIP links arc under the row (ring, full mesh) or run
to a switch below it. A machine of more than `MAX_SIPS_DRAWN` SIPs is drawn
in part: the first SIPs and the links among them, and the model says so.
"""

from __future__ import annotations

from kernbench.topology.summary import format_bandwidth, format_bytes, format_flops, format_time

MAX_SIPS_DRAWN = 64
CUBE = 120          # a cube's side, in drawing units
NOC_GAP = 56        # between cubes: room for the two NoC lines
SIP_PAD = 24        # SIP box padding around its mesh
SIP_GAP = 90        # between SIP boxes
HOST_H = 40
HOST_GAP = 70       # from the host box to the SIP row
PE_R = 6
SRAM_W = 60         # the SRAM box, centred in its cube under the cube's name
L2_W = 80           # the L2 box, in its SIP's title row
MEMORY_H = 18
LANE = 5            # half the distance between a link's two directions


def machine_model(topology) -> dict:
    """The drawing of `topology`: `sips`, `cubes`, `pes`, `links` and the host and switch boxes, with tooltips."""
    mesh = topology.sip.cube_mesh
    shown = min(topology.n_sips, MAX_SIPS_DRAWN)
    sip_w = 2 * SIP_PAD + mesh.w * CUBE + (mesh.w - 1) * NOC_GAP
    sip_h = 2 * SIP_PAD + 24 + mesh.h * CUBE + (mesh.h - 1) * NOC_GAP
    top = HOST_H + HOST_GAP
    model = {"topology": str(topology.source), "n_sips": topology.n_sips, "sips_drawn": shown,
             "inter_sip_shape": topology.system.inter_sip.shape,
             "width": shown * sip_w + (shown - 1) * SIP_GAP, "sips": [], "cubes": [], "memories": [], "pes": [],
             "links": []}
    model["host"] = {"x": 0, "y": 0, "w": model["width"], "h": HOST_H, "tip": _host_tip(topology)}
    cube_tip = _cube_tip(topology)
    sram_tip = _memory_tip("SRAM", topology.cube.sram)
    for sip in range(shown):
        x0 = sip * (sip_w + SIP_GAP)
        model["sips"].append({"name": f"sip{sip}", "x": x0, "y": top, "w": sip_w, "h": sip_h,
                              "tip": f"sip{sip} (ahbm:{sip}): {topology.cubes_per_sip} cubes, "
                                     f"{topology.pes_per_sip} PEs, {format_bytes(topology.hbm_bytes_per_sip)} HBM"})
        if topology.sip.l2 is not None:
            model["memories"].append({"name": f"sip{sip}.l2", "kind": "l2", "label": "L2",
                                      "x": x0 + sip_w - SIP_PAD - L2_W, "y": top + (SIP_PAD + 24 - MEMORY_H) / 2,
                                      "w": L2_W, "h": MEMORY_H,
                                      "tip": f"sip{sip}.l2{_memory_tip('L2', topology.sip.l2)}"})
        centres = {}
        for cube in range(topology.cubes_per_sip):
            cx, cy = topology.cube_xy(cube)
            x = x0 + SIP_PAD + cx * (CUBE + NOC_GAP)
            y = top + SIP_PAD + 24 + cy * (CUBE + NOC_GAP)
            centres[cube] = (x + CUBE / 2, y + CUBE / 2)
            model["cubes"].append({"name": f"sip{sip}.cube{cube}", "resource": f"sip{sip}.cube{cube}.hbm",
                                   "x": x, "y": y, "w": CUBE, "h": CUBE,
                                   "tip": f"sip{sip}.cube{cube}" + (" (I/O cube)" if cube == 0 else "") + cube_tip})
            model["memories"].append({"name": f"sip{sip}.cube{cube}.sram", "kind": "sram", "label": "SRAM",
                                      "x": x + (CUBE - SRAM_W) / 2, "y": y + CUBE / 2 + 12, "w": SRAM_W, "h": MEMORY_H,
                                      "tip": f"sip{sip}.cube{cube}.sram{sram_tip}"})
            model["pes"] += _pes(topology, sip, cube, x, y)
        for link in topology.noc_links(sip):
            a, b = (int(end.rsplit(".c", 1)[1]) for end in (link.src, link.dst))
            model["links"].append(_line(link, *_offset(centres[a], centres[b], CUBE / 2)))
        io = centres[0]
        host_links = ((topology.host_to_sip_link(sip), -LANE), (topology.sip_to_host_link(sip), LANE))
        for link, dx in host_links:
            up = link.src != "host"
            ends = ((io[0] + dx, top), (io[0] + dx, HOST_H))
            model["links"].append(_line(link, *(ends if up else ends[::-1])))
    model["links"] += _inter_sip(topology, shown, sip_w, top + sip_h, model)
    lowest = [top + sip_h] + [box["y"] + box["h"] for box in model.get("switch", [])]
    lowest += [(path[0][1] + 2 * path[1][1] + path[2][1]) / 4 for path in (link["path"] for link in model["links"])
               if len(path) == 3]  # an arc's lowest point (a quadratic Bézier's middle)
    model["height"] = max(lowest) + 30
    return model


def _pes(topology, sip: int, cube: int, x: float, y: float) -> list[dict]:
    layout = topology.cube.pe_layout
    pes = []
    for index in range(topology.pes_per_cube):
        corner = layout.corners[index // layout.pe_per_corner]
        k = index % layout.pe_per_corner
        right, bottom = corner.endswith("e"), corner.startswith("s")
        px = x + (CUBE - 12 - k * 2.4 * PE_R if right else 12 + k * 2.4 * PE_R)
        py = y + (CUBE - 12 if bottom else 12)
        name = f"sip{sip}.cube{cube}.pe{index}"
        pes.append({"name": name, "x": px, "y": py, "r": PE_R, "corner": corner,
                    "tip": f"{name} (corner {corner}){_pe_tip(topology)}"})
    return pes


def _inter_sip(topology, shown: int, sip_w: float, bottom: float, model: dict) -> list[dict]:
    """The inter-SIP links among the SIPs drawn (read SIP by SIP, so a huge machine is not enumerated)."""
    links = topology.all_inter_sip_links()
    shape = topology.system.inter_sip.shape
    per_sip = len(links) // topology.n_sips if topology.n_sips else 0
    centre = {f"sip{s}": s * (sip_w + SIP_GAP) + sip_w / 2 for s in range(shown)}
    drawn = []
    if shape == "switch":
        switch_x = model["width"] / 2
        model["switch"] = [{"name": "switch", "x": switch_x - 50, "y": bottom + 110, "w": 100, "h": 34,
                            "tip": "switch: every SIP has one link up to it and one down"}]
    for link in links[:shown * per_sip]:
        if shape == "switch":
            sip_end = link.src if link.src != "switch" else link.dst
            if sip_end not in centre:
                continue
            up = link.dst == "switch"
            dx = -LANE if up else LANE
            ends = ((centre[sip_end] + dx, bottom), (model["width"] / 2 + dx, bottom + 110))
            drawn.append(_line(link, *(ends if up else ends[::-1])))
            continue
        if link.src not in centre or link.dst not in centre:
            continue
        a, b = centre[link.src], centre[link.dst]
        span = abs(b - a) / (sip_w + SIP_GAP)
        depth = 36 + 26 * span + (12 if b < a else 0)  # the two directions are arcs of different depth
        lane = -LANE if b > a else LANE
        drawn.append({**_facts(link), "path": [[a + lane, bottom], [(a + b) / 2, bottom + 2 * depth],
                                               [b + lane, bottom]]})
    return drawn


def _offset(a: tuple[float, float], b: tuple[float, float], inset: float) -> tuple:
    """A NoC line from cube a's edge to cube b's, shifted to its own side so the two directions do not overlap."""
    (ax, ay), (bx, by) = a, b
    if ay == by:
        sign = 1 if bx > ax else -1
        lane = LANE if sign > 0 else -LANE
        return (ax + sign * inset, ay + lane), (bx - sign * inset, by + lane)
    sign = 1 if by > ay else -1
    lane = -LANE if sign > 0 else LANE
    return (ax + lane, ay + sign * inset), (bx + lane, by - sign * inset)


def _line(link, start, end) -> dict:
    return {**_facts(link), "path": [list(start), list(end)]}


def _facts(link) -> dict:
    return {"name": link.name, "kind": link.kind, "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
            "latency_ps": link.latency_ps,
            "tip": f"{link.name} ({link.kind} link): {format_bandwidth(link.bandwidth_bytes_per_s)}, "
                   f"{format_time(link.latency_ps)}"}


def _host_tip(topology) -> str:
    link = topology.system.host_link
    return (f"host: one link each way to every SIP's I/O cube (cube 0), "
            f"{format_bandwidth(link.bandwidth_bytes_per_s)}, {format_time(link.latency_ps)}")


def _cube_tip(topology) -> str:
    hbm, sram = topology.cube.hbm, topology.cube.sram
    return (f": HBM {format_bytes(hbm.capacity_bytes)}, {format_bandwidth(hbm.bandwidth_bytes_per_s)}, "
            f"{format_time(hbm.latency_ps)}; SRAM {format_bytes(sram.capacity_bytes)}, "
            f"{format_bandwidth(sram.bandwidth_bytes_per_s)}; {topology.pes_per_cube} PEs")


def _memory_tip(what: str, spec) -> str:
    return (f": {what} {format_bytes(spec.capacity_bytes)}, {format_bandwidth(spec.bandwidth_bytes_per_s)}, "
            f"{format_time(spec.latency_ps)}")


def _pe_tip(topology) -> str:
    pe = topology.pe
    peaks = ", ".join(f"{dtype} {format_flops(topology.pe_peak_flops(dtype))}" for dtype in topology.dtypes)
    return (f": {pe.clock_hz / 1e9:g} GHz; matrix {peaks}; {pe.vector_unit.lanes} vector lanes; "
            f"TCM {format_bytes(pe.tcm.capacity_bytes)}, {format_bandwidth(pe.tcm.bandwidth_bytes_per_s)}; "
            f"{pe.dma.engines} DMA engines of {format_bandwidth(pe.dma.bandwidth_bytes_per_s)}")
