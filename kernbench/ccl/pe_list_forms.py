"""The list forms of the collectives on PE ranks, where a worker stands for several ranks.

With PE ranks a worker drives m of the group's n ranks (all of them when
it did not spawn, ADR 0012), and every tensor argument is read as m equal
chunks of its last dimension, chunk j being the j-th of those ranks'. A
list argument is read the same way element by element: that rank's
`tensor_list[k]` is chunk j of `tensor_list[k]`. So with one worker,
`all_gather(tensor_list, x)` leaves in chunk r of `tensor_list[k]` what rank
k had in chunk k of `x`.

As on ranks per SIP (`list_forms.py`), the lists go through one flat
scratch tensor per call, moved by device copies on the current stream. It
holds m·n·c elements (c the elements of one rank's chunk), chunk j (its
n·c elements, on the rank's own PE by `pe_rank_policy`) being the rank's
flat buffer, its k-th run of c the piece for or from group rank k. Packing
or unpacking element k of a list is one strided copy between its
(rows, m, w) view, ranks first, and the scratch's column k.
"""

from __future__ import annotations

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.list_forms import FlatLists, check_list
from kernbench.runtime_api.namespace.factories import Factories


class PeFlatLists(FlatLists):
    """The list forms of a group of n PE ranks, of which the worker drives group ranks `share` (ascending);
    `policy` places chunk j of a tensor on the PE of the j-th."""

    def __init__(self, ctx, n: int, share: list[int], policy):
        super().__init__(ctx, n)
        self.share, self.m, self.policy = share, len(share), policy

    def check(self, tensors, like, call: str, what: str, *, equal: bool = True) -> list:
        """n tensors of `like`'s dtype and device whose rank chunks are as large as `like`'s: one call gives
        every rank the same sizes, so an all-to-all's pieces are equal too."""
        tensors = check_list(tensors, self.n, like, call, what, equal=False)
        want = _share(like, self.m, call, "the tensor")
        for index, tensor in enumerate(tensors):
            got = _share(tensor, self.m, call, f"{what}[{index}]")
            if got != want:
                raise CollectiveError(f"{call}: each PE rank's chunk of {what}[{index}] has {got} elements, not "
                                      f"{want} as {like.name!r}'s; with PE ranks one call gives every rank the "
                                      "same sizes")
        return tensors

    def scratch(self, like, count: int, call: str):
        """n·c elements per rank it drives (`count` in all), chunk j on the j-th rank's PE."""
        return Factories(self.ctx).empty(count, dtype=like.dtype, device=like.device, dp=self.policy,
                                         name=f"{call} buffer")

    def pack(self, flat, tensors, root: int | None = None) -> None:
        """Chunk j of `tensors[k]` into the j-th rank's k-th run of `flat`: every rank's the worker drives, or the
        root's alone."""
        for k, tensor in enumerate(tensors):
            self._copy(self._column(flat, k, tensor, root), self._by_rank(tensor, root))

    def unpack(self, flat, tensors, root: int | None = None) -> list:
        """The j-th rank's k-th run of `flat` into chunk j of `tensors[k]`; the copies' completion handles."""
        return [tensor._pending_writes[-1] for k, tensor in enumerate(tensors)
                if self._copy(self._by_rank(tensor, root), self._column(flat, k, tensor, root))]

    def _by_rank(self, tensor, root):
        """`tensor` as (ranks, rows, width), its last dimension cut into the chunks of the ranks the worker
        drives; the root's alone if one is named."""
        view = tensor.view(-1, self.m, _width(tensor, self.m)).permute(1, 0, 2)
        return view if root is None else view[self._local(root):self._local(root) + 1]

    def _column(self, flat, k: int, tensor, root):
        """Run k of each rank's buffer in `flat`, shaped like `_by_rank(tensor)`."""
        view = flat.view(self.m, self.n, -1, _width(tensor, self.m))[:, k]
        return view if root is None else view[self._local(root):self._local(root) + 1]

    def _local(self, root: int) -> int:
        """Which of the worker's chunks is group rank `root`'s (the caller acts as the root: it drives it)."""
        return self.share.index(root)

    @staticmethod
    def _copy(target, source) -> bool:
        if not target.numel():
            return False
        target.detach().copy_(source, non_blocking=True)  # outside autograd, as c10d writes: a parameter may receive
        return True


def _width(tensor, n: int) -> int:
    return (tensor.shape[-1] if tensor.shape else 1) // n


def _share(tensor, n: int, call: str, what: str) -> int:
    """The elements of one rank's chunk of `tensor` (its last dimension in n equal parts, one per rank the
    worker drives)."""
    last = tensor.shape[-1] if tensor.shape else 1
    if last % n:
        raise CollectiveError(f"{call}: {what} of shape {tuple(tensor.shape)} has a last dimension of {last}, which "
                              f"does not split into {n} equal chunks (one per PE rank)")
    return tensor.numel() // n
