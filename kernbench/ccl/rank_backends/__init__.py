"""How a worker's ranks run `torch.distributed`'s calls: as SIP ranks or PE ranks (ADR 0012)."""

from kernbench.ccl.rank_backends.backend import RankBackend
from kernbench.ccl.rank_backends.choice import rank_backend
from kernbench.ccl.rank_backends.pe_ranks import PeRanks
from kernbench.ccl.rank_backends.sip_ranks import SipRanks

__all__ = ["PeRanks", "RankBackend", "SipRanks", "rank_backend"]
