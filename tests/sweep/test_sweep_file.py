"""ADR 0018: the sweep file — its axes and points, each point's derived files, and one line for every mistake."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest
import yaml

import kernbench
from kernbench.sweep.derive import derive_tasks
from kernbench.sweep.points import expand_points
from kernbench.sweep.sweep_file import load_sweep
from tests.sweep.harness import REPO_ROOT, SHIPPED_CCL, SHIPPED_TOPOLOGY, run_sweep_command, sweep_folder, write


@pytest.mark.quick
def test_adr0018_t8_axes_ranges_and_zips_multiply_in_file_order_and_points_are_listed(tmp_path):
    sweep = sweep_folder(tmp_path, '''
bench: probe.py
axes:
  topology.system.sips.count: {start: 2, stop: 6, step: 2}
  ccl.defaults.algorithm: ring
  --n: {start: 0.5, stop: 2, factor: 2}
zip:
  - ccl.defaults.n_slots: [4, 8]
    ccl.defaults.slot_size: [4096, 65536]
''')
    spec = load_sweep(sweep)
    counts, algorithms, sizes, slots = (2, 4, 6), ("ring",), (0.5, 1.0, 2.0), ((4, 4096), (8, 65536))
    expected = [(c, a, n, s, z) for c in counts for a in algorithms for n in sizes for s, z in slots]
    points = expand_points(spec)
    assert [tuple(value for _, value in point.values) for point in points] == expected
    assert [point.index for point in points] == list(range(1, len(expected) + 1))
    write(tmp_path, "sweep.yaml", '''
bench: probe.py
points:
  - {ccl.defaults.algorithm: tree, --n: 8}
  - {ccl.defaults.algorithm: ring, --n: 16}
''')
    assert [tuple(v for _, v in p.values) for p in expand_points(load_sweep(sweep))] == [("tree", 8), ("ring", 16)]


@pytest.mark.quick
def test_adr0018_t9_a_point_is_the_base_files_with_its_keys_replaced_and_its_hash_names_its_inputs(tmp_path):
    sweep = sweep_folder(tmp_path, '''
bench: probe.py
args: [--sleep, 0]
axes:
  topology.system.inter_sip.bandwidth_gb_per_s: [50, 200]
  ccl.world_size: 2
  --n: 16
  --timing-only: [true, false]
''')
    spec = load_sweep(sweep)
    tasks = derive_tasks(spec, expand_points(spec))
    base_topology, base_ccl = yaml.safe_load(SHIPPED_TOPOLOGY.read_text()), yaml.safe_load(SHIPPED_CCL.read_text())
    for task, (bandwidth, flag) in zip(tasks, [(50, True), (50, False), (200, True), (200, False)]):
        base_topology["system"]["inter_sip"]["bandwidth_gb_per_s"] = bandwidth
        assert yaml.safe_load(task.topology_text) == base_topology
        assert yaml.safe_load(task.ccl_text) == {**base_ccl, "world_size": 2}  # a key the base lacks is added
        assert task.argv == ("--sleep", "0", "--n", "16", *(["--timing-only"] if flag else []))
    assert len({task.key for task in tasks}) == 4
    # The key is SHA-256 over the identity derive.py's docstring names, as json.dumps writes it with sorted keys:
    # what a folder an earlier sweep wrote is resumed by.
    bench_hash = hashlib.sha256((tmp_path / "probe.py").read_bytes()).hexdigest()
    for task in tasks:
        identity = {"bench": bench_hash, "argv": list(task.argv), "kernbench": kernbench.__version__,
                    **{name: json.dumps(yaml.safe_load(text), sort_keys=True)
                       for name, text in (("topology", task.topology_text), ("ccl", task.ccl_text))}}
        assert task.key == hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    assert [t.key for t in derive_tasks(spec, expand_points(spec))] == [t.key for t in tasks]
    write(tmp_path, "probe.py", (tmp_path / "probe.py").read_text() + "\n# edited\n")
    assert not {t.key for t in derive_tasks(spec, expand_points(spec))} & {t.key for t in tasks}


BAD_SWEEPS = {
    "unknown top-level key": ("bench: probe.py\naxis: {--n: [1]}\n",
                              r"sweep\.yaml:2: axis: unknown key \(did you mean 'axes'\?\)"),
    "no bench": ("axes: {--n: [1]}\n", r"sweep\.yaml:1: \(top level\): missing key 'bench'"),
    "unknown shipped bench": ("bench: ccl_allreduc\naxes: {--n: [1]}\n",
                              r"sweep\.yaml:1: bench: no shipped bench named 'ccl_allreduc' "
                              r"\(did you mean 'ccl_allreduce'\?\)"),
    "axis without its file": ("bench: probe.py\naxes:\n  system.sips.count: [2]\n",
                              r"sweep\.yaml:3: axes\.system\.sips\.count: unknown axis "
                              r"\(did you mean 'topology\.system\.sips\.count'\?\)"),
    "empty values": ("bench: probe.py\naxes:\n  --n: []\n", r"sweep\.yaml:3: axes\.--n: found an empty list"),
    "range backwards": ("bench: probe.py\naxes:\n  --n: {start: 8, stop: 2, step: 1}\n",
                        r"sweep\.yaml:3: axes\.--n\.stop: found 2, below start 8"),
    "zip of unequal lists": ("bench: probe.py\nzip:\n  - ccl.defaults.n_slots: [4, 8]\n"
                             "    ccl.defaults.slot_size: [1024, 2048, 4096]\n",
                             r"sweep\.yaml:3: zip\[0\]: .*found ccl\.defaults\.n_slots: 2, "
                             r"ccl\.defaults\.slot_size: 3"),
    "a value the topology refuses": (
        "bench: probe.py\naxes:\n  topology.system.inter_sip.bandwidth_gb_per_s: [100, 0]\n",
        r"sweep\.yaml:3: point 2 of 2 \(topology\.system\.inter_sip\.bandwidth_gb_per_s=0\): "
        r"topology: system\.inter_sip\.bandwidth_gb_per_s: found 0"),
    "a misspelt topology key": ("bench: probe.py\naxes:\n  topology.system.inter_sip.bandwith_gb_per_s: [1]\n",
                                r"point 1 of 1 \(.*\): topology: system\.inter_sip\.bandwith_gb_per_s: unknown key"
                                r".*bandwidth_gb_per_s"),
    "an unknown algorithm": ("bench: probe.py\naxes:\n  ccl.defaults.algorithm: [ring, rnig]\n",
                             r"sweep\.yaml:3: point 2 of 2 \(ccl\.defaults\.algorithm=rnig\): ccl: "
                             r"defaults\.algorithm: unknown algorithm 'rnig' \(did you mean 'ring'\?\)"),
    "a key through a number": ("bench: probe.py\naxes:\n  topology.system.sips.count.x: [1]\n",
                               r"sweep\.yaml:3: point 1 of 1 .*: system\.sips\.count is 4 in the base topology, "
                               r"not a mapping"),
    "an option the sweep sets": ("bench: probe.py\naxes:\n  --topology: [large]\n",
                                 r"sweep\.yaml:3: axes\.--topology: --topology is set by the sweep"),
    "a value twice": ("bench: probe.py\naxes:\n  ccl.defaults.algorithm: [ring, tree, ring]\n",
                      r"sweep\.yaml:3: axes\.ccl\.defaults\.algorithm: the value 'ring' is listed twice"),
    "points naming other axes": ("bench: probe.py\npoints:\n  - {--n: 1}\n  - {--m: 1}\n",
                                 r"sweep\.yaml:4: points\[1\]: every point names the same axes \(--n\); "
                                 r"this one lacks --n; adds --m"),
    "one point twice": ("bench: probe.py\npoints:\n  - {--n: 1}\n  - {--n: 1}\n",
                        r"sweep\.yaml: points 1 and 2 are the same run"),
    "YAML syntax": ("bench: probe.py\naxes:\n  --n: [1, 2\n", r"sweep\.yaml:\d: YAML syntax error"),
}


@pytest.mark.parametrize("name", BAD_SWEEPS)
def test_adr0018_t10_a_bad_sweep_file_is_one_line_naming_file_line_and_key(name, tmp_path, capsys):
    text, expected = BAD_SWEEPS[name]
    sweep = sweep_folder(tmp_path, text)
    status, out, err = run_sweep_command(str(sweep), "--out", str(tmp_path / "out"), capsys=capsys)
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("kernbench: error: "), err
    assert re.search(expected, err), err
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


@pytest.mark.parametrize("options, expected", [
    (["--jobs", "0"], "--jobs 0: expected at least 1"),
    (["--x", "n"], "--x is an option of --plot"),
    (["--plot", "busbw"], "--plot busbw: needs --x AXIS"),
    (["--address", "ray://head:10001"], "--address is the Ray cluster's; expected --executor ray"),
    (["--plot", "busbw", "--x", "nn"], "--x nn: no such column; expected one of: --n"),
])
@pytest.mark.quick
def test_adr0018_t11_bad_options_are_one_line_before_anything_runs(options, expected, tmp_path, capsys):
    sweep = sweep_folder(tmp_path, "bench: probe.py\naxes:\n  --n: [1]\n")
    status, _, err = run_sweep_command(str(sweep), "--out", str(tmp_path / "out"), *options, capsys=capsys)
    assert status == 2 and err.count("\n") == 1 and err.startswith(f"kernbench: error: {expected}"), err
    assert not (tmp_path / "out").exists()


def test_adr0018_t12_the_command_alone_says_a_bad_sweep_in_one_line_with_status_2(tmp_path):
    missing = tmp_path / "missing.yaml"
    result = subprocess.run([sys.executable, "-m", "kernbench.sweep", str(missing)], capture_output=True, text=True,
                            cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, f"kernbench: error: {missing}: no such sweep file\n")


@pytest.mark.quick
def test_adr0018_t13_the_shipped_example_is_twenty_checked_points(capsys):
    example = REPO_ROOT / "kernbench" / "configs" / "sweeps" / "example.yaml"
    status, out, _ = run_sweep_command(str(example), "--dry-run", capsys=capsys)
    assert status == 0
    assert out.splitlines()[0] == f"{example}: 20 points of ccl_allreduce, all checked"
    assert "topology.system.inter_sip.bandwidth_gb_per_s=400  ccl.defaults.algorithm=halving_doubling" in out


@pytest.mark.quick
def test_adr0018_t14_kernel_launches_become_one_set_of_totals_per_kernel(tmp_path):
    from kernbench.sweep.point_process import report_summary
    from kernbench.sweep.table import row_of

    sweep = sweep_folder(tmp_path, "bench: probe.py\naxes:\n  --n: [1]\n")
    spec = load_sweep(sweep)
    (task,) = derive_tasks(spec, expand_points(spec))
    launches = [{"kernel": "add", "device": f"ahbm:{d}", "time_ps": 100 * (d + 1), "bytes": 64, "flops": 0,
                 "roofline_ps": 50} for d in range(3)] + [{"kernel": "mm", "device": "ahbm:0", "time_ps": 400,
                                                            "bytes": 8, "flops": 2048, "roofline_ps": 100}]
    summary = report_summary({"total_time_ps": 1000, "ops": 4, "kernels": launches})
    row = row_of(task, {"status": "ok", "report": summary})
    assert {k: v for k, v in row.items() if k.startswith("kernel.add.")} == {
        "kernel.add.launches": 3, "kernel.add.time_ps": 600, "kernel.add.bytes": 192, "kernel.add.flops": 0,
        "kernel.add.roofline_ps": 150, "kernel.add.of_roofline": 150 / 600}
    assert (row["kernel.mm.launches"], row["kernel.mm.of_roofline"]) == (1, 0.25)


@pytest.mark.parametrize("metric, expected", [
    ("busbw_gb_per_sec", "--plot busbw_gb_per_sec: no column of the table can have that name "
                         "(did you mean 'busbw_gb_per_s'?); expected an axis, a column every run has (point, "),
    ("elemnts", "--plot elemnts: no column of the table can have that name"),
    ("busbw", "--plot busbw: no column of the table can have that name"),
])
def test_adr0018_t15_a_misspelt_plot_metric_is_one_line_before_any_point_runs(metric, expected, tmp_path, capsys):
    sweep = sweep_folder(tmp_path, "bench: probe.py\naxes:\n  --n: [1]\n")
    status, _, err = run_sweep_command(str(sweep), "--out", str(tmp_path / "out"), "--plot", metric, "--x", "n",
                                       capsys=capsys)
    assert status == 2 and err.count("\n") == 1 and err.startswith(f"kernbench: error: {expected}"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("metric", [
    "busbw_gb_per_s", "all_reduce#0.busbw_gb_per_s", "kernel.add.of_roofline", "total_time_ps", "inter_sip",
    "n", "elements", "metric.computed_later",
])
def test_adr0018_t15_a_name_the_table_may_have_is_left_for_the_finished_table(metric, tmp_path, capsys):
    # A collective's, a kernel's and the bench's columns are named only by the runs: `draw_plot` resolves them.
    sweep = sweep_folder(tmp_path, "bench: probe.py\naxes:\n  --n: [1]\n")
    status, out, err = run_sweep_command(str(sweep), "--plot", metric, "--x", "n", "--dry-run", capsys=capsys)
    assert (status, err) == (0, ""), err
    assert out.startswith(f"{sweep}: 1 points of")


def test_adr0018_t16_the_readme_runs_the_shipped_example_as_it_shows_it(monkeypatch, capsys):
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Sweeping a design space"):]
    section = section[:section.index("\n## ", 1)]
    (command,) = [line for line in section.splitlines() if line.startswith("kernbench sweep ")]
    example = REPO_ROOT / "kernbench" / "configs" / "sweeps" / "example.yaml"
    shown = re.search(r"```yaml\n# (\S+)\n(.*?)```", section, re.DOTALL)
    assert REPO_ROOT / shown.group(1) == example
    assert yaml.safe_load(shown.group(2)) == yaml.safe_load(example.read_text())
    monkeypatch.chdir(REPO_ROOT)  # the README's command is run from the repository root
    status, out, err = run_sweep_command(*command.split()[2:], "--dry-run", capsys=capsys)
    assert (status, err) == (0, ""), err
    assert out.splitlines()[0] == f"{example}: 20 points of ccl_allreduce, all checked"
