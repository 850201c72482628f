"""ADR 0005, devices: torch.device spellings, the CUDA names, the default device, float8, .to/.cuda/.cpu."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernbench.runtime_api.device import Device, DeviceError
from kernbench.runtime_api.tensor.moves import cuda_device, to_device
from tests.runtime_api.closed_forms import PS_PER_S, ceil_div


@pytest.mark.parametrize("spelling", [("ahbm:1",), ("ahbm", 1), ("cuda:1",), ("cuda", 1), (1,),
                                      (Device("cuda:1"),)])
def test_adr0005_t9_device_spellings_name_the_same_device(session, spelling):
    device = session.torch.device(*spelling)
    assert (device.type, device.index) == ("ahbm", 1)
    assert device == session.torch.device("ahbm", 1)
    assert str(device) == "ahbm:1"


@pytest.mark.parametrize("spelling", ["ahbm:1", "cuda:1", ("cuda", 1), 1])
def test_adr0005_t10_a_factory_puts_the_tensor_on_the_device_it_names(session, spelling):
    torch = session.torch
    n = 1024
    device = torch.device(*spelling) if isinstance(spelling, tuple) else spelling
    before = [torch.ahbm.memory_allocated(d) for d in range(torch.ahbm.device_count())]
    x = torch.empty(n, dtype=torch.float32, device=device)
    after = [torch.ahbm.memory_allocated(d) for d in range(torch.ahbm.device_count())]
    assert x.device == torch.device("ahbm", 1)
    assert [a - b for a, b in zip(after, before)] == [n * 4 if d == 1 else 0 for d in range(len(before))]


@pytest.mark.parametrize("spelling, named", [("ahbm:{n}", "ahbm:{n}"), ("cuda:{n}", "cuda:{n} (an alias of ahbm:{n})"),
                                             ("tpu", "'tpu'"), ("gpu:0", "'gpu:0'")])
def test_adr0005_t11_a_device_that_does_not_exist_is_one_line_naming_it_and_the_valid_ones(session, spelling,
                                                                                             named):
    n = session.ctx.topology.n_sips
    with pytest.raises(DeviceError) as caught:
        session.torch.zeros(2, device=spelling.format(n=n))
    message = str(caught.value)
    assert "\n" not in message
    assert named.format(n=n) in message
    assert f"ahbm:0 .. ahbm:{n - 1}" in message and "cpu" in message


def test_adr0005_t12_torch_cuda_is_torch_ahbm(session):
    torch = session.torch
    seen = {}

    def worker(rank):
        torch.cuda.set_device(rank)
        seen[rank] = (torch.ahbm.current_device(), torch.zeros(1).device)

    assert torch.cuda is torch.ahbm
    session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=2))
    assert seen == {r: (r, torch.device("ahbm", r)) for r in range(2)}


def test_adr0005_t13_set_default_device_is_per_rank(session):
    torch = session.torch
    world = session.ctx.topology.n_sips
    seen = {}

    def worker(rank):
        torch.set_default_device(f"cuda:{world - 1 - rank}")
        seen[rank] = (torch.zeros(1).device, torch.get_default_device(), torch.ahbm.current_device())

    session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=world))
    assert seen == {r: (torch.device("ahbm", world - 1 - r),) * 2 + (0,) for r in range(world)}


def test_adr0005_t14_a_cpu_default_device_makes_host_tensors_until_reset(session):
    torch = session.torch
    seen = []

    def bench():
        torch.set_default_device("cpu")
        seen.append((torch.zeros(1).device, torch.get_default_device()))
        torch.set_default_device(None)
        torch.ahbm.set_device(2)
        seen.append((torch.zeros(1).device, torch.get_default_device()))

    session.run(bench)
    assert seen == [(torch.device("cpu"),) * 2, (torch.device("ahbm", 2),) * 2]


@pytest.mark.parametrize("name, numpy_type", [("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
                                              ("float8_e5m2", ml_dtypes.float8_e5m2)])
def test_adr0005_t15_float8_tensors_hold_ml_dtypes_values(session, name, numpy_type):
    torch = session.torch
    dtype = getattr(torch, name)
    values = np.array([0.1, -1.5, 3.3, 240.0], dtype=np.float32)
    expected = values.astype(numpy_type)
    x = torch.tensor(values, dtype=dtype)
    assert dtype.itemsize == np.dtype(numpy_type).itemsize == 1 and dtype.is_floating_point
    assert x.nbytes == values.size
    got = x.numpy()
    assert got.dtype == np.dtype(numpy_type)
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))


@pytest.mark.parametrize("form", ["dtype", "dtype=", "device, dtype", "other tensor"])
def test_adr0005_t16_to_converts_dtype_in_each_of_torchs_forms(session, form):
    torch = session.torch
    values = np.array([1.25, -2.5, 3.0, 1e-3], dtype=np.float32)
    x = torch.tensor(values)
    other = torch.zeros(1, dtype=torch.float16)
    call = {"dtype": lambda: to_device(x, torch.float16),
            "dtype=": lambda: to_device(x, dtype=torch.float16),
            "device, dtype": lambda: to_device(x, "cuda", torch.float16),
            "other tensor": lambda: to_device(x, other)}[form]
    y = call()
    assert (y.dtype, y.device) == (torch.float16, x.device)
    np.testing.assert_array_equal(y.numpy(), values.astype(np.float16))


def test_adr0005_t17_to_returns_the_tensor_itself_when_nothing_changes(session):
    torch = session.torch
    x = torch.ones(4)
    assert to_device(x, x.device) is x
    assert to_device(x, torch.float32) is x
    assert to_device(x, "cuda:0", torch.float32) is x
    copied = to_device(x, torch.float32, False, True)  # to(dtype, non_blocking, copy) positionally
    assert copied is not x and copied.data_ptr() != x.data_ptr()
    np.testing.assert_array_equal(copied.numpy(), x.numpy())


def test_adr0005_t18_to_another_sip_returns_at_once_and_takes_the_inter_sip_copy_time(session):
    torch = session.torch
    topology = session.ctx.topology
    n = 1 << 16
    source = torch.arange(n, dtype=torch.float32, device="ahbm:0")
    times = []

    def move():
        torch.ahbm.synchronize(0)
        start = session.engine.now
        moved = to_device(source, "cuda:2")
        times.append(session.engine.now - start)
        torch.ahbm.synchronize(2)
        times.append(session.engine.now - start)
        times.append(moved)

    session.run(move)
    links = list(topology.sip_route(0, 2))
    hbm = topology.cube.hbm
    latency = 2 * hbm.latency_ps + sum(link.latency_ps for link in links)
    bottleneck = min([hbm.bandwidth_bytes_per_s] + [link.bandwidth_bytes_per_s for link in links])
    returned_after, landed_after, moved = times
    assert returned_after == 0
    assert landed_after == latency + ceil_div(n * 4 * PS_PER_S, bottleneck)
    assert moved.device == torch.device("ahbm", 2)
    np.testing.assert_array_equal(moved.numpy(), np.arange(n, dtype=np.float32))


def test_adr0005_t19_cuda_goes_to_the_current_device_and_cpu_comes_back(session):
    torch = session.torch
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    seen = {}

    def bench():
        host = torch.from_numpy(values)
        torch.ahbm.set_device(3)
        on_current, on_one = cuda_device(host), cuda_device(host, 1)
        seen["devices"] = (on_current.device, on_one.device, to_device(on_one, "cpu").device)
        seen["values"] = to_device(on_one, "cpu").numpy()
        with pytest.raises(DeviceError, match="not a device of the accelerator"):
            cuda_device(host, "cpu")

    session.run(bench)
    assert seen["devices"] == (torch.device("ahbm", 3), torch.device("ahbm", 1), torch.device("cpu"))
    np.testing.assert_array_equal(seen["values"], values)


def test_adr0005_t36_a_cuda_device_block_sets_the_current_device_inside_it(session):
    torch = session.torch
    seen = []

    def bench():
        torch.cuda.set_device(1)
        with torch.cuda.device(3):
            seen.append((torch.cuda.current_device(), torch.zeros(1).device))
        seen.append((torch.cuda.current_device(), torch.zeros(1).device))

    session.run(bench)
    assert seen == [(3, torch.device("ahbm", 3)), (1, torch.device("ahbm", 1))]


def test_adr0005_t39_torch_accelerator_answers_for_the_simulated_device(session):
    torch = session.torch
    seen = []

    def bench():
        accelerator = torch.accelerator
        accelerator.set_device_index(2)
        seen.extend([accelerator.is_available(), accelerator.device_count(), accelerator.current_accelerator().type,
                     accelerator.current_device_index(), torch.cuda.current_device()])
        accelerator.synchronize()

    session.run(bench)
    assert seen == [True, session.ctx.topology.n_sips, "ahbm", 2, 2]


@pytest.mark.parametrize("data, expected", [
    (np.zeros(3, np.float16), "float16"), (np.zeros(3, np.int32), "int32"), (np.zeros(3, np.float64), "float64"),
    (np.float16(1.5), "float16"), ([1.5, 2.0], "float32"), ([1, 2], "int64"), ([True, False], "bool"), (2.5, "float32"),
])
def test_adr0005_t37_tensor_keeps_an_arrays_dtype_and_gives_numbers_and_lists_the_defaults(session, data, expected):
    torch = session.torch
    made = torch.tensor(data)
    assert made.dtype == getattr(torch, expected)
    assert torch.tensor(made).dtype == made.dtype


def test_adr0005_t40_a_device_is_a_context_manager_for_the_default_device_nested_and_per_rank(session):
    """`with torch.device(d):` makes factories without `device=` put their tensors on d for the block, blocks nest,
    leaving one restores the default as it was set (None: the current device, which then follows set_device),
    and each rank's blocks are its own."""
    torch = session.torch
    seen = {}

    def worker(rank):
        with torch.device("cpu"):
            outer = torch.zeros(1).device
            with torch.device(f"cuda:{1 - rank}") as inner:
                nested = (torch.ones(2).device, inner)
            back = torch.zeros(1).device
        torch.ahbm.set_device(rank + 2)
        seen[rank] = (outer, nested, back, torch.zeros(1).device)

    session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=2))
    for rank in range(2):
        other = torch.device("ahbm", 1 - rank)
        assert seen[rank] == (torch.device("cpu"), (other, other), torch.device("cpu"), torch.device("ahbm", rank + 2))
