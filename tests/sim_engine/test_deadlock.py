"""Deadlock reports: who waits on what since when, never a hang (adr/0003-engine.md)."""

from __future__ import annotations

import pytest

from kernbench.errors import KernbenchError
from kernbench.sim_engine import Deadlock


def test_adr0003_t16_circular_wait_is_reported(eng):
    inbox = {rank: eng.event(name=f"recv on rank {rank} from rank {1 - rank}") for rank in (0, 1)}

    def rank(me, start_delay):
        eng.sleep(start_delay)
        eng.wait(inbox[me])  # each waits for the other before sending: a cycle
        inbox[1 - me].succeed("data")

    eng.spawn(rank, 1, 20, name="rank1")
    eng.spawn(rank, 0, 30, name="rank0")
    with pytest.raises(Deadlock) as info:
        eng.run()
    report = info.value
    assert isinstance(report, KernbenchError)
    assert report.now == 30
    assert report.waiting == [
        ("process 'rank1'", "'recv on rank 1 from rank 0'", 20),
        ("process 'rank0'", "'recv on rank 0 from rank 1'", 30),
    ]
    assert str(report).splitlines() == [
        "deadlock at t=30 ps: nothing is scheduled but 2 waiter(s) remain",
        "  process 'rank1' waits on 'recv on rank 1 from rank 0' since t=20 ps",
        "  process 'rank0' waits on 'recv on rank 0 from rank 1' since t=30 ps",
    ]


def test_adr0003_t17_receive_nobody_sends_to_is_reported(eng):
    def sender():
        eng.sleep(100)  # sends nothing, finishes

    def receiver():
        eng.sleep(5)
        eng.wait(eng.event(name="recv from rank 3"))

    eng.spawn(sender, name="rank3")
    eng.spawn(receiver, name="rank0")
    with pytest.raises(Deadlock) as info:
        eng.run()
    assert info.value.now == 100
    assert info.value.waiting == [("process 'rank0'", "'recv from rank 3'", 5)]


def test_deadlock_names_the_pending_events_of_a_wait_all(eng):
    done = eng.event(name="a")
    stuck = eng.event(name="b")

    def joiner():
        eng.wait_all([done, stuck])

    eng.spawn(joiner, name="join")
    eng.spawn(lambda: done.succeed())
    with pytest.raises(Deadlock, match=r"process 'join' waits on all of \['b'\] since t=0 ps"):
        eng.run()


def test_run_until_an_event_that_cannot_fire_is_a_deadlock(eng):
    never = eng.event(name="never fired")
    with pytest.raises(Deadlock, match=r"run\(until=...\) waits on 'never fired' since t=0 ps"):
        eng.run(until=never)
    # The failed run leaves no stop behind: a later plain run completes.
    eng.spawn(lambda: eng.sleep(5))
    eng.run()
    assert eng.now == 5
