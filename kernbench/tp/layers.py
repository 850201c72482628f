"""Megatron's tensor-parallel linear layers: `ColumnParallelLinear` and `RowParallelLinear`.

A linear layer computes `Y = X @ W.T + b` with `W` of shape (output_size,
input_size), torch's and Megatron's layout. Across the tensor-parallel group
it is split one of two ways:

- *column parallel*: `W` split along its output features (rows). Each rank
  computes its own columns of `Y` from the whole `X`; gathering them is
  optional, because the next layer is usually row parallel and wants them
  split.
- *row parallel*: `W` split along its input features (columns). Each rank
  multiplies its slice of `X`'s features and holds a partial sum of the whole
  `Y`; an all-reduce completes it. The bias is added once, after the
  all-reduce, or it would be counted once per rank.

With sequence parallelism (`config.sequence_parallel`, tp > 1) activations
outside the region are split along the sequence (first) dim: the column
layer all-gathers its input along it first, and the row layer reduce-scatters
its output along it instead of all-reducing.

The layers compose `kernbench.tp.mappings` and ask `parallel_state` for their
rank and group. Weights are device tensors on the rank's current device.
They are initialized as Megatron's CPU initialization does: the full master
weight is drawn on the host (numpy, from `seed`; or, for an `init_method`
of Megatron's kind that fills a tensor, from the host's torch generator, as
Megatron's CPU initialization after `torch.manual_seed`) and each rank keeps
its partition, so a layer's weights are the same whatever the
tensor-parallel size; biases start at zero. `load_full_weight` partitions given arrays the
same way. Activations are contiguous device tensors of any number of dims,
the last being the features (Megatron's [sequence, batch, hidden]). The
matmul is the GEMM library's device op (cuBLAS's, as Megatron's layers run
it: `F.linear`, the bias in its epilogue) unless `linear_kernel` sets
another (the Triton linear of `kernbench.tp.kernels`, `triton_linear`, or a
user's own); the bias add and GELU are Triton kernels of `kernbench.tp.kernels`.

Weights and biases are parameters (leaves that require grad). The matmul
and the bias add are `torch.autograd.Function`s over those kernels, with
Megatron's backward: the input gradient `grad @ W`, the weight gradient
`gradᵀ @ X` and the bias gradient `Σ grad` over the leading dims, as device
matmuls and reductions; with the mappings' twins this makes a layer's
backward pass — GEMMs and collectives — simulated work (adr/0017-autograd.md).
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from kernbench.dtypes import resolve_dtype
from kernbench.runtime_api.autograd import Function
from kernbench.runtime_api.nn.module import Module
from kernbench.runtime_api.ops.device_ops import gemm_tile
from kernbench.tp import kernels, parallel_state
from kernbench.tp.config import config_value
from kernbench.tp.errors import MegatronAssertionError, ModelParallelError
from kernbench.tp.embedding import VocabParallelEmbedding  # noqa: F401 (in Megatron's layers)
from kernbench.tp.init_methods import InitMethod, init_method_normal
from kernbench.tp.mappings import (
    _gather_along_first_dim,
    _size_and_rank,
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    get_tensor_model_parallel_group_if_none,
    new_like,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from kernbench.tp.param_attributes import (  # noqa: F401 (Megatron's layers holds them)
    copy_gtp_attributes,
    copy_tensor_model_parallel_attributes,
    param_is_not_gtp_duplicate,
    param_is_not_tensor_parallel_duplicate,
    set_defaults_if_not_set_tensor_model_parallel_attributes,
    set_tensor_model_parallel_attributes,
)
from kernbench.tp.random import initial_values

class _ParallelLinear(Module):
    """What both layers share: the master weight's partition along one axis, and its loading.

    A `torch.nn.Module` as Megatron's layers are: `weight` and `bias` are
    registered parameters (`parameters()`, `state_dict()`), the weight marked
    with Megatron's tensor-parallel attributes.
    """

    partition_axis: int  # 0: output features (column parallel); 1: input features (row parallel)

    def __init__(self, input_size: int, output_size: int, *, config, init_method: InitMethod | None, bias: bool,
                 skip_bias_add: bool, stride: int, keep_master_weight_for_test: bool, is_expert: bool,
                 params_dtype, seed: int, tp_group=None, pg_collection=None, name: str | None = None,
                 allocate_weight: bool = True):
        super().__init__()
        self.name = name or type(self).__name__
        name = self.name
        if stride != 1:
            raise ModelParallelError(f"{name}(stride={stride!r}): only stride 1 (contiguous partitions) is implemented")
        self._torch = parallel_state.get_torch_namespace()
        self.config = config
        self.input_size, self.output_size = input_size, output_size
        self.skip_bias_add = skip_bias_add
        # Megatron's layers take their group as `tp_group=` (or from `pg_collection.tp`); else parallel_state's
        # tensor-parallel group, an expert layer's (`is_expert`) the expert tensor-parallel group.
        self.is_expert = is_expert
        self.tp_group = tp_group if tp_group is not None else getattr(pg_collection, "tp", None)
        if self.tp_group is None:
            self.tp_group = get_tensor_model_parallel_group_if_none(None, is_expert=is_expert)
        if self.tp_group is None:  # a world of one, or sizes set without groups (Megatron's fake initialization)
            self.tensor_model_parallel_size = parallel_state.get_tensor_model_parallel_world_size()
            self.tensor_model_parallel_rank = parallel_state.get_tensor_model_parallel_rank()
        else:
            self.tensor_model_parallel_size = self.tp_group.size()
            self.tensor_model_parallel_rank = self.tp_group.rank()
        # An expert layer on several ranks leaves its communication to the experts' token dispatcher (Megatron's
        # explicit expert communication), and one laid out unlike the dense layers has its gradients reduced over
        # the expert data-parallel group: its parameters are marked `allreduce = False`.
        self.expert_parallel = config_value(config, "expert_model_parallel_size") > 1
        self.explicit_expert_comm = is_expert and (self.tensor_model_parallel_size > 1 or self.expert_parallel)
        expert_tp = config_value(config, "expert_tensor_parallel_size")
        use_expert_groups = is_expert and (self.expert_parallel or (
            expert_tp is not None and expert_tp != config_value(config, "tensor_model_parallel_size")))
        self.sequence_parallel = bool(config_value(config, "sequence_parallel"))
        if self.sequence_parallel and self.tensor_model_parallel_size == 1:
            warnings.warn(f"{name}: `sequence_parallel` is set to True, but the tensor model parallel size is 1. "
                          f"Disabling sequence parallel.", stacklevel=3)
            self.sequence_parallel = False
        # Megatron's overlap of the tensor-parallel communication with the GEMMs (`tp_comm_overlap`): here the
        # column-parallel layer's backward runs its input-gradient all-reduce (reduce-scatter with sequence
        # parallelism) beside the weight-gradient GEMM (`LinearWithGradAccumulationAndAsyncCommunication`).
        self.overlap_communication = bool(config_value(config, "tp_comm_overlap")) and \
            self.tensor_model_parallel_size > 1
        if params_dtype is None:
            params_dtype = "f16" if config is None else config_value(config, "params_dtype")
        self.params_dtype = resolve_dtype(params_dtype)

        full_shape = (output_size, input_size)
        split = _divide(full_shape[self.partition_axis], self.tensor_model_parallel_size,
                        f"{name}: {('output_size', 'input_size')[self.partition_axis]}")
        shape = list(full_shape)
        shape[self.partition_axis] = split
        parameter = self._torch.nn.Parameter
        self.weight = parameter(self._torch.empty(*shape, dtype=self.params_dtype, name=f"{name}.weight")) \
            if allocate_weight else None
        if self.weight is not None:
            set_tensor_model_parallel_attributes(self.weight, True, self.partition_axis, stride)
        bias_size = split if self.partition_axis == 0 else output_size
        self.bias = parameter(self._torch.empty(bias_size, dtype=self.params_dtype, name=f"{name}.bias")) \
            if bias else None
        if self.bias is not None and self.partition_axis == 0:
            set_tensor_model_parallel_attributes(self.bias, True, 0, stride)
        for parameter_ in (self.weight, self.bias):
            if parameter_ is not None:
                parameter_.allreduce = not use_expert_groups

        self.master_weight = None
        # Timing only, no value is computed: drawing the master weight on the host (a GPT-3-width layer's
        # is 2.4 GB per rank) would cost the run minutes for numbers nobody reads.
        if config_value(config, "perform_initialization") and allocate_weight and not self._torch.is_timing_only():
            master = initial_values(self._torch, init_method or init_method_normal(0.02), full_shape,
                                    numpy_rng=np.random.default_rng(seed))
            self.load_full_weight(master, np.zeros(output_size, dtype=np.float32) if bias else None)
            if keep_master_weight_for_test:
                # Megatron returns the master weight in the parameters' dtype: the values the ranks hold.
                self.master_weight = self._torch.from_numpy(master.astype(self.params_dtype.numpy),
                                                            name=f"{name}.master_weight")

    def load_full_weight(self, weight: np.ndarray, bias: np.ndarray | None = None) -> None:
        """Load unpartitioned `weight` (output_size, input_size) and `bias` (output_size,); keep this rank's part."""
        weight, bias = np.asarray(weight), None if bias is None else np.asarray(bias)
        what = f"{type(self).__name__}.load_full_weight"
        if weight.shape != (self.output_size, self.input_size):
            raise ModelParallelError(f"{what}: weight has shape {weight.shape}, "
                                     f"expected (output_size, input_size) = {(self.output_size, self.input_size)}")
        if (bias is None) != (self.bias is None):
            raise ModelParallelError(f"{what}: the layer was built with bias={self.bias is not None} "
                                     f"but was given bias={bias is not None}")
        if bias is not None and bias.shape != (self.output_size,):
            raise ModelParallelError(f"{what}: bias has shape {bias.shape}, expected ({self.output_size},)")
        with self._torch.no_grad():
            self.weight.copy_(self._partition(weight, self.partition_axis).astype(self.params_dtype.numpy),
                              non_blocking=True)
            if bias is not None:
                # A row-parallel layer adds its whole bias once, after the all-reduce.
                part = self._partition(bias, 0) if self.partition_axis == 0 else bias
                self.bias.copy_(part.astype(self.params_dtype.numpy), non_blocking=True)

    def _partition(self, array: np.ndarray, axis: int) -> np.ndarray:
        return np.split(array, self.tensor_model_parallel_size, axis=axis)[self.tensor_model_parallel_rank]

    def _check_input(self, input_, features: int) -> None:
        if input_.ndim < 1 or input_.shape[-1] != features:
            raise ModelParallelError(f"{type(self).__name__}: input {input_.name!r} has shape {input_.shape}, "
                                     f"expected (..., {features}): features last")

    def _matmul(self, input_, bias, weight=None, allreduce_dgrad: bool = False, sequence_parallel: bool = False):
        """This rank's `input_ @ weight.T (+ bias)` into a new tensor on the input's device, named for the layer;
        with `allreduce_dgrad` / `sequence_parallel` the linear owns its communication (Megatron's async path)."""
        output = LinearWithGradAccumulationAndAsyncCommunication.apply(
            input_, self._weight_for(weight), bias, False, allreduce_dgrad, sequence_parallel, None, 0,
            get_tensor_model_parallel_group_if_none(self.tp_group), 1, None)
        output.name = f"{input_.name}.{self.name}"
        return output

    def _weight_for(self, weight):
        """The weight a forward uses: its own, or the one given (required with skip_weight_param_allocation)."""
        weight = self.weight if weight is None else weight
        if weight is None:
            raise ModelParallelError(f"{self.name}: built with skip_weight_param_allocation=True, so forward() needs "
                                     "weight=")
        return weight


class ColumnParallelLinear(_ParallelLinear):
    """`Y = X @ W.T + b` with `W` split along its output features; `forward` returns `(output, output_bias)`.

    Each rank's output is its `output_size / tp` columns of `Y` (the bias
    fused into the matmul), or all of `Y` with `gather_output=True`. With
    `skip_bias_add=True` the bias is not added but returned, for the caller
    to fuse into its next kernel (as Megatron's MLP fuses it into GELU).
    With sequence parallelism the input is this rank's slice of the sequence
    (first) dim, all-gathered before the matmul.

    Megatron's keywords; `params_dtype` (default: `config.params_dtype`, or
    f16 without a config) and `seed` are kernbench's, `init_method` defaults
    to `init_method_normal(0.02)`. `tp_group=` (or `pg_collection.tp`)
    replaces parallel_state's tensor-parallel group; `name` names the
    layer's tensors; `skip_weight_param_allocation=True` takes the weight in
    `forward(input_, weight=...)`; `disable_grad_reduce=True` leaves the
    input gradient un-reduced; `output_dtype` casts the output. `is_expert=True` makes it an expert layer
    (ADR 0011 "Expert layers"): split over the expert tensor-parallel group, its parameters marked
    `allreduce = False` where that layout differs from the dense one.
    `tp_comm_buffer_name`, `embedding_activation_buffer` and
    `grad_output_buffer` (Transformer Engine's and deferred-wgrad buffers)
    are accepted and have no effect.
    """

    partition_axis = 0

    def __init__(self, input_size: int, output_size: int, bias: bool = True, gather_output: bool = False,
                 init_method: InitMethod | None = None, skip_bias_add: bool = False, params_dtype=None,
                 seed: int = 0, *, config=None, stride: int = 1, keep_master_weight_for_test: bool = False,
                 skip_weight_param_allocation: bool = False, embedding_activation_buffer=None,
                 grad_output_buffer=None, is_expert: bool = False, tp_comm_buffer_name: str | None = None,
                 disable_grad_reduce: bool = False, output_dtype=None, tp_group=None, pg_collection=None,
                 name: str | None = None):
        super().__init__(input_size, output_size, config=config, init_method=init_method, bias=bias,
                         skip_bias_add=skip_bias_add, stride=stride,
                         keep_master_weight_for_test=keep_master_weight_for_test, is_expert=is_expert,
                         params_dtype=params_dtype, seed=seed, tp_group=tp_group, pg_collection=pg_collection,
                         name=name, allocate_weight=not skip_weight_param_allocation)
        if gather_output and self.sequence_parallel:
            raise ModelParallelError("ColumnParallelLinear: gather_output=True and sequence parallelism exclude each "
                                     "other (the output would be gathered along both dims)")
        self.gather_output = gather_output
        self.disable_grad_reduce = disable_grad_reduce
        self.output_dtype = output_dtype
        self.output_size_per_partition = output_size // self.tensor_model_parallel_size

    def forward(self, input_, weight=None, runtime_gather_output: bool | None = None):
        self._check_input(input_, self.input_size)
        bias = None if self.skip_bias_add else self.bias
        if self.explicit_expert_comm:
            output_parallel = self._matmul(input_, bias, weight)
        elif self.overlap_communication and not self.disable_grad_reduce:
            output_parallel = self._matmul(input_, bias, weight, allreduce_dgrad=not self.sequence_parallel,
                                           sequence_parallel=self.sequence_parallel)
        else:
            if self.sequence_parallel:
                input_parallel = gather_from_sequence_parallel_region(input_, group=self.tp_group)
            elif self.disable_grad_reduce:
                input_parallel = input_
            else:
                input_parallel = copy_to_tensor_model_parallel_region(input_, group=self.tp_group)
            output_parallel = self._matmul(input_parallel, bias, weight)
        gather = self.gather_output if runtime_gather_output is None else runtime_gather_output
        output = gather_from_tensor_model_parallel_region(output_parallel, group=self.tp_group) if gather \
            else output_parallel
        if self.output_dtype is not None:
            output = output.to(self.output_dtype)
        return output, (self.bias if self.skip_bias_add else None)


class RowParallelLinear(_ParallelLinear):
    """`Y = X @ W.T + b` with `W` split along its input features; `forward` returns `(output, output_bias)`.

    The input is this rank's `input_size / tp` features when
    `input_is_parallel=True` (the output of a column-parallel layer), else the
    whole `X`, split here. Every rank's output is all of `Y`, completed by an
    all-reduce, with the (unpartitioned) bias added after it — or returned
    instead with `skip_bias_add=True`. With sequence parallelism the
    all-reduce is a reduce-scatter along the sequence (first) dim: each rank
    keeps its slice of `Y`, and the input must be parallel.

    Keywords as `ColumnParallelLinear`'s.
    """

    partition_axis = 1

    def __init__(self, input_size: int, output_size: int, bias: bool = True, input_is_parallel: bool = False,
                 init_method: InitMethod | None = None, skip_bias_add: bool = False, params_dtype=None,
                 seed: int = 0, *, config=None, stride: int = 1, keep_master_weight_for_test: bool = False,
                 is_expert: bool = False, tp_comm_buffer_name: str | None = None, tp_group=None, pg_collection=None,
                 name: str | None = None):
        super().__init__(input_size, output_size, config=config, init_method=init_method, bias=bias,
                         skip_bias_add=skip_bias_add, stride=stride,
                         keep_master_weight_for_test=keep_master_weight_for_test, is_expert=is_expert,
                         params_dtype=params_dtype, seed=seed, tp_group=tp_group, pg_collection=pg_collection,
                         name=name)
        if self.sequence_parallel and not input_is_parallel:
            raise ModelParallelError("RowParallelLinear: to enable sequence parallelism, input_is_parallel must be "
                                     "True (the input is a column-parallel layer's output)")
        self.input_is_parallel = input_is_parallel
        self.input_size_per_partition = self.weight.shape[1]
        if self.bias is not None:
            # Added after the reduce-scatter, on this rank's slice of the sequence: its gradient is a partial sum
            # that `finalize_model_grads` completes over the tensor-parallel group (Megatron marks it so too).
            self.bias.sequence_parallel = self.sequence_parallel

    def forward(self, input_):
        self._check_input(input_, self.input_size_per_partition if self.input_is_parallel else self.input_size)
        input_parallel = input_ if self.input_is_parallel else \
            scatter_to_tensor_model_parallel_region(input_, group=self.tp_group)
        output_parallel = self._matmul(input_parallel, None)
        if self.explicit_expert_comm:
            if not self.skip_bias_add:  # Megatron asserts it: the dispatcher adds the bias after combining
                raise MegatronAssertionError(f"{self.name}: an expert layer with explicit expert communication "
                                             "returns its bias for the caller (skip_bias_add=True)")
            output = output_parallel
        elif self.sequence_parallel:
            output = reduce_scatter_to_sequence_parallel_region(output_parallel, group=self.tp_group)
        else:
            output = reduce_from_tensor_model_parallel_region(output_parallel, group=self.tp_group)
        if self.skip_bias_add or self.bias is None:
            return output, (self.bias if self.skip_bias_add else None)
        return output + self.bias, None


class LinearWithGradAccumulationAndAsyncCommunication(Function):
    """Megatron's linear that owns its tensor-parallel communication: `input @ weight.T (+ bias)`.

    Forward: with `sequence_parallel`, all-gather this rank's slice of the
    sequence first (kept for the backward; Megatron re-gathers it there
    instead), then the linear (`_linear`), cast to `output_dtype` when given.
    Backward: the input gradient `grad @ W`; with `allreduce_dgrad` its
    all-reduce over `tp_group`, with `sequence_parallel` its reduce-scatter back
    to the sequence slice, started with `async_op=True` so it runs on the
    group's stream while the weight gradient `gradᵀ @ X` and the bias gradient
    `Σ grad` run on the current one, and waited for last. With
    `gradient_accumulation_fusion` the weight gradient is added into
    `weight.main_grad` (Megatron's fused accumulation) and none is returned.
    Without communication this is the plain linear and its backward.
    """

    @staticmethod
    def forward(ctx, input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
                grad_output_buffer=None, wgrad_deferral_limit=0, tp_group=None, gtp_remat_size=1, output_dtype=None):
        _refuse_deferred_wgrad("linear_with_grad_accumulation_and_async_allreduce", grad_output_buffer,
                               wgrad_deferral_limit)
        if gradient_accumulation_fusion and not hasattr(weight, "main_grad"):
            raise ModelParallelError(f"linear_with_grad_accumulation_and_async_allreduce: gradient_accumulation_fusion"
                                     f" accumulates into weight.main_grad, which {weight.name!r} does not have")
        total = _gather_along_first_dim(input, tp_group) if sequence_parallel else input
        ctx.save_for_backward(total, weight)
        ctx.has_bias, ctx.group = bias is not None, tp_group
        ctx.fuse, ctx.allreduce_dgrad, ctx.sequence_parallel = gradient_accumulation_fusion, allreduce_dgrad, \
            sequence_parallel
        output = _linear(total, weight, bias, f"{input.name}.linear")
        return output if output_dtype is None or output_dtype == output.dtype else output.to(output_dtype)

    @staticmethod
    def backward(ctx, grad_output):
        total, weight = ctx.saved_tensors
        world_size, _ = _size_and_rank(ctx.group)
        distributed = parallel_state.torch_namespace().distributed
        rows = _rows(grad_output if grad_output.dtype == weight.dtype else grad_output.to(weight.dtype))
        grad_total = (rows @ weight).reshape(*total.shape)
        work = None
        if ctx.sequence_parallel and world_size > 1:
            grad_input = new_like(total, (total.shape[0] // world_size, *total.shape[1:]), "reduce_scattered")
            work = distributed.reduce_scatter_tensor(grad_input, grad_total, group=ctx.group, async_op=True)
        else:
            grad_input = grad_total
            if ctx.allreduce_dgrad and world_size > 1:
                work = distributed.all_reduce(grad_input, group=ctx.group, async_op=True)
        grad_weight, grad_bias = _weight_and_bias_grads(rows, total, ctx.has_bias)
        if ctx.fuse:
            weight.main_grad.add_(grad_weight)
            grad_weight = None
        if work is not None:
            work.wait()
        return (grad_input, grad_weight, grad_bias) + (None,) * 8


def linear_with_grad_accumulation_and_async_allreduce(input, weight, bias, gradient_accumulation_fusion: bool,
                                                      allreduce_dgrad: bool, sequence_parallel: bool,
                                                      grad_output_buffer=None, wgrad_deferral_limit=0, tp_group=None,
                                                      gtp_remat_size: int = 1, output_dtype=None):
    """Megatron's `linear_with_grad_accumulation_and_async_allreduce`, its signature and meaning: a linear
    whose backward all-reduces (`allreduce_dgrad`) or reduce-scatters (`sequence_parallel`, which also
    all-gathers the input first) the input gradient over `tp_group` (default: this rank's tensor-parallel
    group) beside the weight-gradient GEMM (`LinearWithGradAccumulationAndAsyncCommunication`).

    Megatron asserts that `allreduce_dgrad` and `sequence_parallel` are not
    both set, and so does kernbench; a deferred weight gradient
    (`grad_output_buffer`, `wgrad_deferral_limit`) and generalized tensor
    parallelism (`gtp_remat_size` > 1) are not implemented and are refused
    in one line.
    """
    if allreduce_dgrad and sequence_parallel:
        raise ModelParallelError("linear_with_grad_accumulation_and_async_allreduce: allreduce_dgrad and "
                                 "sequence_parallel both reduce the input gradient over the group; pass one of them")
    if gtp_remat_size != 1:
        raise ModelParallelError(f"linear_with_grad_accumulation_and_async_allreduce(gtp_remat_size="
                                 f"{gtp_remat_size!r}): generalized tensor parallelism is not implemented in "
                                 "kernbench.tp")
    return LinearWithGradAccumulationAndAsyncCommunication.apply(
        input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel, grad_output_buffer,
        wgrad_deferral_limit, get_tensor_model_parallel_group_if_none(tp_group), gtp_remat_size, output_dtype)


def _refuse_deferred_wgrad(what: str, grad_output_buffer, wgrad_deferral_limit) -> None:
    if grad_output_buffer is not None or wgrad_deferral_limit not in (None, 0):
        raise ModelParallelError(f"{what}: a deferred weight gradient (grad_output_buffer, wgrad_deferral_limit) is "
                                 "not implemented in kernbench.tp; pass None and 0")


class LinearWithFrozenWeight(Function):
    """Megatron's linear whose weight takes no gradient (a frozen layer): `input @ weight.T (+ bias)` forward;
    backward only the input gradient `grad @ W`, all-reduced over the group when `allreduce_dgrad` (a
    column-parallel layer, whose input every rank used whole)."""

    @staticmethod
    def forward(ctx, input_, weight, bias, allreduce_dgrad: bool, tp_group):
        ctx.save_for_backward(weight)
        ctx.input_shape, ctx.allreduce_dgrad, ctx.group = input_.shape, allreduce_dgrad, tp_group
        return _linear(input_, weight, bias, f"{input_.name}.frozen_linear")

    @staticmethod
    def backward(ctx, grad_output):
        (weight,) = ctx.saved_tensors
        grad_input = (_rows(grad_output) @ weight).reshape(*ctx.input_shape)
        if ctx.allreduce_dgrad and _size_and_rank(ctx.group)[0] > 1:
            parallel_state.torch_namespace().distributed.all_reduce(grad_input, group=ctx.group)
        return grad_input, None, None, None, None


def linear_with_frozen_weight(input, weight, bias, gradient_accumulation_fusion, allreduce_dgrad, sequence_parallel,
                              grad_output_buffer=None, wgrad_deferral_limit=None, async_grad_allreduce=None,
                              tp_group=None):
    """Megatron's `linear_with_frozen_weight`, its signature and meaning: a linear layer's forward whose weight
    gets no gradient.

    `gradient_accumulation_fusion` has nothing to fuse (no weight gradient);
    `sequence_parallel` all-gathers the input's sequence slices first (and
    reduce-scatters their gradient back); `async_grad_allreduce` is the
    older name of `allreduce_dgrad` (a warning, as Megatron gives);
    `tp_group` defaults to this rank's tensor-parallel group. Megatron
    refuses a `grad_output_buffer` and a weight-gradient deferral here, and so
    does kernbench, and `allreduce_dgrad` with `sequence_parallel` (the input
    gradient would be reduced twice).
    """
    if async_grad_allreduce is not None:
        warnings.warn("linear_with_frozen_weight: async_grad_allreduce is deprecated; use allreduce_dgrad",
                      DeprecationWarning, stacklevel=2)
        allreduce_dgrad = async_grad_allreduce
    if allreduce_dgrad and sequence_parallel:
        raise ModelParallelError("linear_with_frozen_weight: allreduce_dgrad and sequence_parallel both reduce the "
                                 "input gradient over the group; pass one of them")
    if grad_output_buffer is not None or wgrad_deferral_limit not in (None, 0):
        raise ModelParallelError("linear_with_frozen_weight: grad_output_buffer and wgrad_deferral_limit defer a "
                                 "weight gradient, which a frozen weight does not have; pass None")
    if sequence_parallel:
        input = gather_from_sequence_parallel_region(input, tensor_parallel_output_grad=True, group=tp_group)
    return LinearWithFrozenWeight.apply(input, weight, bias, bool(allreduce_dgrad),
                                        get_tensor_model_parallel_group_if_none(tp_group))


def _linear(input_, weight, bias, name: str):
    """`input_ @ weight.T (+ bias)` into a new tensor on the input's device: by the kernel `linear_kernel` set, else
    by the GEMM library's device op (`torch.nn.functional.linear`, the bias in its epilogue), as Megatron's layers
    run cuBLAS."""
    torch = parallel_state.torch_namespace()
    if _LINEAR_KERNEL:
        output = torch.empty(*input_.shape[:-1], weight.shape[0], dtype=input_.dtype, device=input_.device, name=name)
        return _LINEAR_KERNEL[-1](input_.contiguous(), weight, bias, output)
    output = torch.nn.functional.linear(input_, weight, bias)
    output.name = name  # the layer's name for its output, as the kernel path gives it
    return output


_LINEAR_KERNEL: list = []  # the kernels `linear_kernel` set, innermost last


@contextlib.contextmanager
def linear_kernel(kernel):
    """Within the block, the parallel linears' forward GEMM is `kernel(input, weight, bias, output) -> output` (input
    contiguous, weight (N, K), bias (N,) or None, output new): a user's own kernel, or the Triton one of
    `kernbench.tp.kernels` (`triton_linear`). Outside, the GEMM library's (cuBLAS's, as Megatron runs it)."""
    _LINEAR_KERNEL.append(kernel)
    try:
        yield
    finally:
        _LINEAR_KERNEL.pop()


def triton_linear(input_, weight, bias, output):
    """The Triton linear of `kernbench.tp.kernels` in the tile a GEMM library would pick (`gemm_tile`)."""
    tile = gemm_tile(input_._ctx, 1, input_.numel() // input_.shape[-1], weight.shape[0], input_.dtype,
                     smallest=kernels.LINEAR_TILE)
    return kernels.linear(input_, weight, bias, output, *tile)


def _rows(grad_output):
    """The output gradient as a (tokens, features) matrix."""
    return grad_output.contiguous().reshape(-1, grad_output.shape[-1])


def _weight_and_bias_grads(rows, input_, has_bias: bool) -> tuple:
    """Megatron's weight gradient `gradᵀ @ X` and bias gradient `Σ grad` (None without a bias)."""
    grad_weight = rows.mT @ input_.contiguous().reshape(-1, input_.shape[-1])
    return grad_weight, rows.sum(0) if has_bias else None


def _divide(size: int, world_size: int, what: str) -> int:
    if size % world_size:
        raise ModelParallelError(f"{what} ({size}) is not divisible by the tensor-parallel size ({world_size})")
    return size // world_size
