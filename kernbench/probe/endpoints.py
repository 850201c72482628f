"""The places a probe moves bytes between, by name: `host`, `sip1`, `sip0.cube3.pe5`, `sip0.cube1.sram`, ….

| name | memory | who moves the bytes |
|---|---|---|
| `host` | host memory | the SIP's copy engine |
| `sipN`, `sipN.hbm` | HBM of cube 0, where a tensor sits unless told otherwise (`DPPolicy`) | copy engine |
| `sipN.cubeC`, `sipN.cubeC.hbm` | HBM of cube C | copy engine |
| `sipN.cubeC.sram` | the cube's shared SRAM | copy engine |
| `sipN.cubeC.peP` | PE P's TCM | PE P's own DMA engines, as a kernel's loads and stores |
| `sipN.cubeC.peP.tcm` | PE P's TCM, as a memory | copy engine |

A transfer is driven by at most one PE: the source when it is a PE, else
the destination.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernbench.errors import KernbenchError
from kernbench.machine import Endpoint, hbm, host, tcm
from kernbench.machine.endpoints import sram

NAMES = ("host", "sipN", "sipN.hbm", "sipN.cubeC", "sipN.cubeC.hbm", "sipN.cubeC.sram", "sipN.cubeC.peP",
         "sipN.cubeC.peP.tcm")
_GRAMMAR = re.compile(r"sip(\d+)(?:\.(hbm)|\.cube(\d+)(?:\.(hbm|sram)|\.pe(\d+)(\.tcm)?)?)?")


class ProbeError(KernbenchError):
    """A probe that cannot be made: an endpoint that is not a name or not in the machine, a size that is not one."""


@dataclass(frozen=True)
class ProbeEndpoint:
    """A named place: the memory a transfer reads or writes, and the PE whose DMA engines move it (or None)."""

    name: str
    memory: Endpoint
    pe: tuple[int, int, int] | None = None

    def __str__(self) -> str:
        return self.name


def parse_endpoint(text: str, topology) -> ProbeEndpoint:
    """The endpoint `text` names in `topology`; `ProbeError` naming the text and the valid forms otherwise."""
    if text == "host":
        return ProbeEndpoint("host", host())
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise ProbeError(f"endpoint {text!r}: expected one of {', '.join(NAMES)} (e.g. sip1, sip0.cube3.pe5)")
    sip_text, _, cube_text, memory, pe_text, tcm_suffix = match.groups()
    sip = _index(text, "SIP", sip_text, topology.n_sips)
    cube = _index(text, "cube", cube_text, topology.cubes_per_sip) if cube_text is not None else 0
    if pe_text is None:
        kind = memory or "hbm"
        endpoint = hbm(sip, cube) if kind == "hbm" else sram(sip, cube)
        return ProbeEndpoint(str(endpoint), endpoint)
    pe = _index(text, "PE", pe_text, topology.pes_per_cube)
    memory_endpoint = tcm(sip, cube, pe)
    if tcm_suffix:
        return ProbeEndpoint(str(memory_endpoint), memory_endpoint)
    return ProbeEndpoint(f"sip{sip}.cube{cube}.pe{pe}", memory_endpoint, (sip, cube, pe))


def _index(text: str, what: str, digits: str, count: int) -> int:
    index = int(digits)
    if index >= count:
        raise ProbeError(f"endpoint {text!r}: {what} {index} is not in the machine, which has {count} "
                         f"(0 to {count - 1})")
    return index
