"""Closed forms of first-come reservation on units and channels (adr/0003-engine.md)."""

from __future__ import annotations

from fractions import Fraction
from math import ceil

from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.sim_engine import Channel, Engine, ExclusiveUnit, transfer, transfer_and_wait

PS_PER_S = 10**12


def serialization(nbytes: int, bandwidth: int) -> int:
    """ceil(B / bandwidth) in ps, computed independently of the engine (exact fractions)."""
    return ceil(Fraction(nbytes * PS_PER_S, bandwidth))


def test_adr0003_t12_one_transfer_on_an_idle_channel(eng):
    bandwidth, latency, nbytes = 3 * 10**9, 1_250, 1_000  # 1000 B at 3 GB/s is not a whole ps
    hbm = Channel(eng, "hbm0", bandwidth, latency, device="sip0")
    got = []

    def dma():
        eng.sleep(40)
        got.append(transfer_and_wait(eng, [hbm], nbytes))
        got.append(eng.now)

    eng.spawn(dma)
    eng.run()
    expected_end = 40 + latency + serialization(nbytes, bandwidth)
    assert got == [(40, expected_end), expected_end]
    assert (hbm.busy_ps, hbm.bytes_moved, hbm.ops) == (serialization(nbytes, bandwidth), nbytes, 1)


def test_adr0003_t13_equal_concurrent_transfers_end_in_a_staircase(eng):
    bandwidth, latency, nbytes, k = 7 * 10**9, 500, 4096, 5
    link = Channel(eng, "link", bandwidth, latency)
    ends = []

    def sender(i):
        transfer_and_wait(eng, [link], nbytes)
        ends.append((i, eng.now))

    for i in range(k):
        eng.spawn(sender, i)
    eng.run()
    occ = serialization(nbytes, bandwidth)
    assert ends == [(i, latency + (i + 1) * occ) for i in range(k)]
    assert link.busy_ps == k * occ
    # The latency is not held: the channel was busy all but its tail.
    assert link.utilization() == k * occ / (latency + k * occ)


def test_adr0003_t14_multi_hop_route_is_cut_through(eng):
    hops = [Channel(eng, "noc0", 64 * 10**9, 300), Channel(eng, "xsip", 25 * 10**9, 2_000),
            Channel(eng, "noc1", 64 * 10**9, 300)]
    nbytes = 10_000
    occ = serialization(nbytes, min(h.bandwidth_bytes_per_s for h in hops))
    total_latency = sum(h.latency_ps for h in hops)

    first = transfer(eng, hops, nbytes)
    assert first == (0, total_latency + occ)
    # Each hop is charged its own serialization time, from when the data reaches it.
    offsets = [0, 300, 2_300]
    own = [serialization(nbytes, h.bandwidth_bytes_per_s) for h in hops]
    assert [h.free_at for h in hops] == [off + o for off, o in zip(offsets, own)]
    assert [h.busy_ps for h in hops] == own

    # A second transfer over the same route queues behind the bottleneck hop, one occ later.
    assert transfer(eng, hops, nbytes) == (occ, occ + total_latency + occ)
    # A transfer over only the fast last hop uses the bandwidth the slow route left it.
    fast = serialization(nbytes, 64 * 10**9)
    last_free = occ + 2_300 + fast
    assert transfer(eng, hops[2:], nbytes) == (last_free, last_free + 300 + fast)


def test_adr0003_t15_exclusive_unit_runs_one_op_at_a_time_and_tracks_busy_time(eng):
    mxu = ExclusiveUnit(eng, "cube0.pe0.mxu", device="sip0")
    spans = []

    def program(delay, duration):
        eng.sleep(delay)
        spans.append(mxu.reserve_and_wait(duration))

    eng.spawn(program, 0, 10)
    eng.spawn(program, 5, 10)   # arrives while busy: starts at 10
    eng.spawn(program, 50, 10)  # arrives idle: starts at once
    eng.run()
    assert spans == [(0, 10), (10, 20), (50, 60)]
    assert (mxu.busy_ps, mxu.ops, eng.now) == (30, 3, 60)
    assert mxu.utilization() == 30 / 60
    assert mxu.utilization(120) == 30 / 120


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 100_000)), min_size=1, max_size=12),
       st.integers(1, 10**12), st.integers(0, 5_000))
def test_channel_serves_transfers_first_come_first_served(issues, bandwidth, latency):
    eng = Engine()
    link = Channel(eng, "link", bandwidth, latency)
    got = {}

    def sender(i, at, nbytes):
        eng.sleep_until(at)
        got[i] = transfer_and_wait(eng, [link], nbytes)

    for i, (at, nbytes) in enumerate(issues):
        eng.spawn(sender, i, at, nbytes)
    eng.run()
    # Service order: by issue time, ties by spawn order.
    free = 0
    for i in sorted(range(len(issues)), key=lambda i: (issues[i][0], i)):
        at, nbytes = issues[i]
        start = max(at, free)
        free = start + serialization(nbytes, bandwidth)
        assert got[i] == (start, free + latency)
