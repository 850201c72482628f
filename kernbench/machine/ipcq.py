"""IPCQ: bounded inter-PE message queues, modelled the way the hardware works.

An `IpcQueue` joins one sender PE to one receiver PE: a ring buffer of
`n_slots` slots of `slot_size` bytes at the receiver — in its TCM, in its
cube's HBM or in its cube's shared SRAM (`buffer_kind`, each reached over its
own channel) — with a head, a tail and credits flowing back to the sender.

**send.** A message larger than a slot is cut into slot-sized chunks, each a
hardware message of its own, sent one after another (so they pipeline over
the route). Per chunk the sender first takes a free slot; with none left it
waits for a credit — `sleep`: woken when the credit arrives; `poll`: it
re-reads the credit counter every `poll_interval_ps`, so it notices the
credit at the first poll at or after its arrival (every poll is counted).
Then the sender's IPCQ engine moves the chunk from the sender's TCM over
the route between the two PEs (the NoC within a SIP; across SIPs through
each SIP's I/O cube and the inter-SIP links) into the slot, cut-through,
once the route is free: the engine holds one message at a time. Where the
topology gives the IPCQ engine a rate (`ipcq.engine_bandwidth_gb_per_s`),
the engine is the route's first channel, shared by all of the PE's queues:
one PE cannot fill a link much faster than itself, which is why a
collective spreads over several PEs (channels, adr/0010). The slot's
channel is booked when the chunk's first byte reaches it, not when the
sender starts: under FIFO reservation (adr/0003) a booking made ahead of
time would make the receiver's own, earlier traffic on that memory queue
behind data still on the wire. On an idle route this is exactly one
cut-through transfer. The chunk's data and its metadata become visible
together, `message_overhead_ps` (the topology's doorbell and metadata cost)
after its last byte lands.

**recv.** The receiver waits for the next chunk — an engine event named for
who waits on whom, which is what a `Deadlock` report prints — copies it from
the slot into its TCM over the buffer's channel, frees the slot and returns
the credit, which reaches the sender after the latency of the route back (a
credit is a few bytes: no bandwidth is charged).

The IPCQ engines are not the PE's general DMA engines (as a NIC's DMA is not
a GPU's copy engine): queue traffic contends with loads and stores only on
the memories and links they share. Each chunk is one `ipcq_send` and one
`ipcq_recv` op-log entry sharing `args["flow_id"]`; a wait for a credit is
an `ipcq_wait` entry.

`send_steps` / `recv_steps` are the implementation, written as the steps of
an engine task (each wait yielded); `send` / `recv` run them in the calling
process (`Engine.drive`), so a greenlet process and a task block at the
same points.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from kernbench.errors import KernbenchError
from kernbench.machine.endpoints import Endpoint, hbm, sram
from kernbench.machine.machine import Machine
from kernbench.sim_engine import Channel, Route
from kernbench.topology import Topology

BUFFER_KINDS = ("tcm", "hbm", "sram")
BACKPRESSURE_MODES = ("poll", "sleep")


class IpcqError(KernbenchError):
    """IPCQ settings the topology's queues cannot hold, or a message a slot cannot carry."""


@dataclass(frozen=True)
class IpcqSettings:
    """How a collective's queues are built; `checked` validates them against the topology."""

    buffer_kind: str
    backpressure: str
    n_slots: int
    slot_size: int
    poll_interval_ps: int
    # The protocol's terms (adr/0010, "Protocols"): its message overhead in place of the topology's (None: the
    # topology's), and the share of the wire's rate its messages' payload gets (a message of b bytes occupies
    # its route as b / wire_efficiency bytes would).
    message_overhead_ps: int | None = None
    wire_efficiency: Fraction = Fraction(1)

    @classmethod
    def checked(cls, topology: Topology, *, buffer_kind, backpressure, n_slots, slot_size, poll_interval_ps,
                source: str = "ccl config", protocol=None) -> "IpcqSettings":
        """Settings after checking each value; a bad one is an `IpcqError` naming the key and the limit.
        `protocol` (a `ProtocolSpec`, or None) gives the message overhead and wire efficiency."""
        ipcq = topology.ipcq
        if buffer_kind not in BUFFER_KINDS:
            raise IpcqError(f"{source}: buffer_kind {buffer_kind!r} is not one of {', '.join(BUFFER_KINDS)}")
        if backpressure not in BACKPRESSURE_MODES:
            raise IpcqError(f"{source}: backpressure {backpressure!r} is not one of {', '.join(BACKPRESSURE_MODES)}")
        _check_count(source, "n_slots", n_slots, ipcq.depth, "the topology's ipcq.depth")
        _check_count(source, "slot_size", slot_size, ipcq.max_slot_bytes, "the topology's ipcq.max_slot_kib in bytes")
        if not _is_int(poll_interval_ps) or poll_interval_ps < 1:
            raise IpcqError(f"{source}: poll_interval_ps must be a positive integer of picoseconds, "
                            f"got {poll_interval_ps!r}")
        if protocol is None:
            return cls(buffer_kind, backpressure, int(n_slots), int(slot_size), int(poll_interval_ps))
        return cls(buffer_kind, backpressure, int(n_slots), int(slot_size), int(poll_interval_ps),
                   protocol.message_overhead_ps, protocol.bandwidth_efficiency)


class IpcQueue:
    """The queue from one sender PE to one receiver PE (both given as TCM endpoints).

    `send` is called only by the sender's process and `recv` only by the
    receiver's; `programs` are their op-log program numbers. Without `data`
    (timing-only runs) values are not copied but every op is timed the same.
    `booked_on` maps each channel of the queue's routes to the channel its
    transfers are booked on (default: itself); a symmetric collective's
    loopback queue maps the receiver's SIP onto the sender's (adr/0010,
    "Symmetric collectives").
    """

    def __init__(self, machine: Machine, sender: Endpoint, receiver: Endpoint, settings: IpcqSettings, *,
                 label: str, programs: tuple[int | None, int | None], data: bool,
                 booked_on: Callable[[Channel], Channel] | None = None):
        self.settings = settings
        self.sender = sender
        self.receiver = receiver
        self._machine = machine
        self._engine = machine.engine
        self._label = label
        self._programs = programs
        self._data = data
        self._overhead = (machine.topology.ipcq.message_overhead_ps if settings.message_overhead_ps is None
                          else settings.message_overhead_ps)
        self._efficiency = settings.wire_efficiency
        if sender == receiver:
            raise IpcqError(f"{label}: an IPCQ joins two different PEs, got {pe_name(sender)} twice")
        booked_on = booked_on or _itself
        network, buffer_channel, copy = queue_channels(machine, sender, receiver, settings.buffer_kind)
        self._network = Route([booked_on(channel) for channel in network])
        self._buffer = booked_on(buffer_channel)
        self._buffer_route = Route([self._buffer])
        self._flow_ids = machine.flow_ids
        self._to_buffer = self._network.latency_ps
        self._copy_route = Route([booked_on(channel) for channel in copy])
        self._credit_latency = sum(channel.latency_ps for channel in machine.route(receiver, sender))
        self._free_slots = settings.n_slots
        self._credits: deque[int] = deque()  # arrival times of credits on their way back
        self._chunks: deque[_Chunk] = deque()
        self._chunk_landed = None
        self._credit_returned = None
        self.polls = 0
        self._names = (pe_name(sender), pe_name(receiver))
        self._devices = (f"sip{sender.sip}", f"sip{receiver.sip}")
        self._units = (f"cube{sender.cube}.pe{sender.pe}.ipcq", f"cube{receiver.cube}.pe{receiver.pe}.ipcq")
        # Op-log args that never change, shared by every record of this queue (OpLog.append_pairs).
        self._to_pair, self._from_pair = ("to", self._names[1]), ("from", self._names[0])
        self._buffer_pair = ("buffer", settings.buffer_kind)
        # A message's args after its flow id, shared by the queue's one-chunk messages and by its receives.
        self._sent_pairs = (self._to_pair, self._buffer_pair, *_ONLY_CHUNK)
        self._received_pairs = (self._from_pair, self._buffer_pair)
        self._backpressure_pair = ("backpressure", settings.backpressure)
        # What a Deadlock report prints for each wait (built once: a wait happens per message).
        self._slot_wait = f"a free IPCQ slot to send from {self._names[0]} to {self._names[1]} ({label})"
        self._recv_wait = f"recv on {self._names[1]} from {self._names[0]} ({label})"

    def booked_channels(self) -> tuple[Channel, ...]:
        """Every channel the queue's transfers book: the network (from the IPCQ engine), the slot's memory,
        and the copy out of the slot. Credits book none."""
        return (*self._network.channels, self._buffer, *self._copy_route.channels)

    @property
    def undelivered(self) -> int:
        """Chunks sent and not received yet."""
        return len(self._chunks)

    # ---- the sender's side -------------------------------------------------------------
    def send(self, values: np.ndarray) -> None:
        """Post `values` (one message, cut into slot-sized chunks); return once the last chunk is on its way."""
        self._engine.drive(self.send_steps(values))

    def send_steps(self, values: np.ndarray):
        """`send` as the steps of an engine task (`yield from queue.send_steps(values)`): the same reservations
        and op-log records, each wait yielded — a time to sleep until, or an event to wait for."""
        slot_size = self.settings.slot_size
        if values.nbytes <= slot_size and values.itemsize <= slot_size:  # one chunk: every shipped algorithm
            yield from self._chunk_steps(values.copy() if self._data else values, values.nbytes, 0, 1)
            return
        per_slot = slot_size // values.itemsize
        if per_slot == 0:
            raise IpcqError(f"{self._label}: a {values.dtype} element ({values.itemsize} bytes) does not fit in an "
                            f"IPCQ slot of slot_size = {slot_size} bytes")
        firsts = range(0, values.size, per_slot)
        for number, first in enumerate(firsts):
            part = values[first:first + per_slot]
            yield from self._chunk_steps(part.copy() if self._data else part, part.nbytes, number, len(firsts))

    def _chunk_steps(self, values: np.ndarray, nbytes: int, number: int, count: int):
        """One hardware message: take a slot, wait until the route is free, start it; it lands by `_land`."""
        engine = self._engine
        credits = self._credits
        if credits and credits[0] <= engine._now:
            self._absorb_credits()
        if self._free_slots == 0:
            yield from self._credit_steps()
        self._free_slots -= 1
        network = self._network
        wire = nbytes if self._efficiency == 1 else -(-nbytes * self._efficiency.denominator
                                                        // self._efficiency.numerator)
        ready = network.ready(engine._now, wire)  # every hop free for the chunk when its first byte reaches it
        if ready > engine._now:
            yield ready
        start, network_end = network.transfer(engine, wire)
        chunk = _Chunk(values, nbytes, number, count, start, network_end)
        self._chunks.append(chunk)
        engine.call_at(start + self._to_buffer, self._land, chunk)

    def _land(self, chunk: "_Chunk") -> None:
        """The chunk's first byte reaches the slot: book the slot's channel, fix the arrival, wake the receiver."""
        _, buffer_end = self._buffer_route.transfer(self._engine, chunk.nbytes)
        network_end = chunk.network_end + self._buffer.latency_ps
        chunk.arrival = (network_end if network_end > buffer_end else buffer_end) + self._overhead
        chunk.flow_id = flow_id = next(self._flow_ids)
        count = chunk.count
        self._machine.oplog.append_pairs(
            "ipcq_send", self._devices[0], self._units[0], self._label, self._programs[0], chunk.nbytes, 0,
            chunk.start, chunk.arrival,
            self._sent_pairs if count == 1
            else (self._to_pair, self._buffer_pair, ("chunk", chunk.number), ("chunks", count)), flow_id)
        if self._chunk_landed is not None:
            landed, self._chunk_landed = self._chunk_landed, None
            landed.succeed()

    def _credit_steps(self):
        """No free slot: wait for the first credit on its way back (`sleep`) or poll for it (`poll`)."""
        engine = self._engine
        began = engine._now
        if not self._credits:
            self._credit_returned = engine.event(self._slot_wait)
            yield self._credit_returned
        arrival = self._credits[0]
        if self.settings.backpressure == "poll":
            interval = self.settings.poll_interval_ps
            polls = max(1, -(-(arrival - began) // interval))
            self.polls += polls
            args = (self._backpressure_pair, ("polls", polls))
            yield began + polls * interval
        else:
            args = (self._backpressure_pair,)
            yield arrival
        self._machine.oplog.append_pairs("ipcq_wait", self._devices[0], self._units[0], self._label,
                                         self._programs[0], 0, 0, began, engine._now, args)
        self._absorb_credits()

    def _absorb_credits(self) -> None:
        now = self._engine._now
        credits = self._credits
        while credits and credits[0] <= now:
            credits.popleft()
            self._free_slots += 1

    # ---- the receiver's side -----------------------------------------------------------
    def recv(self) -> np.ndarray:
        """Wait for the next message, copy each chunk out of its slot into TCM, return the values."""
        return self._engine.drive(self.recv_steps())

    def recv_steps(self):
        """`recv` as the steps of an engine task (`values = yield from queue.recv_steps()`)."""
        engine = self._engine
        chunks = self._chunks
        parts = None
        while True:
            while not chunks or chunks[0].arrival is None:
                self._chunk_landed = engine.event(self._recv_wait)
                yield self._chunk_landed
            chunk = chunks.popleft()
            if chunk.arrival > engine._now:
                yield chunk.arrival
            start, end = self._copy_route.transfer(engine, chunk.nbytes)
            yield end
            self._machine.oplog.append_pairs(
                "ipcq_recv", self._devices[1], self._units[1], self._label, self._programs[1], chunk.nbytes, 0,
                start, end, self._received_pairs, chunk.flow_id)
            self._credits.append(end + self._credit_latency)
            if self._credit_returned is not None:
                returned, self._credit_returned = self._credit_returned, None
                returned.succeed()
            if chunk.count == 1:
                return chunk.values
            if parts is None:
                parts = []
            parts.append(chunk.values)
            if chunk.number == chunk.count - 1:
                return np.concatenate(parts)


def queue_channels(machine: Machine, sender: Endpoint, receiver: Endpoint,
                   buffer_kind: str) -> tuple[list[Channel], Channel, list[Channel]]:
    """The channels a queue from `sender` to `receiver` books: its network (from the sender's IPCQ engine, where
    the topology gives it a rate, to the slot's memory), the slot's memory, and the copy out of the slot into the
    receiver's TCM (through an L2 for a slot in HBM)."""
    buffer = slot_memory(buffer_kind, receiver)
    *network, buffer_channel = machine.route(sender, buffer)
    engine_channel = machine.ipcq_engine(sender.sip, sender.cube, sender.pe)
    if engine_channel is not None:
        network = [engine_channel, *network]
    return network, buffer_channel, machine.dma_path(buffer, receiver).route


def slot_memory(buffer_kind: str, receiver: Endpoint) -> Endpoint:
    """Where a queue's slots live for `buffer_kind`: the receiver's TCM, or its cube's HBM or SRAM."""
    if buffer_kind == "tcm":
        return receiver
    return (hbm if buffer_kind == "hbm" else sram)(receiver.sip, receiver.cube)


class _Chunk:
    """One slot's worth of a message, on the wire from `start` to `network_end` (its last byte leaving the
    network for the slot's channel); `arrival` and `flow_id` are set when it lands."""

    __slots__ = ("values", "nbytes", "number", "count", "start", "network_end", "arrival", "flow_id")

    def __init__(self, values: np.ndarray, nbytes: int, number: int, count: int, start: int, network_end: int):
        self.values = values
        self.nbytes = nbytes
        self.number = number
        self.count = count
        self.start = start
        self.network_end = network_end
        self.arrival: int | None = None
        self.flow_id: int | None = None


_ONLY_CHUNK = (("chunk", 0), ("chunks", 1))


def pe_name(endpoint: Endpoint) -> str:
    """`sipS.cubeC.peP` for a PE's TCM endpoint."""
    return f"sip{endpoint.sip}.cube{endpoint.cube}.pe{endpoint.pe}"


def next_flow_id(machine: Machine) -> int:
    """The flow id the machine's next message will get."""
    return machine.flow_ids.next_id


def skip_flow_ids(machine: Machine, first_free: int) -> None:
    """Give the machine's next message flow id `first_free`: the ids before it were given to copies of logged
    records (a symmetric collective's replicas), not to messages sent here."""
    machine.flow_ids.next_id = first_free


def _itself(channel: Channel) -> Channel:
    return channel


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_count(source: str, key: str, value, limit: int, what: str) -> None:
    if not _is_int(value) or not 1 <= value <= limit:
        raise IpcqError(f"{source}: {key} must be an integer from 1 to {limit} ({what}), got {value!r}")
