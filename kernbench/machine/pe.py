"""The engines of one PE — DMA engines, matrix unit, vector unit, TCM port — and their op costs.

Costs come from the topology only: a gemm of F flops in dtype d takes
ceil(F / flops_per_cycle[d]) cycles, a vector op over n elements
ceil(n / lanes) cycles, and a cycle is 10^12 / clock_hz ps (rounded up once,
on the total, so a long op is not inflated by per-cycle rounding).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.sim_engine import Channel, ExclusiveUnit
from kernbench.sim_engine.simtime import PS_PER_S
from kernbench.topology import Topology


@dataclass(frozen=True)
class PeUnits:
    """The resources of PE `pe` of cube `cube` of SIP `sip`."""

    sip: int
    cube: int
    pe: int
    dma_engines: tuple[Channel, ...]
    matrix: ExclusiveUnit
    vector: ExclusiveUnit
    tcm: Channel

    @property
    def name(self) -> str:
        return f"cube{self.cube}.pe{self.pe}"

    def free_dma_engine(self) -> Channel:
        """The DMA engine that frees up first (the lowest-numbered on a tie)."""
        engines = self.dma_engines
        best = engines[0]
        for index in range(1, len(engines)):
            if engines[index].free_at < best.free_at:
                best = engines[index]
        return best


def build_pe_units(engine, topology: Topology, sip: int, cube: int, pe: int) -> PeUnits:
    spec = topology.pe
    device = f"sip{sip}"
    prefix = f"cube{cube}.pe{pe}"
    dma = tuple(Channel(engine, f"{prefix}.dma{k}", spec.dma.bandwidth_bytes_per_s, 0, device=device)
                for k in range(spec.dma.engines))
    return PeUnits(
        sip, cube, pe, dma,
        ExclusiveUnit(engine, f"{prefix}.matrix", device=device),
        ExclusiveUnit(engine, f"{prefix}.vector", device=device),
        Channel(engine, f"{prefix}.tcm", spec.tcm.bandwidth_bytes_per_s, spec.tcm.latency_ps, device=device),
    )


def cycles_to_ps(cycles: int, clock_hz: int) -> int:
    return -(-cycles * PS_PER_S // clock_hz)


def gemm_ps(topology: Topology, dtype: str, flops: int) -> int:
    """Matrix-unit time of `flops` flops with operands of `dtype`."""
    rate = topology.pe.matrix_unit.rate(dtype)
    return cycles_to_ps(-(-flops // rate), topology.pe.clock_hz)


def vector_ps(topology: Topology, n_elements: int) -> int:
    """Vector-unit time of an elementwise or reduction op over `n_elements`."""
    return cycles_to_ps(-(-n_elements // topology.pe.vector_unit.lanes), topology.pe.clock_hz)
