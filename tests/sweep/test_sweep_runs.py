"""ADR 0018: a sweep's points are `kernbench run`s; each is on disk as it finishes; nothing finished is lost."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import signal
import time

import pytest
import yaml

from kernbench.sweep.command import main
from tests.sweep.harness import (
    EIGHT_POINTS,
    SHIPPED_CCL,
    SHIPPED_TOPOLOGY,
    journal_lines,
    metrics_of,
    ray_instance,
    read_table,
    run_sweep_command,
    single_runs,
    sweep_folder,
    sweep_process,
    write,
)

VARYING = ("wall_s", "host")  # what differs between two runs of one point


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    """The eight-point sweep, run once with two local jobs: (sweep file, output folder, stdout, stderr, status)."""
    folder = tmp_path_factory.mktemp("eight")
    sweep = sweep_folder(folder, EIGHT_POINTS)
    out = folder / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main([str(sweep), "--out", str(out), "--jobs", "2"])
    return sweep, out, stdout.getvalue(), stderr.getvalue(), status


@pytest.mark.quick
def test_adr0018_t1_each_point_gives_what_the_same_kernbench_run_gives(eight, tmp_path):
    sweep, out, stdout, _, status = eight
    assert status == 0, stdout
    rows = read_table(out)
    assert [int(row["point"]) for row in rows] == list(range(1, 9))
    commands, expected_points = [], []
    for bandwidth in (50, 200):
        for algorithm in ("ring", "tree"):
            for n in (64, 4096):
                topology = yaml.safe_load(SHIPPED_TOPOLOGY.read_text())
                topology["system"]["inter_sip"]["bandwidth_gb_per_s"] = bandwidth
                ccl = yaml.safe_load(SHIPPED_CCL.read_text())
                ccl["defaults"]["algorithm"] = algorithm
                name = f"{bandwidth}-{algorithm}-{n}"
                write(tmp_path, f"{name}.topology.yaml", yaml.safe_dump(topology))
                write(tmp_path, f"{name}.ccl.yaml", yaml.safe_dump(ccl))
                commands.append(["run", str(sweep.parent / "probe.py"), "--topology", f"{name}.topology.yaml",
                                 "--ccl", f"{name}.ccl.yaml", "--json", f"{name}.json", "--n", str(n)])
                expected_points.append((bandwidth, algorithm, n, name))
    results = single_runs(commands, cwd=tmp_path)
    for row, (bandwidth, algorithm, n, name), result in zip(rows, expected_points, results):
        assert result.returncode == 0, result.stderr
        report = json.loads((tmp_path / f"{name}.json").read_text())
        (collective,) = report["collectives"]
        metrics = metrics_of(result.stdout)
        assert (row["topology.system.inter_sip.bandwidth_gb_per_s"], row["ccl.defaults.algorithm"], row["--n"]) \
            == (str(bandwidth), algorithm, str(n))
        assert row["status"] == "ok"
        assert int(row["total_time_ps"]) == report["total_time_ps"]
        assert int(row["all_reduce#0.time_ps"]) == collective["time_ps"]
        assert row["all_reduce#0.algorithm"] == collective["algorithm"] == algorithm
        assert float(row["all_reduce#0.busbw_gb_per_s"]) == collective["busbw_gb_per_s"]
        assert int(row["bytes.inter_sip"]) == report["bytes_by_link_class"]["inter_sip"]
        world = metrics["world"]
        assert float(row["metric.sum"]) == metrics["sum"] == world * (world + 1) / 2
        assert int(row["metric.elements"]) == n
    # The link bandwidth is what moved the time: a faster link, a shorter all-reduce, everything else equal.
    slow, fast = rows[0], rows[4]
    assert int(fast["all_reduce#0.time_ps"]) < int(slow["all_reduce#0.time_ps"])


def test_adr0018_t2_a_rerun_skips_the_points_already_done(eight, tmp_path, capsys):
    sweep, out, *_ = eight
    folder = tmp_path / "out"
    shutil.copytree(out, folder)
    table = read_table(folder)
    status, _, err = run_sweep_command(str(sweep), "--out", str(folder), capsys=capsys)
    assert status == 0
    assert "8 points, 8 already done; running 0" in err
    assert len(journal_lines(folder)) == 8
    # Two records lost (as if stopped before they were written) and a line torn by a kill: those two run again.
    lines = journal_lines(folder)
    (folder / "results.jsonl").write_text("\n".join(lines[:6]) + "\n" + lines[6][:40])
    status, _, err = run_sweep_command(str(sweep), "--out", str(folder), "--jobs", "2", capsys=capsys)
    assert status == 0
    assert "8 points, 6 already done; running 2" in err
    assert len([line for line in journal_lines(folder) if _is_record(line)]) == 8
    assert _without(read_table(folder), VARYING) == _without(table, VARYING)


@pytest.mark.quick
def test_adr0018_t3_a_failing_point_is_recorded_and_the_others_finish(tmp_path, capsys):
    sweep = sweep_folder(tmp_path, '''
bench: probe.py
args: [--fail-on, 13, --crash-on, 17]
axes:
  --n: [8, 13, 16, 17]
''')
    status, out, _ = run_sweep_command(str(sweep), "--out", str(tmp_path / "out"), "--jobs", "2", capsys=capsys)
    assert status == 1
    rows = {row["--n"]: row for row in read_table(tmp_path / "out")}
    assert [rows[n]["status"] for n in ("8", "13", "16", "17")] == ["ok", "failed", "ok", "crashed"]
    assert rows["13"]["error"] == "ValueError: the probe fails at n=13"
    assert rows["17"]["error"].startswith("killed by SIGKILL")
    assert rows["8"]["metric.sum"] == rows["16"]["metric.sum"] == "10.0"
    assert "point 2: failed: ValueError: the probe fails at n=13" in out
    stderr = (tmp_path / "out" / "points" / rows["13"]["key"][:12] / "stderr.txt").read_text()
    assert "Traceback" in stderr  # the whole story is kept beside the one line


def test_adr0018_t4_the_ray_executor_gives_the_same_table(eight, tmp_path, capsys):
    pytest.importorskip("ray")
    sweep, out, *_ = eight
    with ray_instance():
        status, _, err = run_sweep_command(str(sweep), "--out", str(tmp_path / "ray"), "--executor", "ray",
                                           capsys=capsys)
    assert status == 0, err
    assert "running 8 on Ray" in err
    assert _without(read_table(tmp_path / "ray"), VARYING) == _without(read_table(out), VARYING)


def test_adr0018_t5_ctrl_c_leaves_every_finished_point_on_disk(tmp_path):
    sweep = sweep_folder(tmp_path, '''
bench: probe.py
args: [--sleep, 0.3]
axes:
  --n: [8, 16, 24, 32]
''')
    out = tmp_path / "out"
    process = sweep_process(str(sweep), "--out", str(out), "--jobs", "1", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not ((out / "results.jsonl").is_file() and journal_lines(out)) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "interrupted;" in err and "Traceback" not in err
    done = [json.loads(line) for line in journal_lines(out)]
    assert 1 <= len(done) < 4 and all(record["status"] == "ok" for record in done)
    assert [row["--n"] for row in read_table(out)] == [str(r["values"]["--n"]) for r in done]
    assert not list(out.rglob("*.tmp*"))


def test_adr0018_t6_plot_draws_a_column_against_an_axis_per_hue(eight, tmp_path, capsys):
    sweep, out, *_ = eight
    folder = tmp_path / "out"
    shutil.copytree(out, folder)
    status, stdout, err = run_sweep_command(str(sweep), "--out", str(folder), "--plot", "busbw_gb_per_s",
                                            "--x", "bandwidth_gb_per_s", "--hue", "algorithm", capsys=capsys)
    assert status == 0, err
    png = folder / "plot-busbw_gb_per_s-vs-bandwidth_gb_per_s.png"
    assert f"plot: {png}" in stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    status, _, err = run_sweep_command(str(sweep), "--out", str(folder), "--plot", "busbw_gb_per_s",
                                       "--x", "bandwith", capsys=capsys)
    assert status == 2 and err.count("\n") == 1 and err.startswith("kernbench: error: --x bandwith: no such column")


def test_adr0018_t7_the_table_is_csv_and_parquet_in_sweep_order(eight):
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
    _, out, stdout, *_ = eight
    table = pyarrow_parquet.read_table(out / "results.parquet").to_pylist()
    rows = read_table(out)
    assert [row["point"] for row in table] == list(range(1, 9))
    assert [str(row["total_time_ps"]) for row in table] == [row["total_time_ps"] for row in rows]
    assert f"table: {out / 'results.csv'}, {out / 'results.parquet'}" in stdout


def _is_record(line: str) -> bool:
    try:
        return "key" in json.loads(line)
    except json.JSONDecodeError:
        return False


def _without(rows: list[dict], names: tuple[str, ...]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in names} for row in rows]
