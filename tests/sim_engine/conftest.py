"""Fixtures for engine tests: a fresh engine and a greenlet switch counter."""

from __future__ import annotations

import contextlib

import greenlet
import pytest

from kernbench.sim_engine import Engine


@pytest.fixture
def eng() -> Engine:
    return Engine()


@pytest.fixture
def count_switches():
    """A context manager counting greenlet switches (and throws) inside its block; it yields a one-item list."""

    @contextlib.contextmanager
    def counting():
        count = [0]

        def tracer(event, args):
            count[0] += 1

        previous = greenlet.settrace(tracer)
        try:
            yield count
        finally:
            greenlet.settrace(previous)

    return counting
