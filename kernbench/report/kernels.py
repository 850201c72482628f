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
    """One dict per kernel launch (see the module docstring), in start order, ties by device and name."""
    by_kernel: dict[tuple[str, str], list[tuple]] = {}
    for kind, device, label, program, nbytes, flops, start, end, dtype in oplog.program_ops():
        if label in collective_labels:
            continue
        by_kernel.setdefault((device, label), []).append((start, end, kind, nbytes, flops, program, dtype))
    rows = []
    for (device, label), records in by_kernel.items():
        records.sort(key=lambda record: record[0])
        launch: list[tuple] = []
        cover_end = 0
        for record in records:
            if launch and record[0] > cover_end:
                rows.append(_row(topology, device, label, launch))
                launch = []
            cover_end = max(cover_end, record[1]) if launch else record[1]
            launch.append(record)
        rows.append(_row(topology, device, label, launch))
    rows.sort(key=lambda row: (row["start_ps"], natural_key(row["device"]), row["kernel"]))
    return rows


def _row(topology, device: str, label: str, records: list[tuple]) -> dict:
    start = min(record[0] for record in records)
    end = max(record[1] for record in records)
    nbytes = sum(record[3] for record in records if record[2] == "dma")
    flops = sum(record[4] for record in records)
    matrix_dtypes = [record[6] for record in records if record[4] and record[6]]
    dtype = matrix_dtypes[0] if matrix_dtypes else next((record[6] for record in records if record[6]), None)
    time_ps = end - start
    hbm = topology.cube.hbm.bandwidth_bytes_per_s * topology.cubes_per_sip
    memory_ps = -(-nbytes * PS_PER_S // hbm)
    compute_ps = -(-flops * PS_PER_S // topology.sip_peak_flops(dtype)) if flops and dtype else 0
    roofline_ps = max(memory_ps, compute_ps)
    return {
        "kernel": label, "device": device, "programs": len({record[5] for record in records}),
        "start_ps": start, "end_ps": end, "time_ps": time_ps, "bytes": nbytes, "flops": flops, "dtype": dtype,
        "gb_per_s": nbytes / time_ps * 1e3 if time_ps else 0.0,
        "tflop_per_s": flops / time_ps if time_ps else 0.0,
        "roofline_ps": roofline_ps, "bound": "compute" if compute_ps > memory_ps else "HBM",
        "of_roofline": roofline_ps / time_ps if time_ps else 0.0,
    }
