"""The topology.yaml schema: one table of keys, each with its kind, unit and meaning.

Every key a topology file may hold is a row of `SCHEMA`; the nesting of
the file is derived from the dotted paths, so adding a key is one line and
the checks (missing key, unknown key with a suggestion, wrong type, bad
value) apply to it with no further code. Checks that relate several keys
are rows of `RULES`. `validate` returns the normalized value of every key
by its dotted path; nothing else in the package reads the raw YAML data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kernbench.topology.document import Document, KeyPath
from kernbench.topology.errors import TopologyError
from kernbench.topology.kinds import (
    GB_PER_S,
    GHZ,
    GIB,
    KIB,
    NANOSECONDS,
    Choice,
    Count,
    DistinctChoices,
    Fraction01,
    Quantity,
    RateTable,
    describe,
    suggestion,
)

LINK_SHAPES = ("ring", "full_mesh", "switch")
CORNERS = ("nw", "ne", "sw", "se")
DTYPES = ("f16", "bf16", "f32", "f64", "i8", "i32")
# How a tensor with no DPPolicy is laid out in its SIP (adr/0004, "Default placement"): `interleaved` deals
# its storage over every cube and PE, as a GPU interleaves every allocation over its memory stacks;
# `first_pe` keeps it whole on cube 0, PE 0.
DEFAULT_PLACEMENTS = ("interleaved", "first_pe")
# NCCL's protocols (adr/0010, "Protocols"): LL (8-byte stores, 4 of them payload, with a flag), LL128 (128-byte
# lines, 120 of them payload) and Simple (bulk copies, a fence and a flag per step).
PROTOCOLS = ("LL", "LL128", "Simple")
PROTOCOL_TERMS = ("bandwidth_efficiency", "message_overhead_ns", "launch_latency_ns", "exchange_latency_ns",
                  "step_latency_ns", "channel_min_kib", "slot_kib", "tuner_latency_ns", "tuner_step_latency_ns",
                  "tuner_efficiency")

# Bounds on the size of a machine (adr/0002, "Size"): far above any machine a
# study would simulate, low enough that what is listed per SIP, cube or PE
# stays small. 65,536 SIPs of 16 TiB address windows also keep every device
# address below 2^60, inside the int64 addresses kernels compute with.
MAX_SIPS = 65_536
MAX_MESH_SIDE = 64
MAX_PE_PER_CORNER = 16

REQUIRED = object()

# Where a user who wrote part of a file finds the rest: every key (this table, rendered) and a minimal file.
GUIDE = "docs/topology.md"

Kind = Count | Quantity | Choice | DistinctChoices | RateTable | Fraction01


@dataclass(frozen=True, slots=True)
class Field:
    """One key of the file: where it sits, what it holds, and what it means (quoted in error messages).

    A key with a `default` may be left out: the model terms added after the
    first machines were written (a link's payload efficiency, the IPCQ
    engine's rate) default to "no such loss", so every older file keeps
    its meaning, to the picosecond.
    """

    path: str
    kind: Kind
    meaning: str
    default: Any = REQUIRED


def _memory(prefix: str, capacity: Quantity, what: str) -> tuple[Field, ...]:
    """The three keys every memory (HBM, SRAM, TCM) has."""
    unit = capacity.unit.suffix
    return (
        Field(f"{prefix}.capacity{unit}", capacity, f"{what} capacity"),
        Field(f"{prefix}.bandwidth_gb_per_s", Quantity(GB_PER_S), f"{what} bandwidth"),
        Field(f"{prefix}.latency_ns", Quantity(NANOSECONDS, allow_zero=True), f"{what} access latency"),
    )


SCHEMA: tuple[Field, ...] = (
    Field("system.sips.count", Count(maximum=MAX_SIPS), "SIPs (devices) in the system"),
    Field("system.inter_sip.shape", Choice(LINK_SHAPES), "how the SIPs are linked"),
    Field("system.inter_sip.bandwidth_gb_per_s", Quantity(GB_PER_S), "bandwidth of one inter-SIP link, each direction"),
    Field("system.inter_sip.latency_ns", Quantity(NANOSECONDS, allow_zero=True), "latency of one inter-SIP link"),
    Field("system.inter_sip.payload_efficiency", Fraction01(),
          "share of an inter-SIP link's raw bandwidth that carries payload (the rest: packet headers, CRC, flow "
          "control)", default=Fraction(1)),
    Field("system.host_link.bandwidth_gb_per_s", Quantity(GB_PER_S), "host <-> SIP bandwidth, each direction"),
    Field("system.host_link.latency_ns", Quantity(NANOSECONDS, allow_zero=True), "host <-> SIP latency"),
    Field("system.host_link.kernel_launch_ns", Quantity(NANOSECONDS, allow_zero=True),
          "the host's time to launch one kernel or device op (framework, autograd and driver), during which "
          "device work already enqueued runs on", default=0),
    Field("system.host_link.collective_call_ns", Quantity(NANOSECONDS, allow_zero=True),
          "the host's time to issue one collective or send/recv call (the framework's work object, the "
          "collective library's enqueue and its kernel's launch) in a job of one GPU", default=0),
    Field("system.host_link.host_growth_per_gpu", Fraction01(allow_zero=True),
          "how much dearer every host call (a launch, a collective call) is for each GPU (rank process) of the "
          "job beyond the first, as a share of its one-GPU cost: the job's processes share their host",
          default=Fraction(0)),
    Field("sip.cube_mesh.w", Count(maximum=MAX_MESH_SIDE), "cubes across the SIP's mesh"),
    Field("sip.cube_mesh.h", Count(maximum=MAX_MESH_SIDE), "cubes down the SIP's mesh"),
    Field("sip.noc.hop_latency_ns", Quantity(NANOSECONDS, allow_zero=True), "latency of one NoC hop"),
    Field("sip.noc.link_bandwidth_gb_per_s", Quantity(GB_PER_S), "bandwidth of one NoC link, each direction"),
    # An L2 shared by every PE of the SIP (a GPU's), between its PEs and HBM: left out, there is none.
    Field("sip.l2.capacity_kib", Quantity(KIB), "capacity of the SIP's L2 (none when left out)", default=None),
    Field("sip.l2.bandwidth_gb_per_s", Quantity(GB_PER_S), "bandwidth of the SIP's L2, all PEs together",
          default=None),
    Field("sip.l2.latency_ns", Quantity(NANOSECONDS, allow_zero=True), "latency of an L2 hit", default=None),
    Field("sip.default_placement", Choice(DEFAULT_PLACEMENTS),
          "how a tensor with no DPPolicy is laid out: interleaved over every cube and PE, or whole on cube 0, PE 0",
          default="first_pe"),
    Field("sip.kernel_start_ns", Quantity(NANOSECONDS, allow_zero=True),
          "the device's time to start a kernel or device op once its turn on its stream comes (the front end "
          "launching its grid), however far ahead the host is", default=0),
    *_memory("cube.hbm", Quantity(GIB), "HBM stack"),
    Field("cube.hbm.efficiency", Fraction01(),
          "share of an HBM stack's peak bandwidth a stream of reads and writes sustains (the rest: refresh, bank "
          "conflicts, read/write turnaround)", default=Fraction(1)),
    *_memory("cube.sram", Quantity(KIB), "cube-shared SRAM"),
    Field("cube.pe_layout.corners", DistinctChoices(CORNERS), "corners of a cube that hold PEs"),
    Field("cube.pe_layout.pe_per_corner", Count(maximum=MAX_PE_PER_CORNER), "PEs at each listed corner"),
    Field("pe.clock_ghz", Quantity(GHZ), "PE clock"),
    *_memory("pe.tcm", Quantity(KIB), "PE tightly coupled memory"),
    Field("pe.dma.engines", Count(), "DMA engines per PE"),
    Field("pe.dma.bandwidth_gb_per_s", Quantity(GB_PER_S), "bandwidth of one DMA engine"),
    Field("pe.matrix_unit.flops_per_cycle", RateTable(DTYPES), "matrix-unit flops per cycle, per dtype"),
    Field("pe.vector_unit.lanes", Count(), "vector elements per cycle"),
    Field("pe.resident_programs", Count(), "kernel programs a PE keeps in flight (one computes while another waits)"),
    Field("ipcq.depth", Count(), "slots in one IPCQ ring buffer"),
    Field("ipcq.max_slot_kib", Quantity(KIB), "largest IPCQ slot"),
    Field("ipcq.message_overhead_ns", Quantity(NANOSECONDS, allow_zero=True), "fixed cost of one IPCQ message"),
    Field("ipcq.engine_bandwidth_gb_per_s", Quantity(GB_PER_S),
          "rate at which one PE's IPCQ engine puts messages on the wire, all its queues together (unlimited when "
          "left out)", default=None),
    Field("ipcq.launch_latency_ns", Quantity(NANOSECONDS, allow_zero=True),
          "fixed cost of starting one collective: its programs' launch on every member and its queues' first "
          "handshake", default=0),
    *(field for name in PROTOCOLS for field in (
        Field(f"ipcq.protocols.{name}.bandwidth_efficiency", Fraction01(),
              f"share of the payload rate a message moves under NCCL's {name} protocol (its flags and line "
              "format take the rest)", default=None),
        Field(f"ipcq.protocols.{name}.message_overhead_ns", Quantity(NANOSECONDS, allow_zero=True),
              f"fixed cost of one IPCQ message under {name}, in place of ipcq.message_overhead_ns", default=None),
        Field(f"ipcq.protocols.{name}.launch_latency_ns", Quantity(NANOSECONDS, allow_zero=True),
              f"fixed cost of starting one collective under {name}, in place of ipcq.launch_latency_ns",
              default=None),
        Field(f"ipcq.protocols.{name}.exchange_latency_ns", Quantity(NANOSECONDS, allow_zero=True),
              f"fixed cost a call under {name} pays besides its launch where every rank both sends and receives "
              "(all_reduce, all_gather, reduce_scatter), not where data flows one way (broadcast, reduce) nor "
              "for grouped sends and receives (send, scatter, gather, all_to_all)", default=None),
        Field(f"ipcq.protocols.{name}.step_latency_ns", Quantity(NANOSECONDS, allow_zero=True),
              f"latency of one step of an algorithm under {name} beyond its simulated messages, paid at the "
              "launch once per step the algorithm takes", default=None),
        Field(f"ipcq.protocols.{name}.channel_min_kib", Quantity(KIB),
              f"bytes of a call per channel under {name} before `auto` opens another (NCCL's threads per channel "
              "times its per-thread threshold), in place of ccl.yaml's channel_min_kib", default=None),
        Field(f"ipcq.protocols.{name}.slot_kib", Quantity(KIB),
              f"largest IPCQ slot `auto` gives a message under {name} (NCCL's step of that protocol's buffer), at "
              "most ipcq.max_slot_kib", default=None),
        Field(f"ipcq.protocols.{name}.tuner_latency_ns", Quantity(NANOSECONDS, allow_zero=True),
              f"what `auto`'s model, as NCCL's tuner, charges a call under {name} once (NCCL's base latency)",
              default=None),
        Field(f"ipcq.protocols.{name}.tuner_step_latency_ns", Quantity(NANOSECONDS, allow_zero=True),
              f"what `auto`'s model, as NCCL's tuner, charges a call under {name} per step of its algorithm "
              "(NCCL's per-hop latency of the link)", default=None),
        Field(f"ipcq.protocols.{name}.tuner_efficiency", Fraction01(),
              f"the share of the link's payload rate `auto`'s model gives {name} (NCCL's protocol factor)",
              default=None))),
)


@dataclass(frozen=True, slots=True)
class Rule:
    """A constraint across keys; `problem` returns None when it holds, else what is wrong (blamed on `path`)."""

    path: str
    problem: Callable[[Mapping[str, Any]], str | None]


def _ipcq_fits_in_tcm(values: Mapping[str, Any]) -> str | None:
    ring = values["ipcq.depth"] * values["ipcq.max_slot_kib"]
    tcm = values["pe.tcm.capacity_kib"]
    if ring <= tcm:
        return None
    return (
        f"one IPCQ ring buffer of ipcq.depth x ipcq.max_slot_kib = {ring / 1024:g} KiB does not fit in "
        f"pe.tcm.capacity_kib = {tcm / 1024:g} KiB; expected depth x max slot <= TCM capacity "
        "(a queue must be placeable in its PE's TCM)"
    )


def _l2_whole(values: Mapping[str, Any]) -> str | None:
    keys = [field.path for field in SCHEMA if field.path.startswith("sip.l2.")]
    missing = [path for path in keys if values[path] is None]
    if len(missing) in (0, len(keys)):
        return None
    names = ", ".join(path.rsplit(".", 1)[1] for path in keys)
    return (f"an L2 needs all of {names}; missing {', '.join(path.rsplit('.', 1)[1] for path in missing)} "
            "(leave sip.l2 out for no L2)")


def _protocols_whole(values: Mapping[str, Any]) -> str | None:
    """A protocol given at all is given whole: each of its terms present (adr/0010, "Protocols")."""
    for name in PROTOCOLS:
        keys = [f"ipcq.protocols.{name}.{term}" for term in PROTOCOL_TERMS]
        missing = [key for key in keys if values[key] is None]
        if 0 < len(missing) < len(keys):
            return (f"protocol {name} is missing {', '.join(missing)}; expected all of "
                    f"{', '.join(PROTOCOL_TERMS)} (or leave ipcq.protocols.{name} out)")
        slot = values[f"ipcq.protocols.{name}.slot_kib"]
        if slot is not None and slot > values["ipcq.max_slot_kib"]:
            return (f"ipcq.protocols.{name}.slot_kib = {slot / 1024:g} KiB is above ipcq.max_slot_kib = "
                    f"{values['ipcq.max_slot_kib'] / 1024:g} KiB; expected a slot the queues can hold")
    return None


RULES: tuple[Rule, ...] = (Rule("ipcq.max_slot_kib", _ipcq_fits_in_tcm), Rule("sip.l2", _l2_whole),
                           Rule("ipcq.protocols", _protocols_whole))


def _tree(fields: tuple[Field, ...]) -> dict[str, Any]:
    """Nest the dotted paths: {"system": {"sips": {"count": Field}}, ...}."""
    root: dict[str, Any] = {}
    for field in fields:
        *sections, leaf = field.path.split(".")
        node = root
        for section in sections:
            node = node.setdefault(section, {})
        node[leaf] = field
    return root


SCHEMA_TREE = _tree(SCHEMA)


def validate(document: Document) -> dict[str, Any]:
    """Check the document against `SCHEMA` and `RULES`; return each key's normalized value by dotted path.

    Raises the first problem as one `TopologyError`. Unknown keys are
    reported before missing ones, because a misspelt key shows up as both
    and the unknown one carries the useful suggestion.
    """
    values: dict[str, Any] = {}
    _check_section(SCHEMA_TREE, document.data, (), document, values)
    for rule in RULES:
        problem = rule.problem(values)
        if problem is not None:
            raise document.error(tuple(rule.path.split(".")), problem)
    return values


def _check_section(tree: dict[str, Any], data: Any, path: KeyPath, document: Document, values: dict) -> None:
    keys = tuple(tree)
    if not isinstance(data, dict):
        raise document.error(path, f"found {describe(data)}; expected a mapping with keys {', '.join(keys)}")
    for key in data:
        if key not in tree:
            raise document.error(
                path + (key,), f"unknown key{suggestion(key, keys)}; expected one of {', '.join(keys)} here"
            )
    for key, entry in tree.items():
        if key not in data:
            if _optional(entry):
                continue
            if isinstance(entry, Field):
                what = f"{entry.kind.expected} ({entry.meaning})"
            else:
                what = f"a mapping with keys {', '.join(entry)}"
            raise document.error(path + (key,), f"missing key; expected {what}; see {GUIDE} for every key "
                                                 "and a minimal file")
    for key, entry in tree.items():
        if key not in data:
            _take_defaults(entry, values)
        elif isinstance(entry, Field):
            try:
                values[entry.path] = entry.kind.normalize(data[key], path + (key,), document)
            except TopologyError as error:
                # Kinds know the value, not the key; the key's meaning makes the message actionable.
                raise TopologyError(f"{error} ({entry.meaning})") from None
        else:
            _check_section(entry, data[key], path + (key,), document, values)


def _optional(entry) -> bool:
    """A key that may be left out: a field with a default, or a section of nothing but such fields."""
    if isinstance(entry, Field):
        return entry.default is not REQUIRED
    return all(_optional(child) for child in entry.values())


def _take_defaults(entry, values: dict) -> None:
    if isinstance(entry, Field):
        values[entry.path] = entry.default
    else:
        for child in entry.values():
            _take_defaults(child, values)
