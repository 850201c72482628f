"""Importing kernbench pins numpy's BLAS to one thread unless the environment chose (ADR 0007)."""

import os
import subprocess
import sys

import pytest

VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def _fresh_python(code: str, **environment: str) -> str:
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    env.update(environment)
    return subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout


def test_adr0007_t37_importing_kernbench_sets_every_blas_thread_variable_to_one():
    code = f"import kernbench, os; print(' '.join(os.environ.get(v, '-') for v in {VARIABLES!r}))"
    assert _fresh_python(code).split() == ["1"] * len(VARIABLES)


def test_adr0007_t38_a_thread_count_the_environment_chose_wins():
    code = "import kernbench, os; print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])"
    assert _fresh_python(code, OPENBLAS_NUM_THREADS="2").split() == ["2", "1"]


def test_adr0007_t39_numpy_imported_first_is_limited_through_threadpoolctl_when_installed():
    pytest.importorskip("threadpoolctl")
    code = ("import numpy, kernbench, threadpoolctl; "
            "print({info['num_threads'] for info in threadpoolctl.threadpool_info() if info['user_api'] == 'blas'})")
    assert _fresh_python(code).strip() == "{1}"
