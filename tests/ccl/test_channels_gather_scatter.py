"""ADR 0010: all_gather and reduce_scatter run on several channels, each the same slice of every rank's piece.

A channel of an all-gather writes its slice of rank r's piece into piece r
of every output; of a reduce-scatter, it reduces its slice of piece r of
every input into rank r's output. Those shares are strided, kept as
`Blocks` of runs so no index array as large as the call is built.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernbench.ccl.blocks import Blocks
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.closed_forms import PS_PER_S
from tests.ccl.harness import config, device_tensor, member, region, run

BIG_SLOTS = {"slot_size": 64 * 1024, "n_slots": 8}


def gather_or_scatter(kind: str, algorithm: str, p: int, n: int, channels: int, *, timing_only: bool = False):
    """(simulated ps, every rank's output or None) of `kind` over SIPs 0..p−1 of default.yaml, n elements per
    rank's piece (all_gather: rank r gives r·1000 + 0..n−1; reduce_scatter: rank r gives r·1000 + 0..p·n−1)."""
    session = Session(load_topology("default"), timing_only=timing_only)
    in_count, out_count = (n, p * n) if kind == "all_gather" else (p * n, n)
    if timing_only:
        inputs = [session.torch.empty(in_count, dtype="f32", device=f"ahbm:{r}") for r in range(p)]
    else:
        inputs = [device_tensor(session, r, np.arange(in_count) + 1000.0 * r, "f32") for r in range(p)]
    outputs = [session.torch.empty(out_count, dtype="f32", device=f"ahbm:{r}") for r in range(p)]
    took = run(session, kind, [member(r, r, region(i), region(o)) for r, (i, o) in enumerate(zip(inputs, outputs))],
               config(algorithm, channels=channels, **BIG_SLOTS), op="sum" if kind == "reduce_scatter" else None,
               timing_only=timing_only)
    if timing_only:
        return took, None
    return took, [out._allocation.storage.typed(np.float32).copy() for out in outputs]


@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling"])
@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("channels", [2, 3, 5])
def test_adr0010_t68_all_gather_and_reduce_scatter_on_several_channels_give_numpys_numbers(
        algorithm, kind, channels):
    """1001 elements per piece (uneven slices) on 4 ranks: every rank's output is numpy's."""
    p, n = 4, 1001
    _, outputs = gather_or_scatter(kind, algorithm, p, n, channels)
    inputs = [np.arange(n if kind == "all_gather" else p * n) + 1000.0 * r for r in range(p)]
    for rank, got in enumerate(outputs):
        expected = (np.concatenate(inputs) if kind == "all_gather"
                    else np.sum(inputs, axis=0)[rank * n:(rank + 1) * n])
        assert np.array_equal(got, expected.astype(np.float32)), rank


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
def test_adr0010_t69_multi_channel_gathers_fill_the_link_and_beat_one_channel(kind):
    """64 MiB of all_gather output (or reduce_scatter input) per rank on default.yaml's ring: four channels move
    (p−1)/p of it over each link at ≥ 90% of the link's rate, in less time than one channel."""
    topology = load_topology("default")
    link = topology.system.inter_sip.payload_bytes_per_s
    p, total = 4, 64 << 20
    one, _ = gather_or_scatter(kind, "ring", p, total // p // 4, 1, timing_only=True)
    four, _ = gather_or_scatter(kind, "ring", p, total // p // 4, 4, timing_only=True)
    busbw = (p - 1) / p * total / (four / PS_PER_S)
    assert 0.9 * link <= busbw <= link
    assert four < one


@given(lengths=st.lists(st.integers(0, 9), min_size=1, max_size=5), data=st.data())
def test_adr0010_t70_blocks_answer_a_slice_as_the_concatenated_runs_would(lengths, data):
    """A non-empty slice inside one run is that run's own slice (a `range` of a contiguous run: no array);
    across runs it is the concatenation's slice, as an array."""
    runs, start = [], 0
    for index, length in enumerate(lengths):
        runs.append(range(start, start + length) if index % 2 == 0 else np.arange(start, start + length) * 3)
        start += length + 7
    whole = np.concatenate([np.asarray(run, dtype=np.int64) for run in runs])
    blocks = Blocks(runs)
    assert len(blocks) == whole.size
    a = data.draw(st.integers(0, whole.size))
    b = data.draw(st.integers(a, whole.size))
    got = blocks[a:b]
    assert np.array_equal(np.asarray(got, dtype=np.int64), whole[a:b])
    offsets = np.cumsum([0] + lengths)
    inside = next((k for k in range(len(runs)) if offsets[k] <= a < b <= offsets[k + 1]), None)
    if inside is not None and inside % 2 == 0:
        assert isinstance(got, range)
