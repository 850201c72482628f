"""The same ring workload in kernbench's engine and in SimPy, with the same model shortcuts: events per second.

p processes in a ring. In each step a process waits for a token from its
left neighbour (except in its first step), moves a chunk over its outgoing
link (latency + chunk / bandwidth), then hands a token to its right
neighbour. Both models are written the way kernbench's layers are:

- the link is a `free_at` reservation (kernbench/sim_engine/resources.py's
  `Channel`: O(1), the end known when reserving, the exact bigint
  `ceil(B * 10**12 / bandwidth)` computed per transfer), then one sleep to
  the end: `transfer_and_wait` in kernbench, one `env.timeout` in SimPy;
- the mailbox is a token counter with one event for a waiting receiver
  (the way IPCQ receives are built), not a SimPy `Store` or `Resource`.

So both do the same work per step: one hold and one hand-off (the model
events counted below, identical on both sides by construction), the hold
being one timeout in SimPy and one sleep in kernbench (which may take its
no-switch fast path: the heap entries each engine scheduled are printed
too). Both must end at the same simulated time (asserted). Each size runs
both engines three times, taking turns, and keeps the best of each.

Run: `python benchmarks/engine_vs_simpy.py` (`--quick`: fewer steps). The
last line is `speedup_vs_simpy: X.XX`, the geometric mean over p of
kernbench's events/s over SimPy's (below 1: SimPy is faster).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # a multithreaded BLAS fights the simulator on a small machine

import argparse  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import simpy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.sim_engine import Channel, Engine, transfer_and_wait  # noqa: E402
from kernbench.sim_engine.simtime import PS_PER_S  # noqa: E402

LATENCY_PS = 500_000
BANDWIDTH_BYTES_PER_S = 100 * 10**9
CHUNK_BYTES = 64 * 1024
RANKS = (8, 64, 256)
# Process-steps per size, chosen so each engine runs for roughly 0.5-2 s.
RANK_STEPS = 150_000
QUICK_RANK_STEPS = 30_000
REPEATS = 3  # best of, each engine


# ---- kernbench ----------------------------------------------------------------------------------


class Mailbox:
    """Tokens from one neighbour: a counter, and one engine event while the receiver waits."""

    def __init__(self, engine: Engine, name: str):
        self.engine = engine
        self.name = name
        self.tokens = 0
        self.arrival = None

    def put(self) -> None:
        self.tokens += 1
        if self.arrival is not None:
            arrival, self.arrival = self.arrival, None
            arrival.succeed()

    def get(self) -> None:
        if self.tokens == 0:
            self.arrival = self.engine.event(name=self.name)
            self.engine.wait(self.arrival)
        self.tokens -= 1


def run_kernbench(p: int, steps: int) -> tuple[int, int]:
    """(simulated end time, heap entries the engine scheduled)."""
    engine = Engine()
    links = [Channel(engine, f"link{i}", BANDWIDTH_BYTES_PER_S, LATENCY_PS) for i in range(p)]
    boxes = [Mailbox(engine, f"token for rank {i}") for i in range(p)]

    def rank(i: int) -> None:
        route = [links[i]]
        inbox, right = boxes[i], boxes[(i + 1) % p]
        for step in range(steps):
            if step:
                inbox.get()
            transfer_and_wait(engine, route, CHUNK_BYTES)
            right.put()

    for i in range(p):
        engine.spawn(rank, i, name=f"rank{i}")
    engine.run()
    return engine.now, engine._seq


# ---- SimPy --------------------------------------------------------------------------------------


class SimpyLink:
    """kernbench's `Channel` reservation in SimPy: busy until `free_at`."""

    __slots__ = ("env", "bandwidth", "latency", "free_at")

    def __init__(self, env: simpy.Environment, bandwidth_bytes_per_s: int, latency_ps: int):
        self.env = env
        self.bandwidth = bandwidth_bytes_per_s
        self.latency = latency_ps
        self.free_at = 0

    def transfer(self, nbytes: int) -> int:
        """Reserve the link for `nbytes` from max(now, free_at); return when the last byte arrives."""
        now = self.env.now
        start = self.free_at if self.free_at > now else now
        occupancy = -(-nbytes * PS_PER_S // self.bandwidth)
        self.free_at = start + occupancy
        return start + self.latency + occupancy


class SimpyMailbox:
    """The same counter mailbox, with a SimPy event while the receiver waits."""

    __slots__ = ("env", "tokens", "arrival")

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.tokens = 0
        self.arrival = None

    def put(self) -> None:
        self.tokens += 1
        if self.arrival is not None:
            arrival, self.arrival = self.arrival, None
            arrival.succeed()

    def get(self):
        if self.tokens == 0:
            self.arrival = self.env.event()
            yield self.arrival
        self.tokens -= 1


def run_simpy(p: int, steps: int) -> tuple[int, int]:
    """(simulated end time, heap entries SimPy scheduled)."""
    env = simpy.Environment()
    links = [SimpyLink(env, BANDWIDTH_BYTES_PER_S, LATENCY_PS) for _ in range(p)]
    boxes = [SimpyMailbox(env) for _ in range(p)]

    def rank(i: int):
        link, inbox, right = links[i], boxes[i], boxes[(i + 1) % p]
        for step in range(steps):
            if step:
                yield from inbox.get()
            yield env.timeout(link.transfer(CHUNK_BYTES) - env.now)
            right.put()

    for i in range(p):
        env.process(rank(i))
    env.run()
    return env.now, next(env._eid)  # SimPy numbers every scheduled event from an itertools.count


def timed(fn, p: int, steps: int) -> tuple[int, int, float]:
    """(end time, heap entries, wall seconds) of one run."""
    gc.collect()  # the previous run's garbage is not this run's cost
    begin = time.perf_counter()
    end_time, entries = fn(p, steps)
    return end_time, entries, time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RANK_STEPS} process-steps per size")
    rank_steps = QUICK_RANK_STEPS if parser.parse_args().quick else RANK_STEPS

    speedups = []
    print(f"{'p':>5} {'steps':>6} {'events':>8} {'heap entries kb/SimPy':>22} {'kernbench ev/s':>15} "
          f"{'SimPy ev/s':>11} {'speedup':>8}")
    for p in RANKS:
        steps = rank_steps // p
        events = 2 * p * steps
        kb_walls, sp_walls = [], []
        for _ in range(REPEATS):  # taking turns, so load on a shared machine hits both alike
            kb_end, kb_entries, kb_wall = timed(run_kernbench, p, steps)
            sp_end, sp_entries, sp_wall = timed(run_simpy, p, steps)
            assert kb_end == sp_end, f"p={p}: kernbench ends at {kb_end} ps, SimPy at {sp_end} ps"
            kb_walls.append(kb_wall)
            sp_walls.append(sp_wall)
        kb_s, sp_s = min(kb_walls), min(sp_walls)
        speedup = sp_s / kb_s
        speedups.append(speedup)
        entries = f"{kb_entries:,} / {sp_entries:,}"
        print(f"{p:>5} {steps:>6} {events:>8,} {entries:>22} {events / kb_s:>15,.0f} {events / sp_s:>11,.0f} "
              f"{speedup:>7.2f}x")
    geomean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    print(f"speedup_vs_simpy: {geomean:.2f}")


if __name__ == "__main__":
    main()
