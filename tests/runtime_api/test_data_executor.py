"""ADR 0009: when data effects happen, and reads that race writes (hazards)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.cli import main
from kernbench.kernels.library.matmul import matmul
from kernbench.kernels.library.vector_add import add
from kernbench.machine.data_executor import DataHazard, Region, _common_bytes
from kernbench.session import Session

BLOCK = 4096


@triton.jit
def publish_then_read(buf_ptr, out_ptr, other_ptr, BLOCK: tl.constexpr, READER_WAITS: tl.constexpr):
    """Program 0 stores ones into buf; program 1 copies buf to out, first loading `other` when READER_WAITS."""
    offsets = tl.arange(0, BLOCK)
    if tl.program_id(0) == 0:
        tl.store(buf_ptr + offsets, tl.full((BLOCK,), 1.0, tl.float32))
    else:
        if READER_WAITS:
            tl.load(other_ptr + offsets)
        tl.store(out_ptr + offsets, tl.load(buf_ptr + offsets))


def _race(session, reader_waits: bool):
    """Run publish_then_read; return (out values, buf's address, program 0's store, program 1's load of buf)."""
    seen = {}

    def bench(torch):
        buf, out, other = torch.zeros(BLOCK, name="buf"), torch.empty(BLOCK, name="out"), torch.zeros(BLOCK, name="other")
        seen["buf"] = buf.__kernbench_pointer__()[0]
        torch.ahbm.synchronize()
        publish_then_read[(2,)](buf, out, other, BLOCK=BLOCK, READER_WAITS=reader_waits)
        seen["out"] = out.numpy()

    session.run(bench, session.torch)
    ops = session.ctx.machine.oplog.select(kind="dma", label="publish_then_read")
    store = next(op for op in ops if op.program == 0)
    load = [op for op in ops if op.program == 1 and op.args["dst"].endswith("tcm")][-1]
    return seen["out"], seen["buf"], store, load


@pytest.mark.quick
def test_adr0009_t1_a_load_sees_memory_as_of_its_start_and_a_store_lands_at_its_end():
    session = Session("default")
    out, _, store, load = _race(session, reader_waits=False)
    assert load.start < store.end
    assert (out == 0).all(), "a load that starts before the store ends sees the old bytes"

    session = Session("default")
    out, _, store, load = _race(session, reader_waits=True)
    assert load.start >= store.end
    assert (out == 1).all(), "a load that starts after the store ended sees the new bytes"
    assert session.ctx.hazards == []


@pytest.mark.quick
def test_adr0009_t2_a_read_racing_another_programs_write_is_reported_with_both_ops():
    session = Session("default")
    _, address, store, load = _race(session, reader_waits=False)
    (hazard,) = session.ctx.hazards
    assert (hazard.tensor, hazard.sip, hazard.address, hazard.offset, hazard.nbytes) == ("buf", 0, address, 0, BLOCK * 4)
    assert (hazard.reader.label, hazard.reader.program, hazard.reader.start, hazard.reader.end) == \
        ("publish_then_read", 1, load.start, load.end)
    assert (hazard.writer.label, hazard.writer.program, hazard.writer.start, hazard.writer.end) == \
        ("publish_then_read", 0, store.start, store.end)
    assert hazard.reader.unit == f"{load.device}.{load.unit}" and hazard.writer.unit == f"{store.device}.{store.unit}"
    message = str(hazard)
    for part in ("tensor 'buf'", f"bytes [0, {BLOCK * 4})", "kernel 'publish_then_read' program 1",
                 "kernel 'publish_then_read' program 0", f"{store.start}-{store.end} ps"):
        assert part in message


@pytest.mark.quick
def test_adr0009_t3_well_formed_kernels_report_no_hazard():
    session = Session("default")

    def bench(torch):
        spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
        x, y, out = (torch.randn(1 << 14, dp=spread, name=n) for n in ("x", "y", "out"))
        add(x, y, out, block_size=256)
        add(out, y, x, block_size=256)
        rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
        a = torch.randn(128, 64, dtype="f16", dp=rows, name="A")
        b = torch.randn(64, 128, dtype="f16", name="B")
        c = torch.empty(128, 128, dtype="f16", dp=rows, name="C")
        matmul(a, b, c, block_m=32, block_n=32, block_k=32)
        torch.ahbm.synchronize()

    session.run(bench, session.torch)
    assert session.ctx.hazards == []


@pytest.mark.quick
def test_adr0009_t4_strict_mode_raises_the_hazard():
    with pytest.raises(DataHazard, match="data hazard on tensor 'buf'.*program 1.*program 0"):
        _race(Session("default", strict_hazards=True), reader_waits=False)


@pytest.mark.quick
def test_adr0009_t5_hazards_are_in_the_report_and_strict_runs_stop_with_one_message(tmp_path, capsys):
    bench = tmp_path / "racy.py"
    bench.write_text(
        "from tests.runtime_api.test_data_executor import BLOCK, publish_then_read\n\n"
        "def run(torch):\n"
        "    buf, out = torch.zeros(BLOCK, name='buf'), torch.empty(BLOCK, name='out')\n"
        "    publish_then_read[(2,)](buf, out, buf, BLOCK=BLOCK, READER_WAITS=False)\n")
    report = tmp_path / "report.json"
    assert main(["run", str(bench), "--json", str(report)]) == 0
    assert "hazard: data hazard on tensor 'buf'" in capsys.readouterr().out
    (entry,) = json.loads(report.read_text())["hazards"]
    assert (entry["tensor"], entry["reader"]["program"], entry["writer"]["program"]) == ("buf", 1, 0)

    assert main(["run", str(bench), "--strict-hazards"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernbench: error: data hazard on tensor 'buf'") and err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.quick
def test_adr0009_t6_reads_are_checked_against_exact_elements_not_bounding_ranges():
    """Programs writing every other element while others read the elements in between race on nothing."""
    session = Session("default")

    def bench(torch):
        x = torch.zeros(2 * BLOCK, name="x")
        interleaved[(2,)](x, BLOCK=BLOCK)
        torch.ahbm.synchronize()

    session.run(bench, session.torch)
    assert session.ctx.hazards == []


@triton.jit
def interleaved(x_ptr, BLOCK: tl.constexpr):
    """Program 0 writes the even elements; program 1 reads the odd ones into the same place."""
    pid = tl.program_id(0)
    evens = tl.arange(0, BLOCK) * 2
    if pid == 0:
        tl.store(x_ptr + evens, tl.full((BLOCK,), 1.0, tl.float32))
    else:
        odd = tl.load(x_ptr + evens + 1)
        tl.store(x_ptr + evens + 1, odd + 1)



def test_adr0009_t11_a_copy_on_another_stream_racing_a_kernel_is_reported():
    """A copy into `x` on a second stream does not wait for a kernel still reading `x` (no event orders them)."""
    session = Session("default")
    n = 1 << 16

    def bench(torch):
        x, y, out = (torch.ones(n, name=name) for name in ("x", "y", "out"))
        torch.ahbm.synchronize()
        add(x, y, out, block_size=1024)
        with torch.ahbm.stream(torch.ahbm.Stream()):
            x.copy_(torch.zeros(n, device="cpu"), non_blocking=True)
        torch.ahbm.synchronize()

    session.run(bench, session.torch)
    assert session.ctx.hazards, "the kernel's loads of x overlap the copy's write into x"
    hazard = session.ctx.hazards[0]
    assert hazard.tensor == "x"
    assert hazard.reader.label == "add_kernel" and hazard.writer.label == "copy host -> x"


def _bytes_of(elements, itemsize: int) -> set[int]:
    return {element * itemsize + byte for element in elements for byte in range(itemsize)}


# A run of elements, or element indices in any order, repeats included.
_ELEMENTS = st.one_of(
    st.tuples(st.integers(0, 64), st.integers(0, 64)).map(lambda run: slice(run[0], run[0] + run[1])),
    st.lists(st.integers(0, 96), max_size=40).map(lambda picked: np.array(picked, dtype=np.int64)),
)


@settings(max_examples=150, deadline=None)
@given(_ELEMENTS, _ELEMENTS, st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]))
def test_adr0009_t12_two_regions_share_the_bytes_a_byte_by_byte_comparison_finds(read, written, itemsize,
                                                                                   written_itemsize):
    """The first to the last byte two regions both hold (runs as slices, or element indices in any order), as
    comparing their sets of bytes finds them."""
    def elements(chosen):
        return range(chosen.start, chosen.stop) if isinstance(chosen, slice) else chosen.tolist()

    shared = _bytes_of(elements(read), itemsize) & _bytes_of(elements(written), written_itemsize)
    expected = (min(shared), max(shared) + 1 - min(shared)) if shared else None
    assert _common_bytes(Region(None, read, itemsize), Region(None, written, written_itemsize)) == expected
