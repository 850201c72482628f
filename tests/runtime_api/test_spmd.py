"""SPMD replication (adr/0022): a spawn whose ranks do the same work is simulated once and passed on, and the run
reads exactly as the full simulation, whatever the ranks do.

Each test runs the same bench twice, timing-only: replicated (`spmd=True`,
run again without an episode that diverged, as `kernbench run` does) and in
full, and compares the whole report and the whole op log. What may differ
is set aside: a replicated rank's records carry rank 0's tensor names in
their labels (the run numbers tensors as they are made, rank by rank),
messages' flow ids are numbered in another order, and records of the same
picoseconds (two groups' collectives ending together) may come in another
order.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
import triton
import triton.language as tl

from kernbench.benches import tp_layer
from kernbench.cli.attempts import run_exactly
from kernbench.report import run_report
from kernbench.session import Session
from kernbench.sim_engine.op_log import Image, OpLog, Relabel
from tests.cli import run_kernbench_in_process
from tests.derived_topology import derived_topology

_NUMBERED = re.compile(r"\b(?!sip\d|cube\d|pe\d)([A-Za-z_]+)\d+")


def _simulated(bench, topology: str, spmd: bool):
    """(report, op log, programs simulated, attempts) of `bench(torch)` run timing-only on `topology`."""
    attempts = []

    def attempt(skip):
        attempts.append(skip)
        session = Session(topology, timing_only=True, spmd=spmd, spmd_skip=skip)
        session.run(bench, session.torch)
        return session

    session = run_exactly(attempt)
    report = run_report(session.ctx)
    for collective in report["collectives"]:
        collective.pop("symmetric")  # how it was simulated: rank 0's loop when replicated
    report["collectives"].sort(key=lambda c: (c["start_ps"], c["end_ps"], c["label"]))
    log = Counter()
    for kind, device, unit, label, program, nbytes, flops, start, end, args in session.ctx.machine.oplog.rows():
        args = tuple(pair for pair in args or () if pair[0] != "flow_id")
        log[kind, device, unit, _NUMBERED.sub(r"\1#", label), program, nbytes, flops, start, end, args] += 1
    return report, log, session.ctx.programs_done, attempts


def _same_as_full(bench, topology: str = "default"):
    """Replicated and full runs of `bench` agree; (programs simulated replicated, in full, attempts)."""
    report, log, programs, attempts = _simulated(bench, topology, spmd=True)
    full_report, full_log, full_programs, _ = _simulated(bench, topology, spmd=False)
    assert report == full_report
    assert log == full_log
    return programs, full_programs, attempts


def _layer(argv):
    return lambda torch: tp_layer.run(torch, ["--hidden", "64", "--heads", "8", "--seq", "16", *argv])


@pytest.mark.parametrize("topology, argv", [("default", ["--tp", "4", "--sp", "on", "--overlap", "on"]),
                                            ("default", ["--tp", "4", "--sp", "off", "--overlap", "off"]),
                                            ("default", ["--tp", "2", "--dp", "1", "--sp", "on", "--overlap", "off"]),
                                            ("switch", ["--tp", "8", "--sp", "on", "--overlap", "on"])],
                         ids=["tp4-sp-overlap", "tp4-plain", "tp2-of-4-sips-sp", "switch-tp8-sp-overlap"])
def test_adr0022_t1_a_tensor_parallel_step_is_simulated_once_and_reads_as_the_full_run(topology, argv, tmp_path):
    programs, full_programs, attempts = _same_as_full(_layer(argv), _machine(topology, tmp_path))
    assert attempts == [frozenset()]  # no episode diverged
    assert programs * int(argv[1]) == full_programs  # the other ranks' programs were not simulated


def _machine(topology: str, tmp_path) -> str:
    """A shipped topology, or "switch": the large machine's switch on 8 SIPs."""
    if topology != "switch":
        return topology
    return str(derived_topology(tmp_path, "large", [("sips: {count: 32}", "sips: {count: 8}")], "switch.yaml"))


@pytest.mark.parametrize("topology, argv", [
    ("default", ["--tp", "2", "--dp", "2", "--sp", "off", "--overlap", "off"]),
    ("default", ["--tp", "2", "--dp", "2", "--sp", "on", "--overlap", "on"]),
    ("switch", ["--tp", "4", "--dp", "2", "--sp", "on", "--overlap", "on"])], ids=["ring-tp2-dp2", "ring-tp2-dp2-sp-overlap",
                                                                             "switch-tp4-dp2-sp-overlap"])
def test_adr0022_t2_collectives_over_groups_follow_sip_0s_group_and_trees_run_rank_by_rank(topology, argv, tmp_path):
    """tp x dp: SIP 0's group's collective runs as its loop and every other group's twin follows it; a tree
    all-reduce, which does not rotate, stops replication where nothing of SIP 0's is under way, runs on every
    rank, and replication starts again once it has ended."""
    programs, full_programs, attempts = _same_as_full(_layer(argv), _machine(topology, tmp_path))
    assert attempts == [frozenset()]
    assert programs * 3 < full_programs


def _rank_one_differs(torch):
    """Every rank multiplies; rank 1 alone also runs a softmax over another dim (the same tensors: only the
    closure's dim differs), while the matmuls of the others are still under way."""
    def worker(rank):
        torch.ahbm.set_device(rank)
        x = torch.randn(256, 256, dtype=torch.float16)
        y = x @ x
        y = y.softmax(dim=0 if rank == 1 else -1)
        (y @ x).sum()
        torch.ahbm.synchronize()
    torch.multiprocessing.spawn(worker, nprocs=torch.ahbm.device_count())


def test_adr0022_t3_a_rank_doing_other_work_is_simulated_in_full():
    programs, full_programs, attempts = _same_as_full(_rank_one_differs)
    assert attempts[0] == frozenset() and len(attempts) == 2  # the first attempt diverged, the second ran it in full
    assert programs == full_programs


def _interleaved_all_gather(torch):
    def worker(rank):
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group(backend="ahbm")
        x = torch.randn(1000, dtype=torch.float16)
        out = torch.empty(1000 * torch.distributed.get_world_size(), dtype=torch.float16)
        (x * 2).sum()
        torch.distributed.all_gather_into_tensor(out, x)
        (out + 1).sum()
        torch.ahbm.synchronize()
    torch.multiprocessing.spawn(worker, nprocs=torch.ahbm.device_count())


@pytest.mark.parametrize("bench", [_interleaved_all_gather, _layer(["--tp", "4", "--sp", "on", "--overlap", "on"])],
                         ids=["all-gather", "tp4-sp-overlap"])
def test_adr0022_t4_on_a_gpu_topology_collectives_over_interleaved_buffers_are_replicated_too(bench):
    """A GPU topology interleaves memory and has an L2: a collective spreads each rank's chunk over every stack and
    reads around the L2 (adr/0010), so the ranks' work, collectives included, is SIP 0's rotated: simulated once,
    and read as the full run."""
    programs, full_programs, attempts = _same_as_full(bench, topology="h200x4")
    assert attempts == [frozenset()]
    assert programs * 4 == full_programs


def test_adr0022_t5_a_run_with_values_is_never_replicated():
    session = Session("default", spmd=True)
    session.run(_layer(["--tp", "4", "--sp", "off", "--overlap", "off"]), session.torch)
    full = Session("default", spmd=False)
    full.run(_layer(["--tp", "4", "--sp", "off", "--overlap", "off"]), full.torch)
    assert session.ctx.programs_done == full.ctx.programs_done
    assert session.ctx.machine.oplog.end_ps == full.ctx.machine.oplog.end_ps


DIVERGING_BENCH = '''
def run(torch):
    def worker(rank):
        torch.ahbm.set_device(rank)
        x = torch.randn(512, 512, dtype=torch.float16)
        print("rank", rank, "starts", end="")
        y = x @ x
        print(" and multiplies")
        if rank == 2:
            y = y + 1  # where the others multiply again: SIP 0's work is under way when rank 2 differs
        (y @ x).sum()
        torch.ahbm.synchronize()
        print("rank", rank, "ends")
    torch.multiprocessing.spawn(worker, nprocs=torch.ahbm.device_count())
'''


def test_adr0022_t6_kernbench_run_prints_a_diverged_runs_output_once_and_says_why_it_ran_again(tmp_path):
    bench = tmp_path / "diverging.py"
    bench.write_text(DIVERGING_BENCH)
    runs = [run_kernbench_in_process("run", str(bench), "--timing-only", *flag, cwd=tmp_path)
            for flag in ([], ["--no-spmd"])]
    assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
    outputs = [run.stdout for run in runs]
    assert outputs[0] == outputs[1]
    assert outputs[0].count("rank 2 starts and multiplies\n") == 1
    assert "kernbench: SPMD episode 0: " in runs[0].stderr and "SPMD" not in runs[1].stderr  # why it took longer


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def _triton_on_every_rank(torch):
    def worker(rank):
        torch.ahbm.set_device(rank)
        x = torch.randn(4096)
        out = torch.empty_like(x)
        _scale_kernel[(16,)](x, out, x.numel(), BLOCK=256)
        torch.ahbm.synchronize()
    torch.multiprocessing.spawn(worker, nprocs=torch.ahbm.device_count())


@pytest.mark.quick
def test_adr0022_t7_a_triton_kernel_launched_alike_by_every_rank_is_simulated_once():
    programs, full_programs, attempts = _same_as_full(_triton_on_every_rank)
    assert attempts == [frozenset()]
    assert programs * 4 == full_programs


def test_adr0022_t8_a_copy_renames_a_collectives_records_by_their_label_as_its_groups():
    """`Image.relabel`: a group collective's records read as the group's that SIP is in, label, SIPs and ranks
    included; the other records (a kernel's) as the spawn's rotation, their programs their own."""
    log = OpLog()
    first = log.seal()
    log.append_pairs("ipcq_send", "sip0", "cube0.pe0.ipcq", "ag[group[0, 1]]", 0, 64, 0, 0, 7,
                     (("flow_id", 1), ("to", "sip1.cube0.pe0")))
    log.append("dma", "sip0", "cube0.pe0.dma0", "matmul", 5, 32, 0, 3, 9, {"src": "sip0.cube0.hbm"})
    log.seal()
    rotate = {2: lambda text: text.replace("sip0", "sip2")}
    group_of_2 = {0: 2, 1: 3}  # SIP 2 is rank 0 of the group [2, 3] that followed [0, 1]
    log.replicate(first, [Image(rotate[2], 0, 1, 10, {"ag[group[0, 1]]": Relabel(
        lambda text: re.sub(r"sip(\d)", lambda m: f"sip{group_of_2[int(m.group(1))]}", text), "ag[group[2, 3]]",
        0, 2)})])
    send, dma = list(log)[2:]
    assert (send.device, send.label, send.program, send.args) == (
        "sip2", "ag[group[2, 3]]", 0, {"flow_id": 11, "to": "sip3.cube0.pe0"})
    assert (dma.device, dma.label, dma.program, dma.args) == ("sip2", "matmul", 5, {"src": "sip2.cube0.hbm"})
    assert log.device_spans()["sip2"] == (0, 9, 2)


def _racing_on_every_rank(torch):
    from tests.runtime_api.test_data_executor import BLOCK, publish_then_read

    def worker(rank):
        torch.ahbm.set_device(rank)
        buf, out = torch.zeros(BLOCK, name="buf"), torch.empty(BLOCK, name="out")
        publish_then_read[(2,)](buf, out, buf, BLOCK=BLOCK, READER_WAITS=False)
        torch.ahbm.synchronize()
    torch.multiprocessing.spawn(worker, nprocs=torch.ahbm.device_count())


def test_adr0022_t9_a_data_hazard_is_reported_on_every_rank_that_has_it():
    """SIP 0's hazard stands for every rank's, which replication would not find: the spawn is simulated in full."""
    report, _, _, attempts = _simulated(_racing_on_every_rank, "default", spmd=True)
    assert len(attempts) == 2
    assert sorted(hazard["sip"] for hazard in report["hazards"]) == [0, 1, 2, 3]
