"""Turning a `@triton.jit` function into plain Python the bridge can call.

A jit function's body is Triton, not Python: an assignment of a Python
number or constexpr makes a tensor (`x = 0` is an int32 scalar, as the
compiler's `visit_Assign` decides). The bridge re-compiles the function's
source with every plain assignment's value passed through `assigned`, and
otherwise runs it as ordinary Python with the language builtins patched.

The rewritten function is created inside a factory so that the conversion
helper and the original's closure variables are closure cells of the new
function: the kernel module's globals are used live and never written to.
Rewrites are cached per function; they hold no per-program state.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types

import triton.language as tl

from kernbench.kernels.errors import UnsupportedKernelError
from kernbench.kernels.triton_bridge.context import current_program

_HELPER = "__kernbench_assigned__"
_FACTORY = "__kernbench_factory__"
# Per process, not per run (`kernbench.run_caches`): a rewrite is a pure function of the kernel's source, the
# same in every run, and the jit function that holds `fn` lives as long anyway.
_REWRITTEN: dict[types.FunctionType, types.FunctionType] = {}


def assigned(value):
    """The value a Triton assignment binds: numbers and constexprs become tensors."""
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, (bool, int, float)):
        return current_program().semantic.to_tensor(value)
    if type(value) is tuple:
        return tuple(assigned(item) for item in value)
    return value


class _WrapAssignments(ast.NodeTransformer):
    def visit_Assign(self, node: ast.Assign) -> ast.Assign:
        node.value = ast.Call(
            func=ast.Name(id=_HELPER, ctx=ast.Load()), args=[self.visit(node.value)], keywords=[]
        )
        return node


def rewritten(fn: types.FunctionType, kernel=None) -> types.FunctionType:
    """`fn` with Triton assignment semantics, compiled once and cached.

    `kernel`, the jit function wrapping `fn` where the caller has it, gives
    the source lines Triton read when it was defined; without it they are
    read now, and a file edited since the module was imported would give
    other code than the module's.
    """
    if fn not in _REWRITTEN:
        _REWRITTEN[fn] = _rewrite(fn, kernel)
    return _REWRITTEN[fn]


def _source_lines(fn: types.FunctionType, kernel) -> tuple[list[str], int]:
    """The source lines of `fn` and the number of the first: as Triton kept them (`raw_src`,
    `starting_line_number`, from 3.6 on), else from the file."""
    kept = getattr(kernel, "raw_src", None), getattr(kernel, "starting_line_number", None)
    if kept[0] is not None and kept[1] is not None:
        return list(kept[0]), kept[1]
    try:
        return inspect.getsourcelines(fn)
    except OSError as error:
        raise UnsupportedKernelError(
            f"kernel '{fn.__name__}' has no source file; the bridge needs its source to run it"
        ) from error


def _rewrite(fn: types.FunctionType, kernel) -> types.FunctionType:
    lines, first_line = _source_lines(fn, kernel)
    definition = ast.parse(textwrap.dedent("".join(lines))).body[0]
    definition.decorator_list = []
    definition = _WrapAssignments().visit(definition)
    ast.increment_lineno(definition, first_line - 1)

    free = fn.__code__.co_freevars
    factory = ast.parse(f"def {_FACTORY}({', '.join((_HELPER, *free))}):\n    pass\n").body[0]
    factory.body = [definition, ast.Return(value=ast.Name(id=fn.__name__, ctx=ast.Load()))]
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))

    namespace: dict = {}
    exec(compile(module, inspect.getsourcefile(fn) or "<kernel>", "exec"), fn.__globals__, namespace)
    cells = [cell.cell_contents for cell in fn.__closure__ or ()]
    result = namespace[_FACTORY](assigned, *cells)
    result.__defaults__ = fn.__defaults__
    result.__kwdefaults__ = fn.__kwdefaults__
    return result
