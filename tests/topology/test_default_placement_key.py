"""ADR 0004 T12, T13: `sip.default_placement`, the topology's rule for a tensor with no DPPolicy."""

from __future__ import annotations

import re

import pytest

from kernbench.topology import load_topology
from kernbench.topology.errors import TopologyError
from tests.derived_topology import derived_topology

RULE = "  default_placement: first_pe\n"


def with_rule(tmp_path, line: str):
    """default.yaml with its `sip.default_placement` line replaced by `line`."""
    return derived_topology(tmp_path, "default", [(RULE, line)], "rule.yaml")


@pytest.mark.parametrize("name, rule", [("default", "first_pe"), ("single_sip", "first_pe"), ("large", "first_pe"),
                                        ("h100", "interleaved"), ("h200x4", "interleaved"), ("h200x8", "interleaved")])
def test_adr0004_t12_each_shipped_file_states_its_default_placement(name, rule):
    topology = load_topology(name)
    assert "default_placement" in topology.spec["sip"], f"{name}.yaml leaves its rule to the schema's default"
    assert topology.sip.default_placement == rule


def test_adr0004_t12_a_file_without_the_key_keeps_a_tensor_whole_on_the_first_pe(tmp_path):
    assert load_topology(with_rule(tmp_path, "")).sip.default_placement == "first_pe"
    assert load_topology(with_rule(tmp_path, "  default_placement: interleaved\n")).sip.default_placement == \
        "interleaved"


@pytest.mark.parametrize("value, found", [
    ("interleave", r"found 'interleave' \(a string\) \(did you mean 'interleaved'\?\)"),
    ("spread", r"found 'spread' \(a string\);"),
    ("7", r"found 7;"),
    ("[interleaved]", r"found a list;"),
    ("", r"found nothing \(null\);"),
])
def test_adr0004_t13_a_bad_default_placement_is_one_line_naming_file_and_key(tmp_path, value, found):
    path = with_rule(tmp_path, f"  default_placement: {value}\n")
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:")
    assert "sip.default_placement: " in message
    assert re.search(found, message), message
    assert "expected one of interleaved, first_pe" in message
