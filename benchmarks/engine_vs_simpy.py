"""The same ring workload in kernbench's engine and in SimPy: events per second of each.

p processes in a ring. In each step a process waits for the token from its
left neighbour (except in its first step), holds its outgoing link for
latency + chunk / bandwidth, then hands a token to its right neighbour. An
"event" is one link hold or one token hand-off, counted the same way for
both (2 per process per step). Both runs must end at the same simulated time.

Run: `python benchmarks/engine_vs_simpy.py`. The last line is
`speedup_vs_simpy: X.XX`, the geometric mean over p of kernbench's events/s
over SimPy's.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.sim_engine import Channel, Engine, transfer_and_wait  # noqa: E402
from kernbench.sim_engine.simtime import PS_PER_S, ceil_div  # noqa: E402

LATENCY_PS = 500_000
BANDWIDTH_BYTES_PER_S = 100 * 10**9
CHUNK_BYTES = 64 * 1024
# Process-steps per size, chosen so each engine runs for roughly 0.5-2 s.
RANK_STEPS = {8: 150_000, 64: 150_000, 256: 150_000}


class Mailbox:
    """Tokens from one neighbour, the way IPCQ receives are built on engine events."""

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


def run_kernbench(p: int, steps: int) -> int:
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
    return engine.now


def run_simpy(p: int, steps: int) -> int:
    env = simpy.Environment()
    hold = LATENCY_PS + ceil_div(CHUNK_BYTES * PS_PER_S, BANDWIDTH_BYTES_PER_S)
    links = [simpy.Resource(env, capacity=1) for _ in range(p)]
    boxes = [simpy.Store(env) for _ in range(p)]

    def rank(i: int):
        link, inbox, right = links[i], boxes[i], boxes[(i + 1) % p]
        for step in range(steps):
            if step:
                yield inbox.get()
            with link.request() as request:
                yield request
                yield env.timeout(hold)
            yield right.put(step)

    for i in range(p):
        env.process(rank(i))
    env.run()
    return env.now


def timed(fn, p: int, steps: int) -> tuple[int, float]:
    begin = time.perf_counter()
    end_time = fn(p, steps)
    return end_time, time.perf_counter() - begin


def main() -> None:
    speedups = []
    print(f"{'p':>5} {'steps':>7} {'events':>9} {'kernbench ev/s':>15} {'simpy ev/s':>12} {'speedup':>8}")
    for p, rank_steps in RANK_STEPS.items():
        steps = rank_steps // p
        events = 2 * p * steps
        kb_end, kb_s = timed(run_kernbench, p, steps)
        sp_end, sp_s = timed(run_simpy, p, steps)
        assert kb_end == sp_end, f"p={p}: kernbench ends at {kb_end} ps, SimPy at {sp_end} ps"
        speedup = sp_s / kb_s
        speedups.append(speedup)
        print(f"{p:>5} {steps:>7} {events:>9} {events / kb_s:>15,.0f} {events / sp_s:>12,.0f} {speedup:>7.2f}x")
    geomean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    print(f"speedup_vs_simpy: {geomean:.2f}")


if __name__ == "__main__":
    main()
