"""Fuzzing the loader: any mutation of the default file loads or raises TopologyError, nothing else."""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.topology import DEFAULT_TOPOLOGY_PATH, Topology, TopologyError, load_topology

DEFAULT_BYTES = DEFAULT_TOPOLOGY_PATH.read_bytes()
DEFAULT_SPEC = yaml.safe_load(DEFAULT_BYTES)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def containers(node, found=None):
    """Every dict and list in the spec, each with the keys or indices it holds."""
    found = [] if found is None else found
    if isinstance(node, dict):
        found.append(node)
        for child in node.values():
            containers(child, found)
    elif isinstance(node, list):
        found.append(node)
        for child in node:
            containers(child, found)
    return found


@st.composite
def mutated_specs(draw):
    spec = copy.deepcopy(DEFAULT_SPEC)
    for _ in range(draw(st.integers(1, 3))):
        holder = draw(st.sampled_from(containers(spec)))
        keys = list(holder) if isinstance(holder, dict) else list(range(len(holder)))
        action = draw(st.sampled_from(["delete", "replace", "add", "negate"]))
        if action == "add" and isinstance(holder, dict):
            holder[draw(st.text(min_size=1, max_size=10))] = draw(values)
        elif not keys:
            continue
        else:
            key = draw(st.sampled_from(keys))
            if action == "delete":
                del holder[key]
            elif action == "negate" and isinstance(holder[key], (int, float)):
                holder[key] = -holder[key]
            else:
                holder[key] = draw(values)
    return spec


def assert_loads_or_topology_error(path):
    try:
        assert isinstance(load_topology(path), Topology)
    except TopologyError as error:
        assert str(error).startswith(str(path))


@FUZZ
@given(spec=mutated_specs())
def test_adr0002_t31_mutated_data_loads_or_raises_topology_error(tmp_path_factory, spec):
    path = tmp_path_factory.getbasetemp() / "fuzz_data.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert_loads_or_topology_error(path)


@st.composite
def mutated_bytes(draw):
    data = bytearray(DEFAULT_BYTES)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        action = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
        if action == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif action == "truncate":
            del data[at:]
        elif action == "insert":
            data[at:at] = draw(
                st.binary(min_size=1, max_size=4)
                | st.sampled_from([b":", b"-", b"[", b"{", b"&a", b"*a", b"\t", b"\n  "])
            )
        else:
            del data[at : at + draw(st.integers(1, 40))]
    return bytes(data)


@FUZZ
@given(content=mutated_bytes())
def test_adr0002_t32_mutated_text_loads_or_raises_topology_error(tmp_path_factory, content):
    path = tmp_path_factory.getbasetemp() / "fuzz_text.yaml"
    path.write_bytes(content)
    assert_loads_or_topology_error(path)
