"""kernbench's device ops against the same PyTorch ops timed on a real H100 and H200: error per point, per family,
overall.

`benchmarks/anchors/torch_ops_h100.json` and `torch_ops_h200.json` hold the
measurements (taken by `anchors/measure_torch_ops.py`; `anchors/README.md`
says how), and `row_kernels_h200.json` further softmax, log_softmax and
layer_norm row widths on the H200 (`anchors/measure_row_kernels.py`). This
script runs every point as a user writes it — tensors made
with `device="cuda"`, no `DPPolicy`, then `a @ b`, `x.sum()`,
`F.layer_norm(x, (n,))`, … — timing-only on the topology that describes the
GPU (`h100`, and one SIP of `h200x4`), and takes the simulated time as
`do_bench` takes the real one: behind the L2 flush `do_bench` enqueues
before each call, from the flush's end to the op's (so the host's launch
of the op, made while the flush runs, is hidden, and the device's start of
its kernels is not), plus what do_bench's own events add to any kernel's
span (the anchor's empty kernel less the device's start of one). It prints per
point the measured and simulated time and the error (simulated − measured)
/ measured, then per GPU and family the geometric mean of |error| (the
geometric mean of the ratios' distance from 1: exp(mean |ln(sim/real)|) − 1),
and last `overall_geomean_abs_error: X` in percent, with the wall and CPU
seconds each point took to simulate beside it.

Points whose operands hold more than `--max-elements` elements (default:
all) are skipped and counted, so a partial run of a slow model finishes.
`--gpu h100` or `--gpu h200` runs one anchor file, `--family NAME` (matmul,
elementwise, reduction, softmax, log_softmax, layer_norm, attention;
repeatable) only those families.

The attention family (`anchors/sdpa_h200.json`, `anchors/measure_sdpa.py`)
runs `F.scaled_dot_product_attention` forward, and forward then
`out.backward(grad)`, on (B, H, S, D) tensors. Only its points bound by the
GPU are scored: those whose kernels (the anchor's profiled device time) take
at least `DEVICE_BOUND` of do_bench's time; the rest are the host's launches
of cuDNN's attention and autograd, which the device-op model does not
describe, and are listed as skipped. Its model terms (`attention.py`'s vector
passes) were set on the bf16 points of B·H 64 (`fit`); the other points are
held out, and the family prints the geometric mean of each part.

Run as `python benchmarks/fidelity_ops.py` from the repository root.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.session import Session  # noqa: E402
from kernbench.topology import load_topology  # noqa: E402

ANCHORS = Path(__file__).resolve().parent / "anchors"
GPUS = {"h100": ("torch_ops_h100.json", "h100"), "h200": ("torch_ops_h200.json", "h200x4")}
ATTENTION_ANCHORS = {"h200": "sdpa_h200.json"}
ROW_ANCHORS = {"h200": "row_kernels_h200.json"}  # further softmax, log_softmax and layer_norm widths
DEVICE_BOUND = 0.8  # an attention point is scored when its kernels take at least this share of do_bench's time
DTYPE_NAMES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
FLUSH_BYTES = 256 * 1024 * 1024  # triton.testing.do_bench's L2 flush


def operands(point) -> list[tuple[int, ...]]:
    """The shapes of the tensors a point's op reads."""
    if point["family"] == "attention":
        b, h, s, d = point["batch"], point["heads"], point["seq"], point["head_dim"]
        kv = point.get("kv_heads", h)
        return [(b, h, s, d), (b, kv, s, d), (b, kv, s, d)]
    if point["family"] == "matmul":
        return [(point["m"], point["k"]), (point["k"], point["n"])]
    shape = tuple(point.get("shape") or (point["numel"],))
    return [shape, shape] if point.get("op") in ("add", "mul") else [shape]


def the_op(torch, point, tensors):
    """The op of `point` over `tensors`, written as a user writes it."""
    F = torch.nn.functional
    if point["family"] == "matmul":
        a, b = tensors
        return lambda: a @ b
    x = tensors[0]
    op, dim = point["op"], point.get("dim")
    calls = {
        "add": lambda: x + tensors[1], "mul": lambda: x * tensors[1], "gelu": lambda: F.gelu(x),
        "relu": lambda: torch.relu(x), "exp": lambda: x.exp(), "softmax": lambda: torch.softmax(x, -1),
        "log_softmax": lambda: torch.log_softmax(x, -1), "layer_norm": lambda: F.layer_norm(x, (x.shape[-1],)),
        "norm": lambda: torch.norm(x) if dim is None else torch.norm(x, dim=dim),
    }
    if op in calls:
        return calls[op]
    reduce = getattr(torch, op)
    return (lambda: reduce(x)) if dim is None else (lambda: reduce(x, dim))


def simulated_us(topology: str, point) -> float:
    """Simulated microseconds of the point's op on one device of `topology`, timing-only, as `do_bench` times it:
    the L2 flush (`zero_()` of 256 MB) enqueued, then the op; from the flush's end to the op's (the span of
    do_bench's two CUDA events, which the host's launch of the op, made while the flush runs, does not enter).
    The flush's end is the same run without the op."""
    spans = []
    for with_op in (False, True):
        session = Session(topology, timing_only=True)

        def bench(torch):
            op = attention_op(torch, point) if point["family"] == "attention" else the_op(
                torch, point, [torch.randn(*shape, device="cuda", dtype=getattr(torch, DTYPE_NAMES[point["dtype"]]))
                               for shape in operands(point)])
            cache = torch.empty(FLUSH_BYTES // 4, device="cuda", dtype=torch.int32)
            torch.cuda.synchronize()
            start = session.engine.now
            cache.zero_()
            if with_op:
                op()
            torch.cuda.synchronize()
            spans.append(session.engine.now - start)

        session.run(bench, session.torch)
    flushed, both = spans
    return (both - flushed) / 1e6


def attention_op(torch, point):
    """The attention point's call as `measure_sdpa.py` makes it: forward on tensors that need no grad, or
    forward then `out.backward(grad)` (`point["mode"]`)."""
    dtype = getattr(torch, DTYPE_NAMES[point["dtype"]])
    grad = point["mode"] == "forward_backward"
    b, h, s, d = point["batch"], point["heads"], point["seq"], point["head_dim"]
    kv = point.get("kv_heads", h)
    q, k, v = (torch.randn(b, heads, s, d, device="cuda", dtype=dtype, requires_grad=grad) for heads in (h, kv, kv))
    mask = torch.randn(s, s, device="cuda", dtype=dtype) if point.get("mask") == "float" else None
    extra = {"enable_gqa": True} if "kv_heads" in point else {}
    gradient = torch.randn(b, h, s, d, device="cuda", dtype=dtype)

    def call():
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=point.get("dropout", 0.0), is_causal=point["causal"], **extra)
        if grad:
            out.backward(gradient)

    return call


def attention_points(measured) -> tuple[list, list]:
    """The anchor's points, one per call mode (forward, forward_backward), each with its `time_us`, `part` (fit or
    held out); and those bound by the host (not scored)."""
    scored, skipped = [], []
    for point in measured["points"]:
        for mode in ("forward", "forward_backward"):
            fit = point["dtype"] == "bf16" and point["batch"] * point["heads"] == 64 and not OFF_GRID & set(point)
            entry = {**point, "mode": mode, "time_us": point[f"{mode}_us"], "part": "fit" if fit else "held_out"}
            bound = point[f"{mode}_device_us"] >= DEVICE_BOUND * point[f"{mode}_us"]
            (scored if bound else skipped).append(entry)
    return scored, skipped


OFF_GRID = {"mask", "kv_heads", "dropout"}  # the keys of the points off the anchor's grid


def timer_events_us(measured, topology: str) -> float:
    """What do_bench's two CUDA events add to a kernel's span: the anchor's empty Triton kernel as do_bench timed
    it, less the device's start of a kernel (`sip.kernel_start_ns`), which the simulated span already holds."""
    return measured["environment"]["empty_triton_kernel_us"] - load_topology(topology).sip.kernel_start_ps / 1e6


def label(point) -> str:
    if point["family"] == "attention":
        extra = "".join(f" {key}={point[key]}" for key in ("mask", "kv_heads", "dropout") if key in point)
        return (f"sdpa {point['mode'].replace('forward_backward', 'fwd+bwd').replace('forward', 'fwd')} "
                f"{point['dtype']} {point['batch']}x{point['heads']}x{point['seq']}x{point['head_dim']}"
                f"{' causal' if point['causal'] else ''}{extra}")
    if point["family"] == "matmul":
        return f"matmul {point['dtype']} {point['m']}x{point['n']}x{point['k']}"
    shape = "x".join(map(str, point.get("shape") or (point["numel"],)))
    dim = "" if point.get("dim", -1) is None and point["family"] != "reduction" else f" dim={point.get('dim')}"
    return f"{point['op']} {point['dtype']} {shape}{dim if point['family'] == 'reduction' else ''}"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", choices=sorted(GPUS), action="append")
    parser.add_argument("--max-elements", type=int, default=None)
    parser.add_argument("--family", action="append")
    args = parser.parse_args(argv)
    errors, parts = defaultdict(list), defaultdict(list)  # parts: an anchor's fit and held-out points apart
    skipped = 0
    for gpu in args.gpu or sorted(GPUS):
        anchor, topology = GPUS[gpu]
        measured = json.loads((ANCHORS / anchor).read_text())
        events = timer_events_us(measured, topology)
        points = [(point, events) for point in measured["points"]]
        host_bound = []
        if gpu in ROW_ANCHORS:
            rows = json.loads((ANCHORS / ROW_ANCHORS[gpu]).read_text())
            points += [(point, timer_events_us(rows, topology)) for point in rows["points"]]
        if gpu in ATTENTION_ANCHORS and (not args.family or "attention" in args.family):
            scored, host_bound = attention_points(json.loads((ANCHORS / ATTENTION_ANCHORS[gpu]).read_text()))
            points += [(point, events) for point in scored]
        print(f"{gpu} ({topology}.yaml): {'point':<42} {'real us':>10} {'sim us':>10} {'error':>8} "
              f"{'wall s':>7} {'cpu s':>7}")
        for point, events in points:
            if args.family and point["family"] not in args.family:
                continue
            if args.max_elements is not None and max(math.prod(s) for s in operands(point)) > args.max_elements:
                skipped += 1
                continue
            wall, cpu = time.perf_counter(), cpu_seconds()
            simulated = simulated_us(topology, point) + events
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            ratio = simulated / point["time_us"]
            errors[(gpu, point["family"])].append(ratio)
            if "part" in point:
                parts[(gpu, f"{point['family']}_{point['part']}")].append(ratio)
            print(f"  {label(point):<48} {point['time_us']:>10.1f} {simulated:>10.1f} {100 * (ratio - 1):>+7.1f}% "
                  f"{wall:>7.2f} {cpu:>7.2f}", flush=True)
        for point in host_bound:
            print(f"  {label(point):<48} {point['time_us']:>10.1f} {'host-bound':>10} (kernels "
                  f"{point[point['mode'] + '_device_us']:.1f} us), not scored")
    print(f"points skipped (over --max-elements): {skipped}")
    for (gpu, family), ratios in sorted({**errors, **parts}.items()):
        print(f"{gpu}_{family}_geomean_abs_error: {100 * _geomean_abs_error(ratios):.1f}")
    every = [ratio for ratios in errors.values() for ratio in ratios]
    print(f"overall_geomean_abs_error: {100 * _geomean_abs_error(every):.1f}")


def _geomean_abs_error(ratios) -> float:
    return math.exp(sum(abs(math.log(r)) for r in ratios) / len(ratios)) - 1


if __name__ == "__main__":
    main()
