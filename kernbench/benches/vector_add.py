"""Vector add sweep on one SIP against HBM bandwidth: simulated time, GB/s, % of HBM peak.

Runs the Triton add of `kernbench.kernels.library.vector_add` on x, y and out
split over every cube and PE, so each program streams from its own cube's
HBM; the result is checked against numpy with the f32 tolerance (skipped in
a timing-only run, which computes no values).
"""

from kernbench.kernels.library.vector_add import add
from kernbench.numerics import assert_close

SIZES = [1 << 12, 1 << 16, 1 << 20, 1 << 22]
BLOCK = 4096


def run(torch):
    props = torch.ahbm.get_device_properties()
    spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
    print(f"{'elements':>10} {'bytes':>12} {'time':>12} {'GB/s':>9} {'% HBM peak':>11}  check")
    for n in SIZES:
        x = torch.randn(n, dp=spread, name=f"x{n}")
        y = torch.randn(n, dp=spread, name=f"y{n}")
        out = torch.empty(n, dp=spread, name=f"out{n}")
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
        add(x, y, out, block_size=min(BLOCK, n // props.multi_processor_count))
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        moved = 3 * n * 4
        check = "skipped"
        if not torch.is_timing_only():
            assert_close(out.numpy(), x.numpy() + y.numpy(), "f32")
            check = "OK"
        print(f"{n:>10} {moved:>12,d} {seconds * 1e6:>9.2f} us {moved / seconds / 1e9:>9.1f} "
              f"{100 * moved / seconds / props.hbm_bandwidth_bytes_per_s:>10.1f}%  {check}")
