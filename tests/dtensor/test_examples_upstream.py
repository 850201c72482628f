"""ADR 0006 T10: pytorch/examples' tensor-parallel scripts run as written, as torchrun runs them — opt-in.

Set KERNBENCH_PYTORCH_EXAMPLES to a pytorch/examples checkout to run them; they skip otherwise (nothing of
pytorch/examples is in this repository). Each script of `distributed/tensor_parallelism/` is run from its own
folder by `kernbench run SCRIPT --nproc-per-node 4` on h200x4, unchanged: it trains its toy model ten iterations
under ColwiseParallel/RowwiseParallel (or sequence parallelism) and says so in its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = os.environ.get("KERNBENCH_PYTORCH_EXAMPLES")
FOLDER = Path("distributed") / "tensor_parallelism"
# Per step, as PyTorch issues them: the row-parallel output's all-reduce forward (the scripts' inputs need no
# gradient, so the column-parallel input's backward all-reduce is not run); with sequence parallelism the input's
# all-gather and the output's reduce-scatter forward, and the reduce-scatter's all-gather backward.
SCRIPTS = {"tensor_parallel_example.py": ("Tensor Parallel training completed!", {"all_reduce": 10}),
           "sequence_parallel_example.py": ("Sequence Parallel training completed!",
                                            {"all_gather": 20, "reduce_scatter": 10})}


@pytest.mark.skipif(not CHECKOUT, reason="set KERNBENCH_PYTORCH_EXAMPLES to a pytorch/examples checkout to run its "
                                         "tensor-parallel scripts")
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_adr0006_t10_pytorch_examples_tensor_parallel_scripts_run_as_written(tmp_path, script):
    folder = Path(CHECKOUT) / FOLDER
    assert (folder / script).is_file(), f"KERNBENCH_PYTORCH_EXAMPLES={CHECKOUT}: no {FOLDER / script} there"
    report = tmp_path / "report.json"
    result = subprocess.run([sys.executable, "-m", "kernbench", "run", script, "--nproc-per-node", "4",
                             "--topology", "h200x4", "--json", str(report)], capture_output=True, text=True,
                            cwd=folder)
    assert result.returncode == 0, result.stderr
    done, collectives = SCRIPTS[script]
    assert done in result.stdout + result.stderr
    counted = {}
    for row in json.loads(report.read_text())["collectives"]:
        counted[row["collective"]] = counted.get(row["collective"], 0) + 1
    # Ten steps (the parameters' placement broadcast and scatters at parallelize_module come before).
    assert {kind: counted.get(kind, 0) for kind in collectives} == collectives, counted
