"""ccl_sweep, the nccl-tests-style bench: its rows, their values and times, its options and its plot.

Rows ADR 0012 T60 onwards. The bench is driven as `kernbench run` drives it
(`Session.run(run, torch, argv)`); expectations come from the ccl config,
the algorithm modules and the run's own collective records, never from a
pasted run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path

import pytest

from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config
from kernbench.runtime_api import current_run
from kernbench.ccl.records import bus_factor
from kernbench.errors import KernbenchError
from kernbench.session import Session
from tests.cli import run_kernbench_in_process

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "kernbench" / "benches" / "ccl_sweep.py"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
SMALL = ["--max-bytes", "4K"]  # 8 B .. 2 KiB by 4: every algorithm, in well under a second


def load_sweep():
    spec = importlib.util.spec_from_file_location("kernbench_bench_ccl_sweep_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SWEEP = load_sweep()


@pytest.fixture(autouse=True)
def keep_the_current_run(monkeypatch):
    """`load_ccl_config()` gives the last run's config (the last `Session.run` becomes the current run), so a
    test that runs another file must not leave it behind."""
    monkeypatch.setattr(current_run, "_current", current_run._current)


def sweep(argv, *, topology="default", ccl=SHIPPED_CCL_PATH, timing_only=False):
    """Run the bench; return (session, rows, what it printed)."""
    session = Session(topology, ccl=ccl, timing_only=timing_only)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rows = session.run(SWEEP.run, session.torch, list(argv))
    return session, rows, out.getvalue()


def ccl_file(tmp_path: Path, world_size: int) -> Path:
    path = tmp_path / f"ccl_ws{world_size}.yaml"
    path.write_text(f"world_size: {world_size}\n" + SHIPPED_CCL_PATH.read_text())
    return path


def table_lines(printed: str) -> list[list[str]]:
    return [line.split() for line in printed.splitlines() if line.startswith("  ") and line.split()[0].isdigit()]


@pytest.fixture(scope="module")
def small_sweep():
    return sweep(SMALL)


def test_adr0012_t60_one_row_per_algorithm_collective_and_size(small_sweep):
    _, rows, _ = small_sweep
    sizes = [8 * 4**k for k in range(5)] + [4096]  # 8 B · 4^k as nccl-tests' -b 8 -e 4K -f 4, then 4 KiB itself
    reducing = ("all_reduce", "reduce_scatter", "reduce")
    expected = [(algorithm, kind, nbytes, nbytes // 2, "f16", "sum" if kind in reducing else "none")
                for algorithm in load_ccl_config(SHIPPED_CCL_PATH)["algorithms"]
                for kind in COLLECTIVES for nbytes in sizes]
    assert [(r["algorithm"], r["collective"], r["bytes"], r["count"], r["dtype"], r["op"]) for r in rows] == expected
    assert all(r["world_size"] == 4 for r in rows)


def test_adr0012_t61_every_element_matches_numpy(small_sweep):
    _, rows, printed = small_sweep
    assert rows and all(r["wrong"] == 0 for r in rows)
    assert [line[-1] for line in table_lines(printed)] == ["0"] * len(rows)


def test_adr0012_t62_time_and_bandwidths_are_the_collective_records(small_sweep):
    session, rows, _ = small_sweep
    records = [record for record in session.ctx.collectives if record["collective"] != "barrier"]  # the sweep's own
    assert len(records) == len(rows)
    for row, record in zip(rows, records):
        assert (row["algorithm"], row["collective"], row["bytes"]) == (record["configured_algorithm"],
                                                                      record["collective"], record["bytes"])
        assert row["time_us"] == pytest.approx(record["time_ps"] / 1e6, rel=1e-12)
        assert row["algbw_gb_per_s"] == pytest.approx(record["algbw_gb_per_s"], rel=1e-9)
        assert row["busbw_gb_per_s"] == pytest.approx(row["algbw_gb_per_s"] * bus_factor(row["collective"], 4))


def test_adr0012_t63_collectives_an_algorithm_lacks_run_their_fallback_with_a_note():
    session, rows, printed = sweep(["--algorithms", "tree", "--collectives", "all_gather,broadcast,all_to_all",
                                    "--max-bytes", "64"])
    assert "# tree: all_gather has no schedule of its own and runs its fallback (adr/0010)" in printed
    assert "# tree: all_to_all has no schedule of its own and runs its fallback (adr/0010)" in printed
    assert "# tree: broadcast" not in printed  # tree has its own
    assert {row["collective"] for row in rows} == {"all_gather", "broadcast", "all_to_all"}
    assert all(row["wrong"] == 0 for row in rows)
    ran = {(record["collective"], record["algorithm"]) for record in session.ctx.collectives}
    assert ran >= {("all_gather", "ring"), ("broadcast", "tree"), ("all_to_all", "direct")}


def test_adr0012_t64_timing_only_gives_the_same_times_and_no_wrong_count(small_sweep):
    _, data_rows, _ = small_sweep
    _, rows, printed = sweep(SMALL, timing_only=True)
    assert all(r["wrong"] is None for r in rows)
    assert [line[-1] for line in table_lines(printed)] == ["n/a"] * len(rows)
    strip = [{k: v for k, v in r.items() if k != "wrong"} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k != "wrong"} for r in data_rows]


def test_adr0012_t65_ring_busbw_does_not_fall_as_size_grows_above_4k():
    _, rows, _ = sweep(["--algorithms", "ring", "--min-bytes", "4K", "--max-bytes", "8M"], timing_only=True)
    for kind in COLLECTIVES:
        busbw = [r["busbw_gb_per_s"] for r in rows if r["collective"] == kind]
        assert len(busbw) == 7  # 4 KiB · 4^k up to 4 MiB, then 8 MiB
        assert all(later >= 0.99 * earlier for earlier, later in zip(busbw, busbw[1:])), (kind, busbw)
        assert busbw[-1] > 10 * busbw[0], (kind, busbw)


def test_adr0012_t66_more_ranks_than_sips_sweeps_pe_ranks_with_one_worker(tmp_path):
    _, rows, printed = sweep(["--algorithms", "ring,direct", "--max-bytes", "512"], ccl=ccl_file(tmp_path, 8))
    assert rows and all(r["world_size"] == 8 and r["wrong"] == 0 for r in rows)
    assert {r["collective"] for r in rows} == set(COLLECTIVES)
    assert "8 ranks (PEs of SIP 0)" in printed


def test_adr0012_t90_workers_spread_pe_ranks_over_sips_and_the_hierarchical_rows_are_its_own(tmp_path):
    """--workers 4 on an 8-rank world: 2 PE ranks on each of SIPs 0..3; every collective right, every row's
    time the run's record; hierarchical runs its own all_reduce there (ring on the same ranks runs the ring).
    --workers where the ranks fit the SIPs, or that does not split the world, is one line."""
    session, rows, printed = sweep(["--algorithms", "ring,hierarchical", "--max-bytes", "2K", "--workers", "4"],
                                   ccl=ccl_file(tmp_path, 8))
    assert rows and all(r["world_size"] == 8 and r["wrong"] == 0 for r in rows)
    assert {r["collective"] for r in rows} == set(COLLECTIVES)
    assert "8 ranks (2 PEs on each of SIPs 0..3)" in printed
    records = [c for c in session.ctx.collectives if c["collective"] != "barrier"]
    assert [c["algorithm"] for c in records if c["configured_algorithm"] == "hierarchical"
            and c["collective"] == "all_reduce"] == ["hierarchical"] * sum(
        r["collective"] == "all_reduce" and r["algorithm"] == "hierarchical" for r in rows)
    assert [round(r["time_us"] * 1e6) for r in rows] == [c["time_ps"] for c in records]
    with pytest.raises(KernbenchError, match="argument --workers: '0': expected a positive whole number"):
        sweep(["--workers", "0"])
    with pytest.raises(KernbenchError, match="--workers 2: the 4 ranks fit the 4 SIPs, a worker each"):
        sweep(["--workers", "2"])
    with pytest.raises(KernbenchError, match=r"spawn\(nprocs=3\): the world size is 8 .*8 ranks do not split over 3 "
                                             "workers"):
        sweep(["--workers", "3"], ccl=ccl_file(tmp_path, 8))


def test_adr0012_t67_shares_of_an_odd_world_are_whole_elements(tmp_path):
    _, rows, _ = sweep(["--algorithms", "ring", "--max-bytes", "128"], ccl=ccl_file(tmp_path, 3))
    assert rows and all(r["wrong"] == 0 and r["world_size"] == 3 for r in rows)
    whole = [4 // 3 * 3, 16 // 3 * 3, 64 // 3 * 3]  # 8, 32, 128 B of f16, rounded down to a multiple of 3
    counts = {kind: [r["count"] for r in rows if r["collective"] == kind] for kind in COLLECTIVES}
    assert counts == {kind: [4, 16, 64] if kind == "all_reduce" else whole for kind in COLLECTIVES}
    assert all(r["bytes"] == 2 * r["count"] for r in rows)


BROKEN_ALGORITHM = '''
from kernbench.ccl.algorithms import direct


def all_reduce(ctx, request):
    """direct's all_reduce, then one element of rank 0's result off by one."""
    direct.all_reduce(ctx, request)
    if ctx.rank == 0:
        me = ctx.member
        ctx.store(me.output, 0, 1, ctx.load(me.output, 0, 1) + 1)
'''


def test_adr0012_t68_wrong_elements_are_counted_and_fail_the_sweep(tmp_path, monkeypatch):
    (tmp_path / "sweep_broken_algo.py").write_text(BROKEN_ALGORITHM)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "broken.yaml"
    config.write_text(SHIPPED_CCL_PATH.read_text().replace("algorithms:\n", "algorithms:\n  broken: {module: "
                                                           "sweep_broken_algo, wiring: full}\n", 1))
    out = io.StringIO()
    session = Session("default", ccl=config)
    with contextlib.redirect_stdout(out), pytest.raises(AssertionError, match="wrong elements"):
        session.run(SWEEP.run, session.torch, ["--algorithms", "broken", "--max-bytes", "32"])
    lines = table_lines(out.getvalue())
    assert [line[-1] for line in lines[:2]] == ["1", "1"]  # every row printed, each with rank 0's one bad element


def test_adr0012_t69_plot_writes_a_png_without_a_display(tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    out = tmp_path / "sweep.png"
    _, rows, printed = sweep(["--algorithms", "ring,tree", "--collectives", "all_reduce,all_gather", "--max-bytes", "128",
                              "--plot", str(out)], timing_only=True)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"# plot: {out}" in printed


def test_adr0012_t70_sizes_take_binary_suffixes_and_the_default_bound_follows_the_mode():
    argv = ["--algorithms", "ring", "--collectives", "all_gather"]
    _, rows, _ = sweep([*argv, "--min-bytes", "1K", "--max-bytes", "4k", "--factor", "2"], timing_only=True)
    assert [r["bytes"] for r in rows] == [1024, 2048, 4096]
    beyond_data_bound = [*argv, "--min-bytes", "16M", "--factor", "8"]  # 16 MiB, then 128 MiB
    _, rows, _ = sweep(beyond_data_bound, timing_only=True)
    assert [r["bytes"] for r in rows] == [16 * 2**20, 64 * 2**20]  # timing only: up to 64 MiB, which is included
    _, rows, printed = sweep(beyond_data_bound)
    assert rows == []  # values computed: up to 8 MiB, and the bench says so
    assert "sizes stop at 8 MiB" in printed and "--timing-only" in printed


@pytest.mark.parametrize("argv, says", [
    (["--factor", "1"], "--factor 1: must be at least 2"),
    (["--algorithms", "ring,trees"], "unknown 'trees'"),
    (["--collectives", "bcast"], "unknown 'bcast'"),
    (["--max-bytes", "12Q"], "'12Q' is not a positive size"),
    (["--min-bytes", "1M", "--max-bytes", "1K"], "is below --min-bytes"),
    (["--dtype", "f64"], "invalid choice: 'f64'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_adr0012_t71_bad_options_are_one_line_user_errors(argv, says):
    session = Session("default", ccl=SHIPPED_CCL_PATH)
    with pytest.raises(KernbenchError) as raised:
        session.run(SWEEP.run, session.torch, argv)
    message = str(raised.value)
    assert message.startswith("ccl_sweep: ") and says in message and "\n" not in message
    assert session.ctx.collectives == []


def test_adr0012_t72_kernbench_run_passes_the_sweep_options():
    result = run_kernbench_in_process("run", "benches/ccl_sweep.py", "--algorithms", "ring", "--collectives",
                                      "all_reduce", "--max-bytes", "32", "--timing-only", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "# ring all_reduce, 4 ranks (one per SIP), f16" in result.stdout
    assert [line[0] for line in table_lines(result.stdout)] == ["8", "32"]
    refused = run_kernbench_in_process("run", "ccl_sweep", "--factor", "0", cwd=ROOT)
    assert refused.returncode == 2
    assert refused.stderr.startswith("kernbench: error: ccl_sweep: --factor 0: must be at least 2")
