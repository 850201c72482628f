"""ADR 0013: storage decoupled from host memory — capacity first, lazy backing, an honest timing-only mode."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.kernels.library.vector_add import add_kernel
from kernbench.machine import OutOfMemoryError
from kernbench.machine.storage import CHUNK_BYTES, HostMemoryError, Storage
from kernbench.policy import DPPolicy
from kernbench.report.progress import ProgressLine
from kernbench.runtime_api.errors import ValuesNotComputed
from kernbench.runtime_api.tensor.core import HOST_READS
from kernbench.session import Session
from tests.cli import REPO_ROOT, run_kernbench_in_process

# Far beyond any HBM and any host: 4 PiB of f32.
HUGE = (1 << 40, 1 << 10)
FACTORIES = {
    "empty": lambda torch: torch.empty(HUGE),
    "zeros": lambda torch: torch.zeros(HUGE),
    "ones": lambda torch: torch.ones(HUGE),
    "full": lambda torch: torch.full(HUGE, 2.5),
    "randn": lambda torch: torch.randn(HUGE),
    "rand": lambda torch: torch.rand(HUGE),
    "arange": lambda torch: torch.arange(1 << 50),
    "eye": lambda torch: torch.eye(1 << 25),
    "zeros_like": lambda torch: torch.zeros_like(torch.empty(HUGE)),
}


@pytest.mark.parametrize("factory", sorted(FACTORIES))
@pytest.mark.parametrize("timing_only", [False, True])
def test_adr0013_t1_a_tensor_beyond_hbm_is_the_simulated_out_of_memory_error(factory, timing_only):
    """Capacity is checked before any host memory: numpy would fail on 4 PiB, the simulator answers first."""
    session = Session("default", timing_only=timing_only)
    with pytest.raises(OutOfMemoryError, match=r"^sip0: cannot allocate tensor .* free HBM per cube: cube 0: 16\.00 GiB"):
        FACTORIES[factory](session.torch)


# One storage of 3½ chunks: fills and writes that cover whole chunks, straddle them and sit inside one.
STORAGE_BYTES = 3 * CHUNK_BYTES + CHUNK_BYTES // 2
spans = st.tuples(st.integers(0, STORAGE_BYTES // 4), st.integers(0, STORAGE_BYTES // 4)).map(sorted)
operations = st.lists(st.tuples(st.sampled_from(["fill", "write", "read"]), spans,
                                st.sampled_from([0.0, 1.0, -3.5])), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(operations)
@pytest.mark.quick
def test_adr0013_t2_lazy_fills_and_writes_read_back_as_a_plain_array_would(ops):
    storage = Storage(STORAGE_BYTES, "t")
    reference = np.zeros(STORAGE_BYTES // 4, dtype=np.float32)
    for kind, (lo, hi), value in ops:
        if kind == "fill":
            storage.fill(lo * 4, hi * 4, np.float32(value))
            reference[lo:hi] = value
        elif kind == "write":
            values = np.arange(hi - lo, dtype=np.float32) + value
            storage.typed(np.float32, slice(lo, hi))[lo:hi] = values
            reference[lo:hi] = values
        else:
            assert np.array_equal(storage.typed(np.float32, slice(lo, hi))[lo:hi], reference[lo:hi])
    indices = np.arange(0, reference.size, 977)
    assert np.array_equal(storage.typed(np.float32, indices)[indices], reference[indices])
    assert np.array_equal(storage.typed(np.float32), reference)


def _peak_rss_growth_mib(script: str) -> int:
    """Run `script` in a fresh interpreter; it prints the memory it measured itself as JSON."""
    prologue = textwrap.dedent("""
        import json, resource
        from kernbench.session import Session
        def rss_mib():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    """)
    result = subprocess.run([sys.executable, "-c", prologue + textwrap.dedent(script)], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])["growth_mib"]


@pytest.mark.parametrize("timing_only", [False, True])
def test_adr0013_t3_a_tensor_larger_than_host_memory_costs_no_host_memory(tmp_path, timing_only):
    """64 GiB filled with a constant on one SIP (this host has less), then a kernel-sized write into it."""
    topology = tmp_path / "big_cubes.yaml"
    shipped = (REPO_ROOT / "kernbench/configs/topology/default.yaml").read_text()
    topology.write_text(shipped.replace("capacity_gib: 16", "capacity_gib: 80"))
    growth = _peak_rss_growth_mib(f"""
        session = Session({str(topology)!r}, timing_only={timing_only})
        def bench(torch):
            from kernbench.kernels.library.vector_add import add_kernel
            before = rss_mib()
            big = torch.full(((64 << 30) // 2,), 1.5, dtype=torch.float16)
            small = torch.ones(1 << 16, dtype=torch.float16)
            add_kernel[(small.numel() // 4096,)](small, small, big, small.numel(), BLOCK_SIZE=4096)
            torch.ahbm.synchronize()
            return before
        before = session.run(bench, session.torch)
        print(json.dumps({{"growth_mib": rss_mib() - before}}))
    """)
    assert growth < 256


@pytest.mark.quick
def test_adr0013_t4_a_lazily_filled_tensor_reads_and_copies_as_its_constant(session):
    """Chunks kept as a fill value are written out where touched: by a device copy, a host copy, a read."""
    torch = session.torch
    filled = torch.full((4 * CHUNK_BYTES // 4 + 3,), 7.0, dtype=torch.float32)
    target = torch.zeros(filled.shape, dtype=torch.float32)
    target.copy_(filled)
    head = np.arange(1000, dtype=np.float32)
    partial = torch.full(filled.shape, -1.0, dtype=torch.float32)
    partial.copy_(np.concatenate([head, np.full(filled.numel() - head.size, -1.0, dtype=np.float32)]))
    assert np.all(target.numpy() == 7.0)
    assert np.all(filled.numpy() == 7.0)
    assert np.array_equal(partial.numpy()[:1000], head) and np.all(partial.numpy()[1000:] == -1.0)


@pytest.mark.quick
def test_adr0013_t5_timing_only_keeps_no_storage_and_no_values():
    session = Session("default", timing_only=True)
    torch = session.torch
    x = torch.randn(256, 256, dtype=torch.float16, dp=DPPolicy(cube="column_wise", num_cubes=4))
    torch.ahbm.synchronize()
    assert x.allocation.storage is None
    assert torch.is_timing_only() is True
    assert Session("default").torch.is_timing_only() is False


READS = {
    "numpy": lambda t: t.numpy(), "__array__": lambda t: np.asarray(t),
    "item": lambda t: t.item(), "tolist": lambda t: t.tolist(),
    "__float__": lambda t: float(t), "__int__": lambda t: int(t), "__bool__": lambda t: bool(t),
    "cpu": lambda t: t.cpu(), "__repr__": lambda t: repr(t),
    "copy_": lambda t: _host_copy(t),
}


def _host_copy(tensor):
    host = tensor._ctx_host_tensor(np.zeros(tensor.shape, dtype=tensor.dtype.numpy))
    return host.copy_(tensor)


@pytest.mark.parametrize("call", sorted(HOST_READS))
@pytest.mark.quick
def test_adr0013_t6_every_host_read_in_timing_only_is_one_error_naming_tensor_and_call(call):
    session = Session("default", timing_only=True)
    x = session.torch.ones(1, dtype=session.torch.float32, name="x")
    with pytest.raises(ValuesNotComputed, match=r"^values are not computed with --timing-only: tensor 'x' \(ahbm:0\) "
                                                r"read by .+; check torch\.is_timing_only\(\) to skip it$"):
        READS[call](x)


@pytest.mark.quick
def test_adr0013_t7_host_values_beyond_the_host_are_one_line():
    session = Session("default")
    with pytest.raises(HostMemoryError, match=r"^tensor 'host\d+': the host cannot hold its values .* run with --timing-only"):
        session.torch.empty(HUGE, device="cpu")


def test_adr0013_t8_kernbench_run_timing_only_host_read_exits_2_with_one_line(tmp_path):
    bench = tmp_path / "reads.py"
    bench.write_text("def run(torch):\n    x = torch.ones(4, name='x')\n    print(x.tolist())\n")
    result = run_kernbench_in_process("run", str(bench), "--timing-only", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("kernbench: error: values are not computed with --timing-only: tensor 'x' (ahbm:0) "
                             "read by tolist(); check torch.is_timing_only() to skip it\n")


@pytest.mark.quick
def test_adr0013_t9_progress_line_reports_simulated_time_events_and_programs():
    session = Session("default")
    stream = io.StringIO()

    def bench(torch):
        x = torch.ones(1 << 16, dtype=torch.float32)
        add_kernel[(16,)](x, x, x, x.numel(), BLOCK_SIZE=4096)
        torch.ahbm.synchronize()
        time.sleep(0.2)

    with ProgressLine(session.ctx, stream, interval_s=0.02):
        session.run(bench, session.torch)
    last = stream.getvalue().splitlines()[-1]
    assert re.fullmatch(r"\[kernbench\] simulated \d+\.\d{3} [mun]?s, [\d,]+ events, 16 kernel programs done, "
                        r"wall \d+\.\d s", last), last
