"""Megatron's RNG tracker: named random streams a rank forks into, and `model_parallel_cuda_manual_seed`.

Dropout inside the tensor-parallel region, and weights initialized on the
device, must differ across the ranks of a tensor-parallel group yet repeat
across data-parallel replicas; dropout outside the region must agree across
the group. Megatron keeps one named generator state per purpose and swaps
the device's default generator to a state for the duration of a `fork()`:

    model_parallel_cuda_manual_seed(1234)
    with get_cuda_rng_tracker().fork():          # "model-parallel-rng"
        mask = torch.rand(...)                   # differs across tp ranks

`model_parallel_cuda_manual_seed(seed)` seeds the default generator with
`seed` (the data-parallel state, the same on every rank) and adds Megatron's
states: "data-parallel-rng" (seed), "model-parallel-rng" (seed + 2718 + the
tensor-parallel rank) and "expert-parallel-rng" (seed + 1024 + 100 x the
expert rank + the expert tensor rank).

**Over the run's generators.** A state is what `torch.ahbm.get_rng_state()`
returns for the calling rank's default generator, and a fork sets it with
`torch.ahbm.set_rng_state`. As in PyTorch, the host and each device have a
default generator of their own (kernbench.runtime_api.namespace.random), so a fork
swaps the device's stream and host draws are not affected.
`use_cudagraphable_rng=True` keeps each state as a `torch.Generator` instead
of a state tensor (Megatron's graph-safe tracker), with the same streams.

**Per rank.** Megatron's tracker is a module global, one per process; here
it is per rank (a `ContextVar`), as `parallel_state`'s groups are. The
`torch` namespace is the one `parallel_state` holds, or the run's.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

from kernbench.tp import parallel_state
from kernbench.tp.errors import ModelParallelError

_MODEL_PARALLEL_RNG_TRACKER_NAME = "model-parallel-rng"
_EXPERT_PARALLEL_RNG_TRACKER_NAME = "expert-parallel-rng"
_DATA_PARALLEL_RNG_TRACKER_NAME = "data-parallel-rng"
_DEFAULT = "default-rng"  # the stream outside every fork; never a tracked state


def get_expert_parallel_rng_tracker_name() -> str:
    return _EXPERT_PARALLEL_RNG_TRACKER_NAME


def get_data_parallel_rng_tracker_name() -> str:
    return _DATA_PARALLEL_RNG_TRACKER_NAME


class CudaRNGStatesTracker:
    """Named random states of the calling rank's default generator: `add`, `fork`, `get_states`/`set_states`, `reset`.

    `add(name, seed)` records the state the default generator would have
    after `manual_seed(seed)`, leaving the generator as it was; `fork(name)`
    runs its block on that state and keeps where the block left it for the
    next fork. Forks nest (an inner fork of the outer state continues it). A
    seed or a name added twice, and a fork of a name never added, raise
    `ModelParallelError`, as Megatron raises.
    """

    def __init__(self, use_cudagraphable_rng: bool = False, is_inference_rng_tracker: bool = False, *, torch=None):
        self.use_cudagraphable_rng = use_cudagraphable_rng
        self.is_inference_rng_tracker = is_inference_rng_tracker
        self._torch = torch
        self.reset()

    def is_initialized(self) -> bool:
        """Whether a state was added or set since the last reset."""
        return self._is_initialized

    def reset(self) -> None:
        """Forget every state (the tracker as new)."""
        self._is_initialized = False
        self.states_ = {}
        self.seeds_ = set()
        self._current_state_name = _DEFAULT

    def get_states(self) -> dict:
        """The states by name (a new dict; the states themselves are the tracker's)."""
        return dict(self.states_)

    def set_states(self, states: dict) -> None:
        """Replace every state (e.g. with what `get_states` returned); states are not checked."""
        self._is_initialized = True
        self.states_ = states

    def add(self, name: str, seed: int) -> None:
        """Track the state `manual_seed(seed)` gives, under `name`; the default generator is left as it was."""
        self._is_initialized = True
        if seed in self.seeds_:
            raise ModelParallelError(f"seed {seed} already exists")
        self.seeds_.add(seed)
        if name in self.states_:
            raise ModelParallelError(f"cuda rng state {name} already exists")
        torch = self._namespace()
        if self.use_cudagraphable_rng:
            self.states_[name] = torch.Generator(device="ahbm").manual_seed(seed)
            return
        original = torch.ahbm.get_rng_state()
        torch.ahbm.manual_seed(seed)
        self.states_[name] = torch.ahbm.get_rng_state()
        torch.ahbm.set_rng_state(original)

    @contextlib.contextmanager
    def fork(self, name: str = _MODEL_PARALLEL_RNG_TRACKER_NAME):
        """Draw from state `name` inside the block; afterwards the default generator is back where it was."""
        if name not in self.states_:
            raise ModelParallelError(f"cuda rng state {name} is not added")
        original = self._current_state()
        outer_name = self._current_state_name
        if outer_name != _DEFAULT:
            self.states_[outer_name] = original
        self._use_state(self.states_[name])
        self._current_state_name = name
        try:
            yield
        finally:
            if self._current_state_name != name:
                raise ModelParallelError(f"current state name {self._current_state_name} is not the same as the "
                                         f"desired state name {name}")
            self.states_[name] = self._current_state()
            if outer_name != _DEFAULT:
                original = self.states_[outer_name]
            self._use_state(original)
            self._current_state_name = outer_name

    def _namespace(self):
        if self._torch is None:
            self._torch = parallel_state.torch_namespace()
        return self._torch

    def _current_state(self):
        """The default generator's state now: a state tensor, or a new Generator holding it (graph-safe)."""
        torch = self._namespace()
        state = torch.ahbm.get_rng_state()
        return torch.Generator(device="ahbm").set_state(state) if self.use_cudagraphable_rng else state

    def _use_state(self, state) -> None:
        torch = self._namespace()
        torch.ahbm.set_rng_state(state.get_state() if self.use_cudagraphable_rng else state)


class _InferenceRNGStatesTracker(CudaRNGStatesTracker):
    """Megatron's tracker for inference: adding and setting states do nothing, and a fork is a plain block."""

    def add(self, name: str, seed: int) -> None:
        pass

    def set_states(self, states: dict) -> None:
        pass

    def fork(self, name: str = _MODEL_PARALLEL_RNG_TRACKER_NAME):
        return contextlib.nullcontext()


_TRACKER: ContextVar[CudaRNGStatesTracker | None] = ContextVar("kernbench_cuda_rng_tracker", default=None)


def initialize_rng_tracker(use_te_rng_tracker: bool = False, inference_rng_tracker: bool = False,
                           use_cudagraphable_rng: bool = False, force_reset: bool = False) -> None:
    """Create this rank's tracker unless it has one (or `force_reset`).

    `use_te_rng_tracker` (Transformer Engine's tracker) gives Megatron's own:
    there is no Transformer Engine here, and the streams are the same.
    """
    if force_reset:
        _TRACKER.set(None)
    if _TRACKER.get() is not None:
        return
    tracker_class = _InferenceRNGStatesTracker if inference_rng_tracker else CudaRNGStatesTracker
    _TRACKER.set(tracker_class(use_cudagraphable_rng=use_cudagraphable_rng,
                               is_inference_rng_tracker=inference_rng_tracker))


def get_cuda_rng_tracker(use_te_rng_tracker: bool = False, inference_rng_tracker: bool = False,
                         use_cudagraphable_rng: bool = False) -> CudaRNGStatesTracker:
    """This rank's tracker, created on first use with these options."""
    initialize_rng_tracker(use_te_rng_tracker, inference_rng_tracker, use_cudagraphable_rng)
    return _TRACKER.get()


def get_all_rng_states() -> dict:
    """Every state of this rank's tracker, by name."""
    tracker = _TRACKER.get()
    if tracker is None:
        raise ModelParallelError("get_all_rng_states: this rank has no RNG tracker yet (call "
                                 "model_parallel_cuda_manual_seed or get_cuda_rng_tracker first)")
    return tracker.states_


def model_parallel_cuda_manual_seed(seed: int, te_rng_tracker: bool = False, inference_rng_tracker: bool = False,
                                    use_cudagraphable_rng: bool = False, tp_rank: int | None = None,
                                    ep_rank: int | None = None, etp_rank: int | None = None,
                                    gtp_remat_rank: int | None = None, egtp_remat_rank: int | None = None,
                                    force_reset_rng: bool = False, gtp_remat_world_size: int | None = None,
                                    egtp_remat_world_size: int | None = None) -> None:
    """Seed this rank's default generator with `seed` and its tracker with Megatron's per-rank offsets.

    Call it after `initialize_model_parallel`, on every rank, instead of
    `torch.ahbm.manual_seed`. States: the default one and "data-parallel-rng"
    get `seed` (the same on every rank); "model-parallel-rng" gets
    seed + 2718 + tp_rank (differs across a tensor-parallel group, repeats
    across data-parallel replicas); "expert-parallel-rng" gets
    seed + 1024 + 100·ep_rank + etp_rank. The ranks default to this rank's
    in `parallel_state`. Generalized tensor parallelism is not implemented:
    its ranks are accepted and its world sizes must be 1 (or None).
    """
    for name, size in (("gtp_remat_world_size", gtp_remat_world_size),
                       ("egtp_remat_world_size", egtp_remat_world_size)):
        if size not in (None, 1):
            raise ModelParallelError(f"model_parallel_cuda_manual_seed({name}={size!r}): generalized tensor "
                                     f"parallelism is not implemented in kernbench.tp")
    if tp_rank is None:
        tp_rank = parallel_state.get_tensor_model_parallel_rank()
    if ep_rank is None:
        ep_rank = parallel_state.get_expert_model_parallel_rank()
    if etp_rank is None:
        etp_rank = parallel_state.get_expert_tensor_parallel_rank()
    initialize_rng_tracker(te_rng_tracker, inference_rng_tracker, use_cudagraphable_rng, force_reset=force_reset_rng)
    tracker = _TRACKER.get()
    tracker.reset()
    tracker._namespace().ahbm.manual_seed(seed)
    tracker.add(_DATA_PARALLEL_RNG_TRACKER_NAME, seed)
    # Megatron's offset: any positive value keeps the tensor-parallel seeds apart from the data-parallel one.
    tracker.add(_MODEL_PARALLEL_RNG_TRACKER_NAME, seed + 2718 + tp_rank)
    tracker.add(_EXPERT_PARALLEL_RNG_TRACKER_NAME, seed + 1024 + 100 * ep_rank + etp_rank)


@contextlib.contextmanager
def default_generator_rng(torch, device: str = "cpu"):
    """The calling rank's default generator for `device` as a numpy generator, advanced by what the block draws.

    For initializers written as `init_method(array, rng)` (kernbench.tp.layers):
    the host's generator for Megatron's CPU initialization, the device's
    (inside a `fork()`, the tracker's state) for its GPU initialization — as
    `torch.nn.init` draws from in Megatron.
    """
    module = torch if device == "cpu" else torch.ahbm
    generator = torch.Generator()
    generator.set_state(module.get_rng_state())
    yield generator.numpy_rng
    module.set_rng_state(generator.get_state())
