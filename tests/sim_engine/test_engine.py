"""Scheduling, time and the blocking calls of `Engine` (adr/0003-engine.md)."""

from __future__ import annotations

import traceback

import numpy as np
import pytest
from greenlet import getcurrent

from kernbench.errors import KernbenchError
from kernbench.sim_engine import Engine, EngineUsageError, Process


@pytest.mark.quick
def test_adr0003_t1_time_is_integer_picoseconds(eng):
    seen = []

    def proc():
        eng.sleep(3)
        eng.sleep(np.int64(4))  # integer-like values are converted exactly
        seen.append(eng.now)
        for bad in (1.5, 2.0, True, -1):
            with pytest.raises(EngineUsageError):
                eng.sleep(bad)
        with pytest.raises(EngineUsageError):
            eng.sleep_until(eng.now - 1)

    eng.spawn(proc)
    eng.run()
    assert seen == [7]
    assert type(eng.now) is int


def test_processes_run_in_simulated_time_order(eng):
    order = []

    def proc(name, delays):
        for d in delays:
            eng.sleep(d)
            order.append((eng.now, name))

    eng.spawn(proc, "a", [5, 10])
    eng.spawn(proc, "b", [3, 3, 3])
    eng.run()
    assert order == sorted(order, key=lambda x: x[0])
    assert order == [(3, "b"), (5, "a"), (6, "b"), (9, "b"), (15, "a")]


def ring_trace(n: int) -> list:
    eng = Engine()
    trace = []

    def proc(i):
        for step in range(3):
            eng.sleep(10)
            trace.append((eng.now, i, step))

    for i in range(n):
        eng.spawn(proc, i, name=f"p{i}")
    eng.run()
    return trace


@pytest.mark.quick
def test_adr0003_t2_ties_resolve_in_schedule_order_on_every_run():
    trace = ring_trace(5)
    # All five wake at the same times; they run in spawn order every time.
    assert trace == [(10 * (s + 1), i, s) for s in range(3) for i in range(5)]
    assert ring_trace(5) == trace


@pytest.mark.quick
def test_adr0003_t3_sleep_fast_path_does_not_switch_or_reorder(eng, count_switches):
    order = []

    def lone():
        with count_switches() as switches:
            for _ in range(100):
                eng.sleep(7)
        order.append(("lone", switches[0], eng.now))

    eng.spawn(lone)
    eng.run()
    assert order == [("lone", 0, 700)]

    # With another process due at t=700+5, a sleep to the same time must let
    # the earlier-scheduled one run first: equal times are not fast-pathed.
    def early():
        eng.sleep(5)
        order.append(("early", eng.now))

    def late():
        eng.sleep(5)
        order.append(("late", eng.now))

    eng.spawn(early)
    eng.spawn(late)
    eng.run()
    assert order[1:] == [("early", 705), ("late", 705)]


def test_sleep_zero_yields_to_processes_due_now(eng):
    order = []

    def first():
        order.append("first starts")
        eng.sleep(0)
        order.append("first resumes")

    def second():
        order.append("second runs")

    eng.spawn(first)
    eng.spawn(second)
    eng.run()
    assert order == ["first starts", "second runs", "first resumes"]
    assert eng.now == 0


@pytest.mark.quick
def test_adr0003_t4_wait_on_fired_event_does_not_switch(eng, count_switches):
    results = []

    def proc():
        done = eng.event(name="done")
        done.succeed(42)
        me = getcurrent()
        with count_switches() as switches:
            value = eng.wait(done)
            values = eng.wait_all([done])
        results.append((value, values, switches[0], getcurrent() is me))
        with count_switches() as switches:  # the counter does see a blocking wait
            eng.wait(eng.timeout(5))
        results.append(switches[0] > 0)

    eng.spawn(proc)
    eng.run()
    assert results == [(42, [42], 0, True), True]


def test_wait_on_pending_event_returns_its_value_when_triggered(eng):
    got = []
    ev = eng.event(name="data")

    def consumer():
        got.append((eng.wait(ev), eng.now))

    def producer():
        eng.sleep(50)
        ev.succeed("payload")

    eng.spawn(consumer)
    eng.spawn(producer)
    eng.run()
    assert got == [("payload", 50)]


def failing_child(eng):
    eng.sleep(10)
    raise ValueError("bad shard")


@pytest.mark.quick
def test_adr0003_t5_failure_reaches_waiter_with_original_traceback(eng):
    caught = []

    def parent():
        child = eng.spawn(failing_child, eng, name="child")
        try:
            eng.wait(child)
        except ValueError as exc:
            caught.append((exc, eng.now, child.ok, child.value is exc))

    eng.spawn(parent)
    eng.run()
    (exc, now, ok, same), = caught
    assert (str(exc), now, ok, same) == ("bad shard", 10, False, True)
    frames = [frame.name for frame in traceback.extract_tb(exc.__traceback__)]
    # The waiter's frames, then the frames where the child raised.
    assert frames.index("parent") < frames.index("failing_child")
    assert frames[-1] == "failing_child"


def test_failure_of_plain_event_raises_in_every_waiter(eng):
    ev = eng.event(name="dma done")
    caught = []

    def waiter(i):
        try:
            eng.wait(ev)
        except KeyError as exc:
            caught.append((i, exc.args))

    for i in range(2):
        eng.spawn(waiter, i)
    eng.spawn(lambda: ev.fail(KeyError("addr")))
    eng.run()
    assert caught == [(0, ("addr",)), (1, ("addr",))]


@pytest.mark.quick
def test_adr0003_t6_unobserved_failure_stops_run_and_siblings_can_be_killed(eng):
    from kernbench.sim_engine import ProcessFailed

    cleaned = []
    never = eng.event(name="recv from rank 1")

    def sibling():
        try:
            eng.wait(never)
        finally:
            cleaned.append(eng.now)

    sib = eng.spawn(sibling, name="rank0")
    bad = eng.spawn(failing_child, eng, name="rank1")
    with pytest.raises(ProcessFailed) as info:
        eng.run()
    assert isinstance(info.value, KernbenchError)
    assert info.value.process is bad and "rank1" in str(info.value) and "t=10 ps" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert eng.live_processes == [sib]

    sib.kill()
    assert cleaned == [10]
    assert not sib.is_alive and not sib.ok
    eng.run()  # nothing left: no deadlock, no second report


def test_killing_an_unstarted_process_means_it_never_runs(eng):
    ran = []
    victim = eng.spawn(lambda: ran.append("victim"))
    victim.kill(RuntimeError("aborted"))
    eng.run()
    assert ran == [] and not victim.ok and str(victim.value) == "aborted"


def test_kill_from_a_process_reaches_the_waiting_victim(eng):
    log = []

    def victim():
        eng.wait(eng.event(name="never"))

    def killer(v):
        eng.sleep(7)
        v.kill(RuntimeError("aborted"))
        with pytest.raises(RuntimeError, match="aborted"):
            eng.wait(v)
        log.append(eng.now)

    eng.spawn(killer, eng.spawn(victim))
    eng.run()
    assert log == [7]


def test_killed_sleeper_does_not_wake_later(eng):
    log = []

    def sleeper():
        try:
            eng.sleep(100)
        except RuntimeError:
            log.append(("caught", eng.now))
            eng.sleep(5)
            log.append(("after", eng.now))

    def killer(victim):
        eng.sleep(10)
        victim.kill(RuntimeError("stop"))

    victim = eng.spawn(sleeper)
    eng.spawn(killer, victim)
    eng.run()
    assert log == [("caught", 10), ("after", 15)]
    assert victim.ok


def test_adr0003_t7_wait_all_returns_values_in_order_or_first_failure(eng):
    out = []

    def worker(delay, value):
        eng.sleep(delay)
        return value

    def joiner():
        procs = [eng.spawn(worker, d, v) for d, v in [(30, "a"), (10, "b"), (20, "c")]]
        out.append((eng.wait_all(procs), eng.now))
        assert eng.wait_all([]) == []
        failing = [eng.spawn(worker, 50, "x"), eng.spawn(failing_child, eng)]
        with pytest.raises(ValueError):
            eng.wait_all(failing)
        out.append(eng.now)

    eng.spawn(joiner)
    eng.run()
    assert out == [(["a", "b", "c"], 30), 40]


def test_adr0003_t8_wait_any_returns_first_index_and_value(eng):
    out = []

    def joiner():
        events = [eng.timeout(30, "slow"), eng.timeout(10, "fast"), eng.event(name="never")]
        out.append((eng.wait_any(events), eng.now))
        eng.sleep(20)
        out.append(eng.wait_any(events))  # both fired: the first in list order wins
        with pytest.raises(EngineUsageError):
            eng.wait_any([])

    eng.spawn(joiner)
    eng.run()
    assert out == [((1, "fast"), 10), (0, "slow")]


def test_adr0003_t9_spawn_from_process(eng):
    out = []

    def grandchild(x):
        eng.sleep(5)
        return x * 2

    def child(x):
        return eng.wait(eng.spawn(grandchild, x + 1, name="grandchild"))

    def root():
        eng.sleep(10)
        p = eng.spawn(child, 1, name="child")
        assert isinstance(p, Process) and p.name == "child"
        out.append((eng.wait(p), eng.now))

    eng.spawn(root)
    eng.run()
    assert out == [(4, 15)]


def test_process_greenlet_parent_is_main(eng):
    parents = []

    def child():
        parents.append(getcurrent().parent)

    def parent_proc():
        eng.wait(eng.spawn(child))

    main = getcurrent()
    eng.spawn(parent_proc)
    eng.run()
    assert parents == [main]


def test_adr0003_t10_blocking_call_from_main_is_an_error(eng):
    ev = eng.event(name="x")
    for call in (lambda: eng.sleep(1), lambda: eng.sleep_until(1), lambda: eng.wait(ev),
                 lambda: eng.wait_all([ev]), lambda: eng.wait_any([ev])):
        with pytest.raises(EngineUsageError, match="main greenlet"):
            call()

    refused = []

    def proc():
        with pytest.raises(EngineUsageError, match="main greenlet"):
            eng.run()
        refused.append(True)

    eng.spawn(proc)
    eng.run()
    assert refused == [True]


def test_adr0003_t11_run_until_time_and_until_event(eng):
    ticks = []

    def ticker():
        while True:
            eng.sleep(10)
            ticks.append(eng.now)

    eng.spawn(ticker)
    eng.run(until=35)
    assert (ticks, eng.now) == ([10, 20, 30], 35)
    eng.run(until=40)  # an entry due exactly at `until` stays unrun
    assert (ticks, eng.now) == ([10, 20, 30], 40)
    assert eng.run(until=eng.timeout(25, "done")) == "done"
    assert (ticks[-1], eng.now) == (60, 65)
    with pytest.raises(EngineUsageError):
        eng.run(until=10)


def test_event_triggers_once_and_reports_state(eng):
    ev = eng.event(name="flag")
    assert not ev.triggered
    with pytest.raises(EngineUsageError):
        ev.value
    ev.succeed(1)
    assert (ev.triggered, ev.ok, ev.value) == (True, True, 1)
    with pytest.raises(EngineUsageError, match="already triggered"):
        ev.succeed(2)
    with pytest.raises(EngineUsageError):
        eng.timeout(5).succeed()


def test_callbacks_run_from_main_in_registration_order(eng):
    calls = []
    ev = eng.event(name="e")
    ev.add_callback(lambda e: calls.append(("a", e.value, getcurrent() is eng._main)))
    ev.add_callback(lambda e: calls.append(("b", e.value)))

    def proc():
        eng.sleep(3)
        ev.succeed("v")
        ev.add_callback(lambda e: calls.append(("late", eng.now)))

    eng.spawn(proc)
    eng.run()
    assert calls == [("a", "v", True), ("b", "v"), ("late", 3)]


def test_adr0003_t104_a_call_at_the_end_of_now_runs_after_everything_due_then(eng):
    """What happens at a picosecond, entries scheduled during it included, happens before `at_end_of_now`'s call;
    time does not move."""
    order = []

    def early():
        eng.at_end_of_now(lambda _: order.append(("end of now", eng.now)))
        eng.sleep(0)  # due at this picosecond again, after the call was asked for
        order.append(("early again", eng.now))
        eng.spawn(lambda: order.append(("spawned now", eng.now)))

    eng.spawn(early)
    eng.spawn(lambda: (eng.sleep(1), order.append(("later", eng.now))))
    eng.run()
    assert order == [("early again", 0), ("spawned now", 0), ("end of now", 0), ("later", 1)]
