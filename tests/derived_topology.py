"""A shipped topology file with some of its text replaced, written where a test can load it."""

from __future__ import annotations

from pathlib import Path

from kernbench.topology.loader import resolve_topology_path


def derived_topology(directory: Path, shipped: str, replacements: list[tuple[str, str]], name: str) -> Path:
    """`shipped`'s text with each (old, new) replaced — every `old` must be there, so a shipped file that
    changes fails loudly rather than giving the unchanged machine — written to `directory`/`name`."""
    text = resolve_topology_path(shipped).read_text()
    for old, new in replacements:
        assert old in text, f"{shipped}.yaml no longer holds {old!r}"
        text = text.replace(old, new)
    path = directory / name
    path.write_text(text)
    return path
