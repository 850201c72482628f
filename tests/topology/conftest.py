"""Fixtures for topology tests: write variants of the shipped default file and load them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kernbench.topology import DEFAULT_TOPOLOGY_PATH, Topology, load_topology


def default_spec() -> dict:
    return yaml.safe_load(DEFAULT_TOPOLOGY_PATH.read_text())


@pytest.fixture
def write_text(tmp_path: Path) -> Callable[[str], Path]:
    """Write YAML text to a fresh file and return its path."""
    counter = iter(range(1_000_000))

    def write(text: str) -> Path:
        path = tmp_path / f"topology_{next(counter)}.yaml"
        path.write_text(text)
        return path

    return write


@pytest.fixture
def load_variant(write_text) -> Callable[..., Topology]:
    """Load the default machine with some values replaced: load_variant(sips=8, shape="switch", mesh=(4, 2))."""

    def load(sips: int | None = None, shape: str | None = None, mesh: tuple[int, int] | None = None) -> Topology:
        spec = default_spec()
        if sips is not None:
            spec["system"]["sips"]["count"] = sips
        if shape is not None:
            spec["system"]["inter_sip"]["shape"] = shape
        if mesh is not None:
            spec["sip"]["cube_mesh"] = {"w": mesh[0], "h": mesh[1]}
        return load_topology(write_text(yaml.safe_dump(spec)))

    return load
