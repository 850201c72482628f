"""ADR 0011: Megatron's RNG tracker and activation recomputation (`tensor_parallel.random`) as its tests use them.

Written here (not copied) to check what Megatron-LM's
`tests/unit_tests/tensor_parallel/test_random.py` checks — states, nested
forks, `convert_cuda_rng_state`, `checkpoint` with and without
`distribute_saved_activations`, `CheckpointWithoutOutput` — on 8 ranks, and
that a recomputation is simulated work: the forward's ops run again in the
backward and the step takes longer.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.runtime_api.errors import TensorError
from kernbench.session import Session
from kernbench.tp.random import (CheckpointWithoutOutput, CheckpointWithoutOutputManager, CudaRNGStatesTracker,
                                 checkpoint, convert_cuda_rng_state, get_cuda_rng_tracker,
                                 model_parallel_cuda_manual_seed)
from tests.tp.megatron_utils import Utils, on_every_rank


def left_states(tracker, graphable: bool) -> list:
    """The tracker's states as tensors, a graph-safe generator's read through `get_state()`."""
    states = tracker.get_states()
    return [states[name].get_state() if graphable else states[name] for name in sorted(states)]


def test_adr0011_t114_tracker_states_nested_forks_and_converted_states_follow_megatrons_tests():
    """Mirrors test_cuda_rng_states_tracker, test_double_fork_cuda_rng_states_tracker, test_convert_cuda_rng_state
    and test_model_parallel_cuda_manual_seed."""

    def tracked(torch, rank, world_size):
        tracker = CudaRNGStatesTracker()
        tracker.set_states({"given": 1234})
        assert tracker.get_states()["given"] == 1234
        tracker.reset()
        assert tracker.get_states() == {}
        tracker.add("state2", 1111)
        for again in (lambda: tracker.add("state3", 1111), lambda: tracker.add("state2", 111)):
            with pytest.raises(Exception):
                again()
        torch.cuda.manual_seed(1111)
        assert torch.equal(tracker.get_states()["state2"], torch.cuda.get_rng_state())
        # A fork inside a fork continues the outer state where it was: the draws are those of separate forks.
        for graphable in (False, True):
            nested, single = [[], []], [[], []]
            tracker = CudaRNGStatesTracker(use_cudagraphable_rng=graphable)
            tracker.add("one", 1234), tracker.add("two", 5678)
            with tracker.fork("one"):
                nested[0].append(torch.randn(10, device="cuda"))
                with tracker.fork("two"):
                    nested[1].append(torch.randn(10, device="cuda"))
                    with tracker.fork("one"):
                        nested[0].append(torch.randn(10, device="cuda"))
                    nested[1].append(torch.randn(10, device="cuda"))
                nested[0].append(torch.randn(10, device="cuda"))
            after_nested = left_states(tracker, graphable)
            tracker.reset()
            tracker.add("one", 1234), tracker.add("two", 5678)
            for name, draws, count in (("one", single[0], 3), ("two", single[1], 2)):
                with tracker.fork(name):
                    draws.extend(torch.randn(10, device="cuda") for _ in range(count))
            for a, b in zip(nested[0] + nested[1], single[0] + single[1]):
                assert torch.equal(a, b)
            # ... and leaves each state where the separate forks leave it.
            for a, b in zip(after_nested, left_states(tracker, graphable)):
                assert torch.equal(a, b)
        # A state converted either way continues the same stream; the default stream is left where it was.
        torch.cuda.manual_seed(999)
        before = torch.cuda.get_rng_state()
        plain = CudaRNGStatesTracker()
        plain.add("s", 123)
        graphable = CudaRNGStatesTracker(use_cudagraphable_rng=True)
        graphable.set_states({"s": convert_cuda_rng_state(plain.states_["s"], to_graphable=True).clone_state()})
        back = CudaRNGStatesTracker()
        back.set_states({"s": convert_cuda_rng_state(graphable.states_["s"], to_graphable=False)})
        for _ in range(3):
            draws = []
            for each in (plain, graphable):
                with each.fork("s"):
                    draws.append(torch.randn(10, device="cuda"))
            assert torch.equal(*draws)
        with pytest.raises(ValueError, match="Invalid state type"):
            convert_cuda_rng_state(1234)
        assert torch.equal(before, torch.cuda.get_rng_state())
        Utils.initialize_model_parallel(4, 2)
        model_parallel_cuda_manual_seed(0, force_reset_rng=True)
        assert get_cuda_rng_tracker().get_states()["model-parallel-rng"] is not None
        Utils.destroy_model_parallel()
        return True

    assert all(on_every_rank(tracked).values())


def test_adr0011_t115_checkpoint_gives_the_functions_values_and_gradients_and_distributes_its_saved_input():
    """Mirrors test_checkpoint: a sum checkpointed at tp 2, its first input kept as this rank's 1-D half."""

    def checkpointed(torch, rank, world_size):
        add = lambda a, b: a + b  # noqa: E731
        assert torch.equal(checkpoint(add, None, torch.ones(16), torch.ones(16) * 2), torch.ones(16) * 3)
        Utils.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=1)
        first = torch.arange(16, dtype=torch.float32).reshape(4, 4).cuda().requires_grad_(True)
        output = checkpoint(add, True, first, torch.ones((4, 4)).cuda() * 2)
        kept = first.data.shape, first.data.cpu().numpy()
        (output * output).sum().backward()
        restored = first.data.cpu().numpy()
        Utils.destroy_model_parallel()
        return output.detach().cpu().numpy(), kept, restored, first.grad.cpu().numpy()

    whole = np.arange(16, dtype=np.float32).reshape(4, 4)
    for rank, (output, (shape, kept), restored, grad) in on_every_rank(checkpointed).items():
        np.testing.assert_array_equal(output, whole + 2)
        assert shape == (8,)  # this rank's half of the 16 elements, as Megatron's test asserts
        np.testing.assert_array_equal(kept, whole.reshape(-1)[8 * (rank % 2):8 * (rank % 2) + 8])
        np.testing.assert_array_equal(restored, whole)  # gathered back for the recomputation
        np.testing.assert_array_equal(grad, 2 * (whole + 2))


class _NormAndResidual:
    """A function of two outputs, the second its input itself (a fused norm's residual): torch.autograd.Function
    of the run's torch, made per run."""

    @staticmethod
    def function(torch):
        class NormAndResidual(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.save_for_backward(x, weight)
                return x * weight, x

            @staticmethod
            def backward(ctx, grad_normed, grad_residual):
                x, weight = ctx.saved_tensors
                return grad_normed * weight + grad_residual, (grad_normed * x).sum(0)

        return NormAndResidual


@pytest.mark.parametrize("use_manager", [False, True])
def test_adr0011_t116_checkpoint_without_output_matches_the_plain_forward_and_its_gradients(use_manager):
    """Mirrors test_checkpoint_without_output and test_checkpoint_without_output_retain_input_tensors."""

    def compared(torch, rank, world_size):
        Utils.initialize_model_parallel()
        gelu = torch.nn.functional.gelu
        torch.manual_seed(5)
        values = torch.randn(4, 4)
        plain, again = values.clone().requires_grad_(True), values.clone().requires_grad_(True)
        reference = gelu(plain) * plain
        ckpt = CheckpointWithoutOutput()
        out = ckpt.checkpoint(gelu, again) * again
        ckpt.discard_output_and_register_recompute(out)
        assert torch.equal(reference, out)
        grad = torch.randn(4, 4)
        reference.backward(grad)
        out.backward(grad)
        assert torch.allclose(plain.grad, again.grad)
        # Outputs that are the input itself (retain_input_tensors), recomputed alone or by a manager.
        fused = _NormAndResidual.function(torch)
        weight = torch.randn(4, requires_grad=True)
        plain, again = values.clone().requires_grad_(True), values.clone().requires_grad_(True)
        normed, residual = fused.apply(plain, weight)
        reference = normed + residual
        manager = CheckpointWithoutOutputManager() if use_manager else None
        ckpt = CheckpointWithoutOutput(ckpt_manager=manager, retain_input_tensors=True)
        normed, residual = ckpt.checkpoint(lambda x: fused.apply(x, weight), again)
        out = normed + residual
        if manager is None:
            ckpt.discard_output_and_register_recompute(out)
        else:
            manager.discard_all_outputs_and_register_unified_recompute(out)
        assert torch.allclose(reference, out)
        reference.backward(grad)
        expected = plain.grad.clone()
        out.backward(grad)
        assert torch.allclose(expected, again.grad)
        Utils.destroy_model_parallel()
        return True

    assert all(on_every_rank(compared).values())


def test_adr0011_t117_a_recomputation_runs_the_forward_again_in_the_backward_as_device_work():
    def step(torch, use_checkpoint: bool):
        torch.manual_seed(3)
        x = torch.randn(256, 256, device="ahbm", requires_grad=True)
        w = torch.randn(256, 256, device="ahbm", requires_grad=True)
        layer = lambda a, b: torch.nn.functional.gelu(a @ b)  # noqa: E731
        y = checkpoint(layer, False, x, w) if use_checkpoint else layer(x, w)
        (y * y).sum().backward()
        torch.ahbm.synchronize()
        return x.grad.cpu().numpy(), w.grad.cpu().numpy()

    runs = {}
    for use_checkpoint in (False, True):
        session = Session("single_sip")
        grads = session.run(step, session.torch, use_checkpoint)
        gemms = [op for op in session.ctx.machine.oplog if op.kind == "gemm"]
        runs[use_checkpoint] = grads, gemms, session.ctx.engine.now
    (plain_grads, plain_gemms, plain_ps), (grads, gemms, step_ps) = runs[False], runs[True]
    plain_flops, flops = [op.flops for op in plain_gemms], [op.flops for op in gemms]
    for a, b in zip(plain_grads, grads):
        np.testing.assert_array_equal(a, b)
    # The forward GEMM, its recomputation, then the backward's two: a third more GEMM work, every tile of it.
    forward_tiles = len(plain_flops) // 3
    assert len(flops) == len(plain_flops) + forward_tiles and sum(flops) * 3 == sum(plain_flops) * 4
    forward = plain_gemms[:forward_tiles]
    assert step_ps - plain_ps >= max(op.end for op in forward) - min(op.start for op in forward) > 0


def test_adr0011_t137_untyped_storage_is_the_bytes_every_view_shares_and_resizing_it_to_0_frees_them():
    """Size and address are the storage's whatever view asks; `resize_(0)` gives the HBM back (memory_allocated
    drops by the bytes, through every view; an op or a host read of a view is one line until then) and `resize_` to
    the size it had charges it again; other sizes refused."""
    session = Session("default")

    def bench(torch):
        whole = torch.zeros(256, 1024, device="ahbm")  # 1 MiB
        part = whole.view(-1)[4096:4106]
        storage, seen = part.untyped_storage(), {}
        seen["sizes"] = (storage.size(), storage.nbytes(), len(storage), storage.element_size())
        seen["pointers"] = (storage.data_ptr() == whole.data_ptr(), part.data_ptr() - whole.data_ptr())
        before = torch.ahbm.memory_allocated()
        whole.untyped_storage().resize_(0)
        seen["released"] = (before - torch.ahbm.memory_allocated(), storage.size(), storage.data_ptr(), part.shape)
        for use in (lambda: part + 1, lambda: whole.sum(), lambda: part.cpu()):  # PyTorch refuses them too
            with pytest.raises(TensorError, match=r"views a storage of size 0: .*resize it to its 1048576 bytes"):
                use()
        storage.resize_(1 << 20)
        seen["restored"] = (torch.ahbm.memory_allocated() == before, whole.untyped_storage().size(),
                            whole.untyped_storage().data_ptr() == whole.data_ptr() != 0)
        with pytest.raises(TensorError, match=r"resize_\(100\).*to 0 and back to its 1048576 bytes"):
            storage.resize_(100)
        host = torch.ones(3, 5, device="cpu")
        seen["host"] = host.untyped_storage().size()
        with pytest.raises(TensorError, match="device tensors only"):
            host.untyped_storage().resize_(0)
        return seen

    seen = session.run(bench, session.torch)
    assert seen == {"sizes": (1 << 20, 1 << 20, 1 << 20, 1), "pointers": (True, 4096 * 4),
                    "released": (1 << 20, 0, 0, (10,)), "restored": (True, 1 << 20, True), "host": 60}


def test_adr0011_t138_a_discarded_checkpoint_output_frees_its_memory_and_its_saved_views_see_the_recomputation():
    """Mirrors test_checkpoint_without_output_view_sharing_regression: the output's views saved by a later op
    (split rows of a reshape) read the recomputed values in the backward; between the discard and the
    recomputation the output's bytes are not allocated."""

    def compared(torch, rank, world_size):
        Utils.initialize_model_parallel()
        gelu = torch.nn.functional.gelu
        torch.manual_seed(5)
        values, weight = torch.randn(64, 256).cuda(), torch.randn(32, 256).cuda()

        def split_linear(x, w):  # saves two row-views of x, as a grouped GEMM does
            rows = torch.tensor_split(x, 2, dim=0)
            return torch.cat([r.matmul(w.t()) for r in rows], dim=0)

        plain, again = values.clone().requires_grad_(True), values.clone().requires_grad_(True)
        w1, w2 = weight.clone().requires_grad_(True), weight.clone().requires_grad_(True)
        reference = split_linear(gelu(plain), w1)
        ckpt = CheckpointWithoutOutput()
        hidden = ckpt.checkpoint(gelu, again)
        out = split_linear(hidden, w2)
        held = torch.ahbm.memory_allocated()
        ckpt.discard_output_and_register_recompute(out)
        freed = held - torch.ahbm.memory_allocated()
        grad = torch.randn(64, 32).cuda()
        reference.backward(grad)
        out.backward(grad)
        Utils.destroy_model_parallel()
        return (freed, torch.allclose(reference, out), torch.allclose(plain.grad, again.grad),
                torch.allclose(w1.grad, w2.grad))

    for freed, *agree in on_every_rank(compared).values():
        assert freed == 64 * 256 * 4 and all(agree)
