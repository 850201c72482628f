"""Work scheduled without a greenlet — `call_at`, `wake_at`, `Task` — and the run's garbage-collection settings.

Each is a cheaper stand-in for something the engine already had (a timeout's
callback, a sleeping process's wake-up, a process that only sleeps), so each
is specified by running both side by side and asking for the same order of
execution (adr/0003-engine.md).
"""

from __future__ import annotations

import gc

import pytest
from greenlet import GreenletExit

from kernbench.sim_engine import Engine, EngineUsageError, ProcessFailed, Task


def test_adr0003_t22_call_at_runs_exactly_where_a_timeout_callback_would():
    def trace(use_call_at: bool) -> list:
        eng = Engine()
        order = []

        def note(what):
            order.append((eng.now, what))

        def early():
            if use_call_at:
                eng.call_at(10, note, "deferred")
            else:
                eng.timeout(10).add_callback(lambda _event: note("deferred"))
            eng.sleep(10)  # due at 10 as well, scheduled after the deferred call
            note("early woke")

        def late():
            eng.sleep(4)
            eng.sleep_until(10)  # scheduled at 4, after the timeout's entry: runs before its callback
            note("late woke")

        eng.spawn(early, name="early")
        eng.spawn(late, name="late")
        eng.run()
        return order, eng.events_scheduled

    assert trace(use_call_at=True) == trace(use_call_at=False)
    assert trace(use_call_at=True)[0] == [(10, "early woke"), (10, "late woke"), (10, "deferred")]


def test_adr0003_t23_wake_at_runs_exactly_where_a_sleeping_process_would_wake():
    def trace(use_wake_at: bool) -> list:
        eng = Engine()
        order = []

        def other(name, delay):
            eng.sleep(delay)
            order.append((eng.now, name))

        def sleeper():
            if use_wake_at:
                eng.wake_at(7, lambda _: order.append((eng.now, "woken")))
            else:
                eng.sleep_until(7)
                order.append((eng.now, "woken"))

        eng.spawn(other, "before", 7)
        eng.spawn(sleeper)
        eng.spawn(other, "after", 7)
        eng.run()
        return order

    assert trace(use_wake_at=True) == trace(use_wake_at=False) == [(7, "before"), (7, "woken"), (7, "after")]
    eng = Engine()
    eng.run(until=5)
    with pytest.raises(EngineUsageError):
        eng.wake_at(4, print)


def _sleeps(times: list[int], order: list, eng: Engine, name: str):
    for t in times:
        eng.sleep_until(t)
        order.append((eng.now, name))
    return name


def _yields(task, times: list[int], order: list, eng: Engine, name: str):
    for t in times:
        yield t
        order.append((eng.now, name))
    return name


def test_adr0003_t24_a_task_runs_exactly_where_the_same_process_would():
    def trace(as_task: bool) -> list:
        eng = Engine()
        order = []

        def main():
            if as_task:
                work = eng.task(_yields, [3, 3, 9], order, eng, "work", name="work")
            else:
                work = eng.spawn(_sleeps, [3, 3, 9], order, eng, "work", name="work")
            order.append((eng.now, "main started it"))
            eng.sleep(3)
            order.append((eng.now, "main"))
            got = eng.wait(work)
            order.append((eng.now, f"main got {got}"))

        eng.spawn(main)
        eng.spawn(_sleeps, [3, 9], order, eng, "neighbour")
        eng.run()
        return order

    assert trace(as_task=True) == trace(as_task=False)
    assert trace(as_task=True)[-1] == (9, "main got work")


def test_adr0003_t24_a_tasks_failure_reaches_its_waiter_or_stops_the_run():
    def failing(task, eng):
        yield eng.now + 5
        raise ValueError("bad task")

    eng = Engine()
    caught = []

    def waiter():
        try:
            eng.wait(eng.task(failing, eng, name="failing"))
        except ValueError as error:
            caught.append((eng.now, str(error)))

    eng.spawn(waiter)
    eng.run()
    assert caught == [(5, "bad task")]

    def into_the_past(task, eng):
        yield eng.now + 5
        yield eng.now - 1  # raises here, as sleep_until(now - 1) would in a process

    eng = Engine()
    past = []
    eng.spawn(lambda: past.append(pytest.raises(EngineUsageError, eng.wait, eng.task(into_the_past, eng))))
    eng.run()
    assert "in the past" in str(past[0].value)

    eng = Engine()
    task = eng.task(failing, eng, name="unwatched")
    with pytest.raises(ProcessFailed) as failure:
        eng.run()
    assert failure.value.process is task and "unwatched" in str(failure.value)
    assert isinstance(failure.value.__cause__, ValueError)


def test_adr0003_t24_killing_a_task_drops_its_wake_ups_as_killing_a_process_does():
    def ends(as_task: bool) -> tuple:
        eng = Engine()
        work = (eng.task(_yields, [100], [], eng, "w", name="w") if as_task
                else eng.spawn(_sleeps, [100], [], eng, "w", name="w"))

        def killer():
            eng.sleep(10)
            work.kill()

        eng.spawn(killer)
        eng.run()
        return eng.now, work.is_alive, type(work.value)

    assert ends(as_task=True) == ends(as_task=False) == (10, False, GreenletExit)
    assert isinstance(Engine().task(_yields, [], [], None, "t"), Task)


def test_adr0003_t25_a_run_tunes_garbage_collection_and_restores_it():
    eng = Engine()
    seen = {}

    def proc():
        seen["threshold"] = gc.get_threshold()
        seen["frozen"] = gc.get_freeze_count()

    before = gc.get_threshold()
    eng.spawn(proc)
    eng.run()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert seen["threshold"][0] >= 50_000 and seen["frozen"] > 0

    gc.freeze()  # someone else's freeze is left alone: still in place after the run
    try:
        eng.spawn(proc)
        eng.run()
        assert seen["frozen"] > 0 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
