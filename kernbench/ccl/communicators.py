"""What a run's communication keeps from one call to the next, as NCCL's communicators do.

PyTorch's NCCL backend runs each communicator's asynchronous work on an
internal stream of its own per device, and gives each peer pair its own
communicator, hence its own stream per direction. Those streams, and the
one-element tensor a barrier all-reduces, are made on first use and kept for
the whole run, whichever world or rank backend asks next: a later call finds
the same stream (the same name in the trace) and the same token allocation.
"""

from __future__ import annotations

from kernbench import dtypes
from kernbench.runtime_api.namespace.factories import Factories
from kernbench.runtime_api.streams import Stream


class Communicators:
    """The run's communication streams and barrier tokens, keyed by device."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._p2p_streams: dict = {}  # (device, sender, receiver) -> Stream
        self._group_streams: dict = {}  # (device, group name) -> Stream of the group's async collectives
        self._barrier_tokens: dict = {}  # (device, ranks it drives) -> the tensor barriers all-reduce

    def group_stream(self, device: int, group_name: str) -> Stream:
        """The stream a group's `async_op` collectives run on, on one device (NCCL's internal stream)."""
        key = (device, group_name)
        stream = self._group_streams.get(key)
        if stream is None:
            stream = self._group_streams[key] = Stream(self._ctx, device, name=f"ahbm:{device}.{group_name}")
        return stream

    def p2p_stream(self, device: int, sender: int, receiver: int) -> Stream:
        """The stream of one direction between two ranks, on one of them: NCCL's per-peer-pair stream."""
        key = (device, sender, receiver)
        if key not in self._p2p_streams:
            self._p2p_streams[key] = Stream(self._ctx, device, name=f"ahbm:{device}.p2p[{sender}->{receiver}]")
        return self._p2p_streams[key]

    def barrier_token(self, device: int, ranks: int, placement):
        """The float32 tensor of one element per rank a worker's barrier all-reduces on `device`; with more
        than one rank, `placement(ranks)` puts each element on its rank's PE."""
        token = self._barrier_tokens.get((device, ranks))
        if token is None:
            token = self._barrier_tokens[device, ranks] = Factories(self._ctx).zeros(
                ranks, dtype=dtypes.float32, device=f"ahbm:{device}", name=f"barrier token of ahbm:{device}",
                **({"dp": placement(ranks)} if ranks > 1 else {}))
        return token
