"""ADR 0011: Megatron-LM's own `tests/unit_tests/tensor_parallel/` and `test_parallel_state.py` run unchanged on
kernbench's 8 ranks — opt-in.

Set KERNBENCH_MEGATRON_LM to a Megatron-LM checkout to run it; it skips
otherwise (nothing of Megatron's is in this repository). The checkout's
test files are copied to a temporary folder and run by pytest in a
subprocess with `upstream_plugin` (imports remapped name by name, each test
on 8 ranks). Each test must pass, fail as Megatron itself fails
(`upstream_plugin.FAILS_IN_MEGATRON`) or skip for one of the reasons in
`SKIP_REASONS`: what a simulator of torch cannot run (Transformer Engine,
NVIDIA's CUDA library).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = os.environ.get("KERNBENCH_MEGATRON_LM")
HERE = Path(__file__).resolve().parent

# What a skip may say (upstream_plugin's placeholders and Megatron's own skips), each a pattern.
SKIP_REASONS = (r"is Transformer Engine's \(NVIDIA's CUDA library", r"Transformer Engine general_gemm is not available")
# Beside the tensor_parallel folder, these files of tests/unit_tests.
UNIT_TEST_FILES = ("test_parallel_state.py",)


@pytest.mark.skipif(not CHECKOUT, reason="set KERNBENCH_MEGATRON_LM to a Megatron-LM checkout to run its tests")
def test_adr0011_t127_megatrons_own_tensor_parallel_tests_run_unchanged_on_8_ranks(tmp_path):
    unit_tests = Path(CHECKOUT) / "tests" / "unit_tests"
    files = sorted((unit_tests / "tensor_parallel").glob("test_*.py"))
    assert files, f"KERNBENCH_MEGATRON_LM={CHECKOUT}: no tests/unit_tests/tensor_parallel/test_*.py there"
    for name in UNIT_TEST_FILES:
        assert (unit_tests / name).is_file(), f"KERNBENCH_MEGATRON_LM={CHECKOUT}: no tests/unit_tests/{name} there"
        files.append(unit_tests / name)
    for path in files:
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # The plugin, tests/tp (megatron_utils) and the repository (the `tests` package megatron_utils imports from).
    path = [str(HERE), str(HERE.parent), str(HERE.parents[2]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "--tb=line", "-p", "upstream_plugin",
                           "-p", "no:randomly", "-p", "no:cacheprovider",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning", "."],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    outcomes = dict((node, kind) for kind, node in re.findall(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)",
                                                            done.stdout, re.MULTILINE))
    failed = sorted(node for node, kind in outcomes.items() if kind in ("FAILED", "ERROR", "XPASS"))
    assert not failed, done.stdout[-6000:]
    skips = re.findall(r"^SKIPPED \[\d+\] \S+: (.*)$", done.stdout, re.MULTILINE)
    unexplained = [reason for reason in skips if not any(re.search(allowed, reason) for allowed in SKIP_REASONS)]
    assert not unexplained, unexplained
    assert any(kind == "PASSED" for kind in outcomes.values()) and done.returncode == 0, done.stdout[-6000:]
