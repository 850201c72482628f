"""ADR 0008 T14: a SIP's L2 serves a read of bytes it holds at its own rate; misses pass through it, LRU.

On default.yaml with an L2 added (`sip.l2`), reads of one tensor's tiles by
PEs of the I/O cube on an idle machine, each timed alone: a first read goes
DMA engine → HBM → L2 → TCM and the L2 then holds it; the same bytes read
again (by any PE) go DMA engine → L2 → TCM; writes go around the L2; once
reads of other bytes fill it past its capacity, the least recently used
tile is out and misses again. Times are Σ latency + bytes over the slowest
hop, from the topology.
"""

from __future__ import annotations

import numpy as np

from kernbench.machine.placed_dma import load_elements, store_elements
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.closed_forms import Hop, path_ps
from tests.topology.test_l2_keys import with_l2

TILE = 16 * 1024  # bytes: f32 elements 4096


def test_adr0008_t14_the_l2_serves_bytes_it_holds_and_drops_the_least_recently_used(tmp_path):
    path = with_l2(tmp_path, "  l2: {capacity_kib: 48, bandwidth_gb_per_s: 4000, latency_ns: 40}\n")
    topology = load_topology(path)
    hbm, l2, tcm = (Hop(memory.bandwidth_bytes_per_s, memory.latency_ps)
                    for memory in (topology.cube.hbm, topology.sip.l2, topology.pe.tcm))
    dma = Hop(topology.pe.dma.bandwidth_bytes_per_s, 0)
    miss, hit, store = (path_ps(TILE, hops) for hops in ([dma, hbm, l2, tcm], [dma, l2, tcm], [dma, tcm, hbm]))
    assert hit < miss
    session = Session(path, timing_only=True)
    machine, engine = session.ctx.machine, session.engine
    took = []

    def bench(torch):
        allocation = torch.empty(8 * TILE // 4, dtype="f32")._allocation  # cube 0
        tiles = [slice(k * TILE // 4, (k + 1) * TILE // 4) for k in range(8)]

        def timed(pe: int, action, tile: int) -> None:
            begin = engine.now
            action(machine, machine.pe(0, 0, pe), allocation, tiles[tile])
            took.append(engine.now - begin)

        def read(machine, pe, allocation, tile):
            load_elements(machine, pe, allocation, np.dtype(np.float32), tile, label="t", program=0, data=False)

        def write(machine, pe, allocation, tile):
            store_elements(machine, pe, allocation, tile, np.zeros(TILE // 4, np.float32), label="t", program=0,
                           data=False)

        timed(0, read, 0)   # miss: tile 0 is held
        timed(1, read, 0)   # hit, by another PE
        timed(0, write, 5)  # around the L2: tile 5 is not held
        timed(1, read, 5)   # miss
        timed(0, read, 1)   # miss: the L2 (48 KiB) holds tiles 0, 5, 1
        timed(0, read, 0)   # hit: tile 0 is now the most recently used
        timed(0, read, 2)   # miss: tile 5, least recently used, is out
        timed(1, read, 5)   # miss
        timed(1, read, 0)   # hit

    session.run(bench, session.torch)
    assert took == [miss, hit, store, miss, miss, hit, miss, miss, hit]
    tags = machine._l2_tags[0]
    assert (tags.hits, tags.misses, tags.held_bytes) == (3, 5, 3 * TILE)


def test_adr0008_t15_an_ipcq_slot_in_hbm_is_copied_out_through_the_l2(tmp_path):
    """The receiver's copy of a chunk out of a slot in its cube's HBM is a PE's read of HBM: through the L2
    (never a hit: a slot is written anew for every chunk), as a DMA's; a slot in TCM is not."""
    from kernbench.machine import tcm
    from kernbench.machine.ipcq import IpcQueue, IpcqSettings

    path = with_l2(tmp_path, "  l2: {capacity_kib: 48, bandwidth_gb_per_s: 4000, latency_ns: 40}\n")
    topology = load_topology(path)
    hbm, l2, pe_tcm = (Hop(memory.bandwidth_bytes_per_s, memory.latency_ps)
                       for memory in (topology.cube.hbm, topology.sip.l2, topology.pe.tcm))
    copies = {}
    for buffer_kind in ("hbm", "tcm"):
        session = Session(path, timing_only=True)
        settings = IpcqSettings.checked(topology, buffer_kind=buffer_kind, backpressure="sleep", n_slots=2,
                                        slot_size=TILE, poll_interval_ps=100_000)
        queue = IpcQueue(session.ctx.machine, tcm(0, 0, 0), tcm(0, 0, 1), settings, label="q#1", programs=(0, 1),
                         data=False)
        session.engine.spawn(queue.send, np.zeros(TILE // 4, np.float32))
        session.engine.spawn(queue.recv)
        session.engine.run()
        recv, = session.ctx.machine.oplog.select(kind="ipcq_recv")
        copies[buffer_kind] = recv.end - recv.start
    assert copies == {"hbm": path_ps(TILE, [hbm, l2, pe_tcm]), "tcm": path_ps(TILE, [pe_tcm])}
