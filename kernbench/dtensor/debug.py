"""`torch.distributed.tensor.debug.CommDebugMode`: the collectives DTensor issues inside a block, counted per
collective and per module, forward and backward, as PyTorch's debugging mode reports them.

Entered on a rank, it listens to that rank's DTensor collectives (`comm.py`)
and follows the modules it runs through global forward hooks (a module is
named by its path from the outermost one, `ToyModel.in_proj`), recording the
placements of their DTensor parameters. A forward collective counts for the
module running and every module around it, and for `Global`; kernbench's
modules have no backward hooks, so a backward collective counts for
`Global` only. The operations of each module (PyTorch's noise levels above
0) are not traced: the table lists modules, their parameters and their
collectives.
"""

from __future__ import annotations

import greenlet

from kernbench.dtensor import comm
from kernbench.dtensor.dtensor import DTensor
from kernbench.runtime_api.nn.module import register_module_forward_hook, register_module_forward_pre_hook


class CommDebugMode:
    """A context manager counting the collectives of DTensor within it (`get_comm_counts()`, keyed by the
    functional collective's name, e.g. `c10d_functional.all_reduce`)."""

    def __init__(self):
        self.comm_counts: dict = {}
        self._modules: dict = {}  # fqn -> {"depth", "module_type", "parameters", "forward", "backward"}
        self._sharding: dict = {}
        self._parameters: dict = {}
        self._stack: list = []
        self._objects: dict = {}  # fqn -> the module, to name its children
        self._owner = None
        self._handles: list = []

    def __enter__(self):
        self.comm_counts.clear()
        self._sharding.clear()
        self._parameters.clear()
        self._modules = {"Global": _entry(0, None)}
        self._objects = {}
        self._stack = ["Global"]
        self._owner = greenlet.getcurrent()
        comm.listen(self)
        self._handles = [register_module_forward_pre_hook(self._entered), register_module_forward_hook(self._left)]
        return self

    def __exit__(self, *exc) -> None:
        comm.stop_listening(self)
        for handle in self._handles:
            handle.remove()

    # ---- what the rank does inside ------------------------------------------------------------------
    def note(self, collective: str, phase: str) -> None:
        """A collective DTensor issued on this rank, in the forward or backward pass."""
        self.comm_counts[collective] = self.comm_counts.get(collective, 0) + 1
        for fqn in (self._stack if phase == "forward" else ["Global"]):
            counts = self._modules[fqn][phase]
            counts[collective] = counts.get(collective, 0) + 1

    def _entered(self, module, args) -> None:
        if greenlet.getcurrent() is not self._owner:
            return
        fqn = _name_in(self._stack[-1], self._objects.get(self._stack[-1]), module)
        self._modules.setdefault(fqn, _entry(len(self._stack), type(module)))
        for name, param in module.named_parameters(recurse=False):
            self._parameters.setdefault(fqn, {})[name] = param.data
            if isinstance(param, DTensor):
                self._sharding[f"{fqn}.{name}"] = param.placements
                self._modules[fqn]["parameters"][name] = str(param.placements)
        self._stack.append(fqn)
        self._objects[fqn] = module

    def _left(self, module, args, output) -> None:
        if greenlet.getcurrent() is self._owner and len(self._stack) > 1:
            self._stack.pop()

    # ---- reports --------------------------------------------------------------------------------------
    def get_total_counts(self) -> int:
        return sum(self.comm_counts.values())

    def get_comm_counts(self) -> dict:
        """{collective: count} of the block."""
        return self.comm_counts

    def get_sharding_info(self) -> dict:
        """{"module_fqn.parameter": placements} of the DTensor parameters of the modules the block ran."""
        return self._sharding

    def get_parameter_info(self) -> dict:
        """{module_fqn: {parameter name: its data}} of the modules the block ran."""
        return self._parameters

    def generate_comm_debug_tracing_table(self, noise_level: int = 3) -> str:
        """Each module the block ran (indented by depth) with, from `noise_level` 1, its type and parameters'
        placements, then its forward and backward collective counts."""
        table = ""
        for fqn, entry in self._modules.items():
            indent = "  " * (2 * entry["depth"])
            table += f"{indent}{fqn}\n"
            if noise_level > 0 and entry["module_type"] is not None:
                table += f"{indent}*module type: {entry['module_type']}\n"
                if entry["parameters"]:
                    table += f"{indent}*Parameter List\n"
                    table += "".join(f"{indent} *{name}: {placements}\n"
                                     for name, placements in entry["parameters"].items())
            for phase in ("forward", "backward"):
                if entry[phase]:
                    table += f"{indent}  {phase.upper()} PASS\n"
                    table += "".join(f"{indent}    *{collective}: {count}\n"
                                     for collective, count in entry[phase].items())
        return table

    def log_comm_debug_tracing_table_to_file(self, file_name: str = "comm_mode_log.txt", noise_level: int = 3):
        with open(file_name, "w") as log:
            log.write(self.generate_comm_debug_tracing_table(noise_level))


def _entry(depth: int, module_type) -> dict:
    return {"depth": depth, "module_type": None if module_type is None else
            f"class {module_type.__module__}.{module_type.__qualname__}",
            "parameters": {}, "forward": {}, "backward": {}}


def _name_in(parent: str, outer, module) -> str:
    """`module`'s path: its attribute name under the module running around it, or its class name at the top."""
    if outer is not None:
        for name, child in outer.named_children():
            if child is module:
                return f"{parent}.{name}"
    return type(module).__name__
