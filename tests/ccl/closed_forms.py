"""Closed forms of collective times on an idle machine, read off the topology (never off a run).

Members sit on PE 0 of the I/O cube (cube 0) of their SIP, so a message
crosses no NoC hop: its route is the sender's TCM, the inter-SIP link(s),
and the receiver's IPCQ buffer. Every DMA of a PE goes through one of its
DMA engines (no latency, `pe.dma` bandwidth) besides the memories it joins.
A path of hops costs Σ latency + ceil(bytes·10¹²/bandwidth) of its slowest hop.
"""

from __future__ import annotations

import heapq
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

    def __init__(self, topology, buffer_kind: str, links: int = 1, protocol: str | None = None):
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
        # Under a protocol (adr/0010, "Protocols"): its overhead and launch, and its messages occupying the route
        # up to the slot as bytes / efficiency would (the slot itself takes the payload).
        self.efficiency = 1
        if protocol is not None:
            spec = topology.ipcq.protocol(protocol)
            self.overhead, self.launch, self.efficiency = (spec.message_overhead_ps, spec.launch_latency_ps,
                                                           spec.bandwidth_efficiency)

    def load(self, nbytes: int) -> int:
        """HBM → TCM (and TCM → HBM, the same hops): DMA engine, HBM stack, TCM port."""
        return path_ps(nbytes, [self.dma, self.hbm, self.tcm])

    store = load

    def message(self, nbytes: int) -> int:
        """Send start → visible at the receiver: TCM, link(s), buffer, then the message overhead."""
        network = [*self.engine, self.tcm, *[self.link] * self.links]
        wire = ceil_div(nbytes * self.efficiency.denominator, self.efficiency.numerator) \
            if self.efficiency != 1 else nbytes
        latency = sum(h.latency for h in network) + self.buffer.latency
        slowest = max(max(ceil_div(wire * PS_PER_S, h.bandwidth) for h in network),
                      ceil_div(nbytes * PS_PER_S, self.buffer.bandwidth))
        return latency + slowest + self.overhead

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
    """The ring all-reduce's first half: p−1 steps of a message, its copy-out and a reduce, then the store.

    The first piece's own half is loaded as the first send leaves, so the first step waits for the longer of
    the message and that load (the load binds only where the link outpaces the DMA engine: the NoC between
    PE ranks); later steps' loads, started a step ahead, stay hidden while T_load ≤ T_x + T_copy + T_reduce.
    """
    message, load, step = costs.message(nbytes), costs.load(nbytes), costs.copy(nbytes) + costs.reduce(count)
    return load + max(message, load) + step + (p - 2) * (message + step) + costs.store(nbytes)


def ring_all_reduce(costs: Costs, p: int, nbytes: int, count: int) -> int:
    """reduce-scatter, whose store of the reduced chunk is posted, then the all-gather's p−1 steps of a
    message and its copy-out; the last store ends the call."""
    return ring_reduce_scatter(costs, p, nbytes, count) + (p - 1) * (costs.message(nbytes) + costs.copy(nbytes))


def ring_all_gather(costs: Costs, p: int, nbytes: int) -> int:
    """The ring all-reduce's second half: p−1 steps of a message and its copy-out; the stores are posted, the
    last one ends the call."""
    return costs.load(nbytes) + (p - 1) * (costs.message(nbytes) + costs.copy(nbytes)) + costs.store(nbytes)


def halving_doubling_step(costs: Costs, nbytes: int, count: int | None = None) -> int:
    """One step trading `nbytes` with the partner in one message: load, send, copy out, (reduce,) store.

    A reducing step loads the half it keeps as the send leaves: the partner's half is copied out once both
    are in (the load binds only where the link outpaces the DMA engine)."""
    load, message = costs.load(nbytes), costs.message(nbytes)
    arrival = message if count is None else max(message, load)
    reduce = 0 if count is None else costs.reduce(count)
    return load + arrival + costs.copy(nbytes) + reduce + costs.store(nbytes)


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
    frees and the idle gaps before it, under ADR 0003's cut-through law: a transfer starts when every hop is
    free for its own serialization time as its first byte reaches it — after the hop's last booking, or inside
    a gap an earlier transfer left there — holds hop i from start + (latencies before i) for that time, and
    ends after the route's latencies plus its slowest hop's time. Callers apply a schedule's transfers in the
    order the engine makes them; a posted store is made after the program's next transfer issued at the same
    instant."""

    def __init__(self, costs: Costs):
        self.costs, self.free, self.gaps = costs, {}, {}

    def _fits(self, name: str, at: int, held: int, now: int) -> int:
        """The first instant >= `at` from which `name` is idle for `held` ps (gaps ending by `now` are gone)."""
        for gap_start, gap_end in self.gaps.get(name, []):
            if gap_end > now and max(gap_start, at) + held <= gap_end:
                return max(gap_start, at)
        return max(at, self.free.get(name, 0))

    def _book(self, name: str, begin: int, held: int, now: int) -> None:
        gaps, free = self.gaps.setdefault(name, []), self.free.get(name, 0)
        if begin < free:  # inside a gap: what is left of it either side stays
            gap = next(g for g in gaps if g[0] <= begin and begin + held <= g[1])
            gaps[gaps.index(gap):gaps.index(gap) + 1] = [g for g in ((gap[0], begin), (begin + held, gap[1]))
                                                         if g[1] > g[0]]
            return
        if begin > max(free, now):
            gaps.append((max(free, now), begin))
        self.free[name] = begin + held

    @staticmethod
    def _route(nbytes: int, hops: list[tuple[str, Hop]]) -> list[tuple[str, int, int]]:
        """(name, latencies before the hop, its serialization time) per hop."""
        route, offset = [], 0
        for name, hop in hops:
            route.append((name, offset, ceil_div(nbytes * PS_PER_S, hop.bandwidth)))
            offset += hop.latency
        return route

    def ready(self, now: int, nbytes: int, hops: list[tuple[str, Hop]]) -> int:
        """When a transfer of `nbytes` over `hops` asked for at `now` would start (nothing is booked)."""
        route, start = self._route(nbytes, hops), now
        while True:  # every hop in turn may push the start later; stop when none does
            later = max(self._fits(name, start + off, held, now) - off for name, off, held in route)
            if later <= start:
                return start
            start = later

    def transfer(self, now: int, nbytes: int, hops: list[tuple[str, Hop]]) -> tuple[int, int]:
        """Reserve `hops` (name, hop) from `now`; (start, end)."""
        start = self.ready(now, nbytes, hops)
        route = self._route(nbytes, hops)
        for name, off, held in route:
            self._book(name, start + off, held, now)
        return start, start + sum(hop.latency for _, hop in hops) + max(held for _, _, held in route)

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

    def send_hops(self, peer: int) -> list[tuple[str, Hop]]:
        """A message's route out of this member: its TCM, the link to `peer`."""
        return [("tcm", self.costs.tcm), (f"link{peer}", self.costs.link)]

    def send(self, now: int, nbytes: int, peer: int) -> tuple[int, int]:
        """A message's start and the end of its last byte."""
        return self.transfer(now, nbytes, self.send_hops(peer))

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


def star_broadcast(costs: Costs, p: int, nbytes: int, buffer_kind: str) -> int:
    """direct's (one-shot) broadcast of one piece, out of place: the root loads it and sends it to each peer in
    turn from the next rank on (each send waits for the one before to clear its TCM port), then stores it;
    each receiver copies the piece out of its slot once visible and stores it."""
    root = MemberPorts(costs)
    loaded = root.load(0, nbytes)
    ends = []
    for peer in range(1, p):
        start, network_end = root.send(loaded, nbytes, peer)
        receiver = MemberPorts(costs)
        arrival = receiver.land(start + costs.tcm.latency + costs.link.latency, network_end, nbytes, buffer_kind)
        ends.append(receiver.store(receiver.copy(arrival, nbytes, buffer_kind), nbytes))
    ends.append(root.store(loaded, nbytes))
    return max(ends)


def star_reduce(costs: Costs, p: int, nbytes: int, count: int, root: int, buffer_kind: str) -> int:
    """direct's (one-shot) reduce of one piece: every other member loads its piece and sends it to the root
    (the messages land at one instant, booking the root's buffer in rank order); the root takes the p pieces
    in rank order — its own loaded when its turn comes, a peer's copied out once visible — adding each from
    the second on, then stores the sum."""
    sender = MemberPorts(costs)
    start, network_end = sender.send(sender.load(0, nbytes), nbytes, root)
    first_byte = start + costs.tcm.latency + costs.link.latency
    me = MemberPorts(costs)
    t, arrivals = 0, None
    for q in range(p):
        if q == root:
            t = me.load(t, nbytes)
        else:
            if arrivals is None:  # the landings are reserved after a root's own load at 0, before its copies
                arrivals = {k: me.land(first_byte, network_end, nbytes, buffer_kind) for k in range(p) if k != root}
            t = me.copy(max(t, arrivals[q]), nbytes, buffer_kind)
        if q:
            t += costs.reduce(count)
    return me.store(t, nbytes)


# ---- direct's all_gather, reduce_scatter and all_to_all beyond two ranks ----------------------------------------

class Underivable(AssertionError):
    """A schedule leaves a tie (or an overlap) that the sequential derivation below does not order."""


class SlotsAndPorts(MemberPorts):
    """`MemberPorts` of one member of a one-piece collective, with the messages landing in its IPCQ slots.

    A message is `expect`ed at its receiver when it leaves, and books the receiver's buffer channel when its
    first byte reaches the slot, in time order among the receiver's own reservations (`at`, called at the
    instant of each). Its programs (`drive`) reserve in time order. Two reservations of one member at one
    instant by different programs, or one at the instant a message lands, would be ordered by the engine's
    event sequence, which this derivation does not model: it raises `Underivable` instead of guessing."""

    def __init__(self, costs: Costs, buffer_kind: str, nbytes: int):
        super().__init__(costs)
        self.buffer_kind, self._nbytes = buffer_kind, nbytes
        self.last = 0  # the instant of the member's latest reservation or landing
        self.actor = None  # the program reserving now (set by `drive`)
        self._last_actor = None
        self.pending: list[tuple[int, int, int]] = []  # (first byte at the slot, network end, sender)
        self.arrivals: dict[int, int] = {}
        self._landed_at = None
        self._first_bytes: dict[int, int] = {}

    def expect(self, sender: int, start: int, network_end: int) -> None:
        """`sender`'s message to this member left at `start`; its last byte leaves the network at `network_end`."""
        first_byte = start + self.costs.tcm.latency + self.costs.link.latency
        if first_byte <= self.last:
            raise Underivable(f"a message lands at {first_byte} ps, not after the member's reservation at "
                              f"{self.last} ps")
        self.pending.append((first_byte, network_end, sender))
        self.pending.sort()

    def expected(self, sender: int) -> bool:
        return sender in self.arrivals or any(who == sender for _, _, who in self.pending)

    def _land_next(self) -> None:
        first_byte, network_end, sender = self.pending.pop(0)
        # Two landings at one instant: either order books the buffer the same, as long as neither message's
        # arrival is set by its booking (then only its network end and the buffer latency count).
        tied = first_byte == self._landed_at or (bool(self.pending) and self.pending[0][0] == first_byte)
        self._landed_at = first_byte
        self.last = max(self.last, first_byte)  # a reservation derived later must not come before it
        arrival = self.land(first_byte, network_end, self._nbytes, self.buffer_kind)
        if tied and arrival != network_end + self.costs.buffer.latency + self.costs.overhead:
            raise Underivable("two messages land at one instant and the buffer's booking sets an arrival")
        self.arrivals[sender] = arrival
        self._first_bytes[sender] = first_byte

    def at(self, now: int) -> None:
        """The member reserves at `now`: the messages whose first byte reached its slot before land first."""
        if now < self.last:
            raise Underivable(f"a reservation at {now} ps derived after one at {self.last} ps")
        if now == self._landed_at:
            raise Underivable(f"a reservation at {now} ps, the instant a message lands")
        if now == self.last and self._last_actor is not None and self._last_actor is not self.actor:
            raise Underivable(f"two programs of one member reserve at {now} ps")
        while self.pending and self.pending[0][0] <= now:
            if self.pending[0][0] == now:
                raise Underivable(f"a message lands at {now} ps, the instant of one of the member's reservations")
            self._land_next()
        self.last, self._last_actor = now, self.actor

    def first_byte(self, sender: int) -> int:
        """When `sender`'s message reaches this member's slot (it must have left)."""
        if sender in self.arrivals:
            return self._first_bytes[sender]
        return next(first for first, _, who in self.pending if who == sender)

    def arrival(self, sender: int) -> int:
        """When `sender`'s message is visible (the landings up to it made, in time order)."""
        while sender not in self.arrivals:
            self._land_next()
        return self.arrivals[sender]

    def send_ready(self, now: int, peer: int) -> int:
        """When a send to `peer` asked at `now` can start (its route's `ready`): the TCM port and the link free
        for the piece when its first byte reaches each. The send is reserved then."""
        return self.ready(now, self._nbytes, self.send_hops(peer))

    # Each reservation of the member goes through `at` first.
    def load(self, now: int, nbytes: int) -> int:
        self.at(now)
        return super().load(now, nbytes)

    def store(self, now: int, nbytes: int) -> int:
        self.at(now)
        return super().store(now, nbytes)

    def send(self, now: int, nbytes: int, peer: int) -> tuple[int, int]:
        self.at(now)
        return super().send(now, nbytes, peer)

    def copy(self, now: int, nbytes: int, buffer_kind: str | None = None) -> int:
        self.at(now)
        return super().copy(now, nbytes, self.buffer_kind)


def drive(members: list[SlotsAndPorts], programs: list[tuple[int, object]]) -> None:
    """Run `programs`, (member index, generator), in time order: a program yields the instant it next reserves
    at (it goes on then), or ("message", sender) to go on once that sender's message to its member has left.
    At one instant programs run in list order (which `SlotsAndPorts.at` checks cannot matter)."""
    heap = [(0, order, index, program) for order, (index, program) in enumerate(programs)]
    heapq.heapify(heap)
    waiting: list[tuple[int, int, object, int]] = []  # (member index, sender, program, order)
    order = len(programs)
    while heap or waiting:
        if not heap:
            raise Underivable("programs wait for messages that never leave")
        now, _, index, program = heapq.heappop(heap)
        members[index].actor = program
        try:
            wake = next(program)
        except StopIteration:
            wake = None
        order += 1
        if isinstance(wake, tuple):
            waiting.append((index, wake[1], program, order))
        elif wake is not None:
            if wake < now:
                raise Underivable(f"a program goes back from {now} to {wake} ps")
            heapq.heappush(heap, (wake, order, index, program))
        for entry in list(waiting):
            if members[entry[0]].expected(entry[1]):
                waiting.remove(entry)
                heapq.heappush(heap, (now, entry[3], entry[0], entry[2]))


def _others(rank: int, p: int) -> list[int]:
    """direct's send order: the next rank first."""
    return [(rank + step) % p for step in range(1, p)]


def _visible(me: SlotsAndPorts, sender: int, t: int, make_posted):
    """Steps of a take waiting for `sender`'s piece from `t`: its posted stores are made as it starts to wait
    (for a message not left yet, or not landed); returns max(t, when the piece is visible)."""
    if not me.expected(sender):
        make_posted()
        yield "message", sender
    if me.first_byte(sender) > t:
        make_posted()
        yield me.first_byte(sender)
    visible = me.arrival(sender)
    if visible > t:
        make_posted()
        yield visible
        return visible
    return t


def _take_in_rank_order(me: SlotsAndPorts, rank: int, p: int, nbytes: int, own, ends: list[int]):
    """direct's take of one round for all_gather and all_to_all: the p pieces in rank order, each store posted.

    A peer's piece is copied out of its slot once it is visible; `own(t)` takes the member's own piece at `t`
    (a load issued then, or one started earlier), returning when it is in TCM, whether its store is still to
    be posted, and whether the program issued a transfer or waits. A posted store is made at its instant
    after the program's next transfer issued at that instant (the copy of a piece already visible, or the own
    piece's load), else as the program starts to wait; taking an own piece already in TCM does neither."""
    posted: list[int] = []
    t = 0

    def make_posted() -> None:  # each at the instant it was posted
        while posted:
            ends.append(me.store(posted.pop(0), nbytes))

    for q in range(p):
        if q == rank:
            ready, store, moved = own(t)
            if moved:  # the own piece's load was issued, or the program waits for it
                make_posted()
            if ready > t:
                yield ready
            t = ready
            if store:
                posted.append(t)
            continue
        t = yield from _visible(me, q, t, make_posted)
        copied = me.copy(t, nbytes)
        make_posted()
        yield copied
        posted.append(copied)
        t = copied
    make_posted()


def _send_in_turn(me: SlotsAndPorts, members: list[SlotsAndPorts], rank: int, nbytes: int, peers: list[int],
                  now: int, load_next: bool, ready: int | None = None):
    """Steps of a send program at `now` sending to `peers` in turn, each send reserved when its route is
    ready (`ready`: the first one's, asked for earlier). `load_next`: the next peer's piece is loaded as each
    send is reserved and its send asked for once it is in; else the next send is asked for at once."""
    for k, peer in enumerate(peers):
        if ready is None:
            ready = me.send_ready(now, peer)
        if ready > now:
            yield ready
        start, network_end = me.send(ready, nbytes, peer)
        members[peer].expect(rank, start, network_end)
        now, ready = ready, None
        if k < len(peers) - 1:
            if load_next:
                loaded = me.load(now, nbytes)
                yield loaded
                now = loaded
            else:
                ready = me.send_ready(now, peers[k + 1])


def direct_all_gather(costs: Costs, p: int, nbytes: int, buffer_kind: str) -> int:
    """direct's all_gather, one piece a rank, each step ADR 0003's reservation law on the member's channels.

    Sends: each member loads its piece (a started load) and, once it is in, sends it to the others next rank
    first, each send starting when its route is ready (the one before has cleared the TCM port). Rank 0 takes
    its own piece first, so it posts that piece's store as the load ends: the store is made after the first
    send (its send program woke on the load before the store was started) and before the second.
    Takes: `_take_in_rank_order`, the own piece from its load. The call ends with the last store."""
    members = [SlotsAndPorts(costs, buffer_kind, nbytes) for _ in range(p)]
    loaded, ends = {}, []

    def sends(r, me):
        loaded[r] = me.load(0, nbytes)
        yield loaded[r]
        peers = _others(r, p)
        if r:
            yield from _send_in_turn(me, members, r, nbytes, peers, loaded[r], False)
            return
        start, network_end = me.send(loaded[0], nbytes, peers[0])
        members[peers[0]].expect(0, start, network_end)
        ready = me.send_ready(loaded[0], peers[1]) if p > 2 else None  # asked for before the store is made
        ends.append(me.store(loaded[0], nbytes))
        yield from _send_in_turn(me, members, 0, nbytes, peers[1:], loaded[0], False, ready)

    def takes(r, me):
        return _take_in_rank_order(me, r, p, nbytes, lambda t: (max(t, loaded[r]), r != 0, loaded[r] > t), ends)

    drive(members, [(r, sends(r, me)) for r, me in enumerate(members)]
          + [(r, takes(r, me)) for r, me in enumerate(members)])
    return max(ends)


def direct_reduce_scatter(costs: Costs, p: int, nbytes: int, count: int, buffer_kind: str) -> int:
    """direct's reduce_scatter, one piece a rank (each rank's output `nbytes`).

    Sends: the member's own chunk is loaded by a started load, issued first; the send program loads the next
    rank's chunk at the same instant (so on the other DMA engine, after the first load clears the HBM stack)
    and sends it once in, loading the following peer's chunk as each send is reserved, and so on.
    Takes: from its own chunk's load, the p chunks in rank order — a peer's copied out of its slot once
    visible — adding each from the second on (T_reduce on the vector unit); then the store of the sum."""
    members = [SlotsAndPorts(costs, buffer_kind, nbytes) for _ in range(p)]
    loaded, ends = {}, []

    def sends(r, me):
        loaded[r] = me.load(0, nbytes)
        first = me.load(0, nbytes)
        yield first
        yield from _send_in_turn(me, members, r, nbytes, _others(r, p), first, True)

    def takes(r, me):
        t = loaded[r]
        yield t
        for q in range(p):
            if q != r:
                t = yield from _visible(me, q, t, lambda: None)
                t = me.copy(t, nbytes)
                yield t
            if q:
                t += costs.reduce(count)
                yield t
        ends.append(me.store(t, nbytes))

    drive(members, [(r, sends(r, me)) for r, me in enumerate(members)]
          + [(r, takes(r, me)) for r, me in enumerate(members)])
    return max(ends)


def direct_all_to_all(costs: Costs, p: int, nbytes: int, buffer_kind: str) -> int:
    """direct's all_to_all, `nbytes` from each rank to each rank.

    Sends: the send program loads the piece for the next rank, sends it once in, loads the following peer's
    piece as each send is reserved, and so on. Rank 0 takes its own piece first: the program loads it at
    once, before the send program's first load (which so takes the other engine, `second_transfer_gap`
    later), and posts its store when it is in. Takes: `_take_in_rank_order`, the own piece loaded when its
    turn comes (rank 0's done as above)."""
    members = [SlotsAndPorts(costs, buffer_kind, nbytes) for _ in range(p)]
    ends, own_loaded = [], {}

    def sends(r, me):
        if r == 0:
            own_loaded[0] = me.load(0, nbytes)
        first = me.load(0, nbytes)
        if r == 0:
            if not own_loaded[0] < first:
                raise Underivable("rank 0's own store is not made before its first send")
            yield own_loaded[0]
            ends.append(me.store(own_loaded[0], nbytes))
        yield first
        yield from _send_in_turn(me, members, r, nbytes, _others(r, p), first, True)

    def takes(r, me):
        def own(t):
            if r == 0:
                return max(t, own_loaded[0]), False, own_loaded[0] > t
            return me.load(t, nbytes), True, True
        return _take_in_rank_order(me, r, p, nbytes, own, ends)

    drive(members, [(r, sends(r, me)) for r, me in enumerate(members)]
          + [(r, takes(r, me)) for r, me in enumerate(members)])
    return max(ends)
