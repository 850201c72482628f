"""fp16 GEMM sweep on one SIP: simulated time, TFLOP/s, % of peak and the roofline's bound.

Each shape runs the Triton matmul of `kernbench.kernels.library.matmul`
(tl.load + tl.dot with fp32 accumulation + tl.store), with A split by rows
over every cube and PE, B replicated on each cube, and C split like A; the
result is checked against numpy with the f16 tolerance (skipped in a
timing-only run, which computes no values).
"""

import numpy as np

from kernbench.kernels.library.matmul import matmul
from kernbench.numerics import assert_close

SHAPES = [(128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 256)]


def run(torch):
    props = torch.ahbm.get_device_properties()
    peak = props.peak_flops["f16"]
    bandwidth = props.hbm_bandwidth_bytes_per_s
    rows_split = torch.DPPolicy(cube="row_wise", pe="row_wise")
    per_cube_copy = torch.DPPolicy(cube="replicate", pe="row_wise", num_pes=props.multi_processor_count)
    print(f"{'M':>6} {'N':>6} {'K':>6} {'time':>12} {'TFLOP/s':>9} {'% peak':>7} {'roofline':>9}  check")
    for m, n, k in SHAPES:
        torch.manual_seed(m + n + k)
        a = torch.randn(m, k, dtype="f16", dp=rows_split, name=f"A{m}x{k}")
        b = torch.randn(k, n, dtype="f16", dp=per_cube_copy, name=f"B{k}x{n}")
        c = torch.empty(m, n, dtype="f16", dp=rows_split, name=f"C{m}x{n}")
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
        matmul(a, b, c)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        flops = 2 * m * n * k
        intensity = flops / (2 * (m * k + k * n + m * n))
        bound = "compute" if intensity > peak / bandwidth else "HBM"
        check = "skipped"
        if not torch.is_timing_only():
            assert_close(c.numpy(), a.numpy().astype(np.float32) @ b.numpy().astype(np.float32), "f16")
            check = "OK"
        print(f"{m:>6} {n:>6} {k:>6} {seconds * 1e6:>9.2f} us {flops / seconds / 1e12:>9.2f} "
              f"{100 * flops / seconds / peak:>6.1f}% {bound:>9}  {check}")
