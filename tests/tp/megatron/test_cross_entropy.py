"""ADR 0011: `vocab_parallel_cross_entropy` is the cross entropy of the whole vocabulary, on 8 ranks.

Written here (not copied) to check what Megatron-LM's
`tests/unit_tests/tensor_parallel/test_cross_entropy.py` checks
(`test_vocab_parallel_cross_entropy`: tp 4 × dp 2, logits `range(0, 7)`
repeated to (16, 32) per rank, targets 0, 2, ..., 30), and beyond it the
gradient and label smoothing against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.runtime_api.namespace.torch_imports import torch_module
from kernbench.tp import parallel_state
from kernbench.tp.cross_entropy import vocab_parallel_cross_entropy
from tests.tp.megatron_utils import Utils, on_every_rank

TP = 4


def numpy_loss(logits: np.ndarray, target: np.ndarray):
    """Loss per row and its gradient (for an upstream gradient of ones) of the whole (rows, V) logits."""
    log_probs = log_softmax(logits)
    rows = np.arange(len(target))
    grad = np.exp(log_probs)
    grad[rows, target] -= 1.0
    return -log_probs[rows, target], grad


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_adr0011_t118_the_loss_of_megatrons_test_and_its_gradient_are_the_whole_vocabularys():
    def losses(torch, rank, world_size):
        Utils.initialize_model_parallel(TP, 2)
        logits = torch.range(0, 7).repeat(16, 4).cuda().requires_grad_(True)
        target = torch.arange(0, 32, 2).cuda()
        loss = vocab_parallel_cross_entropy(logits, target)
        loss.sum().backward()
        index = parallel_state.get_tensor_model_parallel_rank()
        Utils.destroy_model_parallel()
        return index, loss.detach().cpu().numpy(), logits.grad.cpu().numpy()

    part = np.tile(np.arange(8, dtype=np.float32), (16, 4))
    whole = np.concatenate([part] * TP, axis=1)  # every rank holds the same partition values
    loss, grad = numpy_loss(whole.astype(np.float64), np.arange(0, 32, 2))
    for rank, (index, seen, seen_grad) in on_every_rank(losses).items():
        np.testing.assert_allclose(seen, loss, rtol=1e-5)
        assert np.array_equal(np.round(seen), np.round([10.2309, 8.2309, 6.2309, 4.2309] * 4))  # Megatron's numbers
        np.testing.assert_allclose(seen_grad, grad[:, 32 * index:32 * (index + 1)], atol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_adr0011_t119_random_logits_split_over_the_group_give_numpys_loss(smoothing):
    rows, vocab = 6, 64

    def losses(torch, rank, world_size):
        Utils.initialize_model_parallel(TP, 2)
        index = parallel_state.get_tensor_model_parallel_rank()
        torch.manual_seed(11)
        whole = torch.randn(rows, vocab).cuda()
        target = torch.randint(0, vocab, (rows,)).cuda()
        part = whole[:, index * vocab // TP:(index + 1) * vocab // TP].contiguous()
        loss = vocab_parallel_cross_entropy(part, target, label_smoothing=smoothing)
        Utils.destroy_model_parallel()
        return whole.cpu().numpy(), target.cpu().numpy(), loss.cpu().numpy()

    for rank, (whole, target, seen) in on_every_rank(losses).items():
        loss = numpy_loss(whole.astype(np.float64), target)[0]
        if smoothing:
            # Megatron's smoothing: K = the partition's size, the mean log-probability over this rank's partition.
            index, size = rank % TP, vocab // TP
            smoothed = smoothing * size / (size - 1)
            local = log_softmax(whole.astype(np.float64))[:, index * size:(index + 1) * size]
            loss = (1 - smoothed) * loss - smoothed * local.mean(-1)
        np.testing.assert_allclose(seen, loss, rtol=1e-5)


def test_adr0011_t136_the_all_reduces_are_torch_distributed_all_reduce_a_rank_replaces_for_itself():
    """At tp 1 × dp 8 each rank replaces `torch.distributed.all_reduce` (as `import torch` gives it) with its own
    recorder: the loss calls it three times with the rank's one-rank tensor group, as Megatron's does, and no other
    rank's recorder sees those calls; once the run is over the name is the run's again."""
    distributed = torch_module("torch.distributed")

    def losses(torch, rank, world_size):
        Utils.initialize_model_parallel(1, 1)
        group = parallel_state.get_tensor_model_parallel_group()
        seen, real = [], distributed.all_reduce

        def recorder(tensor, op=None, group=None, async_op=False):
            seen.append((rank, tuple(group.ranks), op))
            return real(tensor, op=op, group=group, async_op=async_op)

        distributed.all_reduce = recorder
        torch.manual_seed(3)
        logits, target = torch.randn(4, 16).cuda(), torch.randint(0, 16, (4,)).cuda()
        loss = vocab_parallel_cross_entropy(logits, target)
        del distributed.all_reduce
        Utils.destroy_model_parallel()
        return seen, group.ranks, logits.cpu().numpy(), target.cpu().numpy(), loss.cpu().numpy()

    for rank, (seen, ranks, logits, target, loss) in on_every_rank(losses).items():
        assert ranks == (rank,)
        assert seen == [(rank, (rank,), "max"), (rank, (rank,), "sum"), (rank, (rank,), "sum")]
        np.testing.assert_allclose(loss, numpy_loss(logits.astype(np.float64), target)[0], rtol=1e-5)
    assert "all_reduce" not in vars(distributed)


def test_adr0011_t143_a_language_modules_loss_is_the_whole_vocabularys_and_its_tied_embeddings_start_equal():
    """Mirrors test_language_module_unfused_loss_passes_tp_group and beyond it: at tp 4 × pp 2 `LanguageModule`'s
    loss of labels [b, s] and logits [s, b, V/4] is numpy's cross entropy of the whole vocabulary, [b, s], over the
    model's tensor group; the fused losses are Megatron's RuntimeError (Transformer Engine) and one line. With
    tied weights the last stage's output layer starts as the first stage's word embeddings (zeroed, then
    all-reduced over the embedding group), and both are marked."""
    from kernbench.tp.config import TransformerConfig
    from kernbench.tp.errors import ModelParallelError
    from kernbench.tp.language_module import LanguageModule

    class Tied(LanguageModule):
        def __init__(self, torch, config):
            super().__init__(config)
            self.pre_process = parallel_state.is_pipeline_first_stage()
            self.post_process = parallel_state.is_pipeline_last_stage()
            self.share_embeddings_and_output_weights = True
            if self.pre_process:
                self.embedding = torch.nn.Module()
                self.embedding.word_embeddings = torch.nn.Embedding(16, 4)
                self.embedding.word_embeddings.weight.data.copy_(torch.arange(64.0).reshape(16, 4))
            if self.post_process:
                self.output_layer = torch.nn.Linear(4, 16, bias=False)
                self.output_layer.weight.data.fill_(7.0)

    def model(torch, rank, world_size):
        Utils.initialize_model_parallel(TP, 2)
        config = TransformerConfig(num_layers=2, hidden_size=8, num_attention_heads=4, tensor_model_parallel_size=TP,
                                   pipeline_model_parallel_size=2)
        tied = Tied(torch, config)
        torch.manual_seed(4)
        whole, labels = torch.randn(3, 2, 16 * TP).cuda(), torch.randint(0, 16 * TP, (2, 3)).cuda()
        index = parallel_state.get_tensor_model_parallel_rank()
        loss = tied.compute_language_model_loss(labels, whole[..., index * 16:(index + 1) * 16].contiguous())
        refused = []
        for implementation, error in (("te", RuntimeError), ("native", ModelParallelError)):
            config.cross_entropy_loss_fusion, config.cross_entropy_fusion_impl = True, implementation
            with pytest.raises(error) as raised:
                tied.compute_language_model_loss(labels, whole)
            refused.append(str(raised.value))
        config.cross_entropy_loss_fusion = False
        tied.setup_embeddings_and_output_layer()
        weight = tied.shared_embedding_or_output_weight()
        seen = (tied.tp_group is parallel_state.get_tensor_model_parallel_group(), whole.cpu().numpy(),
                labels.cpu().numpy(), loss.cpu().numpy(), refused, tied.pre_process, weight.cpu().numpy(),
                weight.is_embedding_or_output_parameter, getattr(weight, "shared_embedding", False))
        Utils.destroy_model_parallel()
        return seen

    for rank, (own_group, whole, labels, loss, refused, first, weight, marked, shared) in on_every_rank(model).items():
        assert own_group and marked and shared
        expected = numpy_loss(whole.transpose(1, 0, 2).reshape(-1, 16 * TP).astype(np.float64), labels.reshape(-1))[0]
        np.testing.assert_allclose(loss, expected.reshape(2, 3), rtol=1e-5)
        assert refused[0] == "Trying to use a TE block when it's not present."
        assert "cross_entropy_fusion_impl='native'" in refused[1] and "\n" not in refused[1]
        assert first == (rank < 4)
        np.testing.assert_array_equal(weight, np.arange(64.0).reshape(16, 4))  # the last stage's copy too
