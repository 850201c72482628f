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
    # A transfer over only the fast last hop uses the bandwidth the slow route left it: the second transfer
    # reaches that hop occ + 2300 in, so the hop idles from the first one's end there until then (T28).
    fast = serialization(nbytes, 64 * 10**9)
    first_free = 2_300 + fast
    assert transfer(eng, hops[2:], nbytes) == (first_free, first_free + 300 + fast)


def test_adr0003_t28_a_transfer_held_back_by_one_hop_leaves_a_gap_that_a_later_transfer_fills(eng):
    """A transfer whose start waits on a busy hop books its other hops later than they free; the idle stretch
    is a gap. A later reservation that fits there — on every hop of its route, at its own offsets — takes it;
    one that does not goes after the hop's last booking; no earlier booking moves."""
    port = Channel(eng, "tcm", 10**12, 0)  # 1 byte per ps, no latency: the link is reached at the start
    link = Channel(eng, "link", 10**12, 100)
    assert transfer(eng, [port], 5_000) == (0, 5_000)  # the port is busy until 5000
    # Held back by the port, the transfer holds the link over [5000, 6000); the link idles over [0, 5000).
    assert transfer(eng, [port, link], 1_000) == (5_000, 5_000 + 100 + 1_000)
    assert link.free_at == 6_000
    # 2000 bytes of link time fit in the gap: they go now, ahead of the earlier booking, which is unchanged.
    assert transfer(eng, [link], 2_000) == (0, 100 + 2_000)
    # 3200 do not fit in what is left of it, [2000, 5000): they go after the last booking.
    assert transfer(eng, [link], 3_200) == (6_000, 6_000 + 100 + 3_200)
    # 2900 do, leaving [4900, 5000).
    assert transfer(eng, [link], 2_900) == (2_000, 2_000 + 100 + 2_900)
    # Through a hop of 50 ps before the link, 100 bytes fit that last gap if they start at 4850 (reaching the
    # link at 4900); 101 do not, and wait for the link's last booking to end, at 9200.
    noc = Channel(eng, "noc", 10**12, 50)
    assert transfer(eng, [noc, link], 100) == (4_850, 4_850 + 150 + 100)
    assert transfer(eng, [noc, link], 101) == (9_150, 9_150 + 150 + 101)
    assert link.busy_ps == 1_000 + 2_000 + 3_200 + 2_900 + 100 + 101
    assert link.free_at == 9_200 + 101


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


def _earliest_start(booked: dict, route, now: int) -> int:
    """The least start >= now at which every hop (name, offset, hold) is clear of `booked` intervals, found by
    trying `now` and every instant a booked interval ends (less the hop's offset): the oracle for T29."""
    def clear(start: int) -> bool:
        return all(start + offset + hold <= begin or end <= start + offset
                   for name, offset, hold in route for begin, end in booked[name])

    candidates = sorted({now} | {end - offset for name, offset, _ in route for _, end in booked[name]
                                 if end - offset > now})
    return next(start for start in candidates if clear(start))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True),
                          st.integers(1, 3_000)), min_size=1, max_size=12),
       st.lists(st.integers(1, 4), min_size=3, max_size=3), st.lists(st.integers(0, 300), min_size=3, max_size=3))
def test_adr0003_t29_every_transfer_starts_at_the_first_instant_each_hop_is_clear(calls, rates, latencies):
    """Transfers issued over time on routes through three channels: each starts at the least instant >= its issue
    at which every hop is clear for its own serialization time when the data reaches it (after a booking or
    in a gap), bookings of a channel never overlap, and an earlier booking never moves."""
    eng = Engine()
    channels = [Channel(eng, f"c{k}", rates[k] * 10**12, latencies[k]) for k in range(3)]
    booked = {f"c{k}": [] for k in range(3)}
    got, expected = [], []

    def issuer():
        for delay, hops, nbytes in calls:
            eng.sleep(delay)
            route, offset = [], 0
            for k in hops:
                route.append((f"c{k}", offset, serialization(nbytes, channels[k].bandwidth_bytes_per_s)))
                offset += channels[k].latency_ps
            start = _earliest_start(booked, route, eng.now)
            for name, hop_offset, hold in route:
                booked[name].append((start + hop_offset, start + hop_offset + hold))
            expected.append((start, start + offset + max(hold for _, _, hold in route)))
            got.append(transfer(eng, [channels[k] for k in hops], nbytes))

    eng.spawn(issuer)
    eng.run()
    assert got == expected
    for name, intervals in booked.items():
        ordered = sorted(intervals)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(ordered, ordered[1:])), name


@st.composite
def _gapped_channels(draw):
    """(gaps as disjoint [start, end) in time order, free_at after them, now, at >= now, occupancy)."""
    gaps, t = [], 0
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.integers(0, 30))
        start = t
        t += draw(st.integers(1, 30))
        gaps.append([start, t])
    now = draw(st.integers(0, t + 10))
    return gaps, t + draw(st.integers(0, 50)), now, draw(st.integers(now, t + 60)), draw(st.integers(0, 40))


@settings(max_examples=150, deadline=None)
@given(_gapped_channels())
def test_adr0003_t103_a_channel_takes_the_first_gap_that_fits_and_forgets_the_gaps_already_over(case):
    gaps, free_at, now, at, occupancy = case
    eng = Engine()
    eng.run(until=now)
    channel = Channel(eng, "link", 10**9, 0)
    channel.gaps, channel.free_at = [list(gap) for gap in gaps], free_at
    left = [gap for gap in gaps if gap[1] > now]
    first_fit = next((max(start, at) for start, end in left if max(start, at) + occupancy <= end), max(free_at, at))
    assert channel.earliest(at, occupancy) == first_fit
    assert channel.gaps == left
