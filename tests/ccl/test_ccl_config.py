"""ADR 0012: ccl.yaml — loading, resolving, world size, per-group options, and the command line.

Every mistake in a file is one `CclConfigError` naming the file, the line
and the key path and listing what is valid; what only the machine can judge
(slots against its IPCQ depth, whether the module imports) is refused at
`init_process_group`. Expected lines are found in the text the test wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kernbench.runtime_api import current_run
from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.install import (SHIPPED_CCL_PATH, CclConfigError, explicit_world_size, load_ccl_config,
                                   resolve_algorithm_config)
from kernbench.ccl.process_group import world_size_rule
from kernbench.errors import KernbenchError
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.test_distributed import ccl, restore_current_ccl, run_world  # noqa: F401 (autouse fixture)
from tests.cli import run_kernbench_in_process

ROOT = Path(__file__).resolve().parents[2]
# These tests exercise a named algorithm's path (its module, its slots checked at init): the shipped file with
# `algorithm: ring` in place of its `auto` (the tuner has tests of its own, tests/ccl/test_tuner.py).
SHIPPED = SHIPPED_CCL_PATH.read_text().replace("algorithm: auto ", "algorithm: ring ", 1)
ALGORITHMS = "ring, tree, direct, halving_doubling, hierarchical"
PARAMETER_KEYS = ("algorithm, world_size, n_elem, buffer_kind, backpressure, n_slots, slot_size, poll_interval_ns, "
                  "channels, max_channels, channel_min_kib, p2p_channels, symmetric, protocol, candidates")


def shipped_with(tmp_path: Path, old: str, new: str, name: str = "ccl.yaml") -> tuple[Path, int]:
    """The shipped file with `old` replaced by `new`, written to tmp_path; (its path, the line of `new`)."""
    assert SHIPPED.count(old) == 1, old
    text = SHIPPED.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if new.splitlines()[0] in row)
    return path, line


def init_error(topology: str, cfg, **init_kwargs) -> KernbenchError:
    """The error `init_process_group` raises in a run of `topology` with `cfg`."""
    session = Session(topology, ccl=cfg)
    with pytest.raises(KernbenchError) as error:
        session.run(lambda torch: torch.distributed.init_process_group(backend="ahbm", **init_kwargs), session.torch)
    return error.value


# ---- file errors ---------------------------------------------------------------------------

def test_adr0012_t24_an_unknown_algorithm_lists_the_valid_ones(tmp_path):
    path, line = shipped_with(tmp_path, "algorithm: ring ", "algorithm: rign ")
    with pytest.raises(CclConfigError) as error:
        load_ccl_config(path)
    assert str(error.value) == (f"{path}:{line}: defaults.algorithm: unknown algorithm 'rign' (did you mean "
                                f"'ring'?); expected one of: {ALGORITHMS}")
    with pytest.raises(CclConfigError, match=f"unknown algorithm 'bus'; expected one of: {ALGORITHMS}"):
        resolve_algorithm_config(load_ccl_config(SHIPPED_CCL_PATH), algorithm="bus")
    error = init_error("default", SHIPPED_CCL_PATH, pg_options={"algorithm": "tre"})
    assert str(error) == (f"init_process_group(pg_options) over {SHIPPED_CCL_PATH}: defaults.algorithm: unknown "
                          f"algorithm 'tre' (did you mean 'tree'?); expected one of: {ALGORITHMS}")


@pytest.mark.parametrize("old, new, key_path, valid", [
    ("n_slots: 8 ", "n_slot: 8 ", "defaults.n_slot", f"(did you mean 'n_slots'?); valid keys: {PARAMETER_KEYS}"),
    ("defaults:", "world_sise: 3\ndefaults:", "world_sise",
     "(did you mean 'world_size'?); valid keys: world_size, defaults, algorithms"),
    ("    wiring: binary_tree", "    wirng: binary_tree", "algorithms.tree.wirng",
     "(did you mean 'wiring'?); valid keys: module, wiring, params, n_elem, buffer_kind, backpressure, n_slots, slot_size, "
     "poll_interval_ns, channels, max_channels, channel_min_kib, p2p_channels, symmetric, protocol"),
])
def test_adr0012_t25_an_unknown_key_lists_the_valid_keys_and_suggests_the_closest(tmp_path, old, new, key_path, valid):
    path, line = shipped_with(tmp_path, old, new)
    with pytest.raises(CclConfigError) as error:
        load_ccl_config(path)
    assert str(error.value) == f"{path}:{line}: {key_path}: unknown key {valid}"
    error = init_error("default", SHIPPED_CCL_PATH, pg_options={"n_slot": 4})
    assert str(error).startswith(f"init_process_group(pg_options) over {SHIPPED_CCL_PATH}: defaults.n_slot: unknown "
                                 "key (did you mean 'n_slots'?)")


def test_adr0012_t26_a_yaml_syntax_error_names_the_file_and_line(tmp_path):
    path, line = shipped_with(tmp_path, "  n_elem: 32", "  n_elem: [32")
    with pytest.raises(CclConfigError) as error:
        load_ccl_config(path)
    message = str(error.value)
    assert message.startswith(f"{path}:") and "YAML syntax error" in message
    reported = int(message.split(":")[1])
    assert line <= reported <= line + 1  # the reader notices an unclosed bracket at the next token


@pytest.mark.parametrize("old, new, key_path, expected", [
    ("n_slots: 8 ", "n_slots: eight ", "defaults.n_slots", "found 'eight' (a string); expected a positive integer"),
    ("n_slots: 8 ", "n_slots: true ", "defaults.n_slots", "found true (a boolean); expected a positive integer"),
    ("slot_size: 65536", "slot_size: 0", "defaults.slot_size", "found 0; expected a positive integer"),
    ("buffer_kind: tcm", "buffer_kind: dram", "defaults.buffer_kind",
     "found 'dram' (a string); expected one of: tcm, hbm, sram"),
    ("backpressure: sleep", "backpressure: spin", "defaults.backpressure",
     "found 'spin' (a string); expected one of: poll, sleep"),
    ("poll_interval_ns: 20", "poll_interval_ns: -1", "defaults.poll_interval_ns",
     "found -1; expected a positive number of nanoseconds"),
    ("defaults:", "world_size: 2.5\ndefaults:", "world_size", "found 2.5; expected a positive integer"),
    ("module: kernbench.ccl.algorithms.direct", "module: 3", "algorithms.direct.module",
     "found 3; expected a Python module path such as kernbench.ccl.algorithms.ring"),
])
def test_adr0012_t27_a_value_of_the_wrong_kind_names_its_key_and_what_was_expected(tmp_path, old, new, key_path,
                                                                                  expected):
    path, line = shipped_with(tmp_path, old, new)
    with pytest.raises(CclConfigError) as error:
        load_ccl_config(path)
    assert str(error.value) == f"{path}:{line}: {key_path}: {expected}"


@pytest.mark.parametrize("text, expected", [
    ("", "PATH: the file is empty; expected a mapping with world_size, defaults, algorithms"),
    ("# only a comment\n\n   # and another\n",
     "PATH: the file is empty; expected a mapping with world_size, defaults, algorithms"),
    ("- ring\n- tree\n", "PATH:1: (top level): found a list; expected a mapping with world_size, defaults, algorithms"),
])
def test_adr0012_t28_an_empty_or_shapeless_file_says_what_a_ccl_file_holds(tmp_path, text, expected):
    path = tmp_path / "ccl.yaml"
    path.write_text(text)
    with pytest.raises(CclConfigError) as error:
        load_ccl_config(path)
    assert str(error.value) == expected.replace("PATH", str(path))
    with pytest.raises(CclConfigError, match="missing.yaml: no such ccl file"):
        load_ccl_config(tmp_path / "missing.yaml")


def test_adr0012_t29_slots_the_topologys_queues_cannot_hold_are_refused_at_init_process_group(tmp_path):
    depth = load_topology("default").ipcq.depth
    assert load_topology("large").ipcq.depth > depth
    path, _ = shipped_with(tmp_path, "n_slots: 8 ", f"n_slots: {depth + 1} ")
    load_ccl_config(path)  # the file alone is fine: the limit is the machine's
    error = init_error("default", path)
    assert str(error) == (f"{path}: n_slots must be an integer from 1 to {depth} (the topology's ipcq.depth), "
                          f"got {depth + 1}")
    session = Session("large", ccl=path)  # a machine with deeper queues takes the same file
    session.run(lambda torch: torch.distributed.init_process_group(backend="ahbm"), session.torch)
    max_slot = load_topology("default").ipcq.max_slot_bytes
    error = init_error("default", ccl(slot_size=2 * max_slot))
    assert f"slot_size must be an integer from 1 to {max_slot}" in str(error)


def test_adr0012_t30_an_algorithm_module_that_does_not_import_is_named_at_init_process_group(tmp_path):
    path, _ = shipped_with(tmp_path, "module: kernbench.ccl.algorithms.ring", "module: kernbench.ccl.algorithms.rnig")
    error = init_error("default", path)
    assert isinstance(error, CclConfigError)
    assert str(error) == (f"{path}: algorithms.ring.module: cannot import 'kernbench.ccl.algorithms.rnig' "
                          "(No module named 'kernbench.ccl.algorithms.rnig')")


def test_adr0012_t31_a_missing_queue_setting_or_an_impossible_world_size_is_named(tmp_path):
    cfg = yaml.safe_load(SHIPPED)  # a mapping is a whole configuration (a file is laid over the shipped one)
    del cfg["defaults"]["poll_interval_ns"]
    error = init_error("default", cfg)
    assert str(error) == ("<ccl mapping>: defaults.poll_interval_ns: not set (nor in algorithms.ring); every "
                          f"collective's queues need buffer_kind, backpressure, n_slots, slot_size, poll_interval_ns")
    pes = load_topology("default").pes_per_sip
    error = init_error("default", ccl(world_size=pes + 1))
    assert str(error) == (f"<ccl mapping>: world_size: a world of {pes + 1} ranks exceeds both the 4 SIPs and the "
                          f"{pes} PEs of one SIP")


# ---- what a run is configured with ---------------------------------------------------------

def test_adr0012_t32_load_ccl_config_gives_the_current_runs_file_else_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setattr(current_run, "_current", None)
    assert load_ccl_config().source == str(SHIPPED_CCL_PATH)
    path, _ = shipped_with(tmp_path, "n_elem: 32", "n_elem: 4242")
    session = Session("single_sip", ccl=path)
    seen = session.run(lambda torch: load_ccl_config(), session.torch)
    assert seen.source == str(path) and seen["defaults"]["n_elem"] == 4242
    assert load_ccl_config(path) == seen and load_ccl_config(seen) is seen


def test_adr0012_t33_resolve_algorithm_config_flattens_defaults_under_the_chosen_entry(tmp_path):
    path, _ = shipped_with(tmp_path, "    wiring: binary_tree", "    wiring: binary_tree\n    n_slots: 2")
    cfg = load_ccl_config(path)
    flat = resolve_algorithm_config(cfg)
    assert flat == {"algorithm": "ring", "module": "kernbench.ccl.algorithms.ring", "wiring": "ring_1d",
                    "n_elem": 32, "buffer_kind": "tcm", "backpressure": "sleep", "n_slots": 8, "slot_size": 65536,
                    "poll_interval_ns": 20, "poll_interval_ps": 20_000, "candidates": ["ring", "tree", "hierarchical"],
                    "channels": 1, "max_channels": 16, "channel_min_kib": 128, "p2p_channels": 32, "symmetric": True,
                    "protocol": "auto"}
    tree = resolve_algorithm_config(cfg, algorithm="tree")
    assert tree == {**flat, "algorithm": "tree", "module": "kernbench.ccl.algorithms.tree", "wiring": "binary_tree",
                    "n_slots": 2}
    assert resolve_algorithm_config(ccl(world_size=3))["world_size"] == 3


@pytest.mark.parametrize("topology, top, default, expected, pe_ranks", [
    ("default", 2, 3, 2, False),  # explicit world_size wins
    ("default", None, 3, 3, False),  # else defaults.world_size
    ("default", None, None, 4, False),  # else the SIP count
    ("large", None, None, 32, False),
    ("single_sip", None, 5, 5, True),  # above the SIP count: PE ranks
])
def test_adr0012_t34_world_size_is_explicit_else_defaults_else_the_sip_count(topology, top, default, expected,
                                                                             pe_ranks):
    cfg = ccl(world_size=top)
    if default is not None:
        cfg["defaults"]["world_size"] = default
    assert world_size_rule(explicit_world_size(load_ccl_config(cfg)), None, None,
                           load_topology(topology).n_sips)[0] == expected
    session = Session(topology, ccl=cfg)
    results = run_world(session, lambda torch, rank: (torch.distributed.get_world_size(), torch.distributed.get_rank()))
    assert sorted(results.values()) == ([(expected, 0)] if pe_ranks else [(expected, r) for r in range(expected)])


def test_adr0012_t35_pg_options_override_ccl_defaults_for_the_process_group():
    """How a sweep compares algorithms in one run: init, run, destroy, init with other options."""
    session = Session("default", ccl=ccl("ring"))
    torch = session.torch

    def worker(rank, algorithm):
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group(backend="ahbm", pg_options={"algorithm": algorithm})
        x = torch.ones(64)
        torch.distributed.all_reduce(x)
        assert x.numpy().tolist() == [4.0] * 64

    def bench(torch):
        for algorithm in ("tree", "halving_doubling"):
            torch.distributed.init_process_group(backend="ahbm", pg_options={"algorithm": algorithm})
            torch.multiprocessing.spawn(worker, args=(algorithm,), nprocs=4)
            torch.distributed.destroy_process_group()

    session.run(bench, torch)
    assert [record["algorithm"] for record in session.ctx.collectives] == ["tree", "halving_doubling"]


def test_adr0012_t36_every_rank_may_call_init_process_group_but_not_with_other_options():
    failures = {}

    def worker(torch, rank):
        torch.distributed.init_process_group(backend="ahbm", world_size=4, rank=rank)  # the same world: fine
        try:
            torch.distributed.init_process_group(backend="ahbm", pg_options={"algorithm": "direct"})
        except CollectiveError as error:
            failures[rank] = str(error)
        return torch.distributed.is_initialized()

    assert set(run_world(Session("default", ccl=ccl("ring")), worker).values()) == {True}
    assert failures == {r: "init_process_group: already initialized with other options; call "
                           "destroy_process_group() first" for r in range(4)}
    error = init_error("default", ccl(world_size=4), world_size=3)
    assert str(error) == "init_process_group(world_size=3): <ccl mapping>: world_size gives a world size of 4"


# ---- the command line ----------------------------------------------------------------------

def test_adr0012_t37_kernbench_run_takes_the_world_size_from_the_ccl_file_and_reports_each_collective(tmp_path):
    path, _ = shipped_with(tmp_path, "defaults:", "world_size: 7\ndefaults:")
    path.write_text(path.read_text().replace("n_elem: 32", "n_elem: 48"))
    out = tmp_path / "report.json"
    result = run_kernbench_in_process("run", str(ROOT / "benches" / "ccl_allreduce.py"), "--ccl", str(path), "--json",
                                      str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "  ring (ws=7): 7 OK" in result.stdout.splitlines()
    [row] = json.loads(out.read_text())["collectives"]
    assert (row["collective"], row["algorithm"], row["dtype"]) == ("all_reduce", "ring", "f16")
    assert row["bytes"] == 48 * 2 and row["ranks"] == list(range(7)) and row["world_size"] == 7
    assert row["time_ps"] > 0
    assert row["algbw_gb_per_s"] == pytest.approx(row["bytes"] / row["time_ps"] * 1e12 / 1e9)
    assert row["busbw_gb_per_s"] == pytest.approx(row["algbw_gb_per_s"] * 2 * 6 / 7)


def test_adr0012_t38_a_bad_ccl_file_is_one_line_with_exit_status_2(tmp_path):
    path, line = shipped_with(tmp_path, "backpressure: sleep", "backpressure: nap")
    result = run_kernbench_in_process("run", "ccl_allreduce", "--ccl", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr == (f"kernbench: error: {path}:{line}: defaults.backpressure: found 'nap' (a string); "
                             f"expected one of: poll, sleep\n")


def test_adr0012_t44_an_algorithms_own_params_reach_its_config(tmp_path, monkeypatch):
    (tmp_path / "my_algorithm.py").write_text(
        "from kernbench.ccl.algorithms import direct\n"
        "SEEN = []\n\n"
        "def all_reduce(ctx, request):\n"
        "    SEEN.append((ctx.rank, ctx.config['fan_out'], ctx.config['n_slots']))\n"
        "    direct.all_reduce(ctx, request)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = ccl("mine")
    cfg["algorithms"]["mine"] = {"module": "my_algorithm", "wiring": "full", "n_slots": 4, "params": {"fan_out": 3}}
    assert resolve_algorithm_config(cfg)["fan_out"] == 3
    results = run_world(Session("default", ccl=cfg),
                        lambda torch, rank: torch.distributed.all_reduce(x := torch.ones(8)) or x.numpy())
    assert all((values == 4).all() for values in results.values())
    import my_algorithm

    assert sorted(my_algorithm.SEEN) == [(rank, 3, 4) for rank in range(4)]

    cfg["algorithms"]["mine"]["params"] = {"n_slots": 2}
    with pytest.raises(CclConfigError, match=r"algorithms\.mine\.params\.n_slots: 'n_slots' is a framework key"):
        load_ccl_config(cfg)
