"""`kernbench topo`: summary, --json, --draw, and a bad file as one message with exit status 2."""

from __future__ import annotations

import json

import pytest

from kernbench.cli import main
from kernbench.topology import DEFAULT_TOPOLOGY_PATH, load_topology
from kernbench.topology.summary import format_bandwidth, format_bytes, format_flops
from tests.cli import run_kernbench_in_process


def test_adr0002_t33_bad_file_exits_2_with_one_message_and_no_traceback(write_text, tmp_path):
    path = write_text(DEFAULT_TOPOLOGY_PATH.read_text().replace("pe_per_corner: 2", "pe_per_corner: -2"))
    result = run_kernbench_in_process("topo", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert f"{path}:" in result.stderr and "cube.pe_layout.pe_per_corner" in result.stderr
    assert result.stdout == ""


def test_adr0002_t34_missing_file_exits_2(capsys, tmp_path):
    assert main(["topo", str(tmp_path / "absent.yaml")]) == 2
    assert "no such topology file" in capsys.readouterr().err


def test_adr0002_t35_json_output_parses_to_the_topology(capsys):
    assert main(["topo", "large", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(json.dumps(load_topology("large").to_json_dict()))


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_adr0002_t36_draw_writes_a_non_empty_image(tmp_path, capsys, suffix):
    out = tmp_path / f"machine{suffix}"
    assert main(["topo", "default", "--draw", str(out)]) == 0
    content = out.read_bytes()
    assert len(content) > 1000
    assert content.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in content[:2000]
    assert str(out) in capsys.readouterr().err


def test_adr0002_t37_draw_refuses_other_formats(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["topo", "--draw", str(tmp_path / "machine.pdf")])
    assert exited.value.code == 2
    assert ".png or .svg" in capsys.readouterr().err


def test_adr0002_t38_summary_shows_counts_memories_links_and_peaks(capsys):
    assert main(["topo"]) == 0
    out = capsys.readouterr().out
    topology = load_topology()
    for fact in (
        f"{topology.n_sips} SIPs",
        f"{topology.cubes_per_sip} cubes",
        f"{topology.total_pes} PEs",
        topology.system.inter_sip.shape,
        format_bytes(topology.cube.hbm.capacity_bytes),
        format_bytes(topology.hbm_bytes_per_sip),
        format_bandwidth(topology.cube.hbm.bandwidth_bytes_per_s),
        format_bandwidth(topology.sip.noc.link_bandwidth_bytes_per_s),
        format_bandwidth(topology.system.inter_sip.bandwidth_bytes_per_s),
        format_bandwidth(topology.system.host_link.bandwidth_bytes_per_s),
        *(format_flops(topology.system_peak_flops(dtype)) for dtype in topology.dtypes),
    ):
        assert fact in out, fact
