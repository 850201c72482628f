"""`torch.ahbm`: the device module, shaped like `torch.cuda` (and reachable as `torch.cuda`: the same object)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from kernbench.machine import OutOfMemoryError
from kernbench.runtime_api.errors import RuntimeUsageError
from kernbench.runtime_api.streams import Event as _Event
from kernbench.runtime_api.streams import Stream as _Stream
from kernbench.runtime_api.unsupported import missing_attribute


@dataclass(frozen=True)
class DeviceProperties:
    """`torch.ahbm.get_device_properties(d)`: torch.cuda's fields plus the peaks a roofline needs."""

    name: str
    total_memory: int
    multi_processor_count: int  # PEs per SIP
    clock_rate_hz: int
    hbm_bandwidth_bytes_per_s: int  # all cubes of the SIP together
    peak_flops: dict  # dtype name -> matrix-unit flops/s of the whole SIP


class AhbmModule:
    """The device module bound to one run (what a bench calls `torch.ahbm`, or `torch.cuda`)."""

    OutOfMemoryError = OutOfMemoryError

    def __init__(self, ctx):
        self._ctx = ctx
        ctx_ref = ctx

        class Stream(_Stream):
            """`torch.ahbm.Stream(device=None)`: a new in-order queue on a device."""

            def __init__(self, device=None, priority: int = 0):
                super().__init__(ctx_ref, ctx_ref.parse_device(device).index)

        class Event(_Event):
            """`torch.ahbm.Event(enable_timing=False)`: a marker recorded on a stream."""

            def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
                super().__init__(ctx_ref, enable_timing, blocking, interprocess)

        self.Stream = Stream
        self.Event = Event

    def __getattr__(self, name: str):
        return missing_attribute(self, name, "torch.ahbm", "torch.cuda is torch.ahbm; ")

    @staticmethod
    def is_available() -> bool:
        """Always True: the simulated device is there."""
        return True

    def is_timing_only(self) -> bool:
        """Whether this run skips the data work (`kernbench run --timing-only`): device values are not computed,
        so a bench checks its results only when this is False."""
        return self._ctx.timing_only

    def device_count(self) -> int:
        """The number of SIPs (`ahbm:0` .. `ahbm:N-1`)."""
        return self._ctx.topology.n_sips

    def get_device_name(self, device=None) -> str:
        """The device's name: kernbench, its index and the topology file."""
        return self.get_device_properties(device).name

    def get_device_properties(self, device=None) -> DeviceProperties:
        """torch.cuda's properties of a SIP, plus its HBM bandwidth and peak flops per dtype."""
        topology = self._ctx.topology
        index = self._ctx.parse_device(device).index
        return DeviceProperties(
            name=f"kernbench ahbm:{index} ({topology.source.name})",
            total_memory=topology.hbm_bytes_per_sip,
            multi_processor_count=topology.pes_per_sip,
            clock_rate_hz=topology.pe.clock_hz,
            hbm_bandwidth_bytes_per_s=topology.cube.hbm.bandwidth_bytes_per_s * topology.cubes_per_sip,
            peak_flops={dtype: topology.sip_peak_flops(dtype) for dtype in topology.dtypes},
        )

    def set_device(self, device) -> None:
        """Make `device` the calling rank's current device (where its tensors and streams go by default)."""
        self._ctx.set_device(self._ctx.parse_device(device).index)

    def current_device(self) -> int:
        """The calling rank's current device index."""
        return self._ctx.current_device()

    @contextmanager
    def device(self, device):
        """Make `device` the calling rank's current device inside the `with` block."""
        previous = self._ctx.current_device()
        self.set_device(device)
        try:
            yield
        finally:
            self._ctx.set_device(previous)

    def empty_cache(self) -> None:
        """Nothing to do: kernbench keeps no cache, HBM is freed when a tensor's last view goes."""

    def synchronize(self, device=None) -> None:
        """Block until all work on the device's streams is done (the current device by default)."""
        self._ctx.synchronize(self._ctx.parse_device(device).index)

    def current_stream(self, device=None) -> _Stream:
        """The calling rank's current stream on the device."""
        return self._ctx.current_stream(self._ctx.parse_device(device).index)

    def default_stream(self, device=None) -> _Stream:
        """The device's default stream."""
        return self._ctx.default_streams[self._ctx.parse_device(device).index]

    @contextmanager
    def stream(self, stream: _Stream):
        """Make `stream` the current stream of its device inside the `with` block."""
        with self._ctx.use_stream(stream):
            yield stream

    def memory_allocated(self, device=None) -> int:
        """HBM bytes held by live tensors on the device (replicas counted on every cube)."""
        return self._memory(device).allocated

    def max_memory_allocated(self, device=None) -> int:
        """The peak of memory_allocated since the start or the last reset_peak_memory_stats."""
        return self._memory(device).peak_total

    def reset_peak_memory_stats(self, device=None) -> None:
        """Restart max_memory_allocated from the bytes held now."""
        self._memory(device).reset_peak()

    def mem_get_info(self, device=None) -> tuple[int, int]:
        """(free, total) HBM bytes of the device."""
        memory = self._memory(device)
        total = memory.capacity_per_cube * len(memory.used)
        return total - memory.allocated, total

    # ---- random numbers: the calling rank's default generator of each device (random.py) ----------------
    def manual_seed(self, seed) -> None:
        """Seed the current device's default generator."""
        self._generator(None).manual_seed(seed)

    def manual_seed_all(self, seed) -> None:
        """Seed every device's default generator (the host's is left alone)."""
        self._ctx.seed_all(seed, host=False)

    def seed(self) -> None:
        """Reseed the current device's default generator from its own stream (repeatable)."""
        self._generator(None).seed()

    def seed_all(self) -> None:
        """Reseed every device's default generator with one seed drawn from the current device's stream."""
        self._ctx.seed_all(self._generator(None).seed(), host=False)

    def initial_seed(self) -> int:
        """The seed the current device's default generator last started from."""
        return self._generator(None).initial_seed()

    @property
    def default_generators(self) -> tuple:
        """The calling rank's default generator of every device, in device order (what DTensor's RNG tracker
        offsets)."""
        return tuple(self._generator(index) for index in range(self.device_count()))

    def get_rng_state(self, device="ahbm"):
        """The device's default generator state (a host uint8 tensor); `"ahbm"`: the current device."""
        return self._generator(device).get_state()

    def set_rng_state(self, new_state, device="ahbm") -> None:
        """Continue the device's default generator from get_rng_state()'s tensor."""
        self._generator(device).set_state(new_state)

    def get_rng_state_all(self) -> list:
        """Every device's default generator state, in device order."""
        return [self.get_rng_state(index) for index in range(self.device_count())]

    def set_rng_state_all(self, new_states) -> None:
        """Continue every device's default generator from `get_rng_state_all()`'s list."""
        states = list(new_states)
        if len(states) != self.device_count():
            raise RuntimeUsageError(f"set_rng_state_all expects one state per device ({self.device_count()}), "
                                    f"got {len(states)}")
        for index, state in enumerate(states):
            self.set_rng_state(state, index)

    def _generator(self, device):
        """The calling rank's default generator of `device` (None or "ahbm": the current device)."""
        return self._ctx.default_generator(self._ctx.parse_device("ahbm" if device is None else device))

    def _memory(self, device):
        return self._ctx.machine.memory[self._ctx.parse_device(device).index]
