"""ADR 0019: the run report sorts names as people count, and has a row per kernel launch against the roofline."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernbench.report import format_report, run_report
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.cli import REPO_ROOT

PS_PER_S = 10**12


def counted(name: str) -> list:
    """`sip10` after `sip2`: digit runs compare as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part]


@pytest.mark.quick
def test_adr0019_t9_devices_and_resources_are_in_natural_order(tmp_path):
    text = (REPO_ROOT / "kernbench" / "configs" / "topology" / "default.yaml").read_text()
    twelve = tmp_path / "twelve.yaml"
    twelve.write_text(re.sub(r"sips: \{count: 4\}", "sips: {count: 12}", text))
    session = Session(str(twelve), timing_only=True)

    def bench(torch):
        for sip in (10, 2, 11, 1):  # filled on each SIP, then copied to the next one round the ring
            x = torch.ones(256, device=f"ahbm:{sip}")
            x.to(f"ahbm:{(sip + 1) % 12}")
        torch.ahbm.synchronize()

    session.run(bench, session.torch)
    report = run_report(session.ctx)
    devices = list(report["devices"])
    assert devices == sorted(devices, key=counted) and devices.index("sip2") < devices.index("sip10")
    names = [row["resource"] for row in report["resources"]]
    assert names == sorted(names, key=counted) and "sip10->sip11" in names
    shown = [line.split()[0] for line in format_report(report).splitlines() if line.startswith("  sip")][:len(devices)]
    assert shown == devices


@pytest.mark.quick
def test_adr0019_t10_each_kernel_launch_is_a_row_with_its_bandwidth_against_the_roofline():
    from kernbench.kernels.library.vector_add import add

    topology = load_topology("single_sip")
    session = Session(topology, timing_only=True)
    sizes, block, times = (1 << 14, 1 << 18), 512, []

    def bench(torch):
        spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
        for n in sizes:
            # Filled tensors, as a bench makes them: the fills on the stream keep the two launches apart
            # (the op log has no record of a launch itself, so back-to-back launches would read as one).
            x, y, out = (torch.randn(n, dp=spread) for _ in range(3))
            start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
            start.record()
            add(x, y, out, block_size=block)
            end.record()
            end.synchronize()
            times.append(end.time_ps - start.time_ps)

    session.run(bench, session.torch)
    rows = run_report(session.ctx)["kernels"]
    assert [row["kernel"] for row in rows] == ["add_kernel"] * len(sizes)
    hbm = topology.cube.hbm.bandwidth_bytes_per_s * topology.cubes_per_sip
    for row, n, elapsed in zip(rows, sizes, times):
        assert row["programs"] == n // block
        assert row["bytes"] == 3 * n * 4  # two loads and a store of f32
        assert row["time_ps"] == elapsed  # the launch's own time, as events around it measure it
        assert row["gb_per_s"] == row["bytes"] / row["time_ps"] * 1e3
        assert row["roofline_ps"] == -(-row["bytes"] * PS_PER_S // hbm) and row["bound"] == "HBM"
        assert row["of_roofline"] == row["roofline_ps"] / row["time_ps"]
    text = format_report(run_report(session.ctx))
    assert "kernels (achieved against the SIP's roofline" in text and text.count("  add_kernel ") == len(sizes)


def launches_one_record_at_a_time(oplog, topology, collective_labels) -> list[tuple]:
    """The module docstring's rule read literally, record by record: the oracle for T30."""
    by_kernel: dict = {}
    for r in oplog:
        if r.program is None or r.label is None or r.label in collective_labels:
            continue
        dtype = (r.args or {}).get("dtype")
        by_kernel.setdefault((r.device, r.label), []).append((r.start, r.end, r.kind, r.nbytes, r.flops, r.program,
                                                              dtype))
    rows = []
    for (device, label), records in by_kernel.items():
        records.sort(key=lambda record: record[0])
        launches, cover_end = [], None
        for record in records:
            if cover_end is None or record[0] > cover_end:
                launches.append([])
                cover_end = record[1]
            cover_end = max(cover_end, record[1])
            launches[-1].append(record)
        for launch in launches:
            dtypes = [rec[6] for rec in launch if rec[4] and rec[6]] or [rec[6] for rec in launch if rec[6]]
            rows.append((min(rec[0] for rec in launch), counted(device), label, device,
                         max(rec[1] for rec in launch), sum(rec[3] for rec in launch if rec[2] == "dma"),
                         sum(rec[4] for rec in launch), dtypes[0] if dtypes else None,
                         len({rec[5] for rec in launch})))
    return [(row[3], row[2], row[0], row[4], row[5], row[6], row[7], row[8]) for row in sorted(rows)]


@settings(max_examples=200, deadline=None)
@given(records=st.lists(st.tuples(
    st.sampled_from(["dma", "gemm", "vector", "ipcq_send"]), st.sampled_from(["sip0", "sip0", "sip10"]),
    st.sampled_from([None, "add_kernel", "matmul_kernel", "matmul_kernel", "all_reduce#0"]),
    st.one_of(st.none(), st.integers(0, 5)), st.integers(0, 4096), st.sampled_from([0, 0, 128]),
    st.integers(0, 12).map(lambda tick: 10 * tick), st.sampled_from([0, 10, 20, 35]),  # ends often touch starts
    st.sampled_from([None, "f16", "f32", ""])), max_size=60), block=st.sampled_from([7, 1 << 16]))
@example(records=[("dma", "sip0", "matmul_kernel", 0, 64, 0, 0, 10, "f32"),  # a launch's dtype is its matrix ops'
                  ("gemm", "sip0", "matmul_kernel", 1, 0, 128, 5, 10, "f16"),
                  ("dma", "sip0", "matmul_kernel", 0, 64, 0, 20, 5, "")],  # apart: a second launch, no dtype
         block=7)
def test_adr0019_t30_kernel_rows_read_from_columns_equal_the_launch_rule_applied_record_by_record(records, block):
    """Launches of kernels on several devices, back to back, overlapping and apart, with collectives' and
    programless records mixed in, part of the log compacted into columns: every row as the rule gives it."""
    from kernbench.sim_engine import op_log
    from kernbench.report.kernels import kernel_rows

    topology = load_topology("default")
    saved, op_log.BLOCK = op_log.BLOCK, block
    try:
        log = op_log.OpLog()
        for kind, device, label, program, nbytes, flops, start, length, dtype in records:
            log.append(kind, device, f"{device}.unit", label, program, nbytes, flops, start, start + length,
                       None if dtype is None else {"op": "x", "dtype": dtype})
    finally:
        op_log.BLOCK = saved
    rows = kernel_rows(log, topology, {"all_reduce#0"})
    assert [(row["device"], row["kernel"], row["start_ps"], row["end_ps"], row["bytes"], row["flops"], row["dtype"],
             row["programs"]) for row in rows] == launches_one_record_at_a_time(log, topology, {"all_reduce#0"})
