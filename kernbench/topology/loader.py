"""Find a topology file, read it, validate it, and build the frozen `Topology`.

This is the edge where YAML becomes typed objects: the only code that turns
the schema's normalized values into specs.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernbench.topology.document import parse_document, read_bounded
from kernbench.topology.errors import TopologyError
from kernbench.topology.model import Topology
from kernbench.topology.schema import PROTOCOL_TERMS, PROTOCOLS, validate
from kernbench.topology.specs import (
    CubeSpec,
    DmaSpec,
    InterSipSpec,
    IpcqSpec,
    LinkSpec,
    MatrixUnitSpec,
    MemorySpec,
    MeshSpec,
    NocSpec,
    PeLayoutSpec,
    PeSpec,
    ProtocolSpec,
    SipSpec,
    SystemSpec,
    VectorUnitSpec,
)

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "configs" / "topology"
DEFAULT_TOPOLOGY_PATH = SHIPPED_DIR / "default.yaml"


def shipped_topology_names() -> tuple[str, ...]:
    """Names accepted in place of a path: the stems of the files shipped in `kernbench/configs/topology`."""
    return tuple(sorted(path.stem for path in SHIPPED_DIR.glob("*.yaml")))


def resolve_topology_path(path_or_name: str | os.PathLike | None) -> Path:
    """None is the shipped default; a shipped name is its shipped file; anything else is a path."""
    if path_or_name is None:
        return DEFAULT_TOPOLOGY_PATH
    if isinstance(path_or_name, str) and path_or_name in shipped_topology_names():
        return SHIPPED_DIR / f"{path_or_name}.yaml"
    return Path(path_or_name)


def load_topology(path_or_name: str | os.PathLike | None = None) -> Topology:
    """Load a topology file (None: the shipped default; or a shipped name; or a path).

    Every problem with the file — missing, unreadable, not YAML, not matching
    the schema — is one `TopologyError` naming the file, the line and the key.
    """
    path = resolve_topology_path(path_or_name)
    source = str(path)
    try:
        raw = read_bounded(path)
    except FileNotFoundError:
        names = ", ".join(shipped_topology_names())
        raise TopologyError(f"{source}: no such topology file; expected a path or a shipped name ({names})") from None
    except OSError as error:
        raise TopologyError(f"{source}: cannot read the topology file: {error.strerror or error}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise TopologyError(f"{source}:{line}: the file is not UTF-8 text (byte 0x{raw[error.start]:02x})") from None
    document = parse_document(text, source)
    values = validate(document)
    return _build(values, document.data, path)


def _memory(values: Mapping[str, Any], prefix: str, capacity_key: str) -> MemorySpec:
    return MemorySpec(
        capacity_bytes=values[f"{prefix}.{capacity_key}"],
        bandwidth_bytes_per_s=values[f"{prefix}.bandwidth_gb_per_s"],
        latency_ps=values[f"{prefix}.latency_ns"],
    )


def _build(values: Mapping[str, Any], data: dict, path: Path) -> Topology:
    return Topology(
        system=SystemSpec(
            sip_count=values["system.sips.count"],
            inter_sip=InterSipSpec(
                shape=values["system.inter_sip.shape"],
                bandwidth_bytes_per_s=values["system.inter_sip.bandwidth_gb_per_s"],
                latency_ps=values["system.inter_sip.latency_ns"],
                payload_efficiency=values["system.inter_sip.payload_efficiency"],
            ),
            host_link=LinkSpec(
                bandwidth_bytes_per_s=values["system.host_link.bandwidth_gb_per_s"],
                latency_ps=values["system.host_link.latency_ns"],
            ),
            kernel_launch_ps=values["system.host_link.kernel_launch_ns"],
            collective_call_ps=values["system.host_link.collective_call_ns"],
            host_growth_per_gpu=values["system.host_link.host_growth_per_gpu"],
        ),
        sip=SipSpec(
            cube_mesh=MeshSpec(w=values["sip.cube_mesh.w"], h=values["sip.cube_mesh.h"]),
            noc=NocSpec(
                hop_latency_ps=values["sip.noc.hop_latency_ns"],
                link_bandwidth_bytes_per_s=values["sip.noc.link_bandwidth_gb_per_s"],
            ),
            l2=None if values["sip.l2.capacity_kib"] is None else _memory(values, "sip.l2", "capacity_kib"),
            default_placement=values["sip.default_placement"],
            kernel_start_ps=values["sip.kernel_start_ns"],
        ),
        cube=CubeSpec(
            hbm=replace(_memory(values, "cube.hbm", "capacity_gib"), efficiency=values["cube.hbm.efficiency"]),
            sram=_memory(values, "cube.sram", "capacity_kib"),
            pe_layout=PeLayoutSpec(
                corners=values["cube.pe_layout.corners"],
                pe_per_corner=values["cube.pe_layout.pe_per_corner"],
            ),
        ),
        pe=PeSpec(
            clock_hz=values["pe.clock_ghz"],
            tcm=_memory(values, "pe.tcm", "capacity_kib"),
            dma=DmaSpec(engines=values["pe.dma.engines"], bandwidth_bytes_per_s=values["pe.dma.bandwidth_gb_per_s"]),
            matrix_unit=MatrixUnitSpec(flops_per_cycle=values["pe.matrix_unit.flops_per_cycle"]),
            vector_unit=VectorUnitSpec(lanes=values["pe.vector_unit.lanes"]),
            resident_programs=values["pe.resident_programs"],
        ),
        ipcq=IpcqSpec(
            depth=values["ipcq.depth"],
            max_slot_bytes=values["ipcq.max_slot_kib"],
            message_overhead_ps=values["ipcq.message_overhead_ns"],
            engine_bandwidth_bytes_per_s=values["ipcq.engine_bandwidth_gb_per_s"],
            launch_latency_ps=values["ipcq.launch_latency_ns"],
            protocols=tuple(
                ProtocolSpec(name, *(values[f"ipcq.protocols.{name}.{term}"] for term in PROTOCOL_TERMS))
                for name in PROTOCOLS if values[f"ipcq.protocols.{name}.bandwidth_efficiency"] is not None),
        ),
        source=path,
        as_written=copy.deepcopy(data),
    )
