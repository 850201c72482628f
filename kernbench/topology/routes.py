"""Links and the routes through them: NoC XY routes inside a SIP, inter-SIP routes between SIPs.

A `Link` is one direction of one physical link, named stably so the engine
can keep one bandwidth channel per name and traffic that shares a link
contends for it. Routes are deterministic: the same pair of endpoints always
gives the same links in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kernbench.topology.specs import InterSipSpec, LinkSpec, MeshSpec, NocSpec

SWITCH = "switch"


@dataclass(frozen=True, slots=True)
class Link:
    """One direction of a link: `name` is `src->dst` (NoC links carry their SIP: `sip0.noc.c0->c1`)."""

    name: str
    kind: str
    src: str
    dst: str
    bandwidth_bytes_per_s: int
    latency_ps: int


def noc_link(sip: int, src_cube: int, dst_cube: int, noc: NocSpec) -> Link:
    return Link(
        name=f"sip{sip}.noc.c{src_cube}->c{dst_cube}",
        kind="noc",
        src=f"sip{sip}.c{src_cube}",
        dst=f"sip{sip}.c{dst_cube}",
        bandwidth_bytes_per_s=noc.link_bandwidth_bytes_per_s,
        latency_ps=noc.hop_latency_ps,
    )


def xy_route(sip: int, src_cube: int, dst_cube: int, mesh: MeshSpec, noc: NocSpec) -> tuple[Link, ...]:
    """Dimension-order route: along x to the destination column, then along y. Deadlock-free on a mesh."""
    x, y = src_cube % mesh.w, src_cube // mesh.w
    dst_x, dst_y = dst_cube % mesh.w, dst_cube // mesh.w
    links = []
    while x != dst_x:
        step = 1 if dst_x > x else -1
        links.append(noc_link(sip, y * mesh.w + x, y * mesh.w + x + step, noc))
        x += step
    while y != dst_y:
        step = 1 if dst_y > y else -1
        links.append(noc_link(sip, y * mesh.w + x, (y + step) * mesh.w + x, noc))
        y += step
    return tuple(links)


def mesh_links(sip: int, mesh: MeshSpec, noc: NocSpec) -> tuple[Link, ...]:
    """Every directed NoC link of one SIP: each cube to its east and south neighbour, and back."""
    links = []
    for cube in range(mesh.w * mesh.h):
        x, y = cube % mesh.w, cube // mesh.w
        for neighbour_exists, neighbour in ((x + 1 < mesh.w, cube + 1), (y + 1 < mesh.h, cube + mesh.w)):
            if neighbour_exists:
                links.append(noc_link(sip, cube, neighbour, noc))
                links.append(noc_link(sip, neighbour, cube, noc))
    return tuple(links)


def _endpoint(index: int | None) -> str:
    return SWITCH if index is None else f"sip{index}"


def inter_sip_link(src: int | None, dst: int | None, inter_sip: InterSipSpec) -> Link:
    """One direction of an inter-SIP link; `None` stands for the switch. Its bandwidth is what carries payload."""
    return Link(
        name=f"{_endpoint(src)}->{_endpoint(dst)}",
        kind="inter_sip",
        src=_endpoint(src),
        dst=_endpoint(dst),
        bandwidth_bytes_per_s=inter_sip.payload_bytes_per_s,
        latency_ps=inter_sip.latency_ps,
    )


def inter_sip_route(src: int, dst: int, sip_count: int, inter_sip: InterSipSpec) -> tuple[Link, ...]:
    """Links from SIP `src` to SIP `dst`.

    ring: the shorter way round; on a tie, the way of increasing index
    (src, src+1, ... modulo the count). full_mesh: the direct link.
    switch: up to the switch and down to `dst`.
    """
    if src == dst:
        return ()
    if inter_sip.shape == "full_mesh":
        return (inter_sip_link(src, dst, inter_sip),)
    if inter_sip.shape == "switch":
        return (inter_sip_link(src, None, inter_sip), inter_sip_link(None, dst, inter_sip))
    forward = (dst - src) % sip_count
    step = 1 if forward <= sip_count - forward else -1
    links = []
    here = src
    while here != dst:
        there = (here + step) % sip_count
        links.append(inter_sip_link(here, there, inter_sip))
        here = there
    return tuple(links)


@dataclass(frozen=True, slots=True)
class InterSipLinks(Sequence[Link]):
    """Every directed inter-SIP link, each once, built when read rather than stored.

    A full mesh of n SIPs has n(n-1) links (16.8 million at 4,096 SIPs), so a
    stored list would make a large machine cost memory and seconds before
    any traffic moves. `len` is a formula and `links[i]` builds the i-th
    link, so counting is O(1) and reading is linear in what is read. Order,
    SIP by SIP: ring, the link to the next SIP then to the previous (a ring
    of two has one link each way); full mesh, to every other SIP in index
    order; switch, up to the switch then down from it.
    """

    sip_count: int
    inter_sip: InterSipSpec

    @property
    def _per_sip(self) -> int:
        if self.inter_sip.shape == "switch":
            return 2
        if self.inter_sip.shape == "full_mesh":
            return self.sip_count - 1
        # The next and the previous SIP are the same one when there are two.
        return min(2, self.sip_count - 1)

    def __len__(self) -> int:
        return self.sip_count * self._per_sip

    def __getitem__(self, index: int | slice) -> Link | tuple[Link, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        count = len(self)
        if not -count <= index < count:
            raise IndexError(f"inter-SIP link {index} is out of range: there are {count}")
        return inter_sip_link(*self._ends(*divmod(index % count, self._per_sip)), self.inter_sip)

    def __iter__(self) -> Iterator[Link]:
        per_sip = self._per_sip
        for sip in range(self.sip_count):
            for k in range(per_sip):
                yield inter_sip_link(*self._ends(sip, k), self.inter_sip)

    def _ends(self, sip: int, k: int) -> tuple[int | None, int | None]:
        """Source and destination of SIP `sip`'s `k`-th link in the order above; None is the switch."""
        if self.inter_sip.shape == "switch":
            return (sip, None) if k == 0 else (None, sip)
        if self.inter_sip.shape == "full_mesh":
            return sip, k if k < sip else k + 1
        return sip, (sip + 1 if k == 0 else sip - 1) % self.sip_count


def host_link(sip: int, to_device: bool, link: LinkSpec) -> Link:
    """The host's PCIe-class link to (`to_device`) or from one SIP."""
    src, dst = ("host", f"sip{sip}") if to_device else (f"sip{sip}", "host")
    return Link(f"{src}->{dst}", "host", src, dst, link.bandwidth_bytes_per_s, link.latency_ps)
