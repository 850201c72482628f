"""kernbench's timing-only ring all-reduce against an idiomatic SimPy model of the same machine.

For each row (ranks x bytes per rank, f16, one rank per SIP, the shipped
ccl.yaml) the machine is default.yaml with its SIP count set to the rank
count and its SIPs behind one switch (`inter_sip: switch`, the link
bandwidth and latency unchanged). kernbench runs the all-reduce through
`Session(..., timing_only=True)` the way a bench does (spawn one worker per
rank, `all_reduce`, `synchronize`); the collective's time is its row in
`session.ctx.collectives`. SimPy then runs a model of the same collective
written from kernbench's timing rules, not from its code paths (it reads
only the machine's numbers from the loaded topology and ccl.yaml; each
rank's tensor has the factories' default placement, on PE 0 of cube 0):

- resources (kernbench/sim_engine/resources.py): a channel keeps `free_at`;
  a transfer over a route is cut-through, starts when every hop is free as
  the data reaches it, holds each hop for its own serialization time and
  ends after the route's latencies plus the slowest hop's time; the vector
  unit is reserved exclusively (the gaps a transfer held back by one hop
  leaves on another, ADR 0003, are not modelled: the equal simulated times
  asserted per row show these rings leave none that a later transfer fits);
- the PE (kernbench/machine/pe.py, placed_dma.py, machine.py): a load is a
  DMA through the least busy of the PE's DMA engines, HBM then TCM; a store
  the reverse; a reduction takes ceil(n / lanes) cycles of the vector unit;
- IPCQ (kernbench/machine/ipcq.py): the sender takes a slot (or sleeps
  until a credit comes back), waits until its route is free, sends
  cut-through over TCM and the up and down links of the switch; when the
  first byte reaches the receiver's TCM the slot is booked, and the chunk is
  visible after its last byte plus the per-message overhead; the receiver
  copies it out of the slot and returns the credit, which arrives after the
  latency of the route back;
- the algorithm (kernbench/ccl/algorithms/ring.py): slabs of p * n_slots/2
  slot-sized pieces; reduce-scatter with one load prefetched while the
  previous piece is reduced and stores posted; all-gather forwarding.

kernbench runs each row twice: as a user's run does (one rank simulated,
the others logged as its copies: adr/0010, "Symmetric collectives"), and
with `symmetric: false` (every rank simulated, the per-message engine this
comparison was first written for). Both must give SimPy's simulated
picoseconds and number of IPCQ messages (asserted per row, every
repetition; a copy's messages are in the op log as the full run's are). The wall time of each side
covers building and running the model (for kernbench, the whole
`session.run`: spawning the ranks, their tensors, the rendezvous and the
collective; the Session is built before), best of two, the two sides taking
turns. Per row: ranks, bytes per rank, IPCQ messages, the simulated time,
the wall time per message of each run, and kernbench's wall over SimPy's
(as run, and every rank). The last lines are the geometric means of those
ratios, `ring_vs_simpy_every_rank_wall_ratio` then
`ring_vs_simpy_wall_ratio` (lower is better for kernbench).

Run as `python benchmarks/ring_vs_simpy.py` from the repository root
(`--quick`: 4 x 4 MiB and 16 x 1 MiB; `--with-256`: add 256 ranks x 1 MiB,
run once, left out by default because SimPy and kernbench's every-rank run
each simulate every one of its messages).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # a multithreaded BLAS fights the simulator on a small machine

import argparse  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import deque  # noqa: E402
from pathlib import Path  # noqa: E402

import simpy  # noqa: E402
import yaml  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.ccl.algorithms.chunking import pieces, split  # noqa: E402  (the ring's own slab and chunk cuts)
from kernbench.ccl.install import (SHIPPED_CCL_PATH, load_ccl_config, resolve_algorithm_config,  # noqa: E402
                                   with_overrides)
from kernbench.session import Session  # noqa: E402
from kernbench.topology import load_topology  # noqa: E402

# The shipped ccl.yaml with its algorithm named: ring on one channel, the schedule the SimPy model is of.
# The shipped settings with the ring: as a user runs it (`symmetric`: rank 0 simulated, the others its copies,
# adr/0010 "Symmetric collectives"), and every rank simulated.
RING = {symmetric: with_overrides(load_ccl_config(SHIPPED_CCL_PATH), {"algorithm": "ring", "symmetric": symmetric},
                                  "ring_vs_simpy") for symmetric in (True, False)}

MIB = 1 << 20
ITEMSIZE = 2  # f16
PS_PER_S = 10**12
DEFAULT_ROWS = [(4, 64 * MIB), (16, 1 * MIB), (64, 1 * MIB)]
QUICK_ROWS = [(4, 4 * MIB), (16, 1 * MIB)]
LARGE_ROW = (256, 1 * MIB)  # run once: about ten seconds of each side
REPEATS = 2  # best of, each side, taking turns
BASE_TOPOLOGY = Path(__file__).resolve().parent.parent / "kernbench" / "configs" / "topology" / "default.yaml"


# ---- the machine ----------------------------------------------------------------------------------


def switch_topology(ranks: int, directory: Path) -> Path:
    """default.yaml with `ranks` SIPs behind one switch, written to `directory`."""
    document = yaml.safe_load(BASE_TOPOLOGY.read_text())
    document["system"]["sips"]["count"] = ranks
    document["system"]["inter_sip"]["shape"] = "switch"
    path = directory / f"switch_{ranks}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


# ---- kernbench --------------------------------------------------------------------------------------


def run_kernbench(topology_path: Path, ranks: int, nbytes: int, symmetric: bool) -> tuple[int, int, float, bool]:
    """(simulated ps of the all-reduce, IPCQ messages in the op log, wall seconds of session.run, whether it ran
    symmetric)."""
    elements = nbytes // ITEMSIZE

    def bench(torch):
        torch.distributed.init_process_group(backend="ahbm")
        torch.multiprocessing.spawn(worker, args=(torch,), nprocs=ranks)

    def worker(rank, torch):
        torch.ahbm.set_device(rank)
        x = torch.full((1, elements), rank + 1, dtype=torch.float16)
        torch.distributed.all_reduce(x)
        torch.ahbm.synchronize()

    session = Session(topology_path, ccl=RING[symmetric], timing_only=True)
    began = time.perf_counter()
    session.run(bench, session.torch)
    wall = time.perf_counter() - began
    (record,) = session.ctx.collectives
    messages = len(session.ctx.machine.oplog.select(kind="ipcq_send"))
    return record["time_ps"], messages, wall, record["symmetric"]


# ---- SimPy ------------------------------------------------------------------------------------------


class Channel:
    """A bandwidth resource under first-come reservation: busy until `free_at`."""

    __slots__ = ("bandwidth", "latency", "free_at")

    def __init__(self, bandwidth_bytes_per_s: int, latency_ps: int):
        self.bandwidth = bandwidth_bytes_per_s
        self.latency = latency_ps
        self.free_at = 0


def transfer(now: int, route: list[Channel], nbytes: int) -> tuple[int, int]:
    """Reserve a cut-through transfer at `now`; return (start, end of the last byte)."""
    start, offset = now, 0
    for channel in route:
        start = max(start, channel.free_at - offset)
        offset += channel.latency
    offset = slowest = 0
    for channel in route:
        occupancy = -(-nbytes * PS_PER_S // channel.bandwidth)
        slowest = max(slowest, occupancy)
        channel.free_at = start + offset + occupancy
        offset += channel.latency
    return start, start + offset + slowest


class Pe:
    """One rank's PE (cube 0, the I/O cube, so no mesh hop): DMA engines, vector unit, TCM, its HBM stack."""

    def __init__(self, env: simpy.Environment, topology):
        pe, hbm = topology.pe, topology.cube.hbm
        self.env = env
        self.dma = [Channel(pe.dma.bandwidth_bytes_per_s, 0) for _ in range(pe.dma.engines)]
        self.hbm = Channel(hbm.bandwidth_bytes_per_s, hbm.latency_ps)
        self.tcm = Channel(pe.tcm.bandwidth_bytes_per_s, pe.tcm.latency_ps)
        self.vector_free_at = 0
        self.lanes = pe.vector_unit.lanes
        self.clock_hz = pe.clock_hz

    def load(self, nbytes: int):
        """HBM -> TCM through the DMA engine that frees up first."""
        engine = min(self.dma, key=lambda channel: channel.free_at)
        _, end = transfer(self.env.now, [engine, self.hbm, self.tcm], nbytes)
        yield self.env.timeout(end - self.env.now)

    def store(self, nbytes: int):
        """TCM -> HBM, the same way."""
        engine = min(self.dma, key=lambda channel: channel.free_at)
        _, end = transfer(self.env.now, [engine, self.tcm, self.hbm], nbytes)
        yield self.env.timeout(end - self.env.now)

    def reduce(self, elements: int):
        """An elementwise op on the vector unit: ceil(n / lanes) cycles, rounded up to ps once."""
        cycles = -(-elements // self.lanes)
        duration = -(-cycles * PS_PER_S // self.clock_hz)
        start = max(self.env.now, self.vector_free_at)
        self.vector_free_at = start + duration
        yield self.env.timeout(self.vector_free_at - self.env.now)


class Queue:
    """The IPCQ from one PE to the next: slots in the receiver's TCM, credits back to the sender."""

    def __init__(self, env: simpy.Environment, sender: Pe, receiver: Pe, up: Channel, down: Channel,
                 n_slots: int, overhead_ps: int):
        self.env = env
        self.network = [sender.tcm, up, down]
        self.buffer = receiver.tcm
        self.to_buffer = sum(channel.latency for channel in self.network)
        self.copy_route = [receiver.tcm]
        self.credit_latency = receiver.tcm.latency + up.latency + down.latency + sender.tcm.latency
        self.overhead = overhead_ps
        self.free_slots = n_slots
        self.credits = deque()  # arrival times of credits on their way back
        self.chunks = deque()  # [nbytes, arrival or None until it lands]
        self.landed = None
        self.credit_returned = None
        self.sent = 0

    def send(self, nbytes: int):
        env = self.env
        self._absorb_credits()
        if self.free_slots == 0:
            if not self.credits:
                self.credit_returned = env.event()
                yield self.credit_returned
            yield env.timeout(self.credits[0] - env.now)
            self._absorb_credits()
        self.free_slots -= 1
        ready, offset = env.now, 0
        for channel in self.network:
            ready = max(ready, channel.free_at - offset)
            offset += channel.latency
        if ready > env.now:
            yield env.timeout(ready - env.now)
        start, network_end = transfer(env.now, self.network, nbytes)
        chunk = [nbytes, None]
        self.chunks.append(chunk)
        self.sent += 1
        env.timeout(start + self.to_buffer - env.now).callbacks.append(
            lambda _event: self._land(chunk, network_end))

    def _land(self, chunk: list, network_end: int) -> None:
        """The first byte reaches the slot: book the receiver's TCM, fix when the chunk is visible."""
        _, buffer_end = transfer(self.env.now, [self.buffer], chunk[0])
        chunk[1] = max(network_end + self.buffer.latency, buffer_end) + self.overhead
        if self.landed is not None:
            landed, self.landed = self.landed, None
            landed.succeed()

    def _absorb_credits(self) -> None:
        while self.credits and self.credits[0] <= self.env.now:
            self.credits.popleft()
            self.free_slots += 1

    def recv(self):
        env = self.env
        while not self.chunks or self.chunks[0][1] is None:
            self.landed = env.event()
            yield self.landed
        nbytes, arrival = self.chunks.popleft()
        if arrival > env.now:
            yield env.timeout(arrival - env.now)
        _, end = transfer(env.now, self.copy_route, nbytes)
        yield env.timeout(end - env.now)
        self.credits.append(end + self.credit_latency)
        if self.credit_returned is not None:
            returned, self.credit_returned = self.credit_returned, None
            returned.succeed()


def ring_member(env: simpy.Environment, pe: Pe, inbox: Queue, outbox: Queue, rank: int, p: int, count: int,
                per_piece: int, n_slots: int):
    """Rank `rank`'s program: reduce-scatter then all-gather, slab by slab (ring.py's schedule)."""
    started = []
    for slab in pieces(0, count, p * max(1, n_slots // 2) * per_piece):
        chunks = [pieces(a, b, per_piece) for a, b in split(*slab, p)]
        for a, b in chunks[(rank - 1) % p]:
            yield from pe.load((b - a) * ITEMSIZE)
            yield from outbox.send((b - a) * ITEMSIZE)
        schedule = [(step, b - a) for step in range(1, p) for a, b in chunks[(rank - step - 1) % p]]
        prefetch = env.process(pe.load(schedule[0][1] * ITEMSIZE)) if schedule else None
        for position, (step, elements) in enumerate(schedule):
            yield prefetch
            started.append(prefetch)
            if position + 1 < len(schedule):
                prefetch = env.process(pe.load(schedule[position + 1][1] * ITEMSIZE))
            yield from inbox.recv()
            yield from pe.reduce(elements)
            yield from outbox.send(elements * ITEMSIZE)
            if step == p - 1:
                started.append(env.process(pe.store(elements * ITEMSIZE)))
        for step in range(1, p):
            for a, b in chunks[(rank - step) % p]:
                yield from inbox.recv()
                if step < p - 1:
                    yield from outbox.send((b - a) * ITEMSIZE)
                started.append(env.process(pe.store((b - a) * ITEMSIZE)))
    yield env.all_of(started)


def run_simpy(topology_path: Path, ranks: int, nbytes: int) -> tuple[int, int, float]:
    """(simulated ps of the all-reduce, IPCQ messages, wall seconds of building and running the model)."""
    topology = load_topology(topology_path)
    settings = resolve_algorithm_config(RING[False])  # the IPCQ settings, the same in both
    if topology.system.inter_sip.shape != "switch" or settings["buffer_kind"] != "tcm" \
            or settings["backpressure"] != "sleep" or settings["algorithm"] != "ring":
        raise SystemExit("the SimPy model covers the ring over a switch, slots in TCM, sleeping senders")
    began = time.perf_counter()
    env = simpy.Environment()
    link = topology.system.inter_sip
    pes = [Pe(env, topology) for _ in range(ranks)]
    ups = [Channel(link.bandwidth_bytes_per_s, link.latency_ps) for _ in range(ranks)]
    downs = [Channel(link.bandwidth_bytes_per_s, link.latency_ps) for _ in range(ranks)]
    queues = [Queue(env, pes[r], pes[(r + 1) % ranks], ups[r], downs[(r + 1) % ranks], settings["n_slots"],
                    topology.ipcq.message_overhead_ps) for r in range(ranks)]
    per_piece = max(1, settings["slot_size"] // ITEMSIZE)
    for r in range(ranks):
        env.process(ring_member(env, pes[r], queues[(r - 1) % ranks], queues[r], r, ranks, nbytes // ITEMSIZE,
                                per_piece, settings["n_slots"]))
    env.run()
    wall = time.perf_counter() - began
    return env.now, sum(queue.sent for queue in queues), wall


# ---- the table --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only 4 x 4 MiB and 16 x 1 MiB (a few seconds)")
    parser.add_argument("--with-256", action="store_true", help="add 256 ranks x 1 MiB (about a minute more)")
    args = parser.parse_args()
    rows = QUICK_ROWS if args.quick else DEFAULT_ROWS
    if args.with_256:
        rows = [*rows, LARGE_ROW]

    print(f"{'ranks':>6} {'bytes/rank':>11} {'messages':>9} {'sim time':>12} {'kernbench':>12} {'every rank':>12} "
          f"{'SimPy':>12} {'ratio':>7} {'ratio':>7}")
    print(f"{'':>6} {'':>11} {'':>9} {'(us)':>12} {'(us/msg)':>12} {'(us/msg)':>12} {'(us/msg)':>12} {'kb/sp':>7} "
          f"{'all/sp':>7}")
    ratios, every_rank_ratios = [], []
    with tempfile.TemporaryDirectory() as directory:
        for ranks, nbytes in rows:
            path = switch_topology(ranks, Path(directory))
            kb_walls, all_walls, sp_walls = [], [], []
            for _ in range(1 if (ranks, nbytes) == LARGE_ROW else REPEATS):
                kb_ps, kb_messages, kb_wall, ran_symmetric = _collected_first(run_kernbench, path, ranks, nbytes, True)
                assert ran_symmetric, f"{ranks} x {nbytes} B: every rank ran (adr/0010, 'Symmetric collectives')"
                all_ps, all_messages, all_wall, _ = _collected_first(run_kernbench, path, ranks, nbytes, False)
                sp_ps, sp_messages, sp_wall = _collected_first(run_simpy, path, ranks, nbytes)
                for ps, messages, side in ((kb_ps, kb_messages, "kernbench"), (all_ps, all_messages, "every rank")):
                    assert ps == sp_ps, f"{ranks} x {nbytes} B: {side} {ps} ps, SimPy {sp_ps} ps"
                    assert messages == sp_messages, f"{ranks} x {nbytes} B: {side} {messages} vs {sp_messages} messages"
                kb_walls.append(kb_wall)
                all_walls.append(all_wall)
                sp_walls.append(sp_wall)
            kb_wall, all_wall, sp_wall = min(kb_walls), min(all_walls), min(sp_walls)
            ratios.append(kb_wall / sp_wall)
            every_rank_ratios.append(all_wall / sp_wall)
            print(f"{ranks:>6} {_size(nbytes):>11} {kb_messages:>9} {kb_ps / 1e6:>12.3f} "
                  f"{kb_wall / kb_messages * 1e6:>12.1f} {all_wall / kb_messages * 1e6:>12.1f} "
                  f"{sp_wall / sp_messages * 1e6:>12.1f} {ratios[-1]:>6.2f}x {every_rank_ratios[-1]:>6.2f}x")
    print(f"ring_vs_simpy_every_rank_wall_ratio: {_geomean(every_rank_ratios):.2f}")
    print(f"ring_vs_simpy_wall_ratio: {_geomean(ratios):.2f}")


def _collected_first(run, *args):
    """`run(*args)` after a full collection: the previous run's garbage (a whole session) is not this run's cost.

    Here and not in the runs themselves, which the tests call inside a large pytest heap for their results only.
    """
    gc.collect()
    return run(*args)


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _size(nbytes: int) -> str:
    return f"{nbytes // MIB} MiB" if nbytes % MIB == 0 else f"{nbytes} B"


if __name__ == "__main__":
    main()
