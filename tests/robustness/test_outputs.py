"""ADR 0014, outputs: every output path is checked before the run, and every file is replaced whole or not at all."""

from __future__ import annotations

import json
import os

import pytest

from kernbench.cli.output_files import staged_outputs
from tests.cli import run_kernbench_in_process
from tests.robustness.harness import assert_one_error_line, kernbench, leftovers, write

# Prints before any simulated work, so its absence from stdout shows the run never started.
MARKED_BENCH = '''
print("the bench ran", flush=True)


def run(torch):
    x = torch.ones(64)
    (x + x).numpy()
'''
GOOD = '{"an earlier": "good report"}\n'


@pytest.fixture
def bench(tmp_path):
    return write(tmp_path, "bench.py", MARKED_BENCH)


@pytest.mark.parametrize("where, needle", [
    ("{tmp}", "is a directory"),
    ("{tmp}/no/such/folder/report.json", "does not exist"),
    ("/proc/report.json", "cannot create a file in /proc"),
    ("/dev/full", "is a device, not a regular file"),
])
@pytest.mark.parametrize("flag", ["--json", "--trace"])
@pytest.mark.quick
def test_adr0014_t1_an_unwritable_output_is_one_line_before_the_run_starts(tmp_path, bench, flag, where, needle):
    result = run_kernbench_in_process("run", str(bench), flag, where.format(tmp=tmp_path), cwd=tmp_path)
    assert_one_error_line(result, flag, needle)
    assert "the bench ran" not in result.stdout


@pytest.mark.parametrize("second", ["report.json", "./report.json", "link.json"])
def test_adr0014_t2_json_and_trace_naming_one_file_are_refused_up_front(tmp_path, bench, second):
    (tmp_path / "report.json").write_text(GOOD)
    (tmp_path / "link.json").symlink_to(tmp_path / "report.json")
    result = run_kernbench_in_process("run", str(bench), "--json", "report.json", "--trace", second, cwd=tmp_path)
    assert_one_error_line(result, "--json and --trace both name")
    assert "the bench ran" not in result.stdout
    assert (tmp_path / "report.json").read_text() == GOOD


@pytest.mark.quick
def test_adr0014_t3_an_output_naming_an_input_is_refused(tmp_path, bench):
    before = bench.read_text()
    result = run_kernbench_in_process("run", str(bench), "--trace", str(bench), cwd=tmp_path)
    assert_one_error_line(result, "--trace", "is the bench file")
    assert bench.read_text() == before


def test_adr0014_t4_a_write_cut_by_a_size_limit_keeps_the_earlier_files(tmp_path, bench):
    (tmp_path / "report.json").write_text(GOOD)
    (tmp_path / "trace.json").write_text(GOOD)
    result = kernbench("run", str(bench), "--json", "report.json", "--trace", "trace.json", cwd=tmp_path,
                       file_size_limit=256)
    assert_one_error_line(result, "cannot write it: File too large", "unchanged")
    assert "the bench ran" in result.stdout  # the run itself went through; only its outputs did not fit
    assert (tmp_path / "report.json").read_text() == GOOD
    assert (tmp_path / "trace.json").read_text() == GOOD
    assert leftovers(tmp_path) == []


def test_adr0014_t5_a_good_run_replaces_each_output_whole_with_the_usual_permissions(tmp_path, bench):
    (tmp_path / "report.json").write_text(GOOD)
    os.chmod(tmp_path / "report.json", 0o640)
    result = run_kernbench_in_process("run", str(bench), "--json", "report.json", "--trace", "trace.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "report.json").read_text())["ops"] > 0
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert (tmp_path / "report.json").stat().st_mode & 0o777 == 0o640  # an existing file keeps its mode
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "trace.json").stat().st_mode & 0o777 == 0o666 & ~umask  # a new one gets open()'s
    assert leftovers(tmp_path) == []


@pytest.mark.quick
def test_adr0014_t6_an_interrupt_while_staging_outputs_leaves_every_earlier_file(tmp_path):
    first, second = tmp_path / "report.json", tmp_path / "trace.json"
    first.write_text(GOOD)
    second.write_text(GOOD)
    with pytest.raises(KeyboardInterrupt), staged_outputs() as staging:
        with staging.file("--json", first) as file:
            file.write("{complete}")  # staged in full ...
        with staging.file("--trace", second) as file:
            file.write('{"half a')
            raise KeyboardInterrupt  # ... but the second one is cut short: neither is put in place
    assert first.read_text() == GOOD and second.read_text() == GOOD
    assert leftovers(tmp_path) == []


def test_adr0014_t7_topo_draw_checks_its_path_first_and_keeps_the_earlier_drawing(tmp_path):
    missing = run_kernbench_in_process("topo", "missing.yaml", "--draw", str(tmp_path / "nowhere" / "machine.png"),
                                       cwd=tmp_path)
    assert_one_error_line(missing, "--draw", "does not exist")  # the path is named, not the missing topology
    earlier = b"\x89PNG an earlier drawing"
    (tmp_path / "machine.png").write_bytes(earlier)
    cut = kernbench("topo", "--draw", "machine.png", cwd=tmp_path, file_size_limit=4096)
    assert_one_error_line(cut, "machine.png", "File too large")
    assert (tmp_path / "machine.png").read_bytes() == earlier
    assert leftovers(tmp_path) == []


def test_adr0014_t8_a_bench_plot_path_is_checked_before_the_sweep(tmp_path):
    result = run_kernbench_in_process("run", "ccl_sweep", "--timing-only", "--plot",
                                      str(tmp_path / "nowhere" / "busbw.png"), cwd=tmp_path)
    assert_one_error_line(result, "--plot", "does not exist")
    assert "all_reduce" not in result.stdout  # no table was printed: the sweep never started
