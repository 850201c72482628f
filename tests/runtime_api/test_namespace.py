"""ADR 0005: the fake torch namespace, host-read barriers, streams and events."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from kernbench.dtypes import DTypeError, resolve_dtype
from kernbench.runtime_api.tensor import core as tensor_module
from kernbench.runtime_api.device import DeviceError
from kernbench.runtime_api.tensor.core import HOST_READS
from tests.runtime_api.closed_forms import PS_PER_S, ceil_div, host_to_cube_path

# What each registered entry point is called with, for the barrier test.
CALLS = {
    "numpy": lambda t: t.numpy(),
    "__array__": lambda t: np.asarray(t),
    "item": lambda t: t[0].item(),
    "__float__": lambda t: float(t[0]),
    "__int__": lambda t: int(t[0]),
    "__bool__": lambda t: bool(t[0]),
    "tolist": lambda t: t.tolist(),
    "cpu": lambda t: t.cpu().numpy(),
    "__repr__": lambda t: repr(t),
    "copy_": lambda t: t._ctx_host_tensor(np.zeros(t.shape, dtype=t.dtype.numpy)).copy_(t).numpy(),
}


@pytest.mark.quick
def test_adr0005_t1_every_host_read_waits_for_pending_writes(session):
    torch = session.torch
    topology = session.ctx.topology
    assert set(CALLS) == set(HOST_READS), "a host-read entry point without a barrier test"
    n = 1 << 16
    for name, call in CALLS.items():
        x = torch.empty(n, dtype="f32", name=f"x_{name}")
        done_at = []

        def read(x=x, call=call):
            start = session.engine.now
            x.copy_(np.full(n, 3.0, dtype=np.float32), non_blocking=True)
            assert session.engine.now == start, "a non-blocking copy returns at once"
            result = call(x)
            done_at.append((start, session.engine.now, result))

        session.run(read)
        start, end, result = done_at[0]
        latency, bandwidth = host_to_cube_path(topology, 0, 0)
        assert end - start >= latency + ceil_div(n * 4 * PS_PER_S, bandwidth), name
        if name in ("numpy", "__array__", "cpu", "copy_"):
            assert (np.asarray(result) == 3.0).all(), name
        elif name in ("item", "__float__", "__int__"):
            assert result == 3
        elif name == "__bool__":
            assert result is True
        elif name == "__repr__":
            assert "3." in result


@pytest.mark.quick
def test_adr0005_t2_only_registered_methods_reach_device_bytes():
    """A new read path must go through `_read_to_host` and be registered with @host_read."""
    source = Path(inspect.getsourcefile(tensor_module)).read_text()
    tree = ast.parse(source)
    tensor_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    callers, decorated = set(), set()
    for node in tensor_class.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        on_self = {n.attr for n in ast.walk(node)
                   if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
        if node.name != "_read_to_host" and ("_read_to_host" in on_self or on_self & set(HOST_READS)):
            callers.add(node.name)
        if any(isinstance(d, ast.Name) and d.id == "host_read" for d in node.decorator_list):
            decorated.add(node.name)
    helpers_without_own_entry = {"_ctx_host_tensor", "_one_value"}
    assert callers - helpers_without_own_entry <= decorated, f"unregistered host reads: {callers - decorated}"
    assert decorated == set(HOST_READS)
    allowed_byte_access = {"_device_values", "_device_fill", "_device_gather", "_device_scatter"}
    touching = {node.name for node in tensor_class.body if isinstance(node, ast.FunctionDef)
                and any(isinstance(n, ast.Attribute) and n.attr == "storage"
                        and isinstance(n.value, ast.Attribute) and n.value.attr == "_allocation"
                        for n in ast.walk(node))}
    assert touching == allowed_byte_access


@pytest.mark.parametrize("spelling, name", [("f16", "f16"), ("float16", "f16"), ("half", "f16"), ("bf16", "bf16"),
                                            ("bfloat16", "bf16"), ("f32", "f32"), ("torch.float32", "f32"),
                                            ("i32", "i32"), ("int8", "i8")])
@pytest.mark.quick
def test_adr0005_t3_dtype_spellings_resolve_and_unknown_ones_list_the_valid(session, spelling, name):
    assert resolve_dtype(spelling).name == name
    assert resolve_dtype(getattr(session.torch, resolve_dtype(spelling).torch_name)).name == name
    with pytest.raises(DTypeError, match="expected one of f16, bf16"):
        resolve_dtype("f17")


@pytest.mark.quick
def test_adr0005_t4_factories_give_torch_values_and_seeded_randn_repeats(session):
    torch = session.torch
    results = {}

    def make():
        results["zeros"] = torch.zeros(2, 3, dtype=torch.float16).numpy()
        results["ones"] = torch.ones((2, 3)).numpy()
        results["full"] = torch.full((2,), 7, dtype="i32").numpy()
        results["arange"] = torch.arange(5).numpy()
        results["eye"] = torch.eye(2, 3, dtype=torch.float16).numpy()
        results["tensor"] = torch.tensor([[1.5, 2.5]], dtype="bf16").numpy()
        host = torch.from_numpy(np.array([1, 2], dtype=np.int64))
        results["host_device"] = host.device
        torch.manual_seed(3)
        results["randn_a"] = torch.randn(4, 4).numpy()
        torch.manual_seed(3)
        results["randn_b"] = torch.randn(4, 4).numpy()

    session.run(make)
    assert results["zeros"].dtype == np.float16 and (results["zeros"] == 0).all()
    assert results["ones"].dtype == np.float32 and (results["ones"] == 1).all()
    assert results["full"].tolist() == [7, 7]
    assert results["arange"].tolist() == [0, 1, 2, 3, 4] and results["arange"].dtype == np.int64
    np.testing.assert_array_equal(results["eye"], np.eye(2, 3, dtype=np.float16))
    assert results["tensor"].astype(np.float32).tolist() == [[1.5, 2.5]]
    assert str(results["host_device"]) == "cpu"
    np.testing.assert_array_equal(results["randn_a"], results["randn_b"])


@pytest.mark.quick
def test_adr0005_t5_device_module_tracks_device_per_rank(session):
    torch = session.torch
    seen = {}

    def worker(rank):
        torch.ahbm.set_device(rank)
        x = torch.ones(8, name=f"ones{rank}")
        seen[rank] = (torch.ahbm.current_device(), str(x.device), torch.ahbm.device_count())

    session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=3))
    n = session.ctx.topology.n_sips
    assert seen == {r: (r, f"ahbm:{r}", n) for r in range(3)}


@pytest.mark.quick
def test_adr0005_t6_event_elapsed_time_is_the_simulated_copy_time_in_ms(session):
    torch = session.torch
    topology = session.ctx.topology
    n = 1 << 18
    x = torch.empty(n, dtype="f32")
    elapsed = []

    def timed():
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
        x.copy_(np.zeros(n, dtype=np.float32), non_blocking=True)
        end.record()
        end.synchronize()
        elapsed.append(start.elapsed_time(end))

    session.run(timed)
    latency, bandwidth = host_to_cube_path(topology, 0, 0)
    assert elapsed == [(latency + ceil_div(n * 4 * PS_PER_S, bandwidth)) / 10**9]


def test_adr0005_t7_device_to_device_copy_across_sips_crosses_the_inter_sip_route(session):
    torch = session.torch
    topology = session.ctx.topology
    n = 1 << 16
    a = torch.empty(n, dtype="f32", device="ahbm:0")
    b = torch.empty(n, dtype="f32", device="ahbm:2")
    times = []

    def copy_across():
        a.copy_(np.arange(n, dtype=np.float32))
        start = session.engine.now
        b.copy_(a)
        times.append(session.engine.now - start)
        times.append(b.numpy())

    session.run(copy_across)
    links = list(topology.sip_route(0, 2))
    hbm = topology.cube.hbm
    latency = 2 * hbm.latency_ps + sum(link.latency_ps for link in links)
    bottleneck = min([hbm.bandwidth_bytes_per_s] + [link.bandwidth_bytes_per_s for link in links])
    assert times[0] == latency + ceil_div(n * 4 * PS_PER_S, bottleneck)
    np.testing.assert_array_equal(times[1], np.arange(n, dtype=np.float32))


def test_adr0005_t8_bad_devices_and_shapes_are_one_clear_message(session):
    torch = session.torch
    with pytest.raises(DeviceError, match="device ahbm:9 does not exist: this machine has ahbm:0 .. ahbm:3"):
        torch.zeros(2, device="ahbm:9")
    with pytest.raises(DeviceError, match="unknown device 'gpu'"):
        torch.zeros(2, device="gpu")
    x = torch.empty(4)
    with pytest.raises(Exception, match=r"cannot copy shape \(3,\) into"):
        x.copy_(np.zeros(3, dtype=np.float32))
