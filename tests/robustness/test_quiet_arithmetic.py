"""ADR 0014, "IEEE results, no numpy noise": inf and nan results print nothing, as PyTorch prints nothing,
wherever the values are computed — host tensors, device programs, casts, a Triton kernel, a collective."""

from __future__ import annotations

import json

from tests.robustness.harness import kernbench, write

BENCH = '''
import json

import triton
import triton.language as tl


@triton.jit
def divide_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, tl.log(x / y) + tl.exp(x * 1000.0) + tl.sqrt(x - 5.0))


def _rank(rank, torch, results):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm")
    x = torch.full((64,), 60000.0, dtype=torch.float16)
    torch.distributed.all_reduce(x)  # 240000 overflows f16
    results[f"all_reduce {rank}"] = x[0].item()


def run(torch):
    results = {}
    for device in ("cpu", "ahbm"):
        zeros, ones = torch.zeros(4, device=device), torch.ones(4, device=device)
        inf = torch.full((2, 2), float("inf"), device=device)
        results[device] = [(ones / zeros)[0].item(), (zeros / zeros)[0].item(), zeros.log()[0].item(),
                           (zeros - 1).sqrt()[0].item(), (ones * 1000).exp()[0].item(),
                           torch.full((4,), 1e30, device=device).to(torch.float16)[0].item(),
                           torch.softmax(inf, -1)[0, 0].item(), inf.sum().item(),
                           torch.matmul(inf, inf)[0, 0].item()]
    x, y, out = torch.ones(8), torch.zeros(8), torch.empty(8)
    divide_kernel[(1,)](x, y, out, BLOCK=8)
    results["kernel"] = out[0].item()
    torch.multiprocessing.spawn(_rank, args=(torch, results), nprocs=torch.ahbm.device_count())
    print(json.dumps(results))
'''

INF, NAN = float("inf"), float("nan")


def test_adr0014_t41_inf_and_nan_results_print_no_numpy_warning_anywhere_they_are_computed(tmp_path):
    bench = write(tmp_path, "ieee.py", BENCH)
    result = kernbench("run", str(bench), "--topology", "default", cwd=tmp_path, env={"PYTHONWARNINGS": "always"})
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "PyTorch prints nothing for inf and nan results"
    results = json.loads(result.stdout.splitlines()[0], parse_constant=float)
    # PyTorch's values: 1/0, 0/0, log 0, sqrt(-1), exp(1000), 1e30 as f16, softmax of infs, a sum and matmul of infs.
    expected = [INF, NAN, -INF, NAN, INF, INF, NAN, INF, INF]
    for device in ("cpu", "ahbm"):
        assert [str(v) for v in results[device]] == [str(v) for v in expected], device
    assert str(results["kernel"]) == "nan"
    assert {results[f"all_reduce {rank}"] for rank in range(4)} == {INF}
