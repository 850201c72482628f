"""Which rank backend drives a worker's ranks of a world: ADR 0012's rule, decided here and nowhere else.

Whether ranks are SIPs or PEs depends on the world's size against the SIP
count and on how the calling worker was started: the worker of a bench that
does not spawn drives PE ranks of one SIP in a world of another size than
the SIP count, spawned workers do above the SIP count (each driving
world/nprocs of them). One world can be joined both ways (a bench
initializes it, then spawns the workers that use it), so a world holds a
backend per way of starting a worker, each chosen the first time such a
worker uses the world and kept with it.
"""

from __future__ import annotations

from kernbench.ccl.rank_backends.backend import RankBackend
from kernbench.ccl.rank_backends.pe_ranks import PeRanks
from kernbench.ccl.rank_backends.sip_ranks import SipRanks


def rank_backend(world, ctx, communicators) -> RankBackend:
    """The backend driving the calling worker's ranks of `world`."""
    started = (ctx.spawned_rank() is not None, ctx.spawned_count())  # spawned at all; by a spawn of how many
    backend = world.backends.get(started)
    if backend is None:
        backend = world.backends[started] = _chosen(world, ctx, communicators, *started)
    return backend


def _chosen(world, ctx, communicators, spawned: bool, nprocs: int | None) -> RankBackend:
    n_sips = ctx.topology.n_sips
    if world.size > n_sips or (not spawned and world.size != n_sips):
        return PeRanks(ctx, world, communicators, ranks_per_worker=world.size // (nprocs or 1))
    return SipRanks(ctx, world, communicators)
