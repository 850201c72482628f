"""Random numbers as PyTorch gives them: a default generator per rank, `torch.Generator`, `generator=`.

Each PyTorch rank is a process with its own default generator, so
`torch.manual_seed(s)` called by every rank gives every rank the same stream.
kernbench's ranks are greenlets of one process; each gets its own default
generator for the host and one per device (`RuntimeContext.default_generator`,
generators.py), each made on first use, as PyTorch keeps a CPU generator and one per CUDA
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

from kernbench.dtypes import int64, resolve_dtype
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.generators import Generator
from kernbench.runtime_api.namespace.factories import _shape as shape_of
from kernbench.runtime_api.tensor.core import Tensor


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
