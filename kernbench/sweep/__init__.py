"""kernbench.sweep: one bench over many topologies, ccl settings and bench arguments (`kernbench sweep`).

The names below are imported on first use: the command line imports this
package when it starts, and the loaders behind them bring in the simulator
(numpy and the machine), which a command must not pay for before its signal
handlers are in place.
"""

from kernbench.lazy_names import lazy_getattr

_PUBLIC = {
    "SweepError": "kernbench.sweep.errors",
    "SweepSpec": "kernbench.sweep.sweep_file",
    "load_sweep": "kernbench.sweep.sweep_file",
    "Point": "kernbench.sweep.points",
    "expand_points": "kernbench.sweep.points",
    "PointTask": "kernbench.sweep.derive",
    "derive_tasks": "kernbench.sweep.derive",
    "run_point": "kernbench.sweep.point_process",
    "LocalExecutor": "kernbench.sweep.local_executor",
    "RayExecutor": "kernbench.sweep.ray_executor",
    "run_sweep": "kernbench.sweep.runner",
    "Journal": "kernbench.sweep.journal",
    "table_rows": "kernbench.sweep.table",
    "draw_plot": "kernbench.sweep.plot",
}

__all__ = sorted(_PUBLIC)
__getattr__ = lazy_getattr(__name__, _PUBLIC)
