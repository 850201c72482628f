"""One training step of a tensor-parallel transformer layer: simulated step time, compute, exposed communication, MFU.

For each tensor-parallel size (`--tp`, default every divisor of the SIP
count), sequence parallelism off and on (`--sp`) and the overlap of the
tensor-parallel communication with the GEMMs off and on (`--overlap`,
Megatron's `tp_comm_overlap`: the column-parallel backward's all-reduce, or
reduce-scatter, beside the weight-gradient GEMM), every rank (one per SIP:
tp x dp of them, `--dp` data-parallel replicas, by default as many as fill
the SIPs) builds Megatron's transformer layer (`kernbench.tp.transformer`), runs
forward, `loss.backward()` and Megatron's `finalize_model_grads` (every
gradient averaged over data parallelism; with sequence parallelism, the
norms' and row-parallel biases' partial gradients summed over the
tensor-parallel group), and rank 0 reports:

- step: simulated time from the first op of the step to the last;
- communication: the collectives on rank 0's stream (tensor-parallel
  all-reduce / all-gather / reduce-scatter, forward and backward, and the
  gradient all-reduces of `finalize_model_grads`), bracketed by stream
  events, so their time is exact; a collective overlapped with a GEMM
  counts only for the time the stream waits for it (its exposed part);
- compute: step minus communication;
- MFU: the layer's training flops (3 x forward: QKV, projection, MLP and the
  attention scores and context) over the step time and the f16 peak of the
  tensor-parallel group's SIPs.

Options: --hidden H --heads N --seq S --batch B --tp 1,2,4 --dp D --sp off,on
--overlap off,on --plot FILE (the step's breakdown per configuration). With --timing-only
nothing is computed and the table is the same.
"""

from kernbench.report.stream_timeline import StreamTimeline
from kernbench.cli.bench_options import add_layer_arguments, parse_bench_options, positive_count, switches
from kernbench.errors import KernbenchError
from kernbench.tp import finalize_model_grads, parallel_state
from kernbench.tp.config import TransformerConfig
from kernbench.tp.transformer import TransformerLayer

class LayerBenchError(KernbenchError):
    """An option tp_layer cannot use: one line, status 2."""


def run(torch, argv=()):
    options = options_of(torch, argv)
    rows = steps(torch, options)
    _print_table(torch, options, rows)
    if options.plot:
        _plot(options.plot, rows)


def steps(torch, options) -> list[tuple]:
    """(tp, dp, sp, overlap, {"compute": ps, "communication": ps}) of each configuration `options` names, rank 0's."""
    rows = []
    for tp in options.tp:
        for sp in options.sp:
            for overlap in options.overlap:
                if (sp or overlap) and tp == 1:
                    continue  # sequence parallelism and the overlap need a tensor-parallel group
                measured = {}
                dp = options.dp or torch.ahbm.device_count() // tp
                torch.multiprocessing.spawn(_worker, args=(torch, options, tp, sp, overlap, measured),
                                            nprocs=tp * dp)
                rows.append((tp, dp, sp, overlap, measured))
    return rows


def add_arguments(parser) -> None:
    add_layer_arguments(parser)
    parser.add_argument("--dp", type=positive_count, default=None,
                        help="data-parallel replicas, tp x dp ranks in all (default: as many as fill the SIPs)")
    parser.add_argument("--overlap", type=switches, default=[False, True],
                        help="tensor-parallel communication overlapped with the GEMMs: off, on, or off,on")
    parser.add_argument("--plot", metavar="OUT.png", default=None, help="draw the breakdown per configuration")


def options_of(torch, argv):
    """The bench's options from `argv` (its command line), checked against the machine."""
    options = parse_bench_options("tp_layer", add_arguments, argv, error_type=LayerBenchError)
    world = torch.ahbm.device_count()
    if options.tp is None:
        options.tp = [d for d in range(1, world + 1) if world % d == 0]
    for tp in options.tp:
        if world % tp or options.heads % tp or options.hidden % options.heads:
            raise LayerBenchError(f"tp_layer: --tp {tp} must divide the {world} SIPs and the {options.heads} heads, "
                                  f"and --heads must divide --hidden {options.hidden}")
        if options.dp and tp * options.dp > world:
            raise LayerBenchError(f"tp_layer: --tp {tp} x --dp {options.dp} ranks do not fit the {world} SIPs")
    return options


def _worker(rank, torch, options, tp, sp, overlap, measured):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm")
    timeline = StreamTimeline(torch, enabled=rank == 0, before_collective="compute", collective="communication")
    parallel_state.initialize_model_parallel(tp, torch=timeline.instrumented())
    config = TransformerConfig(num_layers=1, hidden_size=options.hidden, num_attention_heads=options.heads,
                               params_dtype=torch.float16, sequence_parallel=sp, tp_comm_overlap=overlap)
    layer = TransformerLayer(config)
    rows = options.seq // tp if sp else options.seq
    hidden = torch.randn(rows, options.batch, options.hidden, dtype=torch.float16).requires_grad_()
    torch.ahbm.synchronize()
    timeline.mark("idle")
    layer(hidden).float().square().mean().backward()
    finalize_model_grads(layer)  # through parallel_state's (instrumented) torch: its collectives are communication
    timeline.mark("compute")
    if rank == 0:
        measured.update(timeline.totals(("compute", "communication")))
    parallel_state.destroy_model_parallel()


def _training_flops(options) -> int:
    s, b, h = options.seq, options.batch, options.hidden
    dense = 2 * s * b * h * (3 * h + h + 2 * 4 * h)  # QKV, projection, the two MLP linears
    attention = 2 * 2 * b * s * s * h  # scores and context
    return 3 * (dense + attention)  # forward, and backward's two products per forward product


def _print_table(torch, options, rows) -> None:
    peak = torch.ahbm.get_device_properties(0).peak_flops["f16"]
    flops = _training_flops(options)
    print(f"tp_layer: hidden={options.hidden} heads={options.heads} seq={options.seq} batch={options.batch} f16, "
          f"one training step (forward, backward, finalize_model_grads), rank 0")
    print(f"{'tp':>3} {'dp':>3} {'sp':>4} {'overlap':>8} {'step':>12} {'compute':>12} {'exposed comm':>13} {'MFU':>7}")
    for tp, dp, sp, overlap, measured in rows:
        step = measured["compute"] + measured["communication"]
        mfu = flops / (step * 1e-12) / (tp * peak) if step else 0.0
        print(f"{tp:>3} {dp:>3} {'on' if sp else 'off':>4} {'on' if overlap else 'off':>8} {step / 1e6:>9.3f} us "
              f"{measured['compute'] / 1e6:>9.3f} us {measured['communication'] / 1e6:>10.3f} us {100 * mfu:>6.1f}%")


def _plot(path, rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"tp{tp}{' sp' if sp else ''}{' ov' if overlap else ''}" for tp, _, sp, overlap, _ in rows]
    compute = [m["compute"] / 1e6 for *_, m in rows]
    communication = [m["communication"] / 1e6 for *_, m in rows]
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.bar(labels, compute, label="compute")
    axes.bar(labels, communication, bottom=compute, label="exposed communication")
    axes.set_ylabel("simulated step time (us)")
    axes.set_title("tensor-parallel transformer layer: one training step")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
