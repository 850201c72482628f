"""Random numbers as PyTorch gives them: a default generator per rank, `torch.Generator`, `generator=`.

Each PyTorch rank is a process with its own default generator, so
`torch.manual_seed(s)` called by every rank gives every rank the same stream.
kernbench's ranks are greenlets of one process; each gets its own default
generator for the host and one per device (`RuntimeContext.default_generator`),
each made on first use, as PyTorch keeps a CPU generator and one per CUDA
device: a tensor's values come from the generator of the device it is made
on, `torch.manual_seed` seeds them all, `torch.ahbm.manual_seed` (alias
`torch.cuda.manual_seed`) only the current device's, and Megatron's RNG
tracker forks the device's stream without touching the host's. An
unseeded generator starts from the run's seed (`kernbench run --seed`,
default 0), so unseeded ranks agree and every run repeats — as unseeded
CUDA generators agree in PyTorch, which all start from one fixed seed.

A generator is a PCG64 stream (numpy's), not PyTorch's Philox or Mersenne
Twister: the numbers are not PyTorch's numbers, but the same seed gives the
same numbers, whatever the rank, device or topology. A new
`torch.Generator()` starts from PyTorch's fixed default seed, 67280421310721.
Values are drawn on the host when the call is made (in a timing-only run,
which computes no values, nothing is drawn).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from kernbench.dtypes import int64, resolve_dtype, uint8
from kernbench.runtime_api.device import CPU
from kernbench.runtime_api.errors import RuntimeUsageError, TensorError
from kernbench.runtime_api.factories import _shape as shape_of
from kernbench.runtime_api.tensor import Tensor

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


def generator_class(ctx) -> type:
    """`torch.Generator` of one run: `Generator` with the run bound, so `torch.Generator(device)` reads as torch's."""

    class BoundGenerator(Generator):
        __doc__ = Generator.__doc__

        def __init__(self, device="cpu"):
            super().__init__(ctx, device)

    BoundGenerator.__name__ = BoundGenerator.__qualname__ = "Generator"
    return BoundGenerator


class RankRandom:
    """The seeding functions of `torch`: the calling rank's host generator, and every device's where torch's do."""

    def __init__(self, ctx):
        self._ctx = ctx

    def manual_seed(self, seed) -> Generator:
        """Seed the host's and every device's default generator (every rank calling it gets the same streams)."""
        self._ctx.seed_all(seed, host=True)
        return self._ctx.default_generator()

    def seed(self) -> int:
        """Reseed the host's generator from its own stream (repeatable), and every device's with the same seed."""
        new = self._ctx.default_generator().seed()
        self._ctx.seed_all(new, host=False)
        return new

    def initial_seed(self) -> int:
        """The seed the host's default generator last started from (the run's --seed until reseeded)."""
        return self._ctx.default_generator().initial_seed()

    def get_rng_state(self) -> Tensor:
        """The host's default generator state, a host uint8 tensor."""
        return self._ctx.default_generator().get_state()

    def set_rng_state(self, new_state) -> None:
        """Continue the host's default generator from `get_rng_state()`'s tensor."""
        self._ctx.default_generator().set_state(new_state)


class RandomFactories:
    """The random-number factories besides `randn`/`rand`: `randint`, `randperm`, `normal` and the `_like` forms.

    Each makes its tensor as `Factories` does (allocated first, values
    written by an HBM fill enqueued on the current stream), drawing from
    `generator=` or the calling rank's default generator.
    """

    def __init__(self, factories):
        self._factories = factories
        self._ctx = factories._ctx

    def randint(self, *args, size=None, low=None, high=None, generator=None, dtype=None, device=None, dp=None,
                name=None) -> Tensor:
        """Integers uniform in [low, high): `randint(high, size)` or `randint(low, high, size)`, int64 by default."""
        low, high, size = _randint_arguments(args, low, high, size)
        if not low < high:
            raise TensorError(f"randint expects low < high, got low={low} and high={high}")
        rng, dtype = self._factories.rng_for(generator, device), resolve_dtype(dtype, default=int64)
        shape = shape_of((size,))
        return self._factories._generated(shape, dtype, device, dp, name,
                                          lambda: rng.integers(low, high, size=shape).astype(dtype.numpy))

    def randperm(self, n: int, *, generator=None, dtype=None, device=None, dp=None, name=None) -> Tensor:
        """A random permutation of 0 .. n-1, int64 by default."""
        rng, dtype = self._factories.rng_for(generator, device), resolve_dtype(dtype, default=int64)
        return self._factories._generated(shape_of((n,)), dtype, device, dp, name,
                                          lambda: rng.permutation(n).astype(dtype.numpy))

    def normal(self, mean, std, size, *, generator=None, dtype=None, device=None, dp=None, name=None) -> Tensor:
        """Normal samples `mean + std * N(0, 1)` of shape `size` (float mean and std; the same draws as randn)."""
        if isinstance(mean, Tensor) or isinstance(std, Tensor):
            raise TensorError("torch.normal with tensor mean or std is not supported by kernbench; "
                              "use torch.normal(mean: float, std: float, size)")
        rng, dtype, shape = self._factories.rng_for(generator, device), resolve_dtype(dtype), shape_of((size,))
        return self._factories._generated(shape, dtype, device, dp, name,
                                          lambda: (mean + std * rng.standard_normal(shape)).astype(dtype.numpy))

    def randn_like(self, input: Tensor, *, generator=None, dtype=None, device=None, dp=None, name=None) -> Tensor:
        """`randn` with `input`'s shape, dtype, device and placement unless given."""
        return self._factories.randn(input.shape, generator=generator, **_like(input, dtype, device, dp), name=name)

    def rand_like(self, input: Tensor, *, generator=None, dtype=None, device=None, dp=None, name=None) -> Tensor:
        """`rand` with `input`'s shape, dtype, device and placement unless given."""
        return self._factories.rand(input.shape, generator=generator, **_like(input, dtype, device, dp), name=name)

    def randint_like(self, input: Tensor, low=0, high=None, *, generator=None, dtype=None, device=None, dp=None,
                     name=None) -> Tensor:
        """`randint` with `input`'s shape, dtype, device and placement unless given (`randint_like(x, high)` too)."""
        if high is None:
            low, high = 0, low
        return self.randint(low, high, input.shape, generator=generator, **_like(input, dtype, device, dp), name=name)


def _like(input: Tensor, dtype, device, dp) -> dict:
    return {"dtype": dtype or input.dtype, "device": device or input.device,
            "dp": dp or (input.placement.policy if input.placement else None)}


def _randint_arguments(args: tuple, low, high, size):
    """torch.randint's forms: (high, size), (low, high, size), any of them as keywords; positionals fill from size."""
    rest = list(args)
    if size is None and rest:
        size = rest.pop()
    if high is None and rest:
        high = rest.pop()
    if low is None and rest:
        low = rest.pop()
    if rest or high is None or size is None:
        raise TensorError("randint expects randint(high, size) or randint(low, high, size)")
    return int(0 if low is None else low), int(high), size
