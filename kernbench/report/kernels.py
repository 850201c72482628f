"""The kernels of a finished run, read from the op log: one row per launch, against the roofline.

Every op a kernel program does — a DMA, a matrix or vector op — is an op-log
record carrying the kernel's name as `label` and the program's linear id as
`program`. (Collectives are PE programs too; their records carry the
collective's label and are left to the collectives section.) The op log has
no record of the launch itself, so a launch is recovered as a run of the
kernel's records on one device whose time intervals overlap or touch: a
launch's resident programs keep every PE busy from its start to its end,
and two launches of one kernel on one stream are apart by at least the
launch in between. Two launches of the same kernel that follow each other
with no gap at all therefore read as one row, with both launches' programs.

The roofline of a row is the time the SIP's peak would need for its work:
`max(bytes / HBM bandwidth of the SIP's cubes, flops / peak flops of the
SIP for the kernel's matrix dtype)`. `of_roofline` is that time over the
measured time, so 1.0 is a kernel running at the machine's limit.
"""

from __future__ import annotations

from kernbench.report.natural_sort import natural_key
from kernbench.sim_engine.simtime import PS_PER_S


def kernel_rows(oplog, topology, collective_labels=frozenset()) -> list[dict]:
    """One dict per kernel launch (see the module docstring), in start order, ties by device and name.

    Read from the log's columns (`OpLog.columns`): the records are grouped
    by kernel and cut into launches by sorting, so the report costs a few
    array passes however many ops the run did.
    """
    import numpy as np  # here, not at import: `kernbench --help` loads the report without numpy

    # A kernel's ops only: a collective's, millions of them where it ran symmetric, are left out block by block.
    columns = oplog.columns(labels=lambda label: label.__class__ is str and label not in collective_labels)
    values = columns.values
    kept = np.flatnonzero(columns.program >= 0)
    if not len(kept):
        return []
    order = kept[np.lexsort((columns.start[kept], columns.label[kept], columns.device[kept]))]  # stable
    device, label = columns.device[order], columns.label[order]
    start, end = columns.start[order], columns.end[order]
    kernels = np.flatnonzero(np.r_[True, (device[1:] != device[:-1]) | (label[1:] != label[:-1])])
    # A launch ends where its kernel's next record starts after every record so far has ended: the end running
    # over the whole kernel is the launch's own, since an earlier launch ended before this one began.
    covered = np.concatenate([np.maximum.accumulate(part) for part in np.split(end, kernels[1:])])
    cuts = np.union1d(kernels, np.flatnonzero(start[1:] > covered[:-1]) + 1)
    is_dma = np.isin(columns.kind[order], [code for code, value in enumerate(values) if value == "dma"])
    flops = columns.flops[order]
    launch_ends = np.maximum.reduceat(end, cuts)
    launch_bytes = np.add.reduceat(np.where(is_dma, columns.nbytes[order], 0), cuts)
    launch_flops = np.add.reduceat(flops, cuts)
    dtype_of_args, dtype_names = _dtypes(values)
    dtypes, programs = dtype_of_args[columns.args[order]], columns.program[order]
    rows = []
    for index, (first, stop) in enumerate(zip(cuts, np.r_[cuts[1:], len(order)])):
        with_dtype = np.flatnonzero(dtypes[first:stop] >= 0)
        matrix = with_dtype[flops[first:stop][with_dtype] > 0]  # the matrix ops' dtype, else any op's
        chosen = matrix if len(matrix) else with_dtype
        dtype = dtype_names[dtypes[first + chosen[0]]] if len(chosen) else None
        rows.append(_row(topology, values[device[first]], values[label[first]], int(start[first]),
                         int(launch_ends[index]), int(launch_bytes[index]), int(launch_flops[index]), dtype,
                         len(np.unique(programs[first:stop]))))
    rows.sort(key=lambda row: (row["start_ps"], natural_key(row["device"]), row["kernel"]))
    return rows


def _dtypes(values: list) -> tuple["np.ndarray", list[str]]:
    """For each code of the log, the index in the returned names of the "dtype" its args name (a non-empty
    string, the first such pair), else −1."""
    import numpy as np

    names: dict[str, int] = {}
    out = np.full(len(values), -1, dtype=np.int64)
    for code, value in enumerate(values):
        if value.__class__ is tuple:
            for key, item in value:
                if key == "dtype":
                    if item and item.__class__ is str:
                        out[code] = names.setdefault(item, len(names))
                    break
    return out, list(names)


def _row(topology, device: str, label: str, start: int, end: int, nbytes: int, flops: int, dtype, programs: int):
    time_ps = end - start
    hbm = topology.cube.hbm.bandwidth_bytes_per_s * topology.cubes_per_sip
    memory_ps = -(-nbytes * PS_PER_S // hbm)
    compute_ps = -(-flops * PS_PER_S // topology.sip_peak_flops(dtype)) if flops and dtype else 0
    roofline_ps = max(memory_ps, compute_ps)
    return {
        "kernel": label, "device": device, "programs": programs,
        "start_ps": start, "end_ps": end, "time_ps": time_ps, "bytes": nbytes, "flops": flops, "dtype": dtype,
        "gb_per_s": nbytes / time_ps * 1e3 if time_ps else 0.0,
        "tflop_per_s": flops / time_ps if time_ps else 0.0,
        "roofline_ps": roofline_ps, "bound": "compute" if compute_ps > memory_ps else "HBM",
        "of_roofline": roofline_ps / time_ps if time_ps else 0.0,
    }
