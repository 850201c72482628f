"""Tensor-parallel MLP forward, Megatron's ParallelMLP: h -> 4h (column parallel), GELU, 4h -> h (row parallel).

One worker per SIP (`torch.multiprocessing.spawn`), grouped by
`kernbench.tp.parallel_state` into tensor-parallel groups of KERNBENCH_TP
consecutive ranks (default: every SIP in one group; a smaller size leaves
data-parallel replicas that compute the same MLP). Sizes are the module
constants below unless KERNBENCH_HIDDEN / KERNBENCH_TOKENS say otherwise.
The options `--tp`, `--hidden` and `--tokens` (`add_arguments`) set the
same three and take precedence over the environment.

As in Megatron, the first linear skips its bias so that the bias is fused
into GELU (`bias_gelu`), and the second skips its bias so it is added once,
after the all-reduce, as the next fused op would. Both bias kernels run in
place, in the block the layers' own bias kernels take
(`fusions.elementwise_block_of`: a library's pick for the tensor, ADR 0011).
Each rank's output is checked against a numpy MLP with the same, unsharded
weights (f16 tolerance), and all ranks must agree bit for bit after the
all-reduce (with `--timing-only` no values exist, so nothing is checked).

Rank 0 prints where its simulated time went: `torch.ahbm` events on its
stream mark the end of each phase, and the all-reduce is bracketed from
inside the row-parallel layer by handing rank 0's layers a `torch` whose
`distributed.all_reduce` records an event before and after it. Collectives
are ordered on the stream, so the all-reduce phase is the collective's own
time (the run report's `collectives` row) plus any wait for the other ranks
of the group to arrive; the ranks here are symmetric, so nobody waits and
the two are equal to the picosecond.
"""

import os

import numpy as np

from kernbench.report.stream_timeline import StreamTimeline
from kernbench.cli.bench_options import parse_bench_options, positive_count
from kernbench.errors import KernbenchError
from kernbench.numerics import assert_close
from kernbench.tp import ColumnParallelLinear, ModelParallelConfig, RowParallelLinear, kernels, parallel_state
from kernbench.tp.fusions import elementwise_block_of

HIDDEN = 512
TOKENS = 256
PHASES = ("gemm", "elementwise", "all-reduce")


class MlpSettingError(KernbenchError):
    """A KERNBENCH_* setting tp_mlp cannot use: the CLI prints it as one line, with status 2."""


def add_arguments(parser) -> None:
    """The MLP's sizes (`kernbench run tp_mlp --help`); each defaults to its KERNBENCH_* variable."""
    parser.add_argument("--tp", metavar="N", type=positive_count, default=None,
                        help="tensor-parallel size (default: $KERNBENCH_TP, else every SIP in one group)")
    parser.add_argument("--hidden", metavar="H", type=positive_count, default=None,
                        help=f"hidden size (default: $KERNBENCH_HIDDEN, else {HIDDEN})")
    parser.add_argument("--tokens", metavar="T", type=positive_count, default=None,
                        help=f"tokens in the batch (default: $KERNBENCH_TOKENS, else {TOKENS})")


def run(torch, argv=()):
    options = parse_bench_options("tp_mlp", add_arguments, argv, error_type=MlpSettingError)
    world_size = torch.ahbm.device_count()
    tp = options.tp or _setting("KERNBENCH_TP", world_size)
    if world_size % tp:
        divisors = [d for d in range(1, world_size + 1) if world_size % d == 0]
        given = f"--tp {tp}" if options.tp else f"KERNBENCH_TP={tp}"
        raise MlpSettingError(f"tp_mlp: {given} does not divide the {world_size} ranks (one per SIP); "
                              f"expected one of {', '.join(map(str, divisors))}")
    hidden = options.hidden or _setting("KERNBENCH_HIDDEN", HIDDEN)
    tokens = options.tokens or _setting("KERNBENCH_TOKENS", TOKENS)
    phases = mlp_phases(torch, tp, tokens, hidden)
    _print_breakdown(torch, tokens, hidden, tp, world_size, phases)


def _setting(name: str, default: int) -> int:
    """The positive whole number in environment variable `name`, else `default`."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or value < 1:
        raise MlpSettingError(f"tp_mlp: {name}={text!r}: expected a positive whole number (default {default})")
    return value


def mlp_phases(torch, tp: int, tokens: int, hidden: int) -> dict:
    """Run the MLP on every SIP with tensor-parallel size `tp`, check it, and return rank 0's picoseconds by phase."""
    world_size = torch.ahbm.device_count()
    problem = _problem(tokens, hidden)
    outputs, phases = {}, {}
    torch.multiprocessing.spawn(_worker, args=(torch, tp, problem, outputs, phases), nprocs=world_size)
    if not torch.is_timing_only():
        expected = _reference(*problem)
        for rank, output in sorted(outputs.items()):
            assert_close(output, expected, "f16")
            assert np.array_equal(output, outputs[0]), f"rank {rank}'s output differs from rank 0's"
    return phases


def _worker(rank, torch, tp, problem, outputs, phases):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm")
    timeline = StreamTimeline(torch, enabled=rank == 0, before_collective="gemm", collective="all-reduce")
    parallel_state.initialize_model_parallel(tp, torch=timeline.instrumented())
    x, w1, b1, w2, b2 = problem
    tokens, hidden = x.shape
    # The weights are loaded next: Megatron's `perform_initialization=False` skips drawing them first.
    config = ModelParallelConfig(perform_initialization=False, params_dtype=torch.float16)
    fc1 = ColumnParallelLinear(hidden, 4 * hidden, config=config, skip_bias_add=True)
    fc1.load_full_weight(w1, b1)
    fc2 = RowParallelLinear(4 * hidden, hidden, config=config, input_is_parallel=True, skip_bias_add=True)
    fc2.load_full_weight(w2, b2)
    activations = torch.tensor(x, dtype="f16", name="x")

    timeline.mark("start")
    intermediate, bias1 = fc1(activations)
    timeline.mark("gemm")
    kernels.bias_gelu(intermediate, bias1, intermediate, block_size=elementwise_block_of(intermediate, bias1))
    timeline.mark("elementwise")
    output, bias2 = fc2(intermediate)
    timeline.mark("gemm")  # at tp 1 the row gemm; after an all-reduce, an empty interval
    kernels.add_bias(output, bias2, output, block_size=elementwise_block_of(output, bias2))
    timeline.mark("elementwise")

    if not torch.is_timing_only():
        outputs[rank] = output.numpy()
    if rank == 0:
        phases.update(timeline.totals(PHASES))
    parallel_state.destroy_model_parallel()


def _problem(tokens: int, hidden: int):
    """Input and unsharded weights, random and non-symmetric, scaled to keep activations near 1 in fp16."""
    rng = np.random.default_rng(0)

    def f16(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float16).astype(np.float32)

    ffn = 4 * hidden
    return (f16(tokens, hidden), f16(ffn, hidden, scale=hidden ** -0.5), f16(ffn),
            f16(hidden, ffn, scale=ffn ** -0.5), f16(hidden))


def _reference(x, w1, b1, w2, b2):
    """The unsharded MLP in numpy, rounding to fp16 where the device stores a tensor."""
    z = (x @ w1.T).astype(np.float16).astype(np.float32) + b1
    gelu = (z * 0.5 * (1.0 + np.tanh(0.79788456 * z * (1.0 + 0.044715 * z * z)))).astype(np.float16)
    return gelu.astype(np.float32) @ w2.T + b2


def _print_breakdown(torch, tokens, hidden, tp, world_size, phases):
    total = sum(phases.values())
    flops = 2 * 2 * tokens * hidden * 4 * hidden  # two GEMMs of the unsharded MLP
    peak = torch.ahbm.get_device_properties(0).peak_flops["f16"]
    print(f"tp_mlp: tokens={tokens} hidden={hidden} ffn={4 * hidden} tp={tp} dp={world_size // tp} f16")
    print(f"{'phase (rank 0)':<16} {'time':>12} {'share':>7}")
    for phase, ps in phases.items():
        print(f"{phase:<16} {ps / 1e6:>9.3f} us {100 * ps / total:>6.1f}%")
    print(f"{'total':<16} {total / 1e6:>9.3f} us")
    print(f"achieved: {flops / (total * 1e-12) / 1e12:.2f} TFLOP/s for the MLP over {tp} rank(s) "
          f"({100 * flops / (total * 1e-12) / (tp * peak):.1f}% of their f16 peak); "
          f"{flops / tp / (phases['gemm'] * 1e-12) / 1e12:.2f} TFLOP/s per rank inside its GEMMs")
    if torch.is_timing_only():
        print("check: none (--timing-only computes no values)")
    else:
        print(f"check: every rank matches the unsharded numpy MLP (f16 tolerance); "
              f"all {world_size} ranks agree bit for bit")
