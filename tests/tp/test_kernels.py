"""ADR 0011: the Triton kernels of kernbench.tp.kernels against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.session import Session
from kernbench.tp import kernels
from tests.tp.harness import f16, gelu_tanh, random_f16


def run(fn):
    session = Session("single_sip")
    return session.run(fn, session.torch)


@pytest.mark.parametrize("m, k, n", [(40, 70, 90), (64, 96, 128)], ids=["ragged", "whole_tiles"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
def test_adr0011_t7_linear_is_x_times_w_transposed_plus_bias(with_bias, m, k, n):
    # Ragged: no size a multiple of a block, so every mask matters; whole tiles: the unmasked (EVEN) loads.
    rng = np.random.default_rng(7)
    x, w, b = random_f16(rng, m, k), random_f16(rng, n, k), random_f16(rng, n)

    def linear(torch):
        out = torch.empty(m, n, dtype="f16")
        bias = torch.tensor(b, dtype="f16") if with_bias else None
        kernels.linear(torch.tensor(x, dtype="f16"), torch.tensor(w, dtype="f16"), bias, out,
                       block_m=32, block_n=64, block_k=32)
        return out.numpy()

    assert_close(run(linear), x @ w.T + (b if with_bias else 0), "f16")


def test_adr0011_t8_bias_gelu_and_add_bias_match_megatrons_formulas():
    rng = np.random.default_rng(8)
    x, b = random_f16(rng, 24, 50, scale=4.0), random_f16(rng, 50)  # wide range: both tails of tanh

    def elementwise(torch):
        tx, tb = torch.tensor(x, dtype="f16"), torch.tensor(b, dtype="f16")
        gelu, added = torch.empty(24, 50, dtype="f16"), torch.empty(24, 50, dtype="f16")
        kernels.bias_gelu(tx, tb, gelu, block_size=256)
        kernels.add_bias(tx, tb, added, block_size=256)
        kernels.add_bias(tx, tb, tx, block_size=256)  # in place, as a row-parallel layer adds its bias
        return gelu.numpy(), added.numpy(), tx.numpy()

    gelu, added, in_place = run(elementwise)
    assert_close(gelu, gelu_tanh(x + b), "f16")
    assert_close(added, x + b, "f16")
    np.testing.assert_array_equal(in_place, added)


def test_adr0011_t9_chunk_copies_move_column_blocks_to_row_blocks_and_back():
    rng = np.random.default_rng(9)
    x = f16(rng.standard_normal((36, 4 * 40)))
    chunks = np.concatenate(np.split(x, 4, axis=1), axis=0)

    def copies(torch):
        tx = torch.tensor(x, dtype="f16")
        stacked, back, third = torch.empty(4 * 36, 40, dtype="f16"), torch.empty(36, 160, dtype="f16"), \
            torch.empty(36, 40, dtype="f16")
        kernels.columns_to_chunks(tx, stacked, n_chunks=4, block_rows=16, block_cols=32)
        kernels.chunks_to_columns(stacked, back, n_chunks=4, block_rows=16, block_cols=32)
        kernels.columns_to_chunks(tx, third, n_chunks=1, first_chunk=2, block_rows=16, block_cols=32)
        return stacked.numpy(), back.numpy(), third.numpy()

    stacked, back, third = run(copies)
    np.testing.assert_array_equal(stacked, chunks)
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(third, x[:, 80:120])
