"""The op table's rows bound to their forms: `Tensor`'s methods and operators, and the `torch`,
`torch.nn.functional` and `torch.testing` names.

`TensorOps` is a base class of `Tensor` (tensor/core.py), so a tensor has
every row's method from the moment the class is defined. Each form is made
from the row alone:

- `torch.X`: the row's function, or the elementwise or reduction runner
  bound to the row;
- `Tensor.X`: the row's `method` where it takes other arguments, else the
  torch form with the tensor first;
- `Tensor.X_`: the torch form writing into the tensor (`out=self`), refused
  where autograd needs the old values (autograd.check_in_place);
- `F.X`: the row's `functional`, or for a unary elementwise row
  `(input, inplace=False)`;
- operators: a binary row's operator gives `__op__`, `__rop__` and, where the
  row has an in-place form and does not compare, `__iop__`; a unary row's
  gives `__op__`.
"""

from __future__ import annotations

from kernbench.dtypes import bool_
from kernbench.runtime_api import autograd
from kernbench.runtime_api.ops import elementwise, reductions
from kernbench.runtime_api.ops.overrides import overridable
from kernbench.runtime_api.ops.table import ROWS, Cost, OpRow


def torch_form(row: OpRow):
    """`torch.<name>` of `row` (deferring to an overriding argument's `__torch_function__`, overrides.py)."""
    if row.function is not None:
        return overridable(row.function)
    runner = reductions.reduce if row.cost is Cost.REDUCTION else elementwise.apply

    def form(*args, **kwargs):
        return runner(row, *args, **kwargs)
    form.__name__ = form.__qualname__ = row.name
    form.__doc__ = row.doc
    return overridable(form)


def in_place_form(row: OpRow):
    """`Tensor.<name>_`: the torch form with `out=self`, after autograd's check."""
    function = torch_form(row)

    def method(self, *args, **kwargs):
        autograd.check_in_place(self, row.name, args)
        function(self, *args, out=self, **kwargs)
        return self
    method.__name__ = method.__qualname__ = row.name + "_"
    method.__doc__ = f"In-place {row.name}: the result is written into this tensor."
    return method


def functional_form(row: OpRow):
    """`torch.nn.functional.<name>`."""
    if row.functional is not None:
        return overridable(row.functional)
    if row.cost is not Cost.ELEMENTWISE or row.operands != 1:
        return torch_form(row)

    def form(input, inplace: bool = False):
        return elementwise.apply(row, input, out=input if inplace else None)
    form.__name__ = form.__qualname__ = row.name
    form.__doc__ = row.doc
    return overridable(form)


def _operators(row: OpRow) -> dict:
    function = torch_form(row)
    if row.operands == 1:
        return {f"__{row.operator}__": lambda self: function(self)}
    dunders = {f"__{row.operator}__": lambda self, other: function(self, other)}
    if row.dtypes != "bool":
        dunders[f"__r{row.operator}__"] = lambda self, other: function(other, self)
    if row.dtypes != "bool" and "inplace" in row.forms:
        dunders[f"__i{row.operator}__"] = in_place_form(row)
    return dunders


def _invert(self):
    """~x: logical not of a bool tensor, bitwise not of an integer one."""
    return elementwise.apply(ROWS["logical_not" if self.dtype is bool_ else "bitwise_not"], self)


def _names(row: OpRow) -> tuple:
    return (row.name, *row.aliases)


def _tensor_namespace() -> dict:
    namespace = {"__doc__": "Tensor's methods and operators, one or more per row of the op table (ops/table.py).",
                 "__hash__": object.__hash__,  # __eq__ would otherwise drop it; tensors hash by identity, as torch's
                 "__invert__": _invert}
    for row in ROWS.values():
        if "method" in row.forms:
            namespace.update(dict.fromkeys(_names(row), row.method or torch_form(row)))
        if "inplace" in row.forms:
            namespace.update(dict.fromkeys((name + "_" for name in _names(row)), in_place_form(row)))
        if row.operator is not None:
            namespace.update(_operators(row))
    return namespace


TensorOps = type("TensorOps", (), _tensor_namespace())


def _names_of(form: str, make) -> dict:
    names = {}
    for row in ROWS.values():
        if form in row.forms:
            names.update(dict.fromkeys(_names(row), make(row)))
    return names


TORCH_FUNCTIONS = _names_of("torch", torch_form)
FUNCTIONAL = _names_of("functional", functional_form)
TESTING = _names_of("testing", torch_form)
