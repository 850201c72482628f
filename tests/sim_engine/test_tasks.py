"""Work scheduled without a greenlet — `call_at`, `wake_at`, `Task` — and the run's garbage-collection settings.

Each is a cheaper stand-in for something the engine already had (a timeout's
callback, a sleeping process's wake-up, a process that sleeps and waits), so
each is specified by running both side by side and asking for the same order
of execution (adr/0003-engine.md; tasks that wait on events and `Route`, for
the collectives' members: adr/0010-collective-algorithms.md).
"""

from __future__ import annotations

import gc

import pytest
from greenlet import GreenletExit
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.sim_engine import Channel, Deadlock, Engine, EngineUsageError, ProcessFailed, Route, Task, transfer


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

    before, frozen_before = gc.get_threshold(), gc.get_freeze_count()  # a library may have frozen objects already
    eng.spawn(proc)
    eng.run()
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen_before
    assert seen["threshold"][0] >= 50_000 and seen["frozen"] > 0

    gc.freeze()  # someone else's freeze is left alone: still in place after the run
    try:
        eng.spawn(proc)
        eng.run()
        assert seen["frozen"] > 0 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def _steps(order: list, eng: Engine, name: str, events: list, late):
    """Waits on events (pending, already triggered, failed) and sleeps, noting when it resumes: one body for a
    task and (through `Engine.drive`) for a process."""
    first = yield events[0]
    order.append((eng.now, name, "got", first))
    yield eng.now + 2
    order.append((eng.now, name, "slept"))
    second = yield events[1]  # triggered long ago: no entry, goes on at once
    order.append((eng.now, name, "got", second))
    try:
        yield late
    except ValueError as error:
        order.append((eng.now, name, "raised", str(error)))
    return name


def test_adr0010_t26_a_task_waits_on_events_exactly_where_a_process_would():
    def trace(as_task: bool) -> list:
        eng = Engine()
        order = []
        events = [eng.event("first"), eng.event("second")]
        late = eng.event("late")

        def trigger():
            eng.sleep(5)
            events[0].succeed("a")
            events[1].succeed("b")
            order.append((eng.now, "trigger"))
            eng.sleep(10)
            late.fail(ValueError("late failed"))

        def neighbour():
            for _ in range(3):
                eng.sleep(5)
                order.append((eng.now, "neighbour"))

        eng.spawn(trigger)
        if as_task:
            work = eng.task(lambda task: _steps(order, eng, "work", events, late), name="work")
        else:
            work = eng.spawn(lambda: eng.drive(_steps(order, eng, "work", events, late)), name="work")
        eng.spawn(neighbour)
        eng.run()
        return order, work.value, eng.now

    assert trace(as_task=True) == trace(as_task=False)
    order, value, _ = trace(as_task=True)
    assert value == "work" and (5, "work", "got", "a") in order and (15, "work", "raised", "late failed") in order


def test_adr0010_t26_a_task_waiting_on_an_event_is_in_deadlock_reports_and_can_be_killed():
    eng = Engine()

    def waits(task, event):
        yield event

    never = eng.event("a message nobody sends")
    task = eng.task(waits, never, name="stuck task")
    with pytest.raises(Deadlock) as report:
        eng.run()
    assert "stuck task" in str(report.value) and "a message nobody sends" in str(report.value)

    task.kill()
    assert not task.is_alive and isinstance(task.value, GreenletExit) and not never._callbacks
    never.succeed()
    eng.run()  # nothing left to resume


def test_adr0010_t26_the_current_task_is_known_while_its_step_runs():
    eng = Engine()
    seen = []

    def note(task):
        seen.append((eng.current_task is task, eng.current_process))
        yield eng.now + 1
        seen.append((eng.current_task is task, eng.current_process))

    eng.task(note)
    eng.run()
    assert seen == [(True, None), (True, None)] and eng.current_task is None


@settings(max_examples=60, deadline=None)
@given(hops=st.lists(st.tuples(st.integers(1, 10**12), st.integers(0, 2000)), min_size=1, max_size=4),
       transfers=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 1 << 20)), min_size=1, max_size=12))
def test_adr0010_t27_a_route_reserves_exactly_what_transfer_does(hops, transfers):
    """`Route.transfer` (per-size costs worked out once) against `transfer` on twin channels: the same (start,
    end) for every transfer, and the same free_at, busy time, bytes and op count on every hop."""
    eng = Engine()
    plain = [Channel(eng, f"a{i}", bandwidth, latency) for i, (bandwidth, latency) in enumerate(hops)]
    routed = [Channel(eng, f"b{i}", bandwidth, latency) for i, (bandwidth, latency) in enumerate(hops)]
    route = Route(routed)
    got = []

    def issue():
        for delay, nbytes in transfers:
            eng.sleep(delay)
            got.append((transfer(eng, plain, nbytes), route.transfer(eng, nbytes)))

    eng.spawn(issue)
    eng.run()
    assert all(a == b for a, b in got)
    assert [(c.free_at, c.busy_ps, c.bytes_moved, c.ops) for c in plain] == \
        [(c.free_at, c.busy_ps, c.bytes_moved, c.ops) for c in routed]
    assert route.latency_ps == sum(latency for _, latency in hops)
