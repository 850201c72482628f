"""`prepare_launch`: bind a kernel's arguments once, run its programs one by one.

A launch is prepared once per `kernel[grid](...)`: the kernel wrapper is
unwrapped (`@triton.heuristics` computes its meta-parameters,
`@triton.autotune` contributes its *first* config, since there is nothing
to tune against on a simulated machine), arguments are bound to the
signature and converted the way Triton would see them (kernbench tensors as
typed pointers, numbers as scalar tensors, `tl.constexpr` parameters as
constexprs), and the grid is evaluated. The runtime then calls
`run_program` for each grid point, each in its own greenlet and in any
interleaving; a program's whole state is built inside `run_program`.

A kernbench tensor that can also name its allocation
(`__kernbench_extent__()`: name, base address, bytes) gives its pointer an
origin, so the memcheck holds every access through it to that allocation
(`builder`); `memcheck = False` on a launch turns that off. `check` is what
a compiler would refuse at the launch: the first program runs dry at once,
so an operation the bridge does not simulate fails at `kernel[grid](...)`,
not when the stream reaches the launch.
"""

from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import triton.language as tl
from triton.language.semantic import TritonSemantic
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

from kernbench.kernels.errors import KernelFault, KernelLaunchError, UnsupportedKernelError
from kernbench.kernels.triton_bridge import blocks
from kernbench.kernels.triton_bridge.builder import BridgeBuilder
from kernbench.kernels.triton_bridge.context import RunningProgram
from kernbench.kernels.triton_bridge.dtypes import numpy_dtype, triton_dtype
from kernbench.kernels.triton_bridge.kept_shapes import KeptShapes
from kernbench.kernels.triton_bridge.patches import running_program
from kernbench.kernels.triton_bridge.port import ProgramPort
from kernbench.kernels.triton_bridge.rewriter import rewritten
from kernbench.kernels.triton_bridge.trace import ProgramTraces
from kernbench.kernels.triton_bridge.values import Origin, Value
from kernbench.run_caches import RunCaches


def is_kernbench_tensor(value: Any) -> bool:
    """Whether `value` is a kernbench tensor (it can name its address and dtype)."""
    return hasattr(type(value), "__kernbench_pointer__")


def kernbench_tensors(value: Any) -> Iterator:
    """The kernbench tensors a kernel argument is or holds: itself, a host `TensorDescriptor`'s base, a tuple's."""
    if isinstance(value, TensorDescriptor):
        value = value.base
    if isinstance(value, tuple):
        for item in value:
            yield from kernbench_tensors(item)
    elif is_kernbench_tensor(value):
        yield value


def holds_kernbench_tensor(value: Any) -> bool:
    """Whether a kernel argument is a kernbench tensor, a host `TensorDescriptor` of one, or a tuple holding one."""
    return next(kernbench_tensors(value), None) is not None


@dataclass(frozen=True)
class PointerArg:
    """A kernel argument that was a kernbench tensor."""

    name: str
    tensor: Any
    address: int
    dtype_name: str


class PreparedLaunch:
    """One launch with its arguments bound; `run_program` runs one grid point.

    `timing_only` and `memcheck` are read by each `run_program` call, so the
    runtime may set them after preparation (from its own modes). Programs are
    replayed from a trace of their shape where one can be made (`trace`);
    `replays = False` (on the class or one launch) interprets every program,
    with the same effect on the port. `caches` are the run's speed caches,
    where the kernel's traced shapes are kept for its later launches
    (`kept_shapes`); None: the launch keeps its own.
    """

    replays = True
    memcheck = True

    def __init__(
        self,
        kernel_name: str,
        fn: Callable,
        body: Callable,
        grid: tuple[int, int, int],
        arguments: dict[str, Any],
        pointer_args: tuple[PointerArg, ...],
        timing_only: bool,
        caches: RunCaches | None = None,
        given: dict[str, Any] | None = None,
    ) -> None:
        self.kernel_name = kernel_name
        self.given = given  # the arguments as the caller gave them (tensors, numbers), by parameter
        self.grid = grid
        self.pointer_args = pointer_args
        self.timing_only = timing_only
        self._fn = fn
        self._body = body
        self._arguments = arguments
        self._interpreted = 0
        self._kept_shapes = KeptShapes(caches)
        programs = grid[0] * grid[1] * grid[2]
        # A trace costs one interpretation without simulation: worth it when it serves another program.
        self._traces = self._program_traces() if programs > 1 else None

    def __repr__(self) -> str:
        return f"PreparedLaunch({self.kernel_name!r}, grid={self.grid})"

    def spmd_work(self) -> tuple:
        """What decides its programs' work: the kernel, its grid, its arguments and modes (two launches alike in
        these run alike: an SPMD spawn's ranks are matched by it, adr/0022)."""
        return (self.kernel_name, self._fn, self.grid, self.given, self.timing_only, self.memcheck, self.replays)

    @property
    def interpretations(self) -> int:
        """How many times the kernel's body has run so far: interpreted programs and dry runs of traces."""
        return self._interpreted + (self._traces.dry_runs if self._traces is not None else 0)

    def check(self) -> None:
        """Refuse now what the first program would be refused at run time for: an unsupported operation.

        A GPU compiles the kernel at its launch, so a construct the compiler
        rejects fails at `kernel[grid](...)`. Here the first program's body
        runs dry (no memory, no time: a program trace's dry run, kept for
        replaying the programs), and an `UnsupportedKernelError` it meets is
        raised at once. Only the path that program takes is seen: an op
        behind a branch on loaded data or on another program's id still
        fails when a program reaches it.
        """
        if self.grid[0] * self.grid[1] * self.grid[2] == 0:
            return
        if self._traces is None:
            self._traces = self._program_traces()
        self._traces.record_first()

    def _program_traces(self) -> ProgramTraces:
        return ProgramTraces(self.kernel_name, self._fn, self._body, self._arguments, self.grid, self._kept_shapes)

    def share_memo_pool(self, pool: list[int]) -> None:
        """Keep results for later programs within `pool` (a list of the bytes left), shared with the other
        launches of the run (`kept_values.MemoBudget`)."""
        if self._traces is not None:
            self._traces.memo_budget.share(pool)

    def finished(self) -> None:
        """Every program has run: what was kept for later programs is dropped, its bytes back in the pool."""
        if self._traces is not None:
            self._traces.release()

    def run_program(self, program_id: tuple[int, int, int], port: ProgramPort) -> None:
        """Execute program `program_id` to completion, all its effects through `port`.

        A `KernelFault` raised by the port leaves with this launch's kernel name
        and the program id filled in where the port left them None.
        """
        program_id = tuple(int(i) for i in program_id)
        if len(program_id) != 3 or not all(0 <= i < n for i, n in zip(program_id, self.grid)):
            raise ValueError(f"program id {program_id} is outside grid {self.grid} of '{self.kernel_name}'")
        try:
            if not (self.replays and self._traces is not None
                    and self._traces.run(program_id, port, self.timing_only, self.memcheck)):
                self._interpret(program_id, port)
        except KernelFault as fault:
            if fault.kernel is None:
                fault.kernel = self.kernel_name
            if fault.program_id is None:
                fault.program_id = program_id
            raise

    def _interpret(self, program_id: tuple[int, int, int], port: ProgramPort) -> None:
        """Run the kernel's body for one program through Triton's language layer."""
        self._interpreted += 1
        builder = BridgeBuilder(port, self.kernel_name, program_id, self.grid, self.timing_only, self.memcheck)
        program = RunningProgram(self.kernel_name, program_id, builder, TritonSemantic(builder))
        with running_program(program):
            self._body(**self._arguments)


def prepare_launch(
    kernel: Any, grid: Any, args: tuple, kwargs: dict, timing_only: bool = False, caches: RunCaches | None = None
) -> PreparedLaunch:
    """Bind `kernel[grid](*args, **kwargs)` for the bridge.

    `kernel` is a `JITFunction`, an `InterpretedFunction`, or either wrapped
    in `@triton.heuristics` / `@triton.autotune`. Keyword arguments that are
    not parameters of the kernel (`num_warps`, `num_stages`, ...) are launch
    options and are ignored. With `timing_only`, the port may return loaded
    values it did not read, and a program whose control flow or addresses
    depend on loaded values is refused with `TimingOnlyRefusal`. `caches`:
    the run's speed caches (`PreparedLaunch`).
    """
    kernel, kwargs = _unwrap(kernel, tuple(args), dict(kwargs))
    fn = kernel.fn
    signature = inspect.signature(fn)
    bound = _bound(fn.__name__, signature, args, {k: v for k, v in kwargs.items() if k in signature.parameters})
    pointers = []
    arguments = {}
    for name, value in bound.arguments.items():
        if _is_constexpr(signature.parameters[name]):
            arguments[name] = value if isinstance(value, tl.constexpr) else tl.constexpr(value)
        else:
            arguments[name] = _kernel_value(fn.__name__, name, value, pointers)
    return PreparedLaunch(fn.__name__, fn, rewritten(fn, kernel), _grid(fn.__name__, grid, bound.arguments), arguments,
                          tuple(pointers), timing_only, caches, given=dict(bound.arguments))


def _bound(kernel_name: str, signature: inspect.Signature, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    """The arguments bound to the kernel's parameters, defaults applied; arguments that do not bind are one
    `KernelLaunchError` naming the kernel, its parameters and what it got (where Python says only "missing a
    required argument", thirty frames inside Triton)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        names = ", ".join(signature.parameters)
        given = f"{len(args)} positional" + (f" and {', '.join(kwargs)} by keyword" if kwargs else "")
        raise KernelLaunchError(f"kernel '{kernel_name}' takes {len(signature.parameters)} arguments ({names}), "
                                f"got {given}: {error}") from None
    bound.apply_defaults()
    return bound


def _unwrap(kernel: Any, args: tuple, kwargs: dict) -> tuple[JITFunction | InterpretedFunction, dict]:
    """The jit function inside `kernel`'s decorators, and `kwargs` with what they add."""
    while not isinstance(kernel, (JITFunction, InterpretedFunction)):
        if isinstance(kernel, Heuristics):
            for name, heuristic in kernel.values.items():
                kwargs[name] = heuristic({**dict(zip(kernel.arg_names, args)), **kwargs})
        elif isinstance(kernel, Autotuner):
            kwargs = _first_config(kernel, args, kwargs)
        else:
            raise UnsupportedKernelError(f"{kernel!r} is not a @triton.jit kernel")
        kernel = kernel.fn
    return kernel, kwargs


def _first_config(tuner: Autotuner, args: tuple, kwargs: dict) -> dict:
    """`kwargs` with the config the bridge runs: the first one left by `early_config_prune`, its pre-hook run.

    Triton prunes only when there is a choice, and runs the chosen config's
    pre-hook before every launch (a pre-hook may set a host descriptor's
    block shape from the config, as tutorial 06 does).
    """
    nargs = dict(zip(tuner.arg_names, args))
    configs = tuner.configs
    if len(configs) > 1 and getattr(tuner, "early_config_prune", None):
        configs = tuner.early_config_prune(configs, nargs, **kwargs)
        if not configs:
            raise UnsupportedKernelError(
                f"autotuned kernel '{tuner.base_fn.__name__}': early_config_prune left no config")
    config = configs[0]
    kwargs = {**kwargs, **config.all_kwargs()}
    if config.pre_hook is not None:
        config.pre_hook({**nargs, **kwargs})
    return kwargs


def _is_constexpr(parameter: inspect.Parameter) -> bool:
    annotation = parameter.annotation
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return annotation is tl.constexpr


def _scalar_type(value: int | float | bool) -> tl.dtype:
    if isinstance(value, bool):
        return tl.int1
    if isinstance(value, float):
        return tl.float32
    if -(2**31) <= value < 2**31:
        return tl.int32
    if 0 <= value < 2**32:
        return tl.uint32
    if -(2**63) <= value < 2**63:
        return tl.int64
    return tl.uint64


def _kernel_value(kernel_name: str, name: str, value: Any, pointers: list) -> Any:
    """The value a kernel parameter holds inside the kernel body; a value no launch can pass (a string, a list, an
    array, a number beyond 64 bits) is one `KernelLaunchError` naming kernel and argument, as Triton refuses it."""
    if is_kernbench_tensor(value):
        address, dtype_name = value.__kernbench_pointer__()
        pointer = tl.pointer_type(triton_dtype(dtype_name))
        pointers.append(PointerArg(name, value, int(address), dtype_name))
        return tl.tensor(Value(np.array([address], dtype=np.int64), pointer, False, _origin(name, value)), pointer)
    if isinstance(value, (bool, int, float)):
        if isinstance(value, int) and not -(2**63) <= value < 2**64:
            raise KernelLaunchError(f"kernel '{kernel_name}' argument '{name}' is {value}, beyond what 64 bits hold")
        scalar = _scalar_type(value)
        return tl.tensor(Value(np.array([value]).astype(numpy_dtype(scalar)), scalar), scalar)
    if isinstance(value, TensorDescriptor) and is_kernbench_tensor(value.base):
        return blocks.host_descriptor(_kernel_value(kernel_name, name, value.base, pointers), value)
    if isinstance(value, tuple):
        return tuple(_kernel_value(kernel_name, name, item, pointers) for item in value)
    if hasattr(value, "data_ptr"):
        raise UnsupportedKernelError(
            f"kernel '{kernel_name}' argument '{name}' is another framework's tensor; "
            "a launch on kernbench tensors takes kernbench tensors only"
        )
    if value is not None:
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
        raise KernelLaunchError(f"kernel '{kernel_name}' argument '{name}' is {shown} ({type(value).__name__}); "
                                "expected a kernbench tensor, a Python number or bool, or None (other values go to "
                                "tl.constexpr parameters)")
    return value


def _origin(argument: str, tensor: Any) -> Origin | None:
    """The origin of the pointer a tensor argument becomes, if the tensor can name its allocation."""
    extent = getattr(type(tensor), "__kernbench_extent__", None)
    if extent is None:
        return None
    name, base, nbytes = extent(tensor)
    return Origin(argument, name, int(base), int(nbytes))


def _grid(kernel_name: str, grid: Any, arguments: dict) -> tuple[int, int, int]:
    """The grid as three sizes; anything but 1 to 3 non-negative integers (a float, a string) is refused, as a
    GPU launch refuses it, rather than truncated."""
    dims = grid(dict(arguments)) if callable(grid) else grid
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    try:
        sizes = tuple(operator.index(d) for d in dims)
    except TypeError:
        sizes = None
    if sizes is None or not 1 <= len(sizes) <= 3 or any(d < 0 for d in sizes):
        raise KernelLaunchError(f"kernel '{kernel_name}' grid {dims!r} is not 1 to 3 non-negative integers")
    return sizes + (1,) * (3 - len(sizes))
