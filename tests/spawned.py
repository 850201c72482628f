"""Running a bench that spawns ranks, as the tests do: a rank's failure comes out as itself."""

from __future__ import annotations

from kernbench.runtime_api.namespace.spawn import SpawnException


def run_ranks(session, bench) -> None:
    """`session.run(bench, session.torch)`, the first failing rank's exception raised unwrapped (not as the
    `SpawnException` around it), so a test's `pytest.raises` or an assertion inside a rank fails as itself."""
    try:
        session.run(bench, session.torch)
    except SpawnException as failure:
        raise failure.failures[failure.error_index] from failure
