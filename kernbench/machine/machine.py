"""`Machine`: one simulated machine built from a topology — its memories, channels and DMAs.

Every physical resource the cost model charges is an engine `Channel` named
after the topology's link (or `sipS.cubeC.hbm` for a stack), created once, so
all traffic over one link contends for it. A SIP's I/O — its host link and
its inter-SIP links — enters through cube 0 (the I/O cube), so traffic from
outside crosses the mesh from there to the cube that holds the data.

`run_transfers` is the one DMA primitive: it reserves each transfer's route
at the current simulated time, reads the source bytes at the transfer's
start, and writes them at its end — the data executor's rule that a load
sees memory as of its start and a store becomes visible at its end. Work
that does not block in a process (an engine `Task`) uses its two halves:
`issue_transfers` (or `issue_dma`, one transfer given field by field) now,
`land` at each end.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kernbench.machine.data_executor import Access, DataHazard, HazardDetector, Region
from kernbench.machine.endpoints import SIP_TOKEN, Endpoint
from kernbench.machine.l2 import UNCACHED, L2Tags, read_tag
from kernbench.machine.memory import DeviceMemory
from kernbench.machine.pe import PeUnits, build_pe_units
from kernbench.run_caches import RunCaches
from kernbench.sim_engine import Channel, ExclusiveUnit, OpLog, Route
from kernbench.topology import Link, Topology

IO_CUBE = 0
_PATHS_BY_ID_KEPT = 4096


@dataclass(slots=True)  # not frozen: a frozen __init__ goes through object.__setattr__, half again the cost
class Transfer:
    """One DMA: `nbytes` from `src` to `dst` (`src=None`: the device writes values it made itself).

    `read()` is called at the transfer's start and its result handed to
    `write(values)` at its end; both are None in timing-only runs.
    `src_region` / `dst_region` name the bytes of a tensor it reads or
    writes, for hazard detection (ADR 0009); None where no tensor is touched.
    """

    src: Endpoint | None
    dst: Endpoint
    nbytes: int
    read: Callable[[], np.ndarray] | None = None
    write: Callable[[np.ndarray], None] | None = None
    src_region: Region | None = None
    dst_region: Region | None = None


class FlowIds:
    """A machine's flow-id counter (`next(ids)`), whose next id can also be read and moved on: ids are unique per
    machine, so every IPCQ send pairs with exactly its receive in a trace."""

    __slots__ = ("next_id",)

    def __init__(self):
        self.next_id = 1

    def __next__(self) -> int:
        value = self.next_id
        self.next_id = value + 1
        return value


# A PE's own channel in `Machine.channels` ("sip1.cube2.pe0.dma0"): made with its PE.
_PE_CHANNEL = re.compile(r"sip(\d+)\.cube(\d+)\.pe(\d+)\..*")


class Machine:
    """The simulated hardware of one run."""

    def __init__(self, topology: Topology, engine, *, backed: bool = True, caches: RunCaches | None = None):
        """`backed=False` (timing-only runs): memories keep no values, only capacity. `caches`: the run's speed
        caches, which the machine's routes and the placed DMAs use (a machine built alone has its own)."""
        self.topology = topology
        self.engine = engine
        self.caches = RunCaches() if caches is None else caches
        self.flow_ids = FlowIds()  # of the IPCQ messages sent on this machine (ipcq.py)
        self.oplog = OpLog()
        self.hazards = HazardDetector()
        capacity = topology.cube.hbm.capacity_bytes
        self.memory = [DeviceMemory(s, topology.cubes_per_sip, capacity, backed=backed)
                       for s in range(topology.n_sips)]
        self.channels: dict[str, Channel] = {}
        self._channel_kind: dict[str, str] = {}
        self._routes: dict[tuple[Endpoint | None, Endpoint], list[Channel]] = self.caches["machine.routes"]
        self._paths: dict[tuple[Endpoint | None, Endpoint], _Path] = self.caches["machine.paths"]
        self._paths_by_id: dict[tuple[int, int], tuple[_Path, Endpoint | None, Endpoint]] = (
            self.caches["machine.paths_by_id"])
        self._pes: dict[tuple[int, int, int], PeUnits] = {}
        self._l2_tags: dict[int, L2Tags] = {}
        self.spmd_episode = None  # the replicated spawn under way (runtime_api/spmd.py), which collectives follow

    def pe(self, sip: int, cube: int, pe: int) -> PeUnits:
        """The engines of one PE (created on first use, so idle PEs cost nothing)."""
        key = (sip, cube, pe)
        units = self._pes.get(key)
        if units is None:
            units = self._pes[key] = build_pe_units(self.engine, self.topology, sip, cube, pe)
            for channel in (*units.dma_engines, units.tcm):
                self.channels[f"sip{sip}.{channel.name}"] = channel
                self._channel_kind[f"sip{sip}.{channel.name}"] = "tcm" if channel is units.tcm else "dma"
        return units

    def pes(self) -> list[PeUnits]:
        """Every PE used so far, in a fixed order."""
        return [self._pes[key] for key in sorted(self._pes)]

    # ---- channels and routes ----------------------------------------------------------
    def _channel(self, name: str, kind: str, bandwidth_bytes_per_s: int, latency_ps: int, device: str) -> Channel:
        """The channel named `name`, made (and its kind recorded) on first use."""
        channel = self.channels.get(name)
        if channel is None:
            channel = self.channels[name] = Channel(self.engine, name, bandwidth_bytes_per_s, latency_ps, device=device)
            self._channel_kind[name] = kind
        return channel

    def twin_channel(self, name: str, twin: str, shift: int) -> Channel:
        """Channel `twin`, made alike channel `name` (its kind, numbers and device `shift` SIPs on) if no route has
        made it yet: where a replicated SIP passes on what its twin booked (adr/0022)."""
        if twin in self.channels:
            return self.channels[twin]
        source = self.channels[name]
        device = SIP_TOKEN.sub(lambda m: f"sip{(int(m.group(1)) + shift) % self.topology.n_sips}", source.device)
        pe = _PE_CHANNEL.fullmatch(twin)
        if pe is not None:
            self.pe(*map(int, pe.groups()))
            return self.channels[twin]
        return self._channel(twin, self._channel_kind[name], source.bandwidth_bytes_per_s, source.latency_ps, device)

    def _link_channel(self, link: Link, device: str) -> Channel:
        return self._channel(link.name, link.kind, link.bandwidth_bytes_per_s, link.latency_ps, device)

    def ipcq_engine(self, sip: int, cube: int, pe: int) -> Channel | None:
        """The channel of one PE's IPCQ engine, which every message it sends crosses first (so its queues
        share the engine's rate); None where the topology gives the engine no rate of its own."""
        rate = self.topology.ipcq.engine_bandwidth_bytes_per_s
        if rate is None:
            return None
        return self._channel(f"sip{sip}.cube{cube}.pe{pe}.ipcq_engine", "ipcq_engine", rate, 0, f"sip{sip}")

    def hbm_channel(self, sip: int, cube: int) -> Channel:
        return self._memory_channel("hbm", sip, cube, self.topology.cube.hbm)

    def sram_channel(self, sip: int, cube: int) -> Channel:
        """The cube-shared SRAM on the base die (an IPCQ buffer kind), one channel per cube."""
        return self._memory_channel("sram", sip, cube, self.topology.cube.sram)

    def _memory_channel(self, kind: str, sip: int, cube: int, spec) -> Channel:
        return self._channel(f"sip{sip}.cube{cube}.{kind}", kind, spec.sustained_bytes_per_s, spec.latency_ps,
                             f"sip{sip}")

    def _noc(self, sip: int, src_cube: int, dst_cube: int) -> list[Channel]:
        return [self._link_channel(link, f"sip{sip}")
                for link in self.topology.noc_route(src_cube, dst_cube, sip=sip)]

    def route(self, src: Endpoint | None, dst: Endpoint) -> list[Channel]:
        """The channels a transfer from `src` to `dst` crosses, in order (cached per pair)."""
        key = (src, dst)
        cached = self._routes.get(key)
        if cached is None:
            cached = self._routes[key] = self._build_route(src, dst)
        return cached

    def _build_route(self, src: Endpoint | None, dst: Endpoint) -> list[Channel]:
        topology = self.topology
        if dst.kind == "host":
            return (self._device_side(src) + self._noc(src.sip, src.cube, IO_CUBE)
                    + [self._link_channel(topology.sip_to_host_link(src.sip), f"sip{src.sip}")])
        if src is None:
            return self._device_side(dst)
        if src.kind == "host":
            return ([self._link_channel(topology.host_to_sip_link(dst.sip), f"sip{dst.sip}")]
                    + self._noc(dst.sip, IO_CUBE, dst.cube) + self._device_side(dst))
        if src.sip == dst.sip:
            middle = self._noc(src.sip, src.cube, dst.cube)
        else:
            middle = (self._noc(src.sip, src.cube, IO_CUBE)
                      + [self._link_channel(link, "system") for link in topology.sip_route(src.sip, dst.sip)]
                      + self._noc(dst.sip, IO_CUBE, dst.cube))
        ends = self._device_side(src) + middle + self._device_side(dst)
        return _without_repeats(ends)

    def _device_side(self, endpoint: Endpoint) -> list[Channel]:
        if endpoint.kind == "tcm":
            return [self.pe(endpoint.sip, endpoint.cube, endpoint.pe).tcm]
        if endpoint.kind == "sram":
            return [self.sram_channel(endpoint.sip, endpoint.cube)]
        return [self.hbm_channel(endpoint.sip, endpoint.cube)]

    def nearest_replica(self, placement, sip: int, cube: int) -> int:
        """The replica of a placement whose cube is fewest mesh hops from `cube` (the lowest on a tie)."""
        if placement.replicas == 1:
            return 0
        home = {shard.replica: shard.cube for shard in placement.shards}
        return min(range(placement.replicas),
                   key=lambda r: (len(self.topology.noc_route(home[r], cube, sip=sip)), r))

    # ---- the DMA primitive ------------------------------------------------------------
    def run_transfers(self, transfers: list[Transfer], *, label: str, data: bool = True,
                      device: str | None = None, unit: str = "copy_engine", program=None,
                      dma_engine: Channel | None = None) -> int:
        """Run DMAs issued together by the calling process; return when the last has landed.

        All are reserved at the current time, in list order (so a shared link
        serves them first come, first served); each one's source is read at
        its start and its destination written at its end. A PE's DMAs also
        pass through the PE's `dma_engine`, which caps their rate. Reads of
        tensor bytes another process is still writing are recorded in
        `hazards` (raised as `DataHazard` when it is strict). Returns the
        end time.
        """
        engine = self.engine
        landing = self.issue_transfers(transfers, label=label, data=data, device=device, unit=unit,
                                       program=program, dma_engine=dma_engine, owner=engine.current_process)
        for end, effect in landing:
            engine.sleep_until(end)
            self.land(effect)
        return landing[-1][0] if landing else engine.now

    def issue_transfers(self, transfers: list[Transfer], *, label: str, data: bool, device: str | None, unit: str,
                        program, dma_engine: Channel | None, owner) -> list[tuple[int, "_Effect"]]:
        """The first half of `run_transfers`, for work that does not block in a process (an engine `Task`):
        reserve every transfer now and return `(end, effect)` in landing order; the caller then calls
        `land(effect)` at each end. `owner` is the process or task the DMAs belong to (for hazards)."""
        landing = [self.issue_dma(item.src, item.dst, item.nbytes, item.read, item.write, item.src_region,
                                  item.dst_region, label, data, device, unit, program, dma_engine, owner)
                   for item in transfers]
        if len(landing) > 1:
            landing.sort(key=landing_time)  # stable: equal ends land in issue order
        return landing

    def land(self, effect: "_Effect") -> None:
        """A transfer's end: raise its hazard if strict, then write its values and retire its write."""
        if effect.hazard is not None and self.hazards.strict:
            raise DataHazard(effect.hazard)
        if effect.values is not None and effect.write is not None:
            effect.write(effect.values)
        if effect.in_flight is not None:
            self.hazards.write_landed(effect.in_flight)
            effect.in_flight = None  # it names the effect (who wrote): drop the cycle, free both at once

    def issue_dma(self, src: Endpoint | None, dst: Endpoint, nbytes: int, read, write, src_region: Region | None,
                  dst_region: Region | None, label: str, data: bool, device: str | None, unit: str, program,
                  dma_engine: Channel | None, owner, l2_window: int | None = None) -> tuple[int, "_Effect"]:
        """One `Transfer` of `issue_transfers`, its fields given one by one (the placed DMAs' path, which
        builds no `Transfer`): reserve its route now, log it, arrange its read at its start; return
        `(end, effect)`. `l2_window`: for a read streamed in step by the other readers of the same bytes (a
        GEMM's panel), the bytes of it an L2 holds at once — the window between its first and last reader —
        rather than all of them; 0 for a read the L2 does not serve and that holds nothing (`UNCACHED`)."""
        known = self._paths_by_id.get((id(src), id(dst)))
        path = known[0] if known is not None and known[1] is src and known[2] is dst else self._path(src, dst)
        return self.issue_path_dma(path, nbytes, read, write, src_region, dst_region, label, data,
                                   device or _device_of(src, dst), unit, program, dma_engine, owner, l2_window)

    def dma_path(self, src: Endpoint | None, dst: Endpoint) -> "_Path":
        """The resolved pair (src, dst) for `issue_path_dma`, for a caller that issues many DMAs between them."""
        return self._path(src, dst)

    def issue_path_dma(self, path: "_Path", nbytes: int, read, write, src_region: Region | None,
                       dst_region: Region | None, label: str, data: bool, device: str, unit: str, program,
                       dma_engine: Channel | None, owner, l2_window: int | None = None) -> tuple[int, "_Effect"]:
        """`issue_dma` between the endpoints of `path` (from `dma_path`), its device given."""
        engine = self.engine
        if path.l2 is not None and src_region is not None and l2_window != UNCACHED:  # an HBM read an L2 serves
            hit, tags = path.l2
            if tags.read(read_tag(src_region), nbytes if l2_window is None else min(nbytes, l2_window)):
                path = hit
        route = path.through.get(dma_engine)
        if route is None:
            route = path.through[dma_engine] = Route(path.route if dma_engine is None else [dma_engine, *path.route])
        start, end = route.transfer(engine, nbytes)
        self.oplog.append_pairs("dma", device, unit, label, program, nbytes, 0, start, end, path.pairs)
        effect = _Effect(read if data else None, write, src_region)
        if src_region is not None or dst_region is not None:
            effect.op = (label, program, device, unit, start, end)
        if effect.read is not None or src_region is not None:  # else nothing happens at its start
            if start > engine._now:
                engine.call_at(start, self._read_at_start, (effect, owner))
            else:
                self._read(effect, owner)
        if dst_region is not None:
            effect.in_flight = self.hazards.write_issued(dst_region, end, effect.access, owner)
        return end, effect

    def _path(self, src: Endpoint | None, dst: Endpoint) -> "_Path":
        """The resolved pair (src, dst), found by value, then remembered by the identity of these two
        objects: callers that keep their endpoints (placed DMAs) skip hashing them. The entry holds the
        objects, so their ids cannot be reused while it is kept."""
        path = self._paths.get((src, dst))
        if path is None:
            path = self._paths[src, dst] = self._new_path(src, dst)
        if len(self._paths_by_id) >= _PATHS_BY_ID_KEPT:
            self._paths_by_id.clear()
        self._paths_by_id[id(src), id(dst)] = (path, src, dst)
        return path

    def _new_path(self, src: Endpoint | None, dst: Endpoint) -> "_Path":
        """A read of HBM into a PE's TCM on a SIP with an L2 passes through it (a miss, which the L2 then
        holds) or comes from it (a hit: `_Path.l2`); every other pair takes its route."""
        route = self.route(src, dst)
        spec = self.topology.sip.l2
        if spec is None or src is None or src.kind != "hbm" or dst.kind != "tcm" or src.sip != dst.sip:
            return _Path(route, src, dst)
        l2 = self._channel(f"sip{src.sip}.l2", "l2", spec.bandwidth_bytes_per_s, spec.latency_ps, f"sip{src.sip}")
        path = _Path([*route[:-1], l2, route[-1]], src, dst)
        hit = _Path([l2, route[-1]], src, dst)
        hit.pairs = (("src", l2.name), ("dst", str(dst)))
        path.l2 = (hit, self.l2_tags(src.sip))
        return path

    def l2_tags(self, sip: int) -> L2Tags | None:
        """What SIP `sip`'s L2 holds (None on a topology without one)."""
        spec = self.topology.sip.l2
        if spec is None:
            return None
        tags = self._l2_tags.get(sip)
        if tags is None:
            tags = self._l2_tags[sip] = L2Tags(spec.capacity_bytes)
        return tags

    def _read_at_start(self, call: tuple) -> None:
        self._read(*call)

    def _read(self, effect: "_Effect", owner) -> None:
        """A transfer's start: check its source against writes in flight, then take the source values."""
        if effect.src_region is not None:
            effect.hazard = self.hazards.read(effect.src_region, effect.access, owner, self.engine.now)
        if effect.read is not None:
            effect.values = effect.read()

    # ---- compute ----------------------------------------------------------------------
    def compute(self, unit: ExclusiveUnit, duration_ps: int, *, kind: str, label: str, program=None,
                flops: int = 0, nbytes: int = 0, args: dict | None = None) -> int:
        """Run one op on an exclusive unit (matrix or vector) for the calling process; return its end."""
        end = self.issue_compute(unit, duration_ps, kind=kind, label=label, program=program, flops=flops,
                                 nbytes=nbytes, pairs=None if args is None else tuple(args.items()))
        self.engine.sleep_until(end)
        return end

    def issue_compute(self, unit: ExclusiveUnit, duration_ps: int, *, kind: str, label: str, program=None,
                      flops: int = 0, nbytes: int = 0, pairs: tuple | None = None) -> int:
        """`compute` without the wait, for work that does not block in a process (an engine `Task`): reserve
        the unit now and log the op (`pairs`: its args as `OpLog.append_pairs` takes them); return its end."""
        start, end = unit.reserve(duration_ps)
        self.oplog.append_pairs(kind, unit.device, unit.name, label, program, nbytes, flops, start, end, pairs)
        return end

    # ---- accounting ------------------------------------------------------------------
    def bytes_by_link_kind(self) -> dict[str, int]:
        """Bytes moved over each class of resource: hbm, sram, tcm, dma, noc, inter_sip, host."""
        totals: Counter = Counter()
        for name, channel in self.channels.items():
            totals[self._channel_kind[name]] += channel.bytes_moved
        return dict(totals)

    def channel_kind(self, name: str) -> str:
        return self._channel_kind[name]


class _Path:
    """A resolved (src, dst) pair: its route, the op-log args of its DMAs, and the `Route` it makes behind
    each DMA engine that has used it (built once, not per transfer)."""

    __slots__ = ("route", "pairs", "through", "l2")

    def __init__(self, route: list[Channel], src: Endpoint | None, dst: Endpoint):
        self.route = route
        self.pairs = (("src", str(src) if src else "generated"), ("dst", str(dst)))  # every DMA's op-log args
        self.through: dict[Channel | None, Route] = {}  # by DMA engine (None: none)
        self.l2: tuple[_Path, L2Tags] | None = None  # a read that hits the SIP's L2 takes the first path


class _Effect:
    """One transfer's data effect between its start and its end (`read` is None when nothing is read).

    `op` (label, program, device, unit, start, end) is kept for a transfer that touches a tensor, and
    becomes an `Access` only when a hazard report names it.
    """

    __slots__ = ("read", "write", "src_region", "values", "op", "hazard", "in_flight")

    def __init__(self, read, write, src_region: Region | None):
        self.read = read
        self.write = write
        self.src_region = src_region
        self.values = None
        self.op = None
        self.hazard = None
        self.in_flight = None

    def access(self) -> Access:
        label, program, device, unit, start, end = self.op
        return Access(label, program, f"{device}.{unit}", start, end)


def landing_time(entry: tuple[int, "_Effect"]) -> int:
    """The sort key of `(end, effect)` landings."""
    return entry[0]


def _device_of(src: Endpoint | None, dst: Endpoint) -> str:
    side = dst if dst.kind != "host" else src
    return f"sip{side.sip}"


def _without_repeats(route: list[Channel]) -> list[Channel]:
    """A copy within one cube reads and writes the same stack: it crosses that channel once."""
    seen, unique = set(), []
    for channel in route:
        if id(channel) not in seen:
            seen.add(id(channel))
            unique.append(channel)
    return unique
