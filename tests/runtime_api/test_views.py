"""ADR 0015: tensors are views of a storage, with PyTorch's view rules and aliasing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.ccl.errors import CollectiveError
from kernbench.kernels.library.vector_add import add_kernel
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.layout.views import Layout, basic_index, permute, view
from kernbench.session import Session


def _strided(layout: Layout, storage: np.ndarray) -> np.ndarray:
    """What numpy makes of the same layout over the same storage: the oracle for every view rule."""
    return np.lib.stride_tricks.as_strided(storage[layout.offset:], layout.shape,
                                           tuple(s * storage.itemsize for s in layout.strides))


@st.composite
def permuted_slices(draw):
    """A row-major tensor permuted and sliced with steps: a layout torch can reach with views."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    layout = permute(Layout.contiguous(shape), draw(st.permutations(range(len(shape)))))
    key = tuple(slice(draw(st.integers(0, n - 1)), None, draw(st.integers(1, 2))) for n in layout.shape)
    layout = basic_index(layout, key)
    sizes, rest = [], layout.numel
    for factor in draw(st.lists(st.integers(1, 4), max_size=3)):
        if rest % factor == 0:
            sizes.append(factor)
            rest //= factor
    sizes.append(rest)
    draw(st.randoms()).shuffle(sizes)
    return shape, layout, tuple(sizes)


def _reshapes_without_copy(array: np.ndarray, shape: tuple[int, ...]) -> bool:
    """Whether numpy reshapes `array` to `shape` without moving data (it refuses exactly when it would have to)."""
    try:
        np.reshape(array, shape, copy=False)  # numpy >= 2.1
        return True
    except ValueError:
        return False
    except TypeError:  # an older numpy: no `copy=`, but assigning `shape` refuses the same way (deprecated in 2.5)
        try:
            array.view().shape = shape
            return True
        except AttributeError:
            return False


@settings(max_examples=200, deadline=None)
@given(permuted_slices())
def test_adr0015_t1_view_succeeds_exactly_where_no_copy_is_needed(case):
    shape, layout, target = case
    storage = np.arange(int(np.prod(shape)), dtype=np.int64)
    viewed = _strided(layout, storage)
    assert np.array_equal(layout.indices(), viewed)
    possible = _reshapes_without_copy(viewed, target)
    result = view(layout, target)
    assert (result is not None) == possible
    if result is not None:
        assert np.array_equal(result.indices(), viewed.reshape(target))


# Each step: (name, how kernbench does it, how numpy does it), applicable to any array of >= 2 dims.
STEPS = {
    "transpose": (lambda t: t.transpose(0, 1), lambda a: a.swapaxes(0, 1)),
    "T": (lambda t: t.T, lambda a: a.T),
    "narrow": (lambda t: t.narrow(1, 1, t.shape[1] - 1), lambda a: a[:, 1:]),
    "step": (lambda t: t[::2], lambda a: a[::2]),
    "select": (lambda t: t[-1], lambda a: a[-1]),
    "unsqueeze": (lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    "ellipsis": (lambda t: t[..., 1:], lambda a: a[..., 1:]),
    "chunk": (lambda t: t.chunk(2, dim=1)[-1], lambda a: a[:, -(-a.shape[1] // 2):]),
}


def _chain(draw_steps, tensor, array):
    for name in draw_steps:
        if tensor.ndim < 2 or 0 in tensor.shape or tensor.shape[1] < 2:
            break
        ours, theirs = STEPS[name]
        tensor, array = ours(tensor), theirs(array)
    return tensor, array


@pytest.mark.parametrize("device", ["ahbm:0", "cpu"])
@settings(max_examples=25, deadline=None)
@given(rows=st.integers(2, 6), cols=st.integers(2, 8),
       steps=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4), fill=st.floats(-4, 4, width=32))
@pytest.mark.quick
def test_adr0015_t2_reads_and_writes_through_views_alias_as_numpy_views_do(device, rows, cols, steps, fill):
    session = Session("default")
    reference = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)

    def bench(torch):
        base = torch.tensor(reference, dtype=torch.float32, device=device)
        viewed, expected = _chain(steps, base, reference.copy())
        assert viewed.shape == expected.shape
        assert np.array_equal(viewed.numpy(), expected)
        aliased = reference.copy()
        _, target = _chain(steps, base, aliased)
        target[...] = fill
        viewed.fill_(fill)
        assert np.array_equal(base.numpy(), aliased)

    session.run(bench, session.torch)


@pytest.mark.quick
def test_adr0015_t3_strides_offsets_and_pointers_are_torchs(session):
    x = session.torch.empty(4, 6, dtype=session.torch.float32)
    assert x.stride() == (6, 1) and x.T.stride() == (1, 6) and x.mT.shape == (6, 4)
    part = x[1:, 2:]
    assert part.storage_offset() == 8 and part.data_ptr() - x.data_ptr() == 8 * 4
    assert not part.is_contiguous() and x[1].is_contiguous() and x.unsqueeze(0).stride() == (24, 6, 1)
    assert x.expand(3, 4, 6).stride() == (0, 6, 1)
    assert [t.shape for t in x.split([2, 4], dim=1)] == [(4, 2), (4, 4)]
    assert [t.storage_offset() for t in x.unbind(0)] == [0, 6, 12, 18]


@pytest.mark.quick
def test_adr0015_t4_view_refuses_what_needs_a_copy_and_reshape_copies(session):
    torch = session.torch
    x = torch.arange(24, dtype=torch.float32).view(4, 6)
    with pytest.raises(TensorError, match=r"^view size is not compatible .* use \.reshape\(\.\.\.\) instead$"):
        x.T.view(24)
    flat = x.T.reshape(24)
    assert flat.is_contiguous() and flat.allocation is not x.allocation
    assert np.array_equal(flat.numpy(), np.arange(24, dtype=np.float32).reshape(4, 6).T.reshape(24))
    assert x.reshape(2, 12).allocation is x.allocation
    with pytest.raises(TensorError, match="shape .* is invalid for input of size 24"):
        x.view(5, -1)


@pytest.mark.quick
def test_adr0015_t5_advanced_indexing_gathers_and_scatters_as_numpy(session):
    torch = session.torch
    reference = np.arange(30, dtype=np.float32).reshape(5, 6)
    x = torch.tensor(reference)
    assert np.array_equal(x[[0, 3, 3]].numpy(), reference[[0, 3, 3]])
    mask = reference % 4 == 0
    assert np.array_equal(x[mask].numpy(), reference[mask])
    assert np.array_equal(x[1:, [5, 0]].numpy(), reference[1:, [5, 0]])
    x[[1, 4], 2] = torch.tensor([-1.0, -2.0])
    x[torch.tensor(mask)] = 0.5
    expected = reference.copy()
    expected[[1, 4], 2] = [-1.0, -2.0]
    expected[mask] = 0.5
    assert np.array_equal(x.numpy(), expected)


@pytest.mark.quick
def test_adr0015_t6_a_kernel_given_a_view_reads_and_writes_only_the_view(session):
    torch = session.torch
    x = torch.zeros(4096, dtype=torch.float32)
    ones = torch.ones(1024, dtype=torch.float32)
    middle = x[1024:2048]
    add_kernel[(1,)](ones, ones, middle, 1024, BLOCK_SIZE=1024)
    values = x.numpy()
    assert np.all(values[1024:2048] == 2.0) and not values[:1024].any() and not values[2048:].any()


@pytest.mark.quick
def test_adr0015_t7_collectives_take_contiguous_views_and_refuse_strided_ones():
    session = Session("default")
    results = {}

    def worker(rank, torch):
        torch.ahbm.set_device(rank)
        x = torch.zeros(3, 64, dtype=torch.float32)
        row = x[1]
        row.fill_(rank + 1.0)
        torch.distributed.all_reduce(row)
        results[rank] = x.numpy()
        with pytest.raises(CollectiveError, match=r"^all_reduce: tensor '.*' is not contiguous .* pass tensor\.contiguous\(\)"):
            torch.distributed.all_reduce(x[:, 0])

    def bench(torch):
        torch.distributed.init_process_group(backend="ahbm")
        torch.multiprocessing.spawn(worker, args=(torch,), nprocs=4)

    session.run(bench, session.torch)
    for values in results.values():
        assert np.all(values[1] == 10.0) and not values[0].any() and not values[2].any()


def test_adr0015_t8_a_host_read_of_a_view_moves_only_its_bytes():
    """Reading x[:k] takes exactly as long as reading a k-element tensor in the same cube."""
    times = {}

    def bench(torch):
        big = torch.zeros(1 << 16, dtype=torch.float32)
        small = torch.zeros(1 << 10, dtype=torch.float32)
        torch.ahbm.synchronize()
        for name, tensor in (("view", big[:1 << 10]), ("tensor", small)):
            start = session.engine.now
            tensor.numpy()
            times[name] = session.engine.now - start

    session = Session("default")
    session.run(bench, session.torch)
    assert times["view"] == times["tensor"] > 0


@pytest.mark.parametrize("key, strides", [
    ((None,), (60, 20, 5, 1)), ((Ellipsis, None), (20, 5, 1, 1)), ((Ellipsis, None, 1), (20, 5, 5)),
    ((slice(None), None, 2), (20, 20, 1)),
])
def test_adr0015_t9_a_none_in_an_index_gets_the_stride_torch_gives_it(key, strides):
    # torch: the new dimension of size 1 has unsqueeze's stride at that point of the source (size x stride of
    # the next source dimension, 1 past the last), whatever it is read with.
    assert basic_index(Layout.contiguous((3, 4, 5)), key).strides == strides


def test_adr0015_t10_a_queued_view_copy_holds_no_index_array_and_copies_the_views_as_they_were_called():
    import tracemalloc

    session = Session("default")
    torch = session.torch
    n = 512
    src = torch.tensor(np.arange(n * n, dtype=np.float32).reshape(n, n))
    dst = torch.zeros(n, n)
    other = torch.zeros(n, n)
    torch.ahbm.synchronize()
    tracemalloc.start()
    try:
        for _ in range(8):  # queued behind each other; nothing runs until the host waits
            dst.copy_(src.t(), non_blocking=True)
        queued = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert queued < n * n * 8  # one copy's storage indices would be n·n int64s; eight queued hold less than one
    called = dst.detach()
    dst.data = other  # after the call: the queued copies still write the storage dst had
    torch.ahbm.synchronize()
    np.testing.assert_array_equal(called.numpy(), np.arange(n * n, dtype=np.float32).reshape(n, n).T)
    np.testing.assert_array_equal(dst.numpy(), np.zeros((n, n), dtype=np.float32))
    with pytest.raises(TensorError, match=r"cannot copy .* of shape \(2, 3\) into shape \(3, 2\)"):
        torch.zeros(3, 2).copy_(torch.zeros(2, 3))  # refused at the call, not when the copy runs
