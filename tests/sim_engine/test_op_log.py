"""The op log: queries, summaries and determinism (adr/0003-engine.md)."""

from __future__ import annotations

import random

import pytest

from kernbench.sim_engine import Channel, Engine, EngineUsageError, ExclusiveUnit, OpLog, OpRecord, transfer


def small_log() -> OpLog:
    log = OpLog()
    log.append("dma", "sip0", "pe0.dma0", "gemm_kernel", 0, 4096, 0, 0, 100)
    log.append("gemm", "sip0", "pe0.mxu", "gemm_kernel", 0, 0, 2 * 64**3, 100, 400)
    log.append("dma", "sip0", "pe0.dma0", "gemm_kernel", 1, 4096, 0, 50, 150)  # overlaps the first dma
    log.append("ipcq_send", "sip1", "sip1->sip0", "all_reduce", None, 1024, 0, 500, 700, {"flow_id": 7})
    log.append("vector", "sip1", "pe0.vec", "all_reduce", None, 0, 256, 700, 700)  # zero length
    return log


def test_adr0003_t18_op_log_queries_and_summaries():
    log = small_log()
    assert len(log) == 5 and isinstance(next(iter(log)), OpRecord)
    assert [r.start for r in log.select(kind="dma")] == [0, 50]
    assert [r.kind for r in log.select(device="sip1")] == ["ipcq_send", "vector"]
    assert [r.kind for r in log.select(unit="pe0.mxu")] == ["gemm"]
    assert [r.kind for r in log.select(label="all_reduce", program=None)] == ["ipcq_send", "vector"]
    assert [r.program for r in log.select(program=1)] == [1]
    assert [r.kind for r in log.select(window=(120, 600))] == ["gemm", "dma", "ipcq_send"]
    assert [r.kind for r in log.select(window=(700, 701))] == ["vector"]
    assert log.select(kind="dma", window=(150, 200)) == []

    usage = log.unit_usage()
    horizon = 700
    assert list(usage) == [("sip0", "pe0.dma0"), ("sip0", "pe0.mxu"), ("sip1", "sip1->sip0"), ("sip1", "pe0.vec")]
    assert usage[("sip0", "pe0.dma0")] == (2, 150, 150 / horizon)  # [0,100] ∪ [50,150]
    assert usage[("sip0", "pe0.mxu")] == (1, 300, 300 / horizon)
    assert log.unit_usage(horizon_ps=1400)[("sip1", "sip1->sip0")].utilization == 200 / 1400

    totals = log.label_totals()
    assert totals["gemm_kernel"] == (3, 8192, 2 * 64**3, 100 + 300 + 100)
    assert totals["all_reduce"] == (2, 1024, 256, 200)

    assert log.device_spans() == {"sip0": (0, 400, 3), "sip1": (500, 700, 2)}
    log.append("gemm", "sip0", "pe0.mxu", "gemm_kernel", 1, 0, 2 * 64**3, 400, 700, {"m": 64, "dtype": "f16"})
    columns = log.columns()
    decoded = [(columns.values[kind], columns.values[device], columns.values[label], None if program < 0 else program,
                nbytes, flops, start, end, columns.values[args])
               for kind, device, label, program, nbytes, flops, start, end, args in zip(*map(list, columns[:9]))]
    assert decoded == [(r.kind, r.device, r.label, r.program, r.nbytes, r.flops, r.start, r.end,
                        None if r.args is None else tuple((k, v) for k, v in r.args.items() if k != "flow_id"))
                       for r in log]  # the args column leaves out a message's flow id


def test_op_log_refuses_an_op_ending_before_it_starts():
    with pytest.raises(EngineUsageError, match="before it starts"):
        OpLog().append("dma", "sip0", "pe0.dma0", None, None, 1, 0, 10, 9)


def contended_model(seed: int) -> str:
    """Four programs streaming random-sized DMAs through shared HBM and a link; the log as JSON."""
    eng = Engine()
    log = OpLog()
    rng = random.Random(seed)
    hbm = Channel(eng, "hbm", 409 * 10**9, 1_000, device="sip0")
    link = Channel(eng, "link", 50 * 10**9, 5_000, device="sip0")
    mxu = ExclusiveUnit(eng, "mxu", device="sip0")
    plans = [[(rng.randrange(1, 1 << 16), rng.randrange(0, 3)) for _ in range(20)] for _ in range(4)]

    def program(pid, plan):
        for nbytes, think in plan:
            start, end = transfer(eng, [hbm, link] if pid % 2 else [hbm], nbytes)
            log.append("dma", "sip0", f"pe{pid}.dma0", "k", pid, nbytes, 0, start, end)
            eng.sleep_until(end)
            start, end = mxu.reserve(think * 700)
            log.append("gemm", "sip0", "mxu", "k", pid, 0, think * 1000, start, end, {"think": think})
            eng.sleep_until(end)

    for pid, plan in enumerate(plans):
        eng.spawn(program, pid, plan, name=f"program{pid}")
    eng.run()
    return log.to_json()


def test_adr0003_t19_same_model_gives_byte_identical_op_log():
    first = contended_model(seed=3)
    assert contended_model(seed=3) == first
    assert len(first) > 1000 and contended_model(seed=4) != first


def test_adr0003_t26_a_log_compacted_in_blocks_reads_back_what_was_appended_in_a_quarter_of_the_memory(monkeypatch):
    import gc
    import tracemalloc

    from kernbench.sim_engine import op_log

    def filled(block: int) -> OpLog:
        """Records shaped as a run's: big times, a per-message flow id before args shared by a queue, kernels'
        program ids and args dicts, None labels and programs."""
        monkeypatch.setattr(op_log, "BLOCK", block)
        log = OpLog()
        shared = (("to", "sip1.cube0.pe0"), ("buffer", "sram"))
        for i in range(3000):
            t = 10**12 + 7919 * i
            log.append_pairs("ipcq_send", f"sip{i % 4}", "cube0.pe0.ipcq", "all_reduce#0", i % 4, 65536, 0, t,
                             t + 5 * 10**6, (("flow_id", i), *shared))
            log.append("dma", "sip0", "cube0.pe0.dma0", None if i % 3 else "gemm", i, 4096, 0, t, t + 99,
                       {"src": "hbm", "shape": [64, 64]} if i % 5 == 0 else None)
            log.append_pairs("vector", "sip0", "cube0.pe0.vector", "gemm", None, 0, 2 * i, t, t + 1, None)
            log.append("gemm", "sip0", "cube0.pe0.matrix", "gemm", i, 0, 1, t, t + 2, {"m": 64 if i % 2 else 64.0})
        return log

    plain, compacted = filled(10**9), filled(1000)
    assert len(compacted._blocks) == 12 and not compacted._records
    assert compacted.to_json() == plain.to_json() and list(compacted) == list(plain)
    for summary in ("device_spans", "label_totals", "unit_usage"):
        assert list(getattr(compacted, summary)()) == list(getattr(plain, summary)()), summary
    decoded = [[[c.values[code] for code in c[field].tolist()] if field in (0, 1, 2, 8) else c[field].tolist()
                for field in range(9)] for c in (compacted.columns(), plain.columns())]
    assert decoded[0] == decoded[1]  # codes are numbered as values first appear, so compare what they stand for
    assert compacted.end_ps == plain.end_ps and len(compacted) == len(plain) == 12000
    assert [r.start for r in compacted.select(kind="dma", label="gemm")] == \
        [r.start for r in plain.select(kind="dma", label="gemm")]

    sizes = []
    for block in (10**9, 1000):
        gc.freeze()  # the collection below looks at what filling made, not at every object of the test process
        tracemalloc.start()
        try:
            kept = filled(block)
            gc.collect()  # what the log holds, not garbage of the filling that no collection has freed yet
            sizes.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
            gc.unfreeze()
        del kept
    assert sizes[1] < sizes[0] / 4, sizes  # measured: about a fifth


def test_adr0003_t27_a_record_the_columns_cannot_hold_is_one_line(monkeypatch):
    from kernbench.sim_engine import op_log

    monkeypatch.setattr(op_log, "BLOCK", 2)
    log = OpLog()
    log.append("dma", "sip0", "pe0.dma0", None, None, 1, 0, 0, 10)
    with pytest.raises(EngineUsageError, match="op log: byte counts must be Python ints below 2\\*\\*63"):
        log.append("dma", "sip0", "pe0.dma0", None, None, 1.5, 0, 10, 20)
    log = OpLog()
    log.append("dma", "sip0", "pe0.dma0", None, None, 1, 0, 0, 10)
    with pytest.raises(EngineUsageError, match="op log: program ids must not be negative"):
        log.append("dma", "sip0", "pe0.dma0", None, -1, 1, 0, 10, 20)  # -1 would read back as None


def test_adr0003_t111_a_message_appended_with_its_flow_id_apart_reads_as_appended_with_it_first(monkeypatch):
    """`append_pairs` given the flow id apart (the IPCQ's way: beside the pairs its queue shares) against the id first
    among the pairs, interleaved with other records, before and after compaction: the same records, JSON,
    columns and copies, and no more memory once compacted."""
    import tracemalloc

    from kernbench.sim_engine import op_log
    from kernbench.sim_engine.op_log import Image

    sent = (("to", "sip1.cube0.pe0.tcm"), ("buffer", "sram"), ("chunk", 0), ("chunks", 1))
    received = (("from", "sip0.cube0.pe0.tcm"), ("buffer", "sram"))

    def filled(apart: bool, block: int) -> OpLog:
        monkeypatch.setattr(op_log, "BLOCK", block)
        log = OpLog()
        for i in range(600):
            t = 10**9 + 977 * i
            for kind, pairs in (("ipcq_send", sent), ("ipcq_recv", received)):
                if apart:
                    log.append_pairs(kind, "sip0", "cube0.pe0.ipcq", "all_reduce#0", 0, 65536, 0, t, t + 500, pairs,
                                     flow_id=i)
                else:
                    log.append_pairs(kind, "sip0", "cube0.pe0.ipcq", "all_reduce#0", 0, 65536, 0, t, t + 500,
                                     (("flow_id", i), *pairs))
            log.append("dma", "sip0", "cube0.pe0.dma0", "all_reduce#0", 0, 4096, 0, t, t + 99, {"flow_id": i})
        return log

    reference = filled(False, 10**9)
    for block in (10**9, 250):
        log = filled(True, block)
        assert list(log) == list(reference) and log.to_json() == reference.to_json(), block
        assert log.select(kind="ipcq_recv")[7].args == {"flow_id": 7, "from": "sip0.cube0.pe0.tcm", "buffer": "sram"}
        if block == 250:
            assert len(log._blocks) == 7
    apart, together = filled(True, 250), filled(False, 250)
    columns = [[field.tolist() for field in log.columns()[:9]] for log in (apart, together)]
    assert columns[0] == columns[1]
    image = Image(lambda name: name.replace("sip0", "sip1").replace("sip1.cube", "sip2.cube"), 1, 2, 10**6)
    for log in (apart, together):
        log.replicate(log.seal() - 1, [image])
    assert list(apart) == list(together)

    sizes = []
    for apart_ in (True, False):
        tracemalloc.start()
        try:
            kept = filled(apart_, 250)
            kept.seal()
            sizes.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
        del kept
    assert sizes[0] <= sizes[1], sizes


def test_adr0003_t113_flow_ids_no_column_can_hold_read_back_as_appended():
    """A flow id among the args past int64, or one given apart to a record whose args lead with another, stays
    what was appended once the log is compacted (each was a crash or a swapped id there)."""
    log = OpLog()
    log.append("dma", "sip0", "cube0.pe0.dma0", "big", 0, 64, 0, 0, 10, {"flow_id": 1 << 63})
    log.append("dma", "sip0", "cube0.pe0.dma0", "big", 0, 64, 0, 0, 10, {"flow_id": -1 << 63})
    log.append_pairs("ipcq_send", "sip0", "q", "both", 0, 64, 0, 10, 20, (("flow_id", 5),), flow_id=7)
    log.append_pairs("ipcq_send", "sip0", "q", "apart", 0, 64, 0, 10, 20, None, flow_id=3)
    appended = list(log)
    log.seal()
    assert list(log) == appended
    assert [r.args for r in appended] == [{"flow_id": 1 << 63}, {"flow_id": -1 << 63}, {"flow_id": 5}, {"flow_id": 3}]
