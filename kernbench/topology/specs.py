"""Frozen, unit-normalized parts of a topology: one class per section of topology.yaml.

Field names mirror the file's keys with the unit made canonical: `_ns`
becomes `_ps`, `_gb_per_s` becomes `_bytes_per_s`, `_gib`/`_kib` become
`_bytes`, `_ghz` becomes `_hz`; every value is an exact integer, so the
cost model never sums floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kernbench.topology.errors import TopologyError


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """A point-to-point link; the bandwidth is per direction."""

    bandwidth_bytes_per_s: int
    latency_ps: int


@dataclass(frozen=True, slots=True)
class InterSipSpec:
    """How SIPs are joined: `shape` is ring, full_mesh or switch; each link is a `LinkSpec`.

    `bandwidth_bytes_per_s` is the raw signalling rate; `payload_efficiency`
    the share of it that carries data (a link spends the rest on packet
    headers, CRC and flow control), so traffic moves at `payload_bytes_per_s`.
    """

    shape: str
    bandwidth_bytes_per_s: int
    latency_ps: int
    payload_efficiency: Fraction = Fraction(1)

    @property
    def payload_bytes_per_s(self) -> int:
        # The whole bytes of bandwidth x efficiency (both >= 0), in integers: every route building asks, and
        # Fraction arithmetic is a tenth of the speed.
        efficiency = self.payload_efficiency
        return self.bandwidth_bytes_per_s * efficiency.numerator // efficiency.denominator


@dataclass(frozen=True, slots=True)
class SystemSpec:
    sip_count: int
    inter_sip: InterSipSpec
    host_link: LinkSpec
    kernel_launch_ps: int = 0  # the host's time to launch one kernel or device op, one GPU (adr/0016, "Launch cost")
    collective_call_ps: int = 0  # the host's time to issue one collective call, one GPU (adr/0010)
    host_growth_per_gpu: Fraction = Fraction(0)  # each further GPU of the job makes a host call this much dearer

    def host_call_ps(self, one_gpu_ps: int, gpus: int) -> int:
        """A host call that costs `one_gpu_ps` in a job of one GPU, in a job of `gpus` rank processes: the
        processes share their host, so each further one makes the call `host_growth_per_gpu` of it dearer
        (adr/0016, "Launch cost")."""
        return round(one_gpu_ps * (1 + self.host_growth_per_gpu * (max(gpus, 1) - 1)))


@dataclass(frozen=True, slots=True)
class MeshSpec:
    """A w x h grid of cubes; cube index = y * w + x."""

    w: int
    h: int


@dataclass(frozen=True, slots=True)
class NocSpec:
    """The on-package network: per-hop latency and per-link, per-direction bandwidth."""

    hop_latency_ps: int
    link_bandwidth_bytes_per_s: int


@dataclass(frozen=True, slots=True)
class SipSpec:
    cube_mesh: MeshSpec
    noc: NocSpec
    l2: "MemorySpec | None" = None  # shared by the SIP's PEs between them and HBM; None: no L2
    default_placement: str = "first_pe"  # the layout of a tensor with no DPPolicy: "interleaved" or "first_pe"
    kernel_start_ps: int = 0  # the device's time to start a kernel once its turn comes (adr/0016, "Launch cost")


@dataclass(frozen=True, slots=True)
class MemorySpec:
    """A memory: `bandwidth_bytes_per_s` is its peak; `efficiency` the share of it a stream of reads and writes
    sustains (an HBM stack spends the rest on refresh, bank conflicts and read/write turnaround), so traffic
    moves at `sustained_bytes_per_s`."""

    capacity_bytes: int
    bandwidth_bytes_per_s: int
    latency_ps: int
    efficiency: Fraction = Fraction(1)

    @property
    def sustained_bytes_per_s(self) -> int:
        efficiency = self.efficiency  # integers, as `InterSipSpec.payload_bytes_per_s`
        return self.bandwidth_bytes_per_s * efficiency.numerator // efficiency.denominator


@dataclass(frozen=True, slots=True)
class PeLayoutSpec:
    """Which corners of a cube hold PEs, and how many each; PE index = corner index * pe_per_corner + k."""

    corners: tuple[str, ...]
    pe_per_corner: int

    @property
    def pes_per_cube(self) -> int:
        return len(self.corners) * self.pe_per_corner

    def corner_of(self, pe: int) -> str:
        """The corner name of PE `pe` (its index within the cube)."""
        if not 0 <= pe < self.pes_per_cube:
            raise TopologyError(
                f"PE index {pe} is out of range: a cube has {self.pes_per_cube} PEs (0..{self.pes_per_cube - 1})"
            )
        return self.corners[pe // self.pe_per_corner]


@dataclass(frozen=True, slots=True)
class CubeSpec:
    hbm: MemorySpec
    sram: MemorySpec
    pe_layout: PeLayoutSpec


@dataclass(frozen=True, slots=True)
class DmaSpec:
    """`engines` DMA engines per PE, each with `bandwidth_bytes_per_s`."""

    engines: int
    bandwidth_bytes_per_s: int


@dataclass(frozen=True, slots=True)
class MatrixUnitSpec:
    """Matrix-unit throughput per dtype, as (dtype, flops per cycle) pairs in file order.

    Pairs rather than a dict keep the spec hashable and immutable.
    """

    flops_per_cycle: tuple[tuple[str, int], ...]

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dtype for dtype, _ in self.flops_per_cycle)

    def rate(self, dtype: str) -> int:
        """Flops per cycle for `dtype`; a dtype the unit has no rate for is a `TopologyError`."""
        for name, flops in self.flops_per_cycle:
            if name == dtype:
                return flops
        raise TopologyError(
            f"the matrix unit has no rate for dtype {dtype!r}; "
            f"pe.matrix_unit.flops_per_cycle lists {', '.join(self.dtypes)}"
        )


@dataclass(frozen=True, slots=True)
class VectorUnitSpec:
    lanes: int


@dataclass(frozen=True, slots=True)
class PeSpec:
    clock_hz: int
    tcm: MemorySpec
    dma: DmaSpec
    matrix_unit: MatrixUnitSpec
    vector_unit: VectorUnitSpec
    resident_programs: int


@dataclass(frozen=True, slots=True)
class IpcqSpec:
    """Hardware limits of inter-PE queues: slots per ring buffer, the largest slot, fixed cost per message, the
    rate of one PE's IPCQ engine (None: the engine never limits, the route does), and the fixed cost of
    starting a collective."""

    depth: int
    max_slot_bytes: int
    message_overhead_ps: int
    engine_bandwidth_bytes_per_s: int | None = None
    launch_latency_ps: int = 0
    protocols: tuple["ProtocolSpec", ...] = ()

    def protocol(self, name: str) -> "ProtocolSpec":
        """The protocol called `name`; a `KeyError` where the topology does not give it."""
        for protocol in self.protocols:
            if protocol.name == name:
                return protocol
        raise KeyError(name)


@dataclass(frozen=True)
class ProtocolSpec:
    """One NCCL protocol's terms (adr/0010, "Protocols"): the share of the payload rate its messages carry,
    its per-message, per-call (and per exchanging call) and per-step fixed costs, and the bytes of a call per
    channel `auto` opens; and what the tuner believes of it besides, as NCCL's tuner does: a latency per call
    and per step, a share of the link's rate."""

    name: str
    bandwidth_efficiency: Fraction
    message_overhead_ps: int
    launch_latency_ps: int
    exchange_latency_ps: int
    step_latency_ps: int
    channel_min_bytes: int
    slot_bytes: int
    tuner_latency_ps: int
    tuner_step_latency_ps: int
    tuner_efficiency: Fraction
