"""ADR 0019: the run report sorts names as people count, and has a row per kernel launch against the roofline."""

from __future__ import annotations

import re

from kernbench.report import format_report, run_report
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.cli import REPO_ROOT

PS_PER_S = 10**12


def counted(name: str) -> list:
    """`sip10` after `sip2`: digit runs compare as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part]


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
