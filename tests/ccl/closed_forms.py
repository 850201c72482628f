"""Closed forms of collective times on an idle machine, read off the topology (never off a run).

Members sit on PE 0 of the I/O cube (cube 0) of their SIP, so a message
crosses no NoC hop: its route is the sender's TCM, the inter-SIP link(s),
and the receiver's IPCQ buffer. Every DMA of a PE goes through one of its
DMA engines (no latency, `pe.dma` bandwidth) besides the memories it joins.
A path of hops costs Σ latency + ceil(bytes·10¹²/bandwidth) of its slowest hop.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.ccl.algorithms.wiring import tree_children

PS_PER_S = 10**12


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Hop:
    bandwidth: int
    latency: int


def path_ps(nbytes: int, hops: list[Hop]) -> int:
    return sum(h.latency for h in hops) + max(ceil_div(nbytes * PS_PER_S, h.bandwidth) for h in hops)


class Costs:
    """Per-op times of one member with buffer kind `buffer_kind`, messages crossing `links` inter-SIP links."""

    def __init__(self, topology, buffer_kind: str, links: int = 1):
        pe, cube, link = topology.pe, topology.cube, topology.system.inter_sip
        self.topology = topology
        self.tcm = Hop(pe.tcm.bandwidth_bytes_per_s, pe.tcm.latency_ps)
        self.hbm = Hop(cube.hbm.bandwidth_bytes_per_s, cube.hbm.latency_ps)
        self.sram = Hop(cube.sram.bandwidth_bytes_per_s, cube.sram.latency_ps)
        self.dma = Hop(pe.dma.bandwidth_bytes_per_s, 0)
        self.link = Hop(link.payload_bytes_per_s, link.latency_ps)  # the share of the raw rate carrying payload
        engine = topology.ipcq.engine_bandwidth_bytes_per_s  # a PE's IPCQ engine, where the topology rates it
        self.engine = [] if engine is None else [Hop(engine, 0)]
        self.launch = topology.ipcq.launch_latency_ps  # paid once per collective call
        self.links = links
        self.buffer = {"tcm": self.tcm, "hbm": self.hbm, "sram": self.sram}[buffer_kind]
        # Copying a slot out: a TCM slot is read and written through the one TCM port.
        self.copy_hops = [self.tcm] if buffer_kind == "tcm" else [self.buffer, self.tcm]
        self.overhead = topology.ipcq.message_overhead_ps

    def load(self, nbytes: int) -> int:
        """HBM → TCM (and TCM → HBM, the same hops): DMA engine, HBM stack, TCM port."""
        return path_ps(nbytes, [self.dma, self.hbm, self.tcm])

    store = load

    def message(self, nbytes: int) -> int:
        """Send start → visible at the receiver: TCM, link(s), buffer, then the message overhead."""
        return path_ps(nbytes, [*self.engine, self.tcm, *[self.link] * self.links, self.buffer]) + self.overhead

    def copy(self, nbytes: int) -> int:
        """Slot → receiver's TCM."""
        return path_ps(nbytes, self.copy_hops)

    def tcm_read(self, nbytes: int) -> int:
        """How long one send holds the sender's TCM port (the next send from it starts after)."""
        return ceil_div(nbytes * PS_PER_S, self.tcm.bandwidth)

    def reduce(self, elements: int) -> int:
        pe = self.topology.pe
        return ceil_div(ceil_div(elements, pe.vector_unit.lanes) * PS_PER_S, pe.clock_hz)

    def link_occupancy(self, nbytes: int) -> int:
        return ceil_div(nbytes * PS_PER_S, self.link.bandwidth)


# ---- schedules, one piece of `nbytes` (`count` elements) per message ------------------------------------------

def chain_broadcast(costs: Costs, p: int, nbytes: int) -> int:
    """The ring's broadcast along root → … → root−1, in place: the root loads and sends; each rank copies its
    piece out and forwards it (the send leaves before the posted store); the last one stores."""
    return costs.load(nbytes) + (p - 1) * (costs.message(nbytes) + costs.copy(nbytes)) + costs.store(nbytes)


def chain_reduce(costs: Costs, p: int, nbytes: int, count: int) -> int:
    """The ring's reduce along root+1 → … → root: each rank's own piece is loaded (from the start) before the
    partial arrives, so a hop is a message, its copy-out and one reduce; the root stores the result."""
    hop = costs.message(nbytes) + costs.copy(nbytes) + costs.reduce(count)
    return costs.load(nbytes) + (p - 1) * hop + costs.store(nbytes)


def tree_ready(costs: Costs, p: int, nbytes: int, count: int, place: int = 0) -> int:
    """When the tree member at heap position `place` has its subtree's partial: it loads its own piece, then for
    each child in order waits for the child's partial (ready + message), copies it out and adds it."""
    t = costs.load(nbytes)
    for child in tree_children(place, p):
        t = max(t, tree_ready(costs, p, nbytes, count, child) + costs.message(nbytes)) + costs.copy(nbytes) \
            + costs.reduce(count)
    return t


def tree_down(costs: Costs, p: int, nbytes: int, t: int, place: int = 0, *, stores: bool = True) -> int:
    """When the subtree at `place` holds a piece its member has at time `t`: the member sends to its children
    one after another (each send holds its TCM port for `tcm_read`), each child copies and forwards the same
    way, and a member stores after its sends (`stores` False: the subtree's root keeps it in place)."""
    children = tree_children(place, p)
    ends = [tree_down(costs, p, nbytes, t + k * costs.tcm_read(nbytes) + costs.message(nbytes) + costs.copy(nbytes),
                      child) for k, child in enumerate(children)]
    own = [t + len(children) * costs.tcm_read(nbytes) + costs.store(nbytes)] if stores else []
    return max(ends + own)


def ring_reduce_scatter(costs: Costs, p: int, nbytes: int, count: int) -> int:
    """The ring all-reduce's first half: p−1 steps of a message, its copy-out and a reduce, then the store."""
    return costs.load(nbytes) + (p - 1) * (costs.message(nbytes) + costs.copy(nbytes) + costs.reduce(count)) \
        + costs.store(nbytes)


def ring_all_gather(costs: Costs, p: int, nbytes: int) -> int:
    """The ring all-reduce's second half: p−1 steps of a message and its copy-out; the stores are posted, the
    last one ends the call."""
    return costs.load(nbytes) + (p - 1) * (costs.message(nbytes) + costs.copy(nbytes)) + costs.store(nbytes)


def halving_doubling_step(costs: Costs, nbytes: int, count: int | None = None) -> int:
    """One step trading `nbytes` with the partner in one message: load, send, copy out, (reduce,) store."""
    reduce = 0 if count is None else costs.reduce(count)
    return costs.load(nbytes) + costs.message(nbytes) + costs.copy(nbytes) + reduce + costs.store(nbytes)


def direct_all_reduce(costs: Costs, p: int, nbytes: int, count: int) -> int:
    """Every member loads its piece and sends it to the others, next rank first (a member's sends one TCM read
    apart); member r takes the p pieces in rank order — its own from the load, a peer's once it has arrived,
    copied out — adding each to the sum from the second on, then stores. The call ends with the last member."""
    loaded = costs.load(nbytes)
    ends = []
    for r in range(p):
        t = loaded
        for q in range(p):
            if q != r:
                place = (r - q - 1) % p  # r's place in q's send order
                arrival = loaded + place * costs.tcm_read(nbytes) + costs.message(nbytes)
                t = max(t, arrival) + costs.copy(nbytes)
            if q:
                t += costs.reduce(count)
        ends.append(t + costs.store(nbytes))
    return max(ends)


def second_transfer_gap(costs: Costs, nbytes: int) -> int:
    """How much later the second of two loads (or two stores) a member issues at one instant starts: it takes the
    other DMA engine, and waits for the first to clear the TCM port and the HBM stack at the offsets both routes
    reach them (equal for two loads, and for two stores): max(TCM read, HBM occupancy) of the piece."""
    return max(costs.tcm_read(nbytes), ceil_div(nbytes * PS_PER_S, costs.hbm.bandwidth))


def direct_pair(costs: Costs, kind: str, nbytes: int, count: int) -> int:
    """direct's all_gather, reduce_scatter or all_to_all between two ranks, one piece each way:

    - all_gather: each member's own piece loads and goes out; rank 1 takes rank 0's piece first, so its two
      stores are posted at one instant.
    - reduce_scatter: the piece for the peer is the member's second load (its own piece's load is issued
      first), so it leaves one gap late.
    - all_to_all: the piece for the peer leaves one gap late; rank 1 takes the peer's piece first and only then
      loads its own, which it stores.
    """
    load, store, message, copy = costs.load(nbytes), costs.store(nbytes), costs.message(nbytes), costs.copy(nbytes)
    gap = second_transfer_gap(costs, nbytes)
    return {
        "all_gather": load + message + copy + gap + store,
        "reduce_scatter": load + gap + message + copy + costs.reduce(count) + store,
        "all_to_all": load + gap + message + copy + load + store,
    }[kind]


def halving_doubling_reduce_scatter(costs: Costs, p: int, nbytes: int, count: int) -> int:
    """One slot column of halving-doubling's reduce_scatter (each rank's output `nbytes`, one piece), p = 2^k.

    Step 0 trades p/2 pieces: piece j is loaded when piece j−1's send is posted (after the load of the kept
    piece j−1, issued at the same instant: `second_transfer_gap` later), then sent; the member takes the
    partner's piece j once both its kept piece and the message are in, copies it out and adds it. A later step
    sends its p/2^(i+1) partials from TCM one TCM read apart, once the step before is taken, and takes them the
    same way. The last reduce is followed by the store of the rank's own chunk.
    """
    load, message, copy, reduce = costs.load(nbytes), costs.message(nbytes), costs.copy(nbytes), costs.reduce(count)
    gap = second_transfer_gap(costs, nbytes)
    pieces, sent, t = p // 2, load, 0
    for j in range(pieces):
        if j:
            sent += gap + load
        t = max(t, sent + message) + copy + reduce
    pieces //= 2
    while pieces:
        start = t
        for j in range(pieces):
            t = max(t, start + j * costs.tcm_read(nbytes) + message) + copy + reduce
        pieces //= 2
    return t + costs.store(nbytes)


class MemberPorts:
    """One member's channels (its DMA engines, HBM stack, TCM port, IPCQ buffer, links), each with the time it
    frees, under ADR 0003's cut-through law: a transfer starts when every hop is free as its first byte reaches
    it, holds hop i from start + (latencies before i) for its own serialization time, and ends after the
    route's latencies plus its slowest hop's time. Callers apply a schedule's transfers in the order the
    engine makes them; a posted store is made after the program's next transfer issued at the same instant."""

    def __init__(self, costs: Costs):
        self.costs, self.free = costs, {}

    def transfer(self, now: int, nbytes: int, hops: list[tuple[str, Hop]]) -> tuple[int, int]:
        """Reserve `hops` (name, hop) from `now`; (start, end)."""
        start, offset = now, 0
        for name, hop in hops:
            start = max(start, self.free.get(name, 0) - offset)
            offset += hop.latency
        offset = slowest = 0
        for name, hop in hops:
            held = ceil_div(nbytes * PS_PER_S, hop.bandwidth)
            slowest = max(slowest, held)
            self.free[name] = start + offset + held
            offset += hop.latency
        return start, start + offset + slowest

    def _engine(self) -> str:
        """The DMA engine that frees first (the lowest-numbered on a tie)."""
        engines = self.costs.topology.pe.dma.engines
        return f"dma{min(range(engines), key=lambda k: (self.free.get(f'dma{k}', 0), k))}"

    def load(self, now: int, nbytes: int) -> int:
        costs = self.costs
        return self.transfer(now, nbytes, [(self._engine(), costs.dma), ("hbm", costs.hbm), ("tcm", costs.tcm)])[1]

    def store(self, now: int, nbytes: int) -> int:
        costs = self.costs
        return self.transfer(now, nbytes, [(self._engine(), costs.dma), ("tcm", costs.tcm), ("hbm", costs.hbm)])[1]

    def send(self, now: int, nbytes: int, peer: int) -> tuple[int, int]:
        """A message's route out of this member (its TCM, the link to `peer`): (start, end of its last byte)."""
        return self.transfer(now, nbytes, [("tcm", self.costs.tcm), (f"link{peer}", self.costs.link)])

    def land(self, first_byte: int, network_end: int, nbytes: int, buffer_kind: str) -> int:
        """A message's first byte reaches this member's slot: the buffer is booked; when the message is visible."""
        booked = self.transfer(first_byte, nbytes, [(buffer_kind, self.costs.buffer)])[1]
        return max(network_end + self.costs.buffer.latency, booked) + self.costs.overhead

    def copy(self, now: int, nbytes: int, buffer_kind: str) -> int:
        """Slot → TCM (a TCM slot is read and written through the TCM port alone)."""
        costs = self.costs
        hops = [("tcm", costs.tcm)] if buffer_kind == "tcm" else [(buffer_kind, costs.buffer), ("tcm", costs.tcm)]
        return self.transfer(now, nbytes, hops)[1]


def direct_gather(costs: Costs, p: int, nbytes: int, root: int, buffer_kind: str) -> int:
    """direct's gather, one piece a rank: each sender loads and sends to the root, whose slot is booked as each
    first byte lands (in rank order); the root takes the pieces in rank order — its own from its load, a peer's
    copied out once in — posting a store after each. The root's last store ends the call."""
    sender_ports = MemberPorts(costs)
    loaded = sender_ports.load(0, nbytes)
    start, network_end = sender_ports.send(loaded, nbytes, root)
    first_byte = start + costs.tcm.latency + costs.link.latency
    me = MemberPorts(costs)
    t = me.load(0, nbytes)
    posted, ends, arrivals = [], [], None

    def reserve_posted() -> None:
        while posted:
            ends.append(me.store(posted.pop(0), nbytes))

    for q in range(p):
        if q == root:
            posted.append(t)
            continue
        if arrivals is None:  # the senders' first bytes land before any copy can start
            if t <= first_byte:
                reserve_posted()
            arrivals = {k: me.land(first_byte, network_end, nbytes, buffer_kind) for k in range(p) if k != root}
        if arrivals[q] > t:  # the root waits: what it posted is made now
            reserve_posted()
            t = arrivals[q]
        t_copied = me.copy(t, nbytes, buffer_kind)
        reserve_posted()
        posted.append(t_copied)
        t = t_copied
    reserve_posted()
    return max(ends)


def direct_scatter(costs: Costs, p: int, nbytes: int, root: int, buffer_kind: str) -> int:
    """direct's scatter, one piece a rank: the root loads its own piece (first) and the next rank's (second, so
    `second_transfer_gap` later), stores its own, and sends each peer's piece in rank order from the next
    rank on, loading the following piece as each send starts; a receiver copies its piece out and stores it."""
    me = MemberPorts(costs)
    own = me.load(0, nbytes)
    loaded = me.load(0, nbytes)
    ends = [me.store(own, nbytes)]
    for step in range(1, p):
        peer = (root + step) % p
        start, network_end = me.send(loaded, nbytes, peer)
        receiver = MemberPorts(costs)
        arrival = receiver.land(start + costs.tcm.latency + costs.link.latency, network_end, nbytes, buffer_kind)
        ends.append(receiver.store(receiver.copy(arrival, nbytes, buffer_kind), nbytes))
        if step < p - 1:
            loaded = me.load(start, nbytes)
    return max(ends)
