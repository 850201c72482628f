"""Launching Triton kernels on kernbench tensors: placement of programs on PEs, streams, faults.

`kernel[grid](...)` with kernbench tensors reaches `launch` through the
bridge's hook (ADR 0007). The launch is enqueued on the current stream of the
tensors' device and returns at once, as on a GPU. When the stream reaches it,
each PE that received programs keeps up to `pe.resident_programs` of them in
flight (the topology's number; while one waits on a DMA another computes,
as resident CTAs do on an SM), taking them in order, all PEs in parallel in
simulated time.

Program placement (ADR 0008): programs go to the PEs that own the launch's
largest tensor, in blocks — program p of n to owner ⌊p·k/n⌋ of k — since a
program usually touches the slice of data its id selects. When that tensor
lives on a single PE, programs are dealt round-robin over every PE of the
SIP, nearest to the data first, so a tensor on one PE (the default of a
`first_pe` topology) still uses the whole device.

A launch's host cost does not grow with its grid: each PE's share is a
`range` (owner i of k gets programs ⌈i·n/k⌉ up to ⌈(i+1)·n/k⌉ in blocks,
`range(i, n, k)` round-robin), and the PE's resident workers take their next
program from one iterator over it, so only the programs in flight exist as
Python objects. `ctx.programs_done` counts finished programs for the
progress line.

A launch of more programs than the run allows (`MAX_PROGRAMS` unless
`Session(max_programs=)` or `kernbench run --max-programs` says otherwise)
is refused at `kernel[grid](...)`: every program is simulated one by one,
so a grid of 2^40 would never end and one of 10^6 takes many minutes.

The bridge's memcheck (ADR 0014) is on unless the run turned it off
(`Session(memcheck=False)`, `kernbench run --no-memcheck`); a fault it
raises is told here which tensor, if any, the faulting address lies in
instead of the one the kernel's pointer came from.
"""

from __future__ import annotations

from typing import Iterator

from kernbench.kernels.errors import KernelFault, KernelLaunchError
from kernbench.kernels.triton_import import when_imported
from kernbench.numerics import device_arithmetic
from kernbench.runtime_api.launch.access_plans import AccessPlans
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.launch.kernel_port import SimProgramPort

# Programs one kernel launch may have by default. A program costs a few hundred microseconds of host time, so
# this many take a minute or two; a GPU-sized grid over tens of millions of elements stays well inside it.
MAX_PROGRAMS = 1 << 18


def install() -> None:
    """Route launches on kernbench tensors here (idempotent; see ADR 0007 for the hook), from when Triton is
    imported: now if it is, else right after its import (a run that launches no kernel never loads it)."""
    when_imported(_install_hook)


def _install_hook() -> None:
    from kernbench.kernels.triton_bridge.hook import install_launch_hook

    install_launch_hook(launch, _run_caches)


def _run_caches(tensor):
    """The speed caches of the run a tensor belongs to: a launch on it keeps its kernel's traced shapes there."""
    return tensor._ctx.caches


def launch(prepared) -> None:
    tensors = [arg.tensor for arg in prepared.pointer_args]
    ctx = tensors[0]._ctx
    devices = {str(t.device) for t in tensors}
    if len(devices) != 1 or any(t.device.is_host for t in tensors) or any(t._ctx is not ctx for t in tensors):
        names = ", ".join(f"{a.name}={a.tensor.device}" for a in prepared.pointer_args)
        raise TensorError(f"kernel '{prepared.kernel_name}': every tensor argument must be on one device; got {names}")
    grid = prepared.grid
    programs = grid[0] * grid[1] * grid[2]
    if programs > ctx.max_programs:
        raise KernelLaunchError(
            f"kernel '{prepared.kernel_name}' grid {grid} is {programs:,} programs, above the limit of "
            f"{ctx.max_programs:,} (each is simulated one by one, a few hundred microseconds of host time each); "
            "launch fewer, larger programs, or raise the limit with kernbench run --max-programs N "
            "(Session(max_programs=N))")
    prepared.timing_only = ctx.timing_only
    prepared.memcheck = ctx.memcheck
    plans = AccessPlans(ctx.access_plan_pool)

    def run_program(pe, linear: int) -> None:
        program_id = (linear % grid[0], (linear // grid[0]) % grid[1], linear // (grid[0] * grid[1]))
        try:
            port = SimProgramPort(ctx, prepared.kernel_name, linear, pe, ctx.timing_only, plans)
            prepared.run_program(program_id, port)
        except KernelFault as fault:
            _name_what_is_there(ctx, pe.sip, fault)
            raise

    def finished() -> None:
        prepared.finished()
        plans.release()

    prepared.share_memo_pool(ctx.replay_memo_pool)
    launch_programs(ctx, tensors, tensors, programs, prepared.kernel_name,
                    f"kernel {prepared.kernel_name}{grid}", run_program, finished=finished)


def launch_programs(ctx, tensors, written, n_programs: int, name: str, label: str, run_program,
                    finished=None, host_launch: bool = True) -> None:
    """Enqueue `n_programs` programs over `tensors` on the current stream of their device; return at once.

    The one launch path of kernels and built-in device ops: programs are
    placed on PEs (`place_programs`), each PE keeps `pe.resident_programs`
    of them in flight, and `run_program(pe, linear)` runs program `linear`
    on `pe` in its own greenlet. The launch first waits for writes in flight
    to any of `tensors`; the tensors in `written` wait for it in turn.
    `finished()`, if given, is called when the programs have ended, however.
    The calling host first spends the topology's kernel launch time
    (`system.host_link.kernel_launch_ns`, grown by `host_growth_per_gpu` for
    each further worker of its spawn), as a GPU's framework and driver do:
    a single op waits it out, a host running ahead of its device hides it.
    `host_launch=False` skips it for an op's further kernel, enqueued within
    the call that launched its first (a reduction's merge: adr/0016).
    A launch from outside any process (a script driving the engine itself)
    has no host timeline to spend it on and enqueues at once. Once the
    launch's turn on its stream comes, the device spends `sip.kernel_start_ns`
    before its programs run, as a GPU's front end launches a grid: that much
    the stream is busy per kernel however far ahead the host is.
    """
    sip = tensors[0].device.index
    assignment = place_programs(ctx, tensors, sip, n_programs)
    waits = [handle for t in tensors for handle in t._pending_writes]
    engine = ctx.engine

    def run_on_pe(pe, programs: Iterator[int]) -> None:
        # Every resident worker of the PE draws from the same iterator: the next program goes to
        # whichever worker finishes first, in program order. Its programs compute as the device does.
        with device_arithmetic():
            for linear in programs:
                run_program(pe, linear)
                ctx.programs_done += 1

    def run_launch() -> None:
        if waits:
            engine.wait_all(waits)
        if start_ps:
            engine.sleep(start_ps)
        resident = ctx.topology.pe.resident_programs
        workers = []
        for pe, programs in assignment:
            shared = iter(programs)
            workers += [engine.spawn(run_on_pe, pe, shared, name=f"{name} on sip{sip}.{pe.name}#{slot}")
                        for slot in range(min(resident, len(programs)))]
        for worker in workers:
            worker.add_callback(_observed)
        try:
            engine.wait_all(workers)
        except BaseException:
            for worker in workers:
                worker.kill()
            raise
        finally:
            if finished is not None:
                finished()

    system, start_ps = ctx.topology.system, ctx.topology.sip.kernel_start_ps
    launch_ps = system.host_call_ps(system.kernel_launch_ps, ctx.spawned_count() or 1)
    if host_launch and launch_ps and engine.current_process is not None:
        engine.sleep(launch_ps)  # the host's cost of the launch; work already on the device runs on meanwhile
    handle = ctx.current_stream(sip).enqueue(label, run_launch, spmd=(
        "launch", name, n_programs, tensors, written, run_program, finished, waits, start_ps))
    for tensor in written:
        tensor._pending_writes.append(handle)


def place_programs(ctx, tensors, sip: int, n_programs: int) -> list[tuple[object, range]]:
    """[(PeUnits, range of linear program ids), ...]: each PE that gets programs, in the order it first gets one."""
    largest = max(tensors, key=lambda t: t.nbytes)
    placement = largest.placement
    owners = list(dict.fromkeys((s.cube, s.pe) for s in placement.shards if s.replica == 0))
    k = len(owners)
    if k == 1:
        owners = _nearest_first(ctx.machine, sip, owners[0][0])
        k = len(owners)
        # Program p goes to owner p mod k.
        shares = [range(i, n_programs, k) for i in range(k)]
    else:
        # Program p goes to owner ⌊p·k/n⌋, i.e. owner i gets ⌈i·n/k⌉ <= p < ⌈(i+1)·n/k⌉.
        shares = [range(-(-i * n_programs // k), -(-(i + 1) * n_programs // k)) for i in range(k)]
    return [(ctx.machine.pe(sip, cube, pe), programs) for (cube, pe), programs in zip(owners, shares) if programs]


def _nearest_first(machine, sip: int, home: int) -> tuple[tuple[int, int], ...]:
    """Every (cube, pe) of a SIP, PE slot by PE slot, cubes nearest `home` on the NoC first (ties by index):
    worked out once per run, SIP and home cube (in the run's caches), since every launch of a single-PE tensor
    asks."""
    topology = machine.topology
    known = machine.caches["kernel_launch.nearest_first"]
    order = known.get((sip, home))
    if order is None:
        cubes = sorted(range(topology.cubes_per_sip), key=lambda c: (len(topology.noc_route(home, c, sip=sip)), c))
        order = known[sip, home] = tuple((cube, pe) for pe in range(topology.pes_per_cube) for cube in cubes)
    return order


def _name_what_is_there(ctx, sip: int, fault: KernelFault) -> None:
    """Fill in `fault.inside`: the other tensor a faulting address lies in (what it would have read or overwritten)."""
    if fault.inside is not None or fault.address is None or fault.tensor is None:
        return
    there = ctx.machine.memory[sip].find(fault.address)
    if there is not None and there.base != fault.address - fault.offset:
        fault.inside = there.name


def _observed(_worker) -> None:
    """A PE worker's failure is re-raised by the launch, not reported again by the engine."""
