"""ADR 0005, random numbers: a default generator per rank, torch.Generator, generator=, repeatable runs.

Expected values are drawn here from numpy's PCG64, the generator the ADR names.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.runtime_api.generators import DEFAULT_SEED
from kernbench.session import Session


def pcg64(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def run_ranks(session, worker) -> dict:
    """`worker(torch, rank)` in every rank (one per SIP); its results by rank."""
    torch, world, results = session.torch, session.ctx.topology.n_sips, {}

    def rank_main(rank):
        torch.ahbm.set_device(rank)
        results[rank] = worker(torch, rank)

    session.run(lambda: torch.multiprocessing.spawn(rank_main, nprocs=world))
    return results


def test_adr0005_t20_unseeded_ranks_agree_and_start_from_the_run_seed():
    seed = 11
    results = run_ranks(Session("default", seed=seed), lambda torch, rank: torch.randn(8).numpy())
    expected = pcg64(seed).standard_normal(8).astype(np.float32)
    for values in results.values():
        np.testing.assert_array_equal(values, expected)


def test_adr0005_t21_manual_seed_in_every_rank_gives_every_rank_the_same_stream(session):
    def worker(torch, rank):
        torch.manual_seed(7)
        first = torch.randn(4)
        first = first.numpy()  # a host read: the other ranks run (and seed) while this one waits
        return first, torch.randn(4).numpy()

    results = run_ranks(session, worker)
    stream = pcg64(7)
    expected = (stream.standard_normal(4).astype(np.float32), stream.standard_normal(4).astype(np.float32))
    for first, second in results.values():
        np.testing.assert_array_equal(first, expected[0])
        np.testing.assert_array_equal(second, expected[1])


def test_adr0005_t22_a_generator_argument_draws_from_that_generator_only(session):
    torch = session.torch
    seen = {}

    def bench():
        generator = torch.Generator(device="cuda").manual_seed(3)
        torch.manual_seed(5)
        seen["from_generator"] = torch.randn(6, generator=generator).numpy()
        seen["default_after"] = torch.rand(6).numpy()
        seen["generator_device"] = generator.device

    session.run(bench)
    np.testing.assert_array_equal(seen["from_generator"], pcg64(3).standard_normal(6).astype(np.float32))
    np.testing.assert_array_equal(seen["default_after"], pcg64(5).random(6).astype(np.float32))
    assert seen["generator_device"] == torch.device("ahbm", 0)


def test_adr0005_t23_a_new_generator_starts_from_torchs_default_seed(session):
    torch = session.torch
    generator = torch.Generator()
    assert generator.initial_seed() == DEFAULT_SEED == 67280421310721
    assert generator.device == torch.device("cpu")
    values = torch.rand(5, generator=generator, device="cpu").numpy()
    np.testing.assert_array_equal(values, pcg64(DEFAULT_SEED).random(5).astype(np.float32))


@pytest.mark.parametrize("which", ["generator", "default"])
def test_adr0005_t24_a_saved_state_replays_the_same_numbers(session, which):
    torch = session.torch
    seen = {}

    def bench():
        generator = torch.Generator().manual_seed(9)
        get, put = ((generator.get_state, generator.set_state) if which == "generator"
                    else (torch.get_rng_state, torch.set_rng_state))
        use = generator if which == "generator" else None  # the default: torch's state is the CPU generator's
        torch.randn(3, generator=use, device="cpu")  # move past the start
        state = get()
        first = torch.randn(10, generator=use, device="cpu").numpy()
        torch.randn(7, generator=use, device="cpu")
        put(state)
        seen["replay"] = (first, torch.randn(10, generator=use, device="cpu").numpy(), state.dtype, state.device)

    session.run(bench)
    first, again, dtype, device = seen["replay"]
    np.testing.assert_array_equal(again, first)
    assert (dtype, device) == (torch.uint8, torch.device("cpu"))


def test_adr0005_t25_seed_reseeds_repeatably_and_initial_seed_reports_it():
    def reseeded():
        session = Session("default", seed=4)
        torch, seen = session.torch, []

        def bench():
            new_seed = torch.seed()
            seen.append((new_seed, torch.initial_seed(), torch.randn(3).numpy()))

        session.run(bench)
        return seen[0]

    first, second = reseeded(), reseeded()
    new_seed, initial, values = first
    assert new_seed == initial == second[0]
    expected_seed = int(pcg64(4).integers(0, 1 << 63))
    assert new_seed == expected_seed
    np.testing.assert_array_equal(values, pcg64(expected_seed).standard_normal(3).astype(np.float32))
    np.testing.assert_array_equal(values, second[2])


@pytest.mark.parametrize("args, kwargs, low, high", [((10, (3, 4)), {}, 0, 10), ((-5, 5, (3, 4)), {}, -5, 5),
                                                     ((2, 9), {"size": (3, 4)}, 2, 9),
                                                     ((), {"high": 6, "size": (3, 4)}, 0, 6)])
def test_adr0005_t26_randint_takes_torchs_forms_and_draws_from_low_to_high(session, args, kwargs, low, high):
    torch = session.torch
    generator = torch.Generator().manual_seed(21)
    x = torch.randint(*args, generator=generator, **kwargs)
    assert (x.dtype, x.shape) == (torch.int64, (3, 4))
    np.testing.assert_array_equal(x.numpy(), pcg64(21).integers(low, high, size=(3, 4)))


def test_adr0005_t27_normal_randperm_and_the_like_factories_draw_as_derived(session):
    torch = session.torch
    template = torch.zeros(2, 5, dtype=torch.float16, device="ahbm:1")

    def drawn(call):
        return call(torch.Generator().manual_seed(13))

    normal = drawn(lambda g: torch.normal(2.0, 3.0, (2, 5), generator=g))
    randn_like = drawn(lambda g: torch.randn_like(template, generator=g))
    rand_like = drawn(lambda g: torch.rand_like(template, generator=g))
    randperm = drawn(lambda g: torch.randperm(9, generator=g))
    for like in (randn_like, rand_like):
        assert (like.shape, like.dtype, like.device) == (template.shape, template.dtype, template.device)
    np.testing.assert_array_equal(normal.numpy(), (2.0 + 3.0 * pcg64(13).standard_normal((2, 5))).astype(np.float32))
    np.testing.assert_array_equal(randn_like.numpy(), pcg64(13).standard_normal((2, 5)).astype(np.float16))
    np.testing.assert_array_equal(rand_like.numpy(), pcg64(13).random((2, 5)).astype(np.float16))
    np.testing.assert_array_equal(randperm.numpy(), pcg64(13).permutation(9))


def test_adr0005_t28_the_same_run_twice_gives_the_same_numbers_in_every_rank():
    def draws():
        def worker(torch, rank):
            unseeded = torch.randn(5).numpy()
            torch.manual_seed(100 + rank)
            return [unseeded, torch.randn(5).numpy(), torch.rand(5).numpy(), torch.randint(0, 50, (5,)).numpy(),
                    torch.randperm(5).numpy()]

        return run_ranks(Session("default", seed=3), worker)

    first, second = draws(), draws()
    assert first.keys() == second.keys() and len(first) > 1
    for rank in first:
        for a, b in zip(first[rank], second[rank], strict=True):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0][1], first[1][1])  # ranks seeded differently draw differently


def test_adr0005_t35_host_and_devices_have_generators_of_their_own_as_in_pytorch(session):
    # torch.manual_seed seeds the CPU's generator and every device's; torch.cuda.manual_seed(_all) only devices';
    # a tensor's values come from the generator of the device it is made on.
    torch = session.torch
    seen = []

    def bench():
        torch.cuda.manual_seed_all(17)
        seen.append((torch.randn(4).numpy(), torch.randn(4, device="cpu").numpy(), torch.initial_seed(),
                     torch.cuda.initial_seed()))
        torch.manual_seed(5)
        torch.cuda.manual_seed(9)  # the current device only
        seen.append((torch.randn(4).numpy(), torch.randn(4, device="cpu").numpy(), torch.randn(4, device="ahbm:1").numpy()))

    session.run(bench)
    (device, host, initial, cuda_initial), (device_9, host_5, other_device_5) = seen
    assert (initial, cuda_initial) == (session.ctx.default_seed, 17)
    np.testing.assert_array_equal(device, pcg64(17).standard_normal(4).astype(np.float32))
    np.testing.assert_array_equal(host, pcg64(session.ctx.default_seed).standard_normal(4).astype(np.float32))
    np.testing.assert_array_equal(device_9, pcg64(9).standard_normal(4).astype(np.float32))
    np.testing.assert_array_equal(host_5, pcg64(5).standard_normal(4).astype(np.float32))
    np.testing.assert_array_equal(other_device_5, pcg64(5).standard_normal(4).astype(np.float32))

def test_adr0005_t38_every_devices_state_is_saved_and_restored_at_once(session):
    torch = session.torch
    seen = []

    def bench():
        states = torch.cuda.get_rng_state_all()
        first = [torch.randn(3, device=f"ahbm:{d}").numpy() for d in range(torch.cuda.device_count())]
        torch.cuda.set_rng_state_all(states)
        seen.append((len(states), first, [torch.randn(3, device=f"ahbm:{d}").numpy()
                                          for d in range(torch.cuda.device_count())]))

    session.run(bench)
    count, first, again = seen[0]
    assert count == session.ctx.topology.n_sips
    for before, after in zip(first, again):
        np.testing.assert_array_equal(after, before)
