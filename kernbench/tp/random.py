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

import numpy as np

from kernbench.runtime_api.autograd import Function
from kernbench.runtime_api.generators import Generator
from kernbench.runtime_api.tensor.core import Tensor
from kernbench.runtime_api.tensor.untyped_storage import share_storage
from kernbench.tp import parallel_state
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.init_methods import takes_a_tensor
from kernbench.tp.utils import gather_split_1d_tensor, split_tensor_into_1d_equal_chunks

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


def initial_values(torch, init_method, shape: tuple[int, ...], device: str = "cpu", numpy_rng=None) -> np.ndarray:
    """kernbench's, for the layers: float32 values of `shape` drawn by `init_method`. Megatron's kind
    (`init_methods.takes_a_tensor`) fills a float32 tensor on `device` from that device's default generator
    (inside a `fork()`, the tracker's state); kernbench's kind fills an array from `numpy_rng`, else from that
    same generator (`default_generator_rng`)."""
    if takes_a_tensor(init_method):
        tensor = torch.empty(*shape, dtype=torch.float32, device=device)
        with torch.no_grad():
            init_method(tensor)
        return tensor.cpu().numpy()
    values = np.empty(shape, dtype=np.float32)
    if numpy_rng is not None:
        init_method(values, numpy_rng)
        return values
    with default_generator_rng(torch, device) as rng:
        init_method(values, rng)
    return values


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


# ---- the device generator's state, as Megatron reads and sets it ---------------------------------------------
def _get_cuda_rng_state(device="ahbm", clone: bool = False, graph_safe: bool = False):
    """The device's default generator state: a state tensor, or (`graph_safe`) a `torch.Generator` holding it."""
    torch = parallel_state.torch_namespace()
    state = torch.ahbm.get_rng_state("ahbm" if device in ("cuda", "ahbm", -1) else device)
    return torch.Generator(device="ahbm").set_state(state) if graph_safe else state


def _set_cuda_rng_state(new_state, device: int = -1, graph_safe: bool = False) -> None:
    """Continue the current (or `device`'s) default generator from `new_state`: a state tensor, or a Generator."""
    torch = parallel_state.torch_namespace()
    if isinstance(new_state, Generator):
        new_state = new_state.get_state()
    torch.ahbm.set_rng_state(new_state, "ahbm" if device in (-1, "cuda", "ahbm") else device)


def convert_cuda_rng_state(state, to_graphable: bool = False):
    """A state tensor as a graph-safe `torch.Generator` (`to_graphable`), or a Generator as its state tensor;
    a state already of the asked kind is returned as it is."""
    if isinstance(state, Generator):
        return state if to_graphable else state.get_state()
    if isinstance(state, Tensor):
        return parallel_state.torch_namespace().Generator(device="ahbm").set_state(state) if to_graphable else state
    raise ValueError(f"Invalid state type: {type(state)}")


def is_graph_safe_cuda_rng_tracker(cuda_rng_tracker) -> bool:
    """Whether the tracker keeps its states as Generators (`use_cudagraphable_rng`)."""
    return bool(getattr(cuda_rng_tracker, "use_cudagraphable_rng", False))


def _get_all_rng_states() -> tuple:
    """(host state, device state, the tracker's states): what a recomputation restores."""
    tracker = get_cuda_rng_tracker()
    return (parallel_state.torch_namespace().get_rng_state(),
            _get_cuda_rng_state(graph_safe=is_graph_safe_cuda_rng_tracker(tracker)), tracker.get_states())


def _set_all_rng_states(cpu_rng_state, cuda_rng_state, cuda_rng_state_tracker) -> None:
    parallel_state.torch_namespace().set_rng_state(cpu_rng_state)
    _set_cuda_rng_state(cuda_rng_state)
    get_cuda_rng_tracker().set_states(cuda_rng_state_tracker)


@contextlib.contextmanager
def _fork_rng():
    """Within the block the generators may be moved freely; afterwards they are where they were."""
    states = _get_all_rng_states()
    try:
        yield
    finally:
        _set_all_rng_states(*states)


# ---- activation recomputation -------------------------------------------------------------------------------
_CHECKPOINTING: ContextVar[bool] = ContextVar("kernbench_is_checkpointing", default=False)


def is_checkpointing() -> bool:
    """Whether this rank is inside a checkpointed forward or its recomputation."""
    return _CHECKPOINTING.get()


@contextlib.contextmanager
def _checkpointing():
    token = _CHECKPOINTING.set(True)
    try:
        yield
    finally:
        _CHECKPOINTING.reset(token)


def detach_variable(inputs) -> tuple:
    """Each tensor of `inputs` detached, requiring grad as it did (a new leaf of the recomputed graph)."""
    detached = []
    for value in inputs:
        if isinstance(value, Tensor):
            leaf = value.detach()
            leaf.requires_grad = value.requires_grad
            value = leaf
        detached.append(value)
    return tuple(detached)


def _recompute(run_function, inputs, rng_states) -> tuple:
    """`run_function(*inputs)` again, recording a graph, with the generators as they were at the forward."""
    torch = parallel_state.torch_namespace()
    with _fork_rng():
        _set_all_rng_states(*rng_states)
        with torch.enable_grad(), _checkpointing():
            outputs = run_function(*inputs)
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _input_grads(outputs, grads, inputs) -> tuple:
    """The gradients of the recomputed graph's `inputs`, back-propagating `grads` from its `outputs`.

    The graph is retained: a function of several outputs is back-propagated
    once per output (autograd.Function's rule), each time from fresh input
    gradients.
    """
    for value in inputs:
        if isinstance(value, Tensor):
            value.grad = None
    for output, grad in zip(outputs, grads):
        if isinstance(output, Tensor) and output.requires_grad and grad is not None:
            output.backward(grad, retain_graph=True)
    return tuple(value.grad if isinstance(value, Tensor) else None for value in inputs)


class CheckpointFunction(Function):
    """Megatron's activation checkpointing: the forward runs without recording a graph and keeps only the
    inputs; the backward runs the forward again — the same device work, so it shows in the op log and the
    step time — with the generators restored, then back-propagates through it.

    With `distribute_saved_activations` the first input is kept as this
    rank's 1-D chunk over the tensor-parallel group (its `.data` replaced, as
    Megatron does) and all-gathered back before the recomputation.
    """

    @staticmethod
    def forward(ctx, run_function, distribute_saved_activations, *args):
        with _checkpointing():
            ctx.run_function, ctx.distribute_saved_activations = run_function, distribute_saved_activations
            ctx.rng_states = _get_all_rng_states()
            outputs = run_function(*args)
            if distribute_saved_activations:
                ctx.input_0_shape = args[0].data.shape
                args[0].data = split_tensor_into_1d_equal_chunks(args[0].data, new_buffer=True)
            ctx.save_for_backward(*args)
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        if not hasattr(ctx, "recomputed"):  # once, however many outputs are back-propagated
            inputs = ctx.saved_tensors
            if ctx.distribute_saved_activations:
                inputs[0].data = gather_split_1d_tensor(inputs[0].data).view(ctx.input_0_shape)
            ctx.detached = detach_variable(inputs)
            ctx.recomputed = _recompute(ctx.run_function, ctx.detached, ctx.rng_states)
        return (None, None) + _input_grads(ctx.recomputed, grads, ctx.detached)


def checkpoint(function, distribute_saved_activations: bool, *args):
    """`function(*args)` with its activations recomputed in the backward instead of kept (`CheckpointFunction`)."""
    return CheckpointFunction.apply(function, distribute_saved_activations, *args)


class CheckpointWithoutOutputFunction(Function):
    """The autograd node of `CheckpointWithoutOutput`: forward without a graph, keeping the inputs; backward
    through the outputs its recomputation made."""

    @staticmethod
    def forward(ctx, run_function, checkpoint_without_output_obj, *args):
        outputs = run_function(*args)
        ctx.args, ctx.outputs, ctx.inputs = args, None, None
        checkpoint_without_output_obj.ctx = ctx
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        if ctx.outputs is None:  # no hook ran the recomputation (its tensor took no gradient): run it now
            ctx.checkpoint._recompute(None)
        return (None, None) + _input_grads(ctx.outputs, grads, ctx.inputs)


class CheckpointWithoutOutput:
    """Megatron's checkpoint that also gives up its outputs: `checkpoint(run_function, *args)` runs the
    function without a graph; `discard_output_and_register_recompute(hook_tensor)` makes the gradient of
    `hook_tensor` (a tensor computed from the outputs) run the function again — simulated device work — and
    hand the recomputed values to the outputs, which later backward ops read.

    As in Megatron, the discard gives the outputs' device memory back
    (`untyped_storage().resize_(0)`: `torch.ahbm.memory_allocated` drops)
    while the ops that saved them keep their views, and the recomputation
    points each output's storage at the recomputed bytes (`share_storage`),
    so every view sees them; the recomputation's work and time are
    simulated. With `retain_input_tensors` an output sharing an input's
    storage is kept. `fp8` is accepted (there is no FP8 here); `ckpt_manager`
    defers the discard and the recomputation to a
    `CheckpointWithoutOutputManager`.
    """

    def __init__(self, fp8=False, ckpt_manager=None, retain_input_tensors: bool = False):
        self.fp8 = fp8 is not None
        self.ckpt_manager = ckpt_manager
        self.retain_input_tensors = retain_input_tensors
        self.run_function = self.rng_states = self.ctx = self.outputs = None
        self._saved_input_ptrs: set[int] = set()

    def checkpoint(self, run_function, *args):
        """`run_function(*args)`, its graph not recorded; registered with the manager when there is one."""
        self.run_function = run_function
        self.rng_states = _get_all_rng_states()
        if self.retain_input_tensors:
            self._saved_input_ptrs = {arg.untyped_storage().data_ptr() for arg in args if isinstance(arg, Tensor)}
        outputs = CheckpointWithoutOutputFunction.apply(run_function, self, *args)
        self.ctx.checkpoint = self
        self.outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        if self.ckpt_manager is not None:
            self.ckpt_manager.add_checkpoint(self)
        return outputs

    def _recompute(self, _):
        """The hook: run the function again and give each output the recomputed values (once)."""
        if self.ctx is None:
            return
        inputs = detach_variable(self.ctx.args)
        outputs = _recompute(self.run_function, inputs, self.rng_states)
        for output, recomputed in zip(self.outputs, outputs):
            if isinstance(output, Tensor) and not output.untyped_storage().size():  # discarded
                share_storage(output, recomputed)
        self.ctx.outputs, self.ctx.inputs = outputs, inputs
        self.run_function = self.rng_states = self.outputs = self.ctx = None

    def discard_output_and_register_recompute(self, hook_tensor) -> None:
        """Recompute when `hook_tensor`'s gradient is ready (a manager, when given, does it for all instead)."""
        if self.ckpt_manager is not None:
            return
        self._discard_outputs()
        if hook_tensor.requires_grad:
            hook_tensor.register_hook(self._recompute)

    def _discard_outputs(self) -> None:
        """Give the outputs' storages back, but those sharing a retained input's."""
        kept = self._saved_input_ptrs if self.retain_input_tensors else set()
        for output in self.outputs:
            if isinstance(output, Tensor) and output.untyped_storage().data_ptr() not in kept:
                output.untyped_storage().resize_(0)


class CheckpointWithoutOutputManager:
    """Several `CheckpointWithoutOutput`s recomputed together, in forward order, from one hook."""

    def __init__(self):
        self.checkpoints = []
        self.is_last_layer_in_recompute_block = False

    def add_checkpoint(self, ckpt) -> None:
        if not isinstance(ckpt, CheckpointWithoutOutput):
            raise TypeError("Expected CheckpointWithoutOutput object")
        if ckpt.outputs is None:
            raise ValueError("CheckpointWithoutOutput must call checkpoint() before adding")
        self.checkpoints.append(ckpt)

    def discard_all_outputs_and_register_unified_recompute(self, hook_tensor) -> None:
        for ckpt in self.checkpoints:
            ckpt._discard_outputs()
        if hook_tensor.requires_grad:
            hook_tensor.register_hook(self._unified_recompute_hook)

    def _unified_recompute_hook(self, grad_output) -> None:
        for ckpt in self.checkpoints:
            ckpt._recompute(None)
