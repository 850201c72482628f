"""`RuntimeContext`: everything one run owns, and the one place host code waits.

One context per run: the topology, the engine, the simulated machine (memory
and resources of every device), the streams, the random generator, and which
device each rank has selected. Host code runs either in a rank's greenlet (an
engine process, as under `kernbench run` and `spawn`) or in the main greenlet
(a test or script driving a context directly); `block_on` is where both kinds
wait for device work, so nothing else needs to know which kind it is in.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable

import numpy as np

from kernbench.machine import Machine
from kernbench.runtime_api.device import Device, parse_device
from kernbench.runtime_api.streams import Stream
from kernbench.sim_engine import Engine
from kernbench.topology import Topology


class RuntimeContext:
    """The state of one simulated run."""

    def __init__(self, topology: Topology, *, timing_only: bool = False, seed: int = 0,
                 strict_hazards: bool = False):
        self.topology = topology
        self.timing_only = timing_only
        self.engine = Engine()
        self.machine = Machine(topology, self.engine, backed=not timing_only)
        self.machine.hazards.strict = strict_hazards
        self.streams: list[Stream] = []
        self.default_streams = [Stream(self, d, name=f"ahbm:{d}.default") for d in range(topology.n_sips)]
        self._rank_state: dict[object, _RankState] = {}
        self._tensor_ids = 0
        self.collectives: list[dict] = []  # one record per collective run, in order (filled by kernbench.ccl)
        self.programs_done = 0  # kernel programs finished so far, for the progress line
        self.manual_seed(seed)

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

    def set_spawned_rank(self, rank: int) -> None:
        self._state().rank = rank

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

    # ---- randomness --------------------------------------------------------------------
    def manual_seed(self, seed: int) -> None:
        self.rng = np.random.Generator(np.random.PCG64(seed))


class _RankState:
    """What one rank (greenlet) has selected — its current device and streams — and its spawn rank, if any."""

    __slots__ = ("device", "streams", "rank")

    def __init__(self):
        self.device = 0
        self.rank: int | None = None
        self.streams: dict[int, Stream] = {}
