"""`RuntimeContext`: everything one run owns, and the one place host code waits.

One context per run: the topology, the engine, the simulated machine (memory
and resources of every device), the streams, and what each rank has selected
(its current and default device, its default random generators). Host code runs either in a rank's greenlet (an
engine process, as under `kernbench run` and `spawn`) or in the main greenlet
(a test or script driving a context directly); `block_on` is where both kinds
wait for device work, so nothing else needs to know which kind it is in.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable

import numpy as np

from kernbench.kernels import kept_values
from kernbench.machine import Machine
from kernbench.run_caches import RunCaches
from kernbench.runtime_api.launch import access_plans
from kernbench.runtime_api.launch.kernel_launch import MAX_PROGRAMS
from kernbench.runtime_api.device import CPU, DEVICE_TYPE, Device, parse_device
from kernbench.runtime_api.errors import RuntimeUsageError
from kernbench.runtime_api.generators import Generator, as_seed, generator_class
from kernbench.runtime_api.streams import Stream
from kernbench.sim_engine import Engine
from kernbench.topology import Topology


class RuntimeContext:
    """The state of one simulated run."""

    def __init__(self, topology: Topology, *, timing_only: bool = False, seed: int = 0,
                 strict_hazards: bool = False, memcheck: bool = True, caches: bool = True,
                 max_programs: int = MAX_PROGRAMS, spmd: bool = False, spmd_skip: frozenset = frozenset()):
        """`caches=False` turns off every speed cache of the run (`RunCaches`): the same run, slower. `spmd`
        replicates spawns whose ranks do the same work (adr/0022), except the spawns numbered in `spmd_skip`."""
        self.topology = topology
        self.timing_only = timing_only
        self.memcheck = memcheck  # kernels' accesses held to the tensor each pointer came from (ADR 0014)
        self.max_programs = max_programs  # the most programs one kernel launch may have (ADR 0014)
        self.engine = Engine()
        self.caches = RunCaches(enabled=caches)  # handed down to the machine and the kernel launches
        self.machine = Machine(topology, self.engine, backed=not timing_only, caches=self.caches)
        self.machine.hazards.strict = strict_hazards
        self.streams: list[Stream] = []
        self.default_streams = [Stream(self, d, name=f"ahbm:{d}.default") for d in range(topology.n_sips)]
        self._rank_state: dict[object, _RankState] = {}
        self._tensor_ids = 0
        self.collectives: list[dict] = []  # one record per collective run, in order (filled by kernbench.ccl)
        self.grad_disabled: dict[object, int] = {}  # rank greenlet -> nesting depth of its no_grad blocks (autograd)
        self.programs_done = 0  # kernel programs finished so far, for the progress line
        self.replay_memo_pool = [kept_values.MEMO_BYTES]  # bytes the running launches keep for later programs, together
        self.access_plan_pool = [access_plans.PLAN_BYTES]  # bytes of access plans the running launches keep, together
        self.default_seed = as_seed(seed)  # where every rank's default generator starts (`kernbench run --seed`)
        self.Generator = generator_class(self)  # torch.Generator of this run
        self.spmd, self.spmd_skip = spmd, spmd_skip
        self.spawns_started = 0  # spawns so far: an SPMD episode's number
        self.spmd_spawn = None  # the latest spawn's episode, which may replicate again after an end (spmd.py)

    @property
    def hazards(self) -> list:
        """Data hazards found so far (`kernbench.machine.data_executor.Hazard`, ADR 0009), in order found."""
        return self.machine.hazards.hazards

    # ---- identity of the calling rank -------------------------------------------------
    def _state(self) -> "_RankState":
        key = self.engine.current_process
        state = self._rank_state.get(key)
        if state is None:
            state = self._rank_state[key] = _RankState()
        return state

    def current_device(self) -> int:
        return self._state().device

    def spawned_rank(self) -> int | None:
        """The calling greenlet's rank under `torch.multiprocessing.spawn`; None outside spawned workers."""
        return self._state().rank

    def spawned_count(self) -> int | None:
        """How many workers the `spawn` that started the calling greenlet started; None outside one (a
        `torch.multiprocessing.Process` is started alone, so its world size is the script's to say)."""
        return self._state().spawned

    def set_spawned_rank(self, rank: int, count: int | None = None) -> None:
        state = self._state()
        state.rank, state.spawned = rank, count

    def set_device(self, index: int) -> None:
        self._state().device = index

    def parse_device(self, device) -> Device:
        """A `Device` for any accepted spelling; None is the calling rank's current device."""
        return parse_device(device, self.current_device(), self.topology.n_sips)

    def current_stream(self, device_index: int | None = None) -> Stream:
        index = self.current_device() if device_index is None else device_index
        return self._state().streams.get(index) or self.default_streams[index]

    @contextmanager
    def use_stream(self, stream: Stream):
        streams = self._state().streams
        previous = streams.get(stream.device_index)
        streams[stream.device_index] = stream
        try:
            yield stream
        finally:
            if previous is None:
                del streams[stream.device_index]
            else:
                streams[stream.device_index] = previous

    def register_stream(self, stream: Stream) -> int:
        """Remember every stream, so `synchronize` finds them all; returns the stream's number."""
        self.streams.append(stream)
        return len(self.streams)

    def next_tensor_name(self, prefix: str = "tensor") -> str:
        self._tensor_ids += 1
        return f"{prefix}{self._tensor_ids}"

    # ---- waiting -----------------------------------------------------------------------
    def block_on(self, handles: Iterable) -> None:
        """Return when every handle has fired; re-raise the first failure among them.

        From a rank's greenlet this is an engine wait (the rank yields to main);
        from the main greenlet it runs the engine until the handles fire.
        """
        pending = [h for h in handles if not h.triggered]
        if pending:
            if self.engine.current_process is None:
                for handle in pending:
                    self.engine.run(until=handle)
            elif len(pending) == 1:
                self.engine.wait(pending[0])
            else:
                self.engine.wait_all(pending)
        for handle in handles:
            if not handle.ok:
                raise handle.value

    def synchronize(self, device_index: int | None = None) -> None:
        """Wait for all work on every stream of one device, or of every device when `device_index` is None."""
        for stream in self.streams:
            if device_index is None or stream.device_index == device_index:
                stream.synchronize()

    # ---- default device ----------------------------------------------------------------
    def set_default_device(self, device) -> None:
        """Where the calling rank's factories put tensors without `device=` (torch.set_default_device).

        `"ahbm"` (without index) follows `torch.ahbm.set_device`; `None`
        restores kernbench's default, the current device.
        """
        if device is not None:
            parsed = self.parse_device(device)  # a device this machine lacks fails here, not at first use
            device = parsed if parsed.is_host or _has_index(device) else Device(parsed.type)
        self._state().default_device = device

    def enter_device_scope(self, device) -> None:
        """`with torch.device(device):` — the calling rank's default device until the block ends (PyTorch's device
        context: factories without `device=` make their tensors there)."""
        state = self._state()
        previous = state.default_device
        self.set_default_device(device)
        state.device_scopes.append(previous)

    def exit_device_scope(self) -> None:
        """The end of the innermost `with torch.device(...)` block: the default device set before it is back."""
        state = self._state()
        state.default_device = state.device_scopes.pop()

    def get_default_device(self) -> Device:
        """The device factories use without `device=` (torch.get_default_device), resolved to an index."""
        return self.parse_device(self._state().default_device)

    def default_device(self):
        """The calling rank's default device as set (None: the current device), for factories to resolve."""
        return self._state().default_device

    # ---- randomness (adr/0005-torch-namespace.md, random numbers) ------------------------
    def default_generator(self, device: Device | None = None) -> Generator:
        """The calling rank's default generator of `device` (None or the CPU: the host's; else that device's).

        PyTorch keeps one for the CPU and one per device: `torch.manual_seed`
        seeds them all, `torch.cuda.manual_seed` only the current device's.
        Each is made on first use, from the last seed given to all of its kind
        (`seed_all`), else the run's seed.
        """
        state = self._state()
        key = None if device is None or device.is_host else device.index
        generator = state.generators.get(key)
        if generator is None:
            seed = state.seeds.get("host" if key is None else "devices", self.default_seed)
            generator = self.Generator(CPU if key is None else Device(DEVICE_TYPE, key)).manual_seed(seed)
            state.generators[key] = generator
        return generator

    def seed_all(self, seed, *, host: bool) -> None:
        """Restart every device's default generator of the calling rank from `seed`, and the host's with `host`."""
        state = self._state()
        seed = as_seed(seed)
        state.seeds["devices"] = seed
        if host:
            state.seeds["host"] = seed
        state.generators = {key: generator for key, generator in state.generators.items()
                            if key is None and not host}

    def rng_for(self, generator, device: Device) -> np.random.Generator:
        """The numpy generator behind a factory's `generator=`: the argument's stream, or the rank's default
        generator of the device the values are made on."""
        if generator is None:
            return self.default_generator(device).numpy_rng
        if not isinstance(generator, Generator):
            raise RuntimeUsageError(f"generator= expects a torch.Generator, got {generator!r}")
        return generator.numpy_rng


class _RankState:
    """What one rank (greenlet) has selected — its current and default device, its streams — its spawn rank, if
    any, and its default random generators, the host's and one per device (each made on first use, as each PyTorch
    process has its own)."""

    __slots__ = ("device", "streams", "rank", "spawned", "default_device", "generators", "seeds", "device_scopes")

    def __init__(self):
        self.device = 0
        self.rank: int | None = None
        self.spawned: int | None = None
        self.streams: dict[int, Stream] = {}
        self.default_device: Device | None = None
        self.generators: dict[int | None, Generator] = {}  # None: the host's; else a device index's
        self.seeds: dict[str, int] = {}  # "host" / "devices": the seed given to all of that kind, if any
        self.device_scopes: list = []  # the default devices `with torch.device(...)` blocks entered over


def _has_index(device) -> bool:
    """Whether a device spelling names an index (`"ahbm:1"`, `1`, `device("ahbm", 1)`), not just a type."""
    return not isinstance(device, (str, Device)) or (Device(device).index is not None)
