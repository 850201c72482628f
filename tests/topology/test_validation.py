"""Every malformed topology file is one TopologyError naming file, line, key path, found and expected."""

from __future__ import annotations

import pytest

from kernbench.topology import DEFAULT_TOPOLOGY_PATH, TopologyError, load_topology
from kernbench.topology.kinds import Quantity
from kernbench.topology.schema import REQUIRED, SCHEMA

DEFAULT_TEXT = DEFAULT_TOPOLOGY_PATH.read_text()


def line_containing(text: str, fragment: str) -> int:
    """1-based line of the only line of `text` containing `fragment`."""
    lines = [number for number, line in enumerate(text.splitlines(), 1) if fragment in line]
    assert len(lines) == 1, f"{fragment!r} is on lines {lines}"
    return lines[0]


def edited(old: str, new: str) -> str:
    assert DEFAULT_TEXT.count(old) == 1, old
    return DEFAULT_TEXT.replace(old, new)


# (id, old text, new text, key path named, fragment of the line blamed, words the message must hold)
MALFORMED = [
    (
        "zero_pe_per_corner",
        "pe_per_corner: 2",
        "pe_per_corner: 0",
        "cube.pe_layout.pe_per_corner",
        "pe_per_corner",
        ["found 0", ">= 1"],
    ),
    (
        "negative_bandwidth",
        "bandwidth_gb_per_s: 819,",
        "bandwidth_gb_per_s: -819,",
        "cube.hbm.bandwidth_gb_per_s",
        "hbm:",
        ["-819", "positive"],
    ),
    ("zero_sips", "sips: {count: 4}", "sips: {count: 0}", "system.sips.count", "sips:", ["found 0"]),
    (
        "bool_count",
        "sips: {count: 4}",
        "sips: {count: true}",
        "system.sips.count",
        "sips:",
        ["boolean", "whole number"],
    ),
    ("string_clock", "clock_ghz: 1.5", "clock_ghz: fast", "pe.clock_ghz", "clock_ghz", ["'fast'", "GHz"]),
    ("float_count", "engines: 2,", "engines: 2.5,", "pe.dma.engines", "dma:", ["2.5", "whole number"]),
    ("zero_mesh", "w: 2, h: 2", "w: 0, h: 2", "sip.cube_mesh.w", "cube_mesh", ["found 0"]),
    (
        "unknown_corner",
        "[nw, ne, sw, se]",
        "[nw, ne, sw, north]",
        "cube.pe_layout.corners[3]",
        "corners",
        ["'north'", "nw, ne, sw, se"],
    ),
    (
        "duplicate_corner",
        "[nw, ne, sw, se]",
        "[nw, ne, nw]",
        "cube.pe_layout.corners[2]",
        "corners",
        ["'nw'", "distinct"],
    ),
    ("empty_corners", "[nw, ne, sw, se]", "[]", "cube.pe_layout.corners", "corners", ["a list", "non-empty"]),
    (
        "unknown_shape",
        "shape: ring,",
        "shape: torus,",
        "system.inter_sip.shape",
        "shape:",
        ["'torus'", "ring, full_mesh, switch"],
    ),
    ("unknown_dtype", "f32: 512", "fp32: 512", "pe.matrix_unit.flops_per_cycle.fp32", "fp32", ["did you mean 'f32'"]),
    (
        "unknown_key",
        "bandwidth_gb_per_s: 819,",
        "bandwith_gb_per_s: 819,",
        "cube.hbm.bandwith_gb_per_s",
        "bandwith",
        ["unknown key", "did you mean 'bandwidth_gb_per_s'"],
    ),
    (
        "missing_key",
        "  hbm: {capacity_gib: 16, bandwidth_gb_per_s: 819, latency_ns: 100}\n",
        "",
        "cube.hbm",
        "cube:",
        ["missing key", "capacity_gib"],
    ),
    (
        "missing_leaf",
        "vector_unit: {lanes: 64}",
        "vector_unit: {}",
        "pe.vector_unit.lanes",
        "vector_unit",
        ["missing key", "vector elements per cycle"],
    ),
    (
        "section_not_mapping",
        "ipcq: {depth: 8, max_slot_kib: 64, message_overhead_ns: 40}",
        "ipcq: 8",
        "ipcq",
        "ipcq:",
        ["found 8", "a mapping"],
    ),
    ("null_latency", "latency_ns: 5}", "latency_ns: ~}", "pe.tcm.latency_ns", "tcm:", ["null", ">= 0"]),
    (
        "negative_latency",
        "hop_latency_ns: 10",
        "hop_latency_ns: -1",
        "sip.noc.hop_latency_ns",
        "hop_latency_ns",
        ["found -1"],
    ),
    (
        "sub_picosecond",
        "latency_ns: 5}",
        "latency_ns: 0.0001}",
        "pe.tcm.latency_ns",
        "tcm:",
        ["0.1 ps", "whole number of ps"],
    ),
    (
        "infinite_bandwidth",
        "bandwidth_gb_per_s: 256",
        "bandwidth_gb_per_s: .inf",
        "pe.dma.bandwidth_gb_per_s",
        "dma:",
        ["inf"],
    ),
    ("duplicate_key", "  sram:", "  hbm: {}\n  sram:", "cube.hbm", "  hbm: {}", ["appears twice"]),
    (
        "ipcq_exceeds_tcm",
        "max_slot_kib: 64",
        "max_slot_kib: 1024",
        "ipcq.max_slot_kib",
        "max_slot_kib",
        ["does not fit", "TCM"],
    ),
    ("zero_rate", "i8: 4096", "i8: 0", "pe.matrix_unit.flops_per_cycle.i8", "i8:", ["found 0"]),
    (
        "empty_rates",
        "{f16: 2048, bf16: 2048, f32: 512, i8: 4096}",
        "{}",
        "pe.matrix_unit.flops_per_cycle",
        "matrix_unit",
        ["non-empty mapping"],
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "key_path", "line_fragment", "words"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
@pytest.mark.quick
def test_adr0002_t13_malformed_file_is_one_error_naming_file_line_and_key(
    write_text, old, new, key_path, line_fragment, words
):
    text = edited(old, new)
    path = write_text(text)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line_containing(text, line_fragment)}: {key_path}: "), message
    for word in words:
        assert word in message
    assert "\n" not in message


def test_adr0002_t14_unknown_key_suggests_the_closest_valid_key(write_text):
    path = write_text(edited("pe_per_corner: 2", "pes_per_corner: 2"))
    with pytest.raises(
        TopologyError, match=r"cube\.pe_layout\.pes_per_corner: unknown key \(did you mean 'pe_per_corner'\?\)"
    ):
        load_topology(path)


def test_adr0002_t15_unknown_key_far_from_any_gives_the_valid_keys(write_text):
    path = write_text(edited("sip:\n", "colour: blue\nsip:\n"))
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert "did you mean" not in str(caught.value)
    assert "expected one of system, sip, cube, pe, ipcq" in str(caught.value)


def test_adr0002_t16_yaml_syntax_error_reports_its_own_line(write_text):
    text = edited("latency_ns: 500}", "latency_ns: 500")
    path = write_text(text)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:")
    assert "YAML syntax error" in message and "\n" not in message
    reported_line = int(message[len(str(path)) + 1 :].split(":")[0])
    assert reported_line >= line_containing(text, "latency_ns: 500 ")


FILE_LEVEL = [
    ("empty", b"", "empty"),
    ("comment_only", b"# nothing here\n", "empty"),
    ("top_level_list", b"- system\n- sip\n", "(top level): found a list"),
    ("top_level_scalar", b"42\n", "(top level): found 42"),
    ("not_utf8", b"system:\n  sips: {count: \xff}\n", "not UTF-8"),
    ("control_character", b"system:\n  sips: {count: 4}\x07\n", "YAML syntax error"),
    ("deep_nesting", b"system: " + b"[" * 1200, "nested too deeply"),
    ("two_documents", b"a: 1\n---\nb: 2\n", "YAML syntax error"),
    (
        "python_tag",
        b"system: !!python/object:os.system {}\n",
        "found the tag 'tag:yaml.org,2002:python/object:os.system'",
    ),
    ("set_tag", b"system: !!set {a, b}\n", "found the tag 'tag:yaml.org,2002:set'"),
]


@pytest.mark.parametrize(
    ("content", "fragment"), [case[1:] for case in FILE_LEVEL], ids=[case[0] for case in FILE_LEVEL]
)
def test_adr0002_t17_whole_file_problems_name_the_file(tmp_path, content, fragment):
    path = tmp_path / "machine.yaml"
    path.write_bytes(content)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert str(caught.value).startswith(str(path))
    assert fragment in str(caught.value)


def test_adr0002_t18_missing_file_names_it_and_the_shipped_names(tmp_path):
    path = tmp_path / "nowhere.yaml"
    with pytest.raises(TopologyError, match="no such topology file.*default, h100, h200x4, h200x8, large, single_sip") as caught:
        load_topology(path)
    assert str(path) in str(caught.value)


def test_adr0002_t19_directory_is_not_a_topology_file(tmp_path):
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology(tmp_path)


def test_adr0002_t20_schema_units_are_spelt_in_key_names():
    for field in SCHEMA:
        if isinstance(field.kind, Quantity):
            assert field.path.endswith(field.kind.unit.suffix), field.path


def test_adr0002_t21_default_file_uses_every_schema_key():
    """Every required key is set in the default file; every optional one (a model term that defaults to no
    loss) is named there in a comment, so the file documents the whole schema."""
    import yaml

    spec = yaml.safe_load(DEFAULT_TEXT)
    for field in SCHEMA:
        if field.default is not REQUIRED:
            assert field.path.rsplit('.', 1)[1] in DEFAULT_TEXT, field.path
            continue
        node = spec
        for part in field.path.split("."):
            node = node[part]


def test_adr0002_t22_queries_outside_the_machine_are_topology_errors():
    topology = load_topology()
    with pytest.raises(TopologyError, match="SIP 4 is out of range"):
        topology.sip_route(0, topology.n_sips)
    with pytest.raises(TopologyError, match="cube"):
        topology.noc_route(0, topology.cubes_per_sip, sip=0)
    with pytest.raises(TopologyError, match="no rate for dtype 'f64'"):
        topology.pe_peak_flops("f64")
    with pytest.raises(TopologyError, match="PE index"):
        topology.cube.pe_layout.corner_of(topology.pes_per_cube)


def test_adr0002_t44_a_text_is_read_once_and_each_caller_gets_its_own_copy(tmp_path):
    from kernbench.topology import document

    first = document.parse_document(DEFAULT_TEXT, "kept.yaml")
    first.data["pe"]["vector_unit"]["lanes"] = 1  # a caller changing its copy
    again = document.parse_document(DEFAULT_TEXT, "kept.yaml")
    assert again.data["pe"]["vector_unit"]["lanes"] == 64 and again.data is not first.data
    assert again.lines[("pe", "vector_unit", "lanes")] == line_containing(DEFAULT_TEXT, "vector_unit: {lanes")
    assert ("kept.yaml", DEFAULT_TEXT) in document._parsed  # read once, kept

    path = tmp_path / "edited.yaml"
    path.write_text(DEFAULT_TEXT)
    assert load_topology(path).pe.vector_unit.lanes == 64
    path.write_text(edited("vector_unit: {lanes: 64}", "vector_unit: {lanes: 32}"))
    assert load_topology(path).pe.vector_unit.lanes == 32  # the same path, another text: read anew

    bad = "system: [unclosed\n"
    for _ in range(2):
        with pytest.raises(TopologyError, match="bad.yaml:.*YAML syntax error"):
            document.parse_document(bad, "bad.yaml")
    assert ("bad.yaml", bad) not in document._parsed
