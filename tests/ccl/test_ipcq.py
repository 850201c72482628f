"""ADR 0010: the IPCQ model — message cost, chunking, credits and backpressure, settings checks."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.machine import tcm
from kernbench.machine.ipcq import IpcqError, IpcQueue, IpcqSettings
from kernbench.session import Session
from tests.ccl.closed_forms import Costs, ceil_div

SENDER, RECEIVER = tcm(0, 0, 0), tcm(1, 0, 0)  # neighbours on default.yaml's ring, both in the I/O cube


def settings(topology, **overrides) -> IpcqSettings:
    values = {"buffer_kind": "sram", "backpressure": "sleep", "n_slots": 4, "slot_size": 4096,
              "poll_interval_ps": 100_000, **overrides}
    return IpcqSettings.checked(topology, **values)


def exchange(queue_settings, values: np.ndarray, session: Session | None = None):
    """Send `values` from SENDER to RECEIVER on an idle machine; return (session, queue, received, recv end)."""
    session = session or Session("default")
    machine = session.ctx.machine
    queue = IpcQueue(machine, SENDER, RECEIVER, queue_settings, label="probe#1", programs=(0, 1), data=True)
    got = {}

    def receiver():
        got["values"] = queue.recv()
        got["end"] = session.engine.now

    session.engine.spawn(queue.send, values, name="sender")
    session.engine.spawn(receiver, name="receiver")
    session.engine.run()
    return session, queue, got["values"], got["end"]


@pytest.mark.parametrize("buffer_kind", ["tcm", "hbm", "sram"])
@pytest.mark.quick
def test_adr0010_t1_one_message_costs_overhead_plus_transfer_and_its_copy_out(buffer_kind):
    session = Session("default")
    costs = Costs(session.ctx.topology, buffer_kind)
    values = np.arange(1000, dtype=np.float32)
    _, _, got, end = exchange(settings(session.ctx.topology, buffer_kind=buffer_kind), values, session)
    np.testing.assert_array_equal(got, values)
    assert end == costs.message(values.nbytes) + costs.copy(values.nbytes)
    send, = session.ctx.machine.oplog.select(kind="ipcq_send")
    recv, = session.ctx.machine.oplog.select(kind="ipcq_recv")
    assert (send.start, send.end) == (0, costs.message(values.nbytes))
    assert recv.args["flow_id"] == send.args["flow_id"]
    assert (send.device, recv.device, send.label) == ("sip0", "sip1", "probe#1")


@pytest.mark.quick
def test_adr0010_t2_a_message_larger_than_a_slot_streams_in_slot_sized_chunks():
    session = Session("default")
    costs = Costs(session.ctx.topology, "sram")
    slot, chunks = 4096, 5
    values = np.arange(chunks * slot // 4, dtype=np.float32)
    _, _, got, end = exchange(settings(session.ctx.topology, n_slots=8, slot_size=slot), values, session)
    np.testing.assert_array_equal(got, values)
    sends = session.ctx.machine.oplog.select(kind="ipcq_send")
    assert [s.nbytes for s in sends] == [slot] * chunks
    # The link is the slowest hop: chunk i enters it one link occupancy after chunk i-1.
    assert [s.start for s in sends] == [i * costs.link_occupancy(slot) for i in range(chunks)]
    assert end == (chunks - 1) * costs.link_occupancy(slot) + costs.message(slot) + costs.copy(slot)


def credit_return(costs: Costs, slot: int) -> int:
    """When the one slot's credit is back at the sender: first chunk visible, copied out, credit over the route back."""
    route_back = costs.tcm.latency + costs.link.latency + costs.tcm.latency
    return costs.message(slot) + costs.copy(slot) + route_back


@pytest.mark.quick
def test_adr0010_t3_a_sleeping_sender_resumes_when_the_credit_arrives():
    session = Session("default")
    costs = Costs(session.ctx.topology, "sram")
    slot = 4096
    values = np.arange(2 * slot // 4, dtype=np.float32)
    _, queue, got, _ = exchange(settings(session.ctx.topology, n_slots=1, slot_size=slot), values, session)
    np.testing.assert_array_equal(got, values)
    second = session.ctx.machine.oplog.select(kind="ipcq_send")[1]
    wait, = session.ctx.machine.oplog.select(kind="ipcq_wait")
    assert second.start == wait.end == credit_return(costs, slot)
    assert wait.args == {"backpressure": "sleep"} and queue.polls == 0


@pytest.mark.quick
def test_adr0010_t4_a_polling_sender_sees_the_credit_at_the_next_poll_and_counts_polls():
    session = Session("default")
    costs = Costs(session.ctx.topology, "sram")
    slot, interval = 4096, 300_000
    values = np.arange(2 * slot // 4, dtype=np.float32)
    queue_settings = settings(session.ctx.topology, n_slots=1, slot_size=slot, backpressure="poll",
                              poll_interval_ps=interval)
    _, queue, _, _ = exchange(queue_settings, values, session)
    polls = ceil_div(credit_return(costs, slot), interval)  # the wait began when the first chunk left, at t=0
    second = session.ctx.machine.oplog.select(kind="ipcq_send")[1]
    assert second.start == polls * interval
    assert queue.polls == polls
    assert session.ctx.machine.oplog.select(kind="ipcq_wait")[0].args == {"backpressure": "poll", "polls": polls}


@pytest.mark.parametrize("key, value, words", [
    ("n_slots", 9, "ipcq.depth"), ("slot_size", 65 * 1024, "max_slot_kib"), ("buffer_kind", "l2", "tcm, hbm, sram"),
    ("backpressure", "spin", "poll, sleep"), ("poll_interval_ps", 0, "positive"),
])
@pytest.mark.quick
def test_adr0010_t5_settings_the_topology_cannot_hold_are_refused_by_name(key, value, words):
    topology = Session("default").ctx.topology
    with pytest.raises(IpcqError, match=key) as error:
        settings(topology, **{key: value})
    assert words in str(error.value)
