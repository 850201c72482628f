"""The op table's elementwise rows with a numpy function, by arity: what the row-by-row tests run."""

from kernbench.runtime_api.ops.table import ROWS, Cost

# Rows making complex numbers of real ones (polar, complex) have real-valued tests of their own
# (test_complex_views.py): the row-by-row tests compare real results against real numpy references.
_ELEMENTWISE = {name: row for name, row in ROWS.items()
                if row.cost is Cost.ELEMENTWISE and row.numpy is not None and row.dtypes != "complex"}
UNARY = {name: row for name, row in _ELEMENTWISE.items() if row.operands == 1}
BINARY = {name: row for name, row in _ELEMENTWISE.items() if row.operands == 2}
