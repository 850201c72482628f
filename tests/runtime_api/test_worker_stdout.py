"""ADR 0019: each worker (rank) prints whole lines, as each PyTorch process has its own stdout."""

from __future__ import annotations

import re
import sys

import pytest

from kernbench.session import Session

WORLD = 4


def print_after_all_reduce(torch):
    """Every rank prints its all-reduced tensor; the host read of `x[0]` blocks in the middle of the print."""
    def worker(rank):
        torch.distributed.init_process_group("nccl")
        x = torch.full((1024,), rank + 1.0, device=f"cuda:{rank}")
        torch.distributed.all_reduce(x)
        print("Rank", rank, "has", x[0])

    torch.multiprocessing.spawn(worker, nprocs=WORLD)


def test_adr0019_t25_concurrent_ranks_print_whole_lines_in_a_repeatable_order(capsys):
    outputs = []
    for _ in range(2):
        session = Session("default")
        stdout = sys.stdout
        session.run(print_after_all_reduce, session.torch)
        assert sys.stdout is stdout
        outputs.append(capsys.readouterr().out)
    lines = outputs[0].splitlines()
    total = float(sum(range(1, WORLD + 1)))
    pattern = re.compile(rf"Rank (\d) has tensor\({total:g}\., device='ahbm:\1', dtype=torch.float32\)")
    assert len(lines) == WORLD and all(pattern.fullmatch(line) for line in lines), lines
    assert sorted(int(pattern.fullmatch(line).group(1)) for line in lines) == list(range(WORLD))
    assert outputs[1] == outputs[0]


def test_adr0019_t26_a_partial_line_waits_for_its_newline_and_is_ended_when_its_worker_fails(capfd):
    def interleaved(torch):
        def worker(rank):
            x = torch.ones(4, device=f"cuda:{rank}")
            if rank == 0:
                print("zero starts", end="", flush=True)
                print(" and ends after a host read", x[0].item())  # rank 1 prints while this one waits
            else:
                print("one, at once")

        torch.multiprocessing.spawn(worker, nprocs=2)

    def failing(torch):
        def worker(rank):
            x = torch.ones(4, device=f"cuda:{rank}")
            if rank == 0:
                print("zero is aborted in a host read", end="")
                x.tolist()
            else:
                print("one fails mid-line", end="")
                raise ValueError("rank 1 failed")

        torch.multiprocessing.spawn(worker, nprocs=2)

    session = Session("default")
    session.run(interleaved, session.torch)
    assert sorted(capfd.readouterr().out.splitlines(keepends=True)) == [
        "one, at once\n", "zero starts and ends after a host read 1.0\n"]
    session = Session("default")
    with pytest.raises(Exception, match="rank 1 failed"):
        session.run(failing, session.torch)
    assert sorted(capfd.readouterr().out.splitlines(keepends=True)) == [
        "one fails mid-line\n", "zero is aborted in a host read\n"]
