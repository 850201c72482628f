"""Random generators as PyTorch keeps them: `torch.Generator`, seeds, and a stream's state.

The run context (`context.py`) owns each rank's default generators; the
namespace's seeding functions and random factories (`namespace/random.py`)
draw from them. What a generator is and why it repeats is said in
namespace/random.py's docstring.
"""

from __future__ import annotations

from contextlib import contextmanager
from numbers import Integral

import numpy as np

from kernbench.dtypes import uint8
from kernbench.runtime_api.device import CPU
from kernbench.runtime_api.errors import RuntimeUsageError
from kernbench.runtime_api.tensor.core import Tensor

# PyTorch's default_rng_seed_val: where a new torch.Generator() starts.
DEFAULT_SEED = 67280421310721
_U64 = 1 << 64
# get_state's bytes: PCG64 state and increment (16 each), has_uint32 (1), uinteger (4), initial seed (8).
_STATE_BYTES = 45


def as_seed(seed) -> int:
    """A seed as torch accepts it (an integer in [-2**63, 2**64), negatives taken modulo 2**64), as a uint64."""
    if isinstance(seed, bool) or not isinstance(seed, (Integral, float)) or seed != int(seed):
        raise RuntimeUsageError(f"a seed must be an integer, got {seed!r}")
    value = int(seed)
    if not -(1 << 63) <= value < _U64:
        raise RuntimeUsageError(f"a seed must lie in [-2**63, 2**64), got {value}")
    return value % _U64


class Generator:
    """`torch.Generator(device='cpu')`: one repeatable stream of random numbers (PCG64)."""

    def __init__(self, ctx, device="cpu"):
        self._ctx = ctx
        self.device = ctx.parse_device(device)
        self._initial_seed = DEFAULT_SEED
        self._rng = np.random.Generator(np.random.PCG64(DEFAULT_SEED))

    def __repr__(self) -> str:
        return f"<torch.Generator device='{self.device}' initial_seed={self._initial_seed}>"

    @property
    def numpy_rng(self) -> np.random.Generator:
        """The numpy generator that draws this stream's numbers."""
        return self._rng

    def manual_seed(self, seed) -> "Generator":
        """Restart the stream from `seed`; returns the generator, as torch's does."""
        self._initial_seed = as_seed(seed)
        self._rng = np.random.Generator(np.random.PCG64(self._initial_seed))
        return self

    def seed(self) -> int:
        """Reseed from a new seed and return it; the seed is drawn from this stream, so a run still repeats."""
        new = int(self._rng.integers(0, 1 << 63))
        self.manual_seed(new)
        return new

    def initial_seed(self) -> int:
        """The seed the stream last started from."""
        return self._initial_seed

    def get_state(self) -> Tensor:
        """The stream's state as a host uint8 tensor, for `set_state`."""
        state = self._rng.bit_generator.state
        parts = (state["state"]["state"].to_bytes(16, "little"), state["state"]["inc"].to_bytes(16, "little"),
                 int(state["has_uint32"]).to_bytes(1, "little"), int(state["uinteger"]).to_bytes(4, "little"),
                 self._initial_seed.to_bytes(8, "little"))
        values = np.frombuffer(b"".join(parts), dtype=np.uint8).copy()
        return Tensor(self._ctx, values.shape, uint8, CPU, self._ctx.next_tensor_name("rng_state"), host_array=values)

    def set_state(self, new_state) -> "Generator":
        """Continue the stream from a state `get_state` returned."""
        values = np.asarray(new_state)
        if values.dtype != np.uint8 or values.shape != (_STATE_BYTES,):
            raise RuntimeUsageError(f"set_state expects the uint8 tensor of {_STATE_BYTES} bytes get_state returns, "
                                    f"got dtype {values.dtype} and shape {values.shape}")
        raw = values.tobytes()
        bit_generator = np.random.PCG64()
        bit_generator.state = {"bit_generator": "PCG64",
                               "state": {"state": int.from_bytes(raw[0:16], "little"),
                                         "inc": int.from_bytes(raw[16:32], "little")},
                               "has_uint32": raw[32], "uinteger": int.from_bytes(raw[33:37], "little")}
        self._rng = np.random.Generator(bit_generator)
        self._initial_seed = int.from_bytes(raw[37:45], "little")
        return self

    @contextmanager
    def offset_region(self, start: int, end: int):
        """Inside the block, this stream continues from its state now `start` draws (64-bit outputs) ahead; after
        it, from that state `end` draws ahead, however many the block drew. What PyTorch's Philox offsets give a
        distributed random op (DTensor's RNG tracker): each shard draws its own part of one stream, and every rank
        leaves in the same state."""
        state = self._rng.bit_generator.state
        self._rng = _ahead(state, start)
        try:
            yield
        finally:
            self._rng = _ahead(state, end)

    def clone_state(self) -> "Generator":
        """A new generator on the same device continuing from this one's state (torch's graph-safe copy)."""
        clone = Generator(self._ctx, self.device)
        clone.__class__ = type(self)
        return clone.set_state(self.get_state())


def _ahead(state: dict, draws: int) -> np.random.Generator:
    """A numpy generator continuing the PCG64 `state` `draws` outputs ahead (PCG64 jumps there in O(log n))."""
    bit_generator = np.random.PCG64()
    bit_generator.state = {**state, "has_uint32": 0, "uinteger": 0}  # no half of an earlier output carried over
    bit_generator.advance(draws)
    return np.random.Generator(bit_generator)


def generator_class(ctx) -> type:
    """`torch.Generator` of one run: `Generator` with the run bound, so `torch.Generator(device)` reads as torch's."""

    class BoundGenerator(Generator):
        __doc__ = Generator.__doc__

        def __init__(self, device="cpu"):
            super().__init__(ctx, device)

    BoundGenerator.__name__ = BoundGenerator.__qualname__ = "Generator"
    return BoundGenerator
