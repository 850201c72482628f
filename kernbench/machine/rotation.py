"""SIPs in rank order, and names renamed as the ranks rotate: how a rank's records and channels are another's.

A symmetric collective (ccl/symmetry.py) and a replicated spawn
(runtime_api/spmd.py) simulate rank 0 and give every other rank rank 0's
work rotated: a channel, record or device named for rank i's SIP is rank
(i + shift)'s. Names are the machine's (`sipK`, endpoints.SIP_TOKEN).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from kernbench.machine.endpoints import SIP_TOKEN, named_sips
from kernbench.sim_engine import Channel


@dataclass(frozen=True)
class Rotation:
    """The members' SIPs in rank order, and the offsets d of rank 0's queues (to rank d, from rank p − d)."""

    sips: tuple[int, ...]
    offsets: tuple[int, ...]

    @functools.cached_property
    def _rank_of(self) -> dict[int, int]:
        return {sip: rank for rank, sip in enumerate(self.sips)}

    @functools.cached_property
    def _parsed(self) -> dict[str, tuple[tuple[str, ...], tuple[int, ...]]]:
        return {}

    def name(self, text: str, shift: int) -> str:
        """`text` with every member SIP `sipK` (rank i's) renamed to rank (i + shift) mod p's; other SIPs
        unchanged. Each text is parsed once (into the literal pieces around its member SIPs, and their ranks), as
        it is renamed for every shift."""
        parsed = self._parsed.get(text)
        if parsed is None:
            parsed = self._parsed[text] = self._parse(text)
        pieces, ranks = parsed
        if not ranks:
            return text
        sips, p = self.sips, len(self.sips)
        out = [pieces[0]]
        for rank, piece in zip(ranks, pieces[1:]):
            out += ("sip", str(sips[(rank + shift) % p]), piece)
        return "".join(out)

    def _parse(self, text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
        pieces, ranks, start = [], [], 0
        for match in SIP_TOKEN.finditer(text):
            rank = self._rank_of.get(int(match.group(1)))
            if rank is not None:
                pieces.append(text[start:match.start()])
                ranks.append(rank)
                start = match.end()
        pieces.append(text[start:])
        return tuple(pieces), tuple(ranks)

    def owner(self, name: str) -> int | None:
        """The rank whose SIP is the only one a channel's name names (its memories and NoC, its link from the
        switch), or None (a link between two SIPs)."""
        named = named_sips(name)
        return self._rank_of.get(named.pop()) if len(named) == 1 else None


def pass_on(source, image, before: tuple[int, int, int]) -> None:
    """Give `image` (a channel or unit of another rank) the bookings `source` took since `before` (busy time,
    ops, bytes) and its horizon."""
    busy, ops, moved = before
    image.busy_ps += source.busy_ps - busy
    image.ops += source.ops - ops
    image.free_at = source.free_at
    if isinstance(source, Channel):
        image.bytes_moved += source.bytes_moved - moved
        image.gaps = [list(gap) for gap in source.gaps]
