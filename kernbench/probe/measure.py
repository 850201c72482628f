"""A probe: simulated transfers between two endpoints, each beside the closed form the links give.

The probe builds a `Session` (timing only: no bytes are kept), finds the
route a DMA takes (`Machine.dma_path`) — plus the driving PE's DMA engine in
front when a PE moves the bytes — and runs `Transfer`s on it with the
machine's own DMA primitive, one size after another, so each starts on idle
links. On a SIP with an L2 (`sip.l2`) a read of HBM into a PE passes through
it; a probe's transfers name no tensor bytes, so the L2 holds nothing for
them and every one is a miss (ADR 0008). What
it reports for each is the simulated time next to the closed form of ADR
0003's cut-through transfer:

    time(B) = Σ latency of the hops + ceil(B / slowest hop's bandwidth)

(in picoseconds, rounded up as the engine rounds). Latency is the same at 0
bytes. With contention, `k` transfers are issued together (the DMA engines
of a driving PE dealt round-robin, as a kernel's loads are). On a
cut-through route each transfer may start on a hop only once the one ahead
has left it, so with `occ(h) = ceil(B / bandwidth of h)`, `a` the largest
`occ` of the hops every transfer crosses, and (when a PE drives them) `b`
one DMA engine's `occ` with `E` engines, transfer j starts at
`max(start(j-1) + a, start(j-E) + b)`, and the last of k ends at

    makespan(k, B) = Σ latency + max occ + max((k-1)·a, q·b + r·a),  (q, r) = divmod(k-1, E)

which without a PE engine on the route is `Σ latency + k · max occ`: the
transfers leave the slowest hop one serialization time apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernbench.machine import Transfer
from kernbench.probe.endpoints import ProbeEndpoint, ProbeError
from kernbench.sim_engine.simtime import PS_PER_S


@dataclass(frozen=True)
class Hop:
    """One resource on the route: its name, class, bandwidth (bytes/s) and latency (ps)."""

    name: str
    kind: str
    bandwidth_bytes_per_s: int
    latency_ps: int


@dataclass
class ProbeResult:
    """What `probe` measured: the route, the 0-byte latency, and one row per size (and per k with contention)."""

    topology: str
    src: str
    dst: str
    route: list[Hop]
    latency_ps: int
    predicted_latency_ps: int
    sizes: list[dict] = field(default_factory=list)
    contention: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"topology": self.topology, "src": self.src, "dst": self.dst,
                "route": [vars(hop) for hop in self.route],
                "latency_ps": self.latency_ps, "predicted_latency_ps": self.predicted_latency_ps,
                "sizes": self.sizes, "contention": self.contention}


def probe(topology, src: ProbeEndpoint, dst: ProbeEndpoint, sizes: list[int],
          concurrency: list[int] = ()) -> ProbeResult:
    """Measure `src` -> `dst` for each size (and each k of `concurrency`); see the module docstring."""
    if src.memory.kind == "host" and dst.memory.kind == "host":
        raise ProbeError("probe host host: a transfer needs a device end; expected a SIP, cube, PE or memory")
    if any(size < 0 for size in sizes):
        raise ProbeError("--bytes: sizes must be at least 0")
    if any(k < 1 for k in concurrency):
        raise ProbeError("--concurrent: each count must be at least 1")
    from kernbench.session import Session  # the simulator: imported when a probe runs, not with the CLI

    session = Session(topology, timing_only=True)
    machine = session.ctx.machine
    driver = src.pe or dst.pe
    engines = list(machine.pe(*driver).dma_engines) if driver else [None]
    route = machine.dma_path(src.memory, dst.memory).route  # as a DMA goes: through a SIP's L2 on a read of HBM
    names = {id(channel): name for name, channel in machine.channels.items()}
    hops = [Hop(names[id(channel)], machine.channel_kind(names[id(channel)]), channel.bandwidth_bytes_per_s,
                channel.latency_ps) for channel in ([engines[0]] if driver else []) + list(route)]
    latency = sum(hop.latency_ps for hop in hops)
    slowest = min(hop.bandwidth_bytes_per_s for hop in hops)
    measured: dict[tuple[int, int], int] = {}

    def sweep() -> None:
        engine = session.engine
        for k in dict.fromkeys((1, *concurrency)):
            for size in ([0] if k == 1 else []) + sizes:
                began = engine.now
                landing = []
                for j in range(k):  # issued together, at one simulated instant, engines dealt round-robin
                    landing += machine.issue_transfers(
                        [Transfer(src.memory, dst.memory, size)], label=f"probe {size} B", data=False, device=None,
                        unit="probe", program=None, dma_engine=engines[j % len(engines)],
                        owner=engine.current_process)
                last = max(end for end, _ in landing)
                engine.sleep_until(last)
                for _, effect in landing:
                    machine.land(effect)
                measured[k, size] = last - began

    session.run(sweep)
    result = ProbeResult(str(topology.source), src.name, dst.name, hops, measured[1, 0], latency)
    for size in sizes:
        predicted = latency + _ceil_div(size * PS_PER_S, slowest)
        result.sizes.append(_row(size, measured[1, size], predicted))
    for k in concurrency:
        for size in sizes:
            predicted = _makespan(hops, size, k, engines=len(engines) if driver else 0)
            result.contention.append({"transfers": k, **_row(size, measured[k, size], predicted, total=k * size)})
    return result


def _makespan(hops: list[Hop], size: int, k: int, engines: int) -> int:
    """The closed form of k transfers of `size` issued together (module docstring); hop 0 is the
    driving PE's DMA engine when `engines` > 0."""
    occupancy = [_ceil_div(size * PS_PER_S, hop.bandwidth_bytes_per_s) for hop in hops]
    latency = sum(hop.latency_ps for hop in hops)
    shared = occupancy[1:] if engines else occupancy
    a = max(shared, default=0)
    q, r = divmod(k - 1, engines) if engines else (0, k - 1)
    b = occupancy[0] if engines else 0
    return latency + max(occupancy) + max((k - 1) * a, q * b + r * a)


def _row(size: int, measured_ps: int, predicted_ps: int, total: int | None = None) -> dict:
    moved = size if total is None else total
    return {"bytes": size, "time_ps": measured_ps, "predicted_ps": predicted_ps,
            "gb_per_s": moved / measured_ps * 1e3 if measured_ps else 0.0,
            "predicted_gb_per_s": moved / predicted_ps * 1e3 if predicted_ps else 0.0}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
