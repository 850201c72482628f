"""The op log: one record per op, the single source for reports and traces.

Appending is on the hot path (one record per PE op), so the log appends
plain tuples to a list (measured: ~20% cheaper per append than building the
named tuple) and hands out `OpRecord`s when read. An op's `args` are stored
as a tuple of (key, value) pairs and read back as a dict: a tuple holding a
dict stays tracked by the garbage collector for good, while one holding only
strings, numbers and such tuples is untracked at its first collection.

**Compacted in blocks.** A tuple record with its large integers costs 240
to 350 bytes (an IPCQ record, with an args tuple of its own, the most), so
a 256-rank all-reduce's half a million ops held more than 100 MB. Every
`BLOCK` records the list becomes one `_Block` of columns: numpy integers
for the sizes, start times and durations, a code per distinct kind, device,
unit, label and args tuple, and a `flow_id` (the one arg that differs per
message, first in an IPCQ record's args, which `append_pairs` takes
apart from the args its queue shares) in a column of its own, each
column in the narrowest integer type that holds its block's values (the
start times alone need 64 bits): about 36 bytes a record. Reading rebuilds
each record's tuple as it was appended, so queries, reports and the
canonical JSON are unchanged: args tuples are shared only where their
values' types match too (1 and 1.0 are equal keys). Records are kept in
append order, which the engine makes deterministic.

**Images.** A symmetric collective (adr/0010) simulates one rank and logs
the others as renamed copies of its records (`replicate`): each copy is a
view of the simulated blocks that keeps only a renaming of their few
distinct devices and args, so p ranks' records cost one rank's memory until
they are read.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Callable, Mapping, NamedTuple

from kernbench.sim_engine.errors import EngineUsageError

_ANY = object()
BLOCK = 1 << 16  # records appended as tuples before they are compacted into columns


class OpRecord(NamedTuple):
    """One op: what (`kind`), where (`device`, `unit`), for whom (`label`, `program`), how much, when.

    `start`/`end` are ps with `end >= start`; `args` is a small dict of extra
    facts (shape, dtype, `flow_id` linking a send to its receive) or None.
    """

    kind: str
    device: str
    unit: str
    label: str | None
    program: int | None
    nbytes: int
    flops: int
    start: int
    end: int
    args: dict | None


class Columns(NamedTuple):
    """The op log as columns (`OpLog.columns`): one int64 array per field, a row per record in append order.

    `kind`, `device`, `label` and `args` are codes, `values[code]` being what
    was appended (a string, None, or an args tuple of (key, value) pairs
    without its `flow_id`); `program` is −1 where it was None.
    """

    kind: "np.ndarray"
    device: "np.ndarray"
    label: "np.ndarray"
    program: "np.ndarray"
    nbytes: "np.ndarray"
    flops: "np.ndarray"
    start: "np.ndarray"
    end: "np.ndarray"
    args: "np.ndarray"
    values: list


class UnitUsage(NamedTuple):
    """Per (device, unit): op count, busy time (union of op intervals) and busy / horizon."""

    ops: int
    busy_ps: int
    utilization: float


class LabelTotals(NamedTuple):
    """Per label: op count, bytes, flops and busy time (sum of op durations)."""

    ops: int
    nbytes: int
    flops: int
    busy_ps: int


class Relabel(NamedTuple):
    """How a copy renames the records of one label (a collective's, whose programs are ranks of its group): their
    device and args by `rename`, their label to `label`, a program id p >= 0 to (p + program_shift) %
    program_modulus."""

    rename: Callable[[str], str]
    label: str
    program_shift: int
    program_modulus: int


class Image(NamedTuple):
    """How `OpLog.replicate` renames a copy of records: `rename` maps the device and every string value of the
    args; a program id p >= 0 becomes (p + program_shift) % program_modulus; a flow id f becomes f +
    flow_offset. Where `relabel` is given, the records of its labels are renamed as it says, and the others keep
    their programs (a kernel's programs are its own, not ranks)."""

    rename: Callable[[str], str]
    program_shift: int
    program_modulus: int
    flow_offset: int
    relabel: Mapping[str, Relabel] | None = None


class OpLog:
    """An append-only list of `OpRecord`s with queries and summaries."""

    __slots__ = ("_records", "_blocks", "_codes", "_values", "_columns")

    def __init__(self):
        self._records: list[tuple] = []  # the newest records, as appended (fewer than BLOCK)
        self._blocks: list[_Block] = []  # the older ones, compacted
        self._columns = (0, None)  # (blocks it was built from, `columns()`'s last answer)
        self._codes: dict = {}  # a kind, device, unit, label or args tuple -> its code in the blocks
        self._values: list = []  # code -> what it stands for

    def append(self, kind, device, unit, label, program, nbytes, flops, start, end, args=None) -> None:
        """Record one op. Raises `EngineUsageError` if `end < start`; nothing else is checked."""
        if end < start:
            raise EngineUsageError(f"op {kind} on {device}:{unit} ends at {end} ps before it starts at {start} ps")
        self._records.append((kind, device, unit, label, program, nbytes, flops, start, end,
                              None if args is None else tuple(args.items()), -1))
        if len(self._records) >= BLOCK:
            self._compact()

    def append_pairs(self, kind, device, unit, label, program, nbytes, flops, start, end, pairs,
                     flow_id: int = -1) -> None:
        """`append` with `args` given as stored: a tuple of (key, value) pairs, or None.

        For callers that log many ops: a pair that never changes (a queue's
        `("to", name)`) is built once and shared by every record, which
        costs no dict per op and no memory per record. Reading gives the
        same `OpRecord` as `append(..., dict(pairs))`.

        A message's `flow_id` (an int >= 0) is given apart: the record's args
        are `("flow_id", flow_id)` then `pairs`, read back as
        `append_pairs(..., (("flow_id", flow_id), *pairs))` would give them,
        while the pairs a queue's messages share stay one object and a block
        takes the id straight into its flow column.
        """
        if end < start:
            raise EngineUsageError(f"op {kind} on {device}:{unit} ends at {end} ps before it starts at {start} ps")
        records = self._records
        records.append((kind, device, unit, label, program, nbytes, flops, start, end, pairs, flow_id))
        if len(records) >= BLOCK:
            self._compact()

    def _compact(self) -> None:
        self._blocks.append(_Block(self._records, self._code))
        self._records = []

    def seal(self) -> int:
        """Compact the records appended so far into a block; return the number of blocks, which is the index
        of the block the next records will start (what `replicate` is given)."""
        if self._records:
            self._compact()
        return len(self._blocks)

    def replicate(self, first_block: int, images) -> None:
        """Append a copy of every record of the blocks from `first_block` (those appended since `seal` returned
        it, sealed again) for each `Image`, renamed as it says, copy after copy.

        A copy shares every column with the records it copies but the device, program, args and flow ids,
        which it works out when read: its memory is its distinct names, not its records.
        """
        if self._records:
            raise EngineUsageError("op log: replicate() needs the copied records sealed first (seal())")
        bases = [_ImageBase(block) for block in self._blocks[first_block:]]
        for image in images:
            for base in bases:
                self._blocks.append(_ImageBlock(base, image, self._code, self._values))

    def _code(self, value) -> int:
        key = (value, tuple(v.__class__ for _, v in value)) if value.__class__ is tuple else value
        try:
            code = self._codes.get(key)
        except TypeError:  # an unhashable arg value (a list): a code of its own
            self._values.append(value)
            return len(self._values) - 1
        if code is None:
            code = self._codes[key] = len(self._values)
            self._values.append(value)
        return code

    def rows(self):
        """Every record as the tuple appended (args as (key, value) pairs, a message's flow id first), oldest
        first: for readers of the whole log that want no `OpRecord` and args dict per record (the trace)."""
        return chain(*(block.tuples(self._values) for block in self._blocks), map(_as_appended, self._records))

    def __len__(self) -> int:
        return sum(len(block) for block in self._blocks) + len(self._records)

    def __iter__(self):
        return map(_as_record, self.rows())

    @property
    def end_ps(self) -> int:
        """The latest end of any op, 0 for an empty log."""
        return max([block.end_ps() for block in self._blocks] + [r[8] for r in self._records], default=0)

    def select(self, kind=None, device=None, unit=None, label=None, program=_ANY, window=None) -> list[OpRecord]:
        """Records matching every given filter, in append order.

        `program` filters on equality (so `program=None` selects ops without
        a program). `window=(t0, t1)` keeps ops overlapping `[t0, t1)`; a
        zero-length op at time t counts as overlapping when `t0 <= t < t1`.
        """
        out = []
        for row in self.rows():  # filtered as stored: only the records selected become `OpRecord`s
            if kind is not None and row[0] != kind:
                continue
            if device is not None and row[1] != device:
                continue
            if unit is not None and row[2] != unit:
                continue
            if label is not None and row[3] != label:
                continue
            if program is not _ANY and row[4] != program:
                continue
            if window is not None:
                t0, t1 = window
                start, end = row[7], row[8]
                if not (start < t1 and (end > t0 or start >= t0)):
                    continue
            out.append(_as_record(row))
        return out

    def unit_usage(self, horizon_ps: int | None = None) -> dict[tuple[str, str], UnitUsage]:
        """Per (device, unit), in order of first appearance: ops, busy time and utilization.

        Busy time is the union of the unit's op intervals (overlapping ops
        count once); utilization is busy time over `horizon_ps` (default
        `end_ps`, i.e. the run from 0 to its last op).
        """
        horizon = self.end_ps if horizon_ps is None else horizon_ps
        intervals: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for r in self.rows():
            intervals.setdefault((r[1], r[2]), []).append((r[7], r[8]))
        usage = {}
        for key, spans in intervals.items():
            busy = 0
            cover_start = cover_end = None
            for start, end in sorted(spans):
                if cover_end is None or start > cover_end:
                    if cover_end is not None:
                        busy += cover_end - cover_start
                    cover_start, cover_end = start, end
                elif end > cover_end:
                    cover_end = end
            busy += cover_end - cover_start
            usage[key] = UnitUsage(len(spans), busy, busy / horizon if horizon else 0.0)
        return usage

    def device_spans(self) -> dict[str, tuple[int, int, int]]:
        """Per device, in order of first appearance: (earliest start, latest end, ops)."""
        self.seal()
        spans: dict[int, list[int]] = {}  # device code -> [index of its first record, start, end, ops]
        offset = 0
        for block in self._blocks:
            for code, first, start, end, count in zip(*(column.tolist() for column in block.device_spans())):
                entry = spans.get(code)
                if entry is None:
                    spans[code] = [offset + first, start, end, count]
                else:
                    entry[1], entry[2], entry[3] = min(entry[1], start), max(entry[2], end), entry[3] + count
            offset += len(block)
        return {self._values[code]: (start, end, count)
                for code, (_, start, end, count) in sorted(spans.items(), key=lambda item: item[1][0])}

    def columns(self, labels=None) -> "Columns":
        """Every record as numpy columns, oldest first, for readers that summarize the whole log (the report)
        without a tuple per record: see `Columns`. With `labels` (a predicate on a label), only the records whose
        label it accepts, read a block at a time: a block with none of them (a collective's copies) is skipped
        without building its columns."""
        import numpy as np

        self.seal()  # the newest records become a block too, so the next reader finds them as columns
        blocks = self._blocks
        if labels is None:
            built_from, columns = self._columns
            if columns is not None and built_from == len(blocks):
                return columns  # blocks are only ever appended: the same blocks, the same columns
            parts = [_block_columns(block, self._values) for block in blocks]
        else:
            accepted: dict[int, bool] = {}  # label code -> whether `labels` accepts it
            parts = []
            for block in blocks:
                codes = block.label
                distinct = np.unique(codes).tolist()
                table = np.zeros(max(distinct) + 1, dtype=bool)
                for code in distinct:
                    if code not in accepted:
                        accepted[code] = bool(labels(self._values[code]))
                    table[code] = accepted[code]
                mask = table[codes]
                if mask.any():
                    parts.append(Columns(*(field[mask] for field in _block_columns(block, self._values)[:9]),
                                         self._values))
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return Columns(*([empty] * 9), self._values)
        columns = Columns(*(np.concatenate([part[k] for part in parts]) for k in range(9)), self._values)
        if labels is None:
            self._columns = (len(blocks), columns)
        return columns

    def label_totals(self) -> dict[str | None, LabelTotals]:
        """Per label, in order of first appearance: ops, bytes, flops and summed durations."""
        totals: dict[str | None, list[int]] = {}
        for _, _, _, label, _, nbytes, flops, start, end, _ in self.rows():
            t = totals.get(label)
            if t is None:
                t = totals[label] = [0, 0, 0, 0]
            t[0] += 1
            t[1] += nbytes
            t[2] += flops
            t[3] += end - start
        return {label: LabelTotals(*t) for label, t in totals.items()}

    def to_json(self) -> str:
        """The whole log as canonical JSON (one list per record, sorted args): equal logs give equal text."""
        return json.dumps([tuple(_as_record(r)) for r in self.rows()], sort_keys=True, separators=(",", ":"))


def _block_columns(block, values: list) -> Columns:
    """One block's records as `Columns` of int64."""
    import numpy as np

    start = block.start.astype(np.int64)
    return Columns(*(getattr(block, field).astype(np.int64) for field in ("kind", "device", "label", "program",
                                                                           "nbytes", "flops")),
                   start, start + block.duration, block.args.astype(np.int64), values)


def _as_appended(record: tuple) -> tuple:
    """A record not compacted yet (its args and its flow id, -1 for none, apart) as the tuple appended."""
    *fields, args, flow = record
    return (*fields, _joined(flow, args))


def _joined(flow: int, rest):
    """The args of a record whose flow id (-1 for none) was kept apart from the rest of its args: the id first."""
    return rest if flow < 0 else (("flow_id", flow), *(rest or ()))


def _as_record(stored: tuple) -> OpRecord:
    kind, device, unit, label, program, nbytes, flops, start, end, args = stored
    # tuple.__new__ directly: a NamedTuple's own __new__ is one more Python call per record read.
    return _new_tuple(OpRecord, (kind, device, unit, label, program, nbytes, flops, start, end,
                                 None if args is None else dict(args)))


_new_tuple = tuple.__new__


class _Reading:
    """What every block kind answers from its columns (`kind` ... `flow`, as `_Block` holds them)."""

    __slots__ = ()

    def __len__(self) -> int:
        return len(self.start)

    def end_ps(self) -> int:
        return int((self.start + self.duration).max())

    def device_spans(self):
        """Per device of the block: its code, the index of its first record, earliest start, latest end, ops."""
        import numpy as np

        order = np.argsort(self.device, kind="stable")
        device = self.device[order]
        firsts = np.flatnonzero(np.r_[True, device[1:] != device[:-1]])
        start = self.start[order].astype(np.int64)
        return (device[firsts], order[firsts], np.minimum.reduceat(start, firsts),
                np.maximum.reduceat(start + self.duration[order], firsts), np.diff(np.r_[firsts, len(device)]))

    def tuples(self, values: list):
        """The records' tuples, equal to those appended."""
        look = values.__getitem__
        args = map(_joined, self.flow.tolist(), map(look, self.args.tolist()))
        programs = (None if p < 0 else p for p in self.program.tolist())
        return zip(map(look, self.kind.tolist()), map(look, self.device.tolist()), map(look, self.unit.tolist()),
                   map(look, self.label.tolist()), programs, self.nbytes.tolist(), self.flops.tolist(),
                   self.start.tolist(), (self.start + self.duration).tolist(), args)


class _Block(_Reading):
    """`BLOCK` records as columns: codes (`OpLog._code`) for the strings and args, integers for the rest.

    An args tuple whose first pair is ("flow_id", n) keeps n in `flow` and the
    rest of the tuple as its code, so a queue's records share one args code.
    """

    __slots__ = ("kind", "device", "unit", "label", "program", "nbytes", "flops", "start", "duration", "args", "flow")

    def __init__(self, records: list[tuple], code):
        import numpy as np  # here, not at import: `kernbench topo` and `--help` load the engine without numpy

        kind, device, unit, label, program, nbytes, flops, start, end, args, flows = zip(*records)

        def codes(values, by_identity: bool = False) -> np.ndarray:
            # One `code` call per distinct value: names by value, whose hash Python keeps; args tuples (and
            # anything unhashable) by identity, since records share most of them and hashing one walks its pairs.
            keys = values
            try:
                distinct = None if by_identity else dict(zip(keys, values))
            except TypeError:
                distinct = None
            if distinct is None:
                keys = list(map(id, values))
                distinct = dict(zip(keys, values))
            table = {key: code(value) for key, value in distinct.items()}
            return _narrowest(np.fromiter(map(table.__getitem__, keys), dtype=np.int64, count=len(keys)))

        self.kind, self.device, self.unit, self.label = codes(kind), codes(device), codes(unit), codes(label)
        self.program = _narrowest(_program_ids(program))
        self.nbytes = _narrowest(_integers(nbytes, "byte counts"))
        self.flops = _narrowest(_integers(flops, "flop counts"))
        self.start = _integers(start, "start times")
        self.duration = _narrowest(_integers(end, "end times") - self.start)  # short next to the times themselves
        flows, rests = list(flows), list(args)  # flow ids given to `append_pairs` apart are columns already
        shared_rests = {}  # the ids of a rest's pairs -> one rest tuple: a queue's records share their pairs
        ids = list(map(id, args))
        with_flow = {key for key, pairs in dict(zip(ids, args)).items() if _carries_flow(pairs)}
        if with_flow:  # records appended with a flow id among their args, each args tuple its own
            for index, key in enumerate(ids):
                if key in with_flow and flows[index] < 0:  # an id given apart stays; its args are kept whole
                    pairs = args[index]
                    rest = pairs[1:]
                    flows[index] = pairs[0][1]
                    rests[index] = shared_rests.setdefault(tuple(map(id, rest)), rest)
        self.flow, self.args = _narrowest(np.array(flows, dtype=np.int64)), codes(rests, by_identity=True)


class _ImageBase:
    """A block that copies are made of, with its distinct device and args codes and each record's index
    among them: worked out once, shared by every copy. Copies that rename by label also share the distinct
    labels and (label, device) and (label, args) pairs (`by_label`)."""

    __slots__ = ("block", "devices", "device_index", "args", "args_index", "spans", "_by_label")

    def __init__(self, block: _Reading):
        import numpy as np

        self.block = block
        self.devices, self.device_index = np.unique(block.device, return_inverse=True)
        self.args, self.args_index = np.unique(block.args, return_inverse=True)
        self.spans = None  # the block's device spans, once a reader asks a copy for its own
        self._by_label = None

    def by_label(self):
        """(labels, each record's label index, (label, device) pairs, each record's pair index, (label, args)
        pairs, each record's pair index)."""
        import numpy as np

        if self._by_label is None:
            block = self.block
            labels, label_index = np.unique(block.label, return_inverse=True)
            devices, device_index = np.unique(np.stack([block.label, block.device]), axis=1, return_inverse=True)
            args, args_index = np.unique(np.stack([block.label, block.args]), axis=1, return_inverse=True)
            self._by_label = (labels, label_index, devices.T, device_index.reshape(-1), args.T,
                              args_index.reshape(-1))
        return self._by_label


class _ImageBlock(_Reading):
    """A renamed copy of a block (`OpLog.replicate`): the times, sizes, kinds and units are the block's own
    arrays; devices, args (and, renaming by label, labels) are looked up through the image's renaming of their
    distinct codes, programs and flow ids shifted, when read."""

    __slots__ = ("_base", "_image", "_devices", "_args", "_labels", "_shift", "_modulus")

    def __init__(self, base: _ImageBase, image: Image, code, values: list):
        import numpy as np

        self._base, self._image = base, image
        if image.relabel is None:
            self._labels = self._shift = self._modulus = None
            self._devices = np.array([code(image.rename(values[int(c)])) for c in base.devices], dtype=np.int64)
            self._args = np.array([code(_renamed(values[int(c)], image.rename)) for c in base.args], dtype=np.int64)
            return
        labels, _, devices, _, args, _ = base.by_label()
        plans = {}
        for label in labels.tolist():
            entry = image.relabel.get(values[label])
            plans[label] = (image.rename, label, 0, 1 << 62) if entry is None else (
                entry.rename, code(entry.label), entry.program_shift, entry.program_modulus)
        self._labels = np.array([plans[label][1] for label in labels.tolist()], dtype=np.int64)
        self._shift = np.array([plans[label][2] for label in labels.tolist()], dtype=np.int64)
        self._modulus = np.array([plans[label][3] for label in labels.tolist()], dtype=np.int64)
        self._devices = np.array([code(plans[label][0](values[device])) for label, device in devices.tolist()],
                                 dtype=np.int64)
        self._args = np.array([code(_renamed(values[arg], plans[label][0])) for label, arg in args.tolist()],
                              dtype=np.int64)

    kind = property(lambda self: self._base.block.kind)
    unit = property(lambda self: self._base.block.unit)
    nbytes = property(lambda self: self._base.block.nbytes)
    flops = property(lambda self: self._base.block.flops)
    start = property(lambda self: self._base.block.start)
    duration = property(lambda self: self._base.block.duration)

    # Each record's index among the distinct codes its copy renames (the base's: a copy holds no column of its own).
    _device_index = property(lambda self: self._base.device_index if self._labels is None else self._base.by_label()[3])
    _args_index = property(lambda self: self._base.args_index if self._labels is None else self._base.by_label()[5])
    _label_index = property(lambda self: self._base.by_label()[1])

    @property
    def label(self):
        return self._base.block.label if self._labels is None else self._labels[self._label_index]

    @property
    def device(self):
        return self._devices[self._device_index]

    def device_spans(self):
        """The copied block's spans, its devices renamed: its records' times are the block's own. (Renamed by
        label, a device's records may go to several devices: worked out from the copy's own columns.)"""
        import numpy as np

        if self._labels is not None:
            return _Reading.device_spans(self)
        base = self._base
        if base.spans is None:
            base.spans = base.block.device_spans()
        codes, *rest = base.spans
        return (self._devices[np.searchsorted(base.devices, codes)], *rest)

    @property
    def args(self):
        return self._args[self._args_index]

    @property
    def program(self):
        import numpy as np

        program, image = self._base.block.program.astype(np.int64), self._image
        if self._labels is None:
            return np.where(program >= 0, (program + image.program_shift) % image.program_modulus, program)
        shift, modulus = self._shift[self._label_index], self._modulus[self._label_index]
        return np.where(program >= 0, (program + shift) % modulus, program)

    @property
    def flow(self):
        import numpy as np

        flow = self._base.block.flow.astype(np.int64)
        return np.where(flow < 0, flow, flow + self._image.flow_offset)


def _renamed(args, rename):
    """An args value (None or a tuple of (key, value) pairs) with `rename` applied to its string values."""
    if args is None:
        return None
    return tuple((key, rename(value) if value.__class__ is str else value) for key, value in args)


def _carries_flow(pairs) -> bool:
    """Whether an args tuple starts with a message's ("flow_id", n), 0 <= n < 2**63, which `_Block` keeps in a
    column (any other flow id stays among the args)."""
    return bool(pairs) and pairs[0][0] == "flow_id" and pairs[0][1].__class__ is int and 0 <= pairs[0][1] < 1 << 63


def _integers(values, what: str) -> np.ndarray:
    """`values` as int64, or one line where they are not all ints below 2**63 (a float, a None or a larger int
    gives numpy another dtype)."""
    import numpy as np

    column = np.array(values)
    if column.dtype != np.int64:
        raise EngineUsageError(f"op log: {what} must be Python ints below 2**63, got {column.dtype} values")
    return column


def _program_ids(programs) -> np.ndarray:
    """Program ids with −1 standing for None, so an id itself must not be negative."""
    column = _integers([-1 if p is None else p for p in programs], "program ids")
    if (column < -1).any() or int((column == -1).sum()) != programs.count(None):
        raise EngineUsageError("op log: program ids must not be negative")
    return column


def _narrowest(column):
    """`column` in the narrowest of int16, int32 and int64 that holds its values (codes and sizes are small)."""
    import numpy as np

    if not column.size:
        return column
    low, high = int(column.min()), int(column.max())
    for dtype in (np.int16, np.int32):
        limits = np.iinfo(dtype)
        if limits.min <= low and high <= limits.max:
            return column.astype(dtype)
    return column
