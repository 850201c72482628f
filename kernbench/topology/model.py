"""`Topology`: one loaded machine, its derived facts, routes and the `spec` view for benches.

Everything above this layer asks a `Topology` (PE counts, peak rates,
routes) instead of computing from raw numbers, so a fact has one definition.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, is_dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from kernbench.topology import routes
from kernbench.topology.errors import TopologyError
from kernbench.topology.routes import InterSipLinks, Link
from kernbench.topology.specs import CubeSpec, IpcqSpec, PeSpec, SipSpec, SystemSpec


@dataclass(frozen=True, slots=True, order=True)
class PeAddress:
    """A PE's identity: SIP index, cube index within the SIP, PE index within the cube."""

    sip: int
    cube: int
    pe: int

    @property
    def name(self) -> str:
        return f"sip{self.sip}.c{self.cube}.pe{self.pe}"


def _as_json(value: Any) -> Any:
    if is_dataclass(value):
        return {f.name: _as_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_as_json(item) for item in value]
    if isinstance(value, Fraction):
        return float(value)
    return value


@dataclass(frozen=True, slots=True)
class Topology:
    """A machine as described by one topology file, with every unit normalized to integers.

    `source` is the file it came from; `as_written` is the file's plain data,
    kept private to the `spec` view.
    """

    system: SystemSpec
    sip: SipSpec
    cube: CubeSpec
    pe: PeSpec
    ipcq: IpcqSpec
    source: Path
    as_written: dict = field(repr=False, compare=False, hash=False)

    # -- counts ---------------------------------------------------------------

    @property
    def n_sips(self) -> int:
        return self.system.sip_count

    @property
    def cubes_per_sip(self) -> int:
        return self.sip.cube_mesh.w * self.sip.cube_mesh.h

    @property
    def pes_per_cube(self) -> int:
        return self.cube.pe_layout.pes_per_cube

    @property
    def pes_per_sip(self) -> int:
        return self.cubes_per_sip * self.pes_per_cube

    @property
    def total_pes(self) -> int:
        return self.n_sips * self.pes_per_sip

    @property
    def hbm_bytes_per_sip(self) -> int:
        return self.cubes_per_sip * self.cube.hbm.capacity_bytes

    # -- compute --------------------------------------------------------------

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes the matrix unit has a rate for, in file order."""
        return self.pe.matrix_unit.dtypes

    def pe_peak_flops(self, dtype: str) -> int:
        """Matrix-unit peak of one PE in flops/s: flops per cycle x clock."""
        return self.pe.matrix_unit.rate(dtype) * self.pe.clock_hz

    def sip_peak_flops(self, dtype: str) -> int:
        return self.pe_peak_flops(dtype) * self.pes_per_sip

    def system_peak_flops(self, dtype: str) -> int:
        return self.pe_peak_flops(dtype) * self.total_pes

    # -- identities -----------------------------------------------------------

    def _check(self, what: str, index: int, count: int) -> None:
        if not 0 <= index < count:
            raise TopologyError(f"{what} {index} is out of range: {self.source} has {count} ({what}s 0..{count - 1})")

    def cube_xy(self, cube: int) -> tuple[int, int]:
        """(x, y) of a cube in its SIP's mesh; cube index = y * w + x."""
        self._check("cube", cube, self.cubes_per_sip)
        return cube % self.sip.cube_mesh.w, cube // self.sip.cube_mesh.w

    def cube_index(self, x: int, y: int) -> int:
        self._check("mesh column", x, self.sip.cube_mesh.w)
        self._check("mesh row", y, self.sip.cube_mesh.h)
        return y * self.sip.cube_mesh.w + x

    def corner_of(self, address: PeAddress) -> str:
        """The corner (nw, ne, sw, se) of its cube where the PE sits."""
        return self.cube.pe_layout.corner_of(address.pe)

    def pe_addresses(self, sip: int) -> tuple[PeAddress, ...]:
        """A SIP's PEs, cube by cube in index order, and within a cube by PE index."""
        self._check("SIP", sip, self.n_sips)
        return tuple(PeAddress(sip, cube, pe) for cube in range(self.cubes_per_sip) for pe in range(self.pes_per_cube))

    # -- links and routes -----------------------------------------------------

    def noc_route(self, src_cube: int, dst_cube: int, *, sip: int) -> tuple[Link, ...]:
        """NoC links from one cube to another inside SIP `sip`, x first then y; empty for the same cube."""
        self._check("SIP", sip, self.n_sips)
        self._check("cube", src_cube, self.cubes_per_sip)
        self._check("cube", dst_cube, self.cubes_per_sip)
        return routes.xy_route(sip, src_cube, dst_cube, self.sip.cube_mesh, self.sip.noc)

    def noc_links(self, sip: int) -> tuple[Link, ...]:
        """Every directed NoC link of SIP `sip`."""
        self._check("SIP", sip, self.n_sips)
        return routes.mesh_links(sip, self.sip.cube_mesh, self.sip.noc)

    def sip_route(self, src_sip: int, dst_sip: int) -> tuple[Link, ...]:
        """Inter-SIP links from one SIP to another (see `routes.inter_sip_route`); empty for the same SIP."""
        self._check("SIP", src_sip, self.n_sips)
        self._check("SIP", dst_sip, self.n_sips)
        return routes.inter_sip_route(src_sip, dst_sip, self.n_sips, self.system.inter_sip)

    def all_inter_sip_links(self) -> InterSipLinks:
        """Every directed inter-SIP link, each once: a lazy sequence, so `len` costs nothing at any size."""
        return InterSipLinks(self.n_sips, self.system.inter_sip)

    def host_to_sip_link(self, sip: int) -> Link:
        self._check("SIP", sip, self.n_sips)
        return routes.host_link(sip, True, self.system.host_link)

    def sip_to_host_link(self, sip: int) -> Link:
        self._check("SIP", sip, self.n_sips)
        return routes.host_link(sip, False, self.system.host_link)

    # -- views ----------------------------------------------------------------

    @property
    def spec(self) -> dict:
        """The file as written, as plain nested dicts and lists: a fresh deep copy on every access."""
        return copy.deepcopy(self.as_written)

    def to_json_dict(self) -> dict:
        """Normalized sections plus derived facts, JSON-serializable (what `kernbench topo --json` prints)."""
        sections = {name: _as_json(getattr(self, name)) for name in ("system", "sip", "cube", "pe", "ipcq")}
        sections["pe"]["matrix_unit"]["flops_per_cycle"] = dict(self.pe.matrix_unit.flops_per_cycle)
        link = self.system.inter_sip
        return {
            "source": str(self.source),
            **sections,
            "derived": {
                "n_sips": self.n_sips,
                "cubes_per_sip": self.cubes_per_sip,
                "pes_per_cube": self.pes_per_cube,
                "pes_per_sip": self.pes_per_sip,
                "total_pes": self.total_pes,
                "hbm_bytes_per_sip": self.hbm_bytes_per_sip,
                "hbm_bytes_total": self.hbm_bytes_per_sip * self.n_sips,
                "inter_sip_link": {
                    "shape": link.shape,
                    "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
                    "payload_bytes_per_s": link.payload_bytes_per_s,
                    "latency_ps": link.latency_ps,
                    "count": len(self.all_inter_sip_links()),
                },
                "peak_flops_per_s": {
                    dtype: {
                        "pe": self.pe_peak_flops(dtype),
                        "sip": self.sip_peak_flops(dtype),
                        "system": self.system_peak_flops(dtype),
                    }
                    for dtype in self.dtypes
                },
            },
        }
