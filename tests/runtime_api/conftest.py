"""Fixtures for runtime tests: a fresh session on the default topology."""

from __future__ import annotations

import pytest

from kernbench.session import Session


@pytest.fixture
def session() -> Session:
    return Session("default")
