"""Where bytes can be: the host, a cube's HBM or shared SRAM, a PE's TCM."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A SIP named in a resource's or record's name ("sip3.cube1.hbm", "link sip0->sip2").
SIP_TOKEN = re.compile(r"\bsip(\d+)\b")


def named_sips(text: str) -> set[int]:
    """The SIPs a name names (one for a SIP's own memory, NoC or port; two for a link between two)."""
    return {int(match.group(1)) for match in SIP_TOKEN.finditer(text)}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A memory a DMA reads or writes: `kind` is host, hbm, sram or tcm; `pe` only for tcm."""

    kind: str
    sip: int = -1
    cube: int = -1
    pe: int = -1

    def __str__(self) -> str:
        if self.kind == "host":
            return "host"
        where = f"sip{self.sip}.cube{self.cube}"
        return f"{where}.pe{self.pe}.tcm" if self.kind == "tcm" else f"{where}.{self.kind}"


HOST = Endpoint("host")


def host() -> Endpoint:
    return HOST


def hbm(sip: int, cube: int) -> Endpoint:
    return Endpoint("hbm", sip, cube)


def sram(sip: int, cube: int) -> Endpoint:
    return Endpoint("sram", sip, cube)


def tcm(sip: int, cube: int, pe: int) -> Endpoint:
    return Endpoint("tcm", sip, cube, pe)
