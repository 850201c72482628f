"""What `init_process_group` and `spawn` refuse before a world is set up.

Two things only the run can tell, checked once where the world is made
rather than at the first collective (which would hang or fail far from the
cause): whether the world's ranks split over the workers that will drive
them (ADR 0012), and whether the ccl configuration fits the machine's queues
and names algorithm modules that import.
"""

from __future__ import annotations

import importlib

from kernbench.ccl.install import CclConfigError
from kernbench.ccl.tuner import AUTO, slots_within
from kernbench.machine.ipcq import IpcqSettings

_IPCQ_KEYS = ("buffer_kind", "backpressure", "n_slots", "slot_size", "poll_interval_ns")


def split_over_workers(size: int, nprocs: int | None, topology) -> str:
    """Why a world of `size` ranks cannot run on `nprocs` spawned workers ('' when it can; None: not spawned).

    Up to the SIP count a spawned worker is one rank (its SIP). Above it,
    spawned workers split the world into equal shares of consecutive ranks, a
    worker per SIP, each driving size/nprocs PE ranks of its SIP. The worker of
    a bench that does not spawn drives SIP ranks or the PE ranks of one SIP.
    """
    n_sips, pes = topology.n_sips, topology.pes_per_sip
    if nprocs is None:
        fits = size <= max(n_sips, pes)
        return "" if fits else f"a world of {size} ranks exceeds both the {n_sips} SIPs and the {pes} PEs of one SIP"
    if size <= n_sips:
        return "" if nprocs == size else "spawn one worker per rank"
    if nprocs > n_sips:
        return f"{nprocs} workers on {n_sips} SIPs; each worker runs on a SIP of its own"
    if size % nprocs:
        return (f"{size} ranks do not split over {nprocs} workers; above the SIP count spawn a number of workers "
                "that divides the world size (each then drives world_size/nprocs PE ranks of its SIP)")
    if size // nprocs > pes:
        return (f"{nprocs} workers would drive {size // nprocs} PE ranks each, more than the {pes} PEs of a SIP")
    return ""


def check_config_on_machine(config: dict, cfg, topology) -> None:
    """What only the machine can tell: the IPCQ settings fit its queues, the algorithm's module imports."""
    missing = [key for key in _IPCQ_KEYS if key not in config]
    if missing:
        raise CclConfigError(f"{cfg.source}: {', '.join(f'defaults.{key}' for key in missing)}: not set (nor in "
                             f"algorithms.{config['algorithm']}); every collective's queues need "
                             f"{', '.join(_IPCQ_KEYS)}")
    n_slots, slot_size = config.get("n_slots"), config.get("slot_size")
    if config["algorithm"] == AUTO:  # upper bounds: the tuner keeps within the topology's queues
        n_slots, slot_size = slots_within(topology, config)
    IpcqSettings.checked(topology, buffer_kind=config.get("buffer_kind"), backpressure=config.get("backpressure"),
                         n_slots=n_slots, slot_size=slot_size, poll_interval_ps=config.get("poll_interval_ps"),
                         source=f"{cfg.source}")
    entries = config["candidates"] if config["algorithm"] == AUTO else {config["algorithm"]: config}
    for name, entry in entries.items():
        try:
            importlib.import_module(entry["module"])
        except ImportError as error:
            raise CclConfigError(f"{cfg.source}: algorithms.{name}.module: cannot import {entry['module']!r} "
                                 f"({error})") from None
