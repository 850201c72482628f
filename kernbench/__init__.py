"""kernbench: a simulated multi-SIP HBM accelerator with a torch-like API.

A run gives two things at once: the numbers a workload computes (checkable
against numpy) and its simulated performance (time, bandwidth, utilization),
derived from a topology file and deterministic to the picosecond.

Importing kernbench pins numpy's BLAS to one thread: each of
OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS and
VECLIB_MAXIMUM_THREADS that the environment does not set is set to 1, so a
count chosen in the variable a BLAS library reads first (OPENBLAS_ for
OpenBLAS, MKL_ for MKL) always wins. The simulator's BLAS calls are small
(one tile's `tl.dot`, microseconds of work) and come one at a time from one
Python thread, so a pool of BLAS threads only adds wake-ups: on a 2-core
host shared with other work a 128x64 @ 64x256 dot took 24-40 ms with the
default pool and 0.07-0.13 ms on one thread. BLAS libraries read these
variables once, when numpy loads them, so they are set here, before any
kernbench module imports numpy. If numpy was imported first they come too
late: when the environment set none of them, the pool is then limited
through `threadpoolctl` if that is installed (kernbench does not depend on
it), and otherwise stays as numpy started it — set OPENBLAS_NUM_THREADS=1
in the environment, or import kernbench before numpy, for the
single-threaded speed.
"""

import os
import sys

_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def _pin_blas_to_one_thread() -> None:
    user_chose = any(name in os.environ for name in _BLAS_THREAD_VARIABLES)
    for name in _BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    if "numpy" in sys.modules and not user_chose:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return
        threadpool_limits(1, user_api="blas")


_pin_blas_to_one_thread()

from kernbench.errors import KernbenchError  # noqa: E402  (after the BLAS variables are set)

__all__ = ["KernbenchError"]
__version__ = "0.1.0"
