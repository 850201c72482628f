"""ADR 0014, "No silent wrong answers": an out-of-range dim and a second backward raise as PyTorch raises,
where they used to wrap around or add the gradients again."""

from __future__ import annotations

import pytest

from kernbench.runtime_api.errors import FreedGraphError
from kernbench.session import Session
from tests.cli import run_kernbench_in_process
from tests.robustness.harness import assert_one_error_line, write

# The calls on x = ones(3, 4), each with a dim that a 2-D tensor (or, for stack, the 3-D result) lacks.
OUT_OF_RANGE = {
    "x.sum(5)": (lambda torch, x: x.sum(5), 5, 2),
    "x.mean(7)": (lambda torch, x: x.mean(7), 7, 2),
    "x.amax(2)": (lambda torch, x: x.amax(2), 2, 2),
    "x.argmax(9)": (lambda torch, x: x.argmax(9), 9, 2),
    "softmax(x, dim=3)": (lambda torch, x: torch.softmax(x, dim=3), 3, 2),
    "cat([x, x], dim=4)": (lambda torch, x: torch.cat([x, x], dim=4), 4, 2),
    "x.chunk(2, dim=3)": (lambda torch, x: x.chunk(2, dim=3), 3, 2),
    "x.max(-3)": (lambda torch, x: x.max(-3), -3, 2),
    "x.var(2)": (lambda torch, x: x.var(2), 2, 2),
    "x.topk(1, dim=2)": (lambda torch, x: x.topk(1, dim=2), 2, 2),
    "x.split(1, 2)": (lambda torch, x: x.split(1, 2), 2, 2),
    "x.unbind(2)": (lambda torch, x: x.unbind(2), 2, 2),
    "x.movedim(2, 0)": (lambda torch, x: x.movedim(2, 0), 2, 2),
    "x.flatten(3)": (lambda torch, x: x.flatten(3), 3, 2),
    "x.size(2)": (lambda torch, x: x.size(2), 2, 2),
    "log_softmax(x, dim=-3)": (lambda torch, x: torch.nn.functional.log_softmax(x, dim=-3), -3, 2),
    "stack([x, x], dim=4)": (lambda torch, x: torch.stack([x, x], dim=4), 4, 3),
    "x.unsqueeze(3)": (lambda torch, x: x.unsqueeze(3), 3, 3),
}


def _in_run(fn, topology: str = "single_sip"):
    session = Session(topology)
    out = {}
    session.run(lambda torch: out.update(value=fn(torch)), session.torch)
    return out["value"]


@pytest.mark.parametrize("call", OUT_OF_RANGE)
def test_adr0014_t36_an_out_of_range_dim_is_pytorchs_index_error_not_a_wrap_around(call):
    fn, dim, ndim = OUT_OF_RANGE[call]
    with pytest.raises(IndexError) as caught:
        _in_run(lambda torch: fn(torch, torch.ones(3, 4)))
    assert str(caught.value) == f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], " \
                                f"but got {dim})"


def test_adr0014_t36_dims_in_range_still_wrap_as_in_pytorch_and_the_command_line_says_one_line(tmp_path):
    sums = _in_run(lambda torch: (torch.ones(3, 4).sum(-1).tolist(), torch.ones(3, 4).sum(-2).tolist(),
                                  torch.tensor(2.0).sum(-1).item()))
    assert sums == ([4.0] * 3, [3.0] * 4, 2.0)
    bench = write(tmp_path, "dims.py", "def run(torch):\n    print(torch.ones(3, 4).sum(5))\n")
    assert_one_error_line(run_kernbench_in_process("run", str(bench), "--topology", "single_sip", cwd=tmp_path),
                          "Dimension out of range (expected to be in range of [-2, 1], but got 5)")


def test_adr0014_t37_a_second_backward_through_a_freed_graph_raises_unless_retain_graph():
    def twice(torch, retain: bool):
        w = torch.ones(4, requires_grad=True)
        loss = (w * w).sum()
        loss.backward(retain_graph=retain)
        loss.backward()
        return w.grad.tolist()

    assert _in_run(lambda torch: twice(torch, True)) == [4.0] * 4, "retained: the second backward adds 2w again"
    with pytest.raises(FreedGraphError, match=r"^Trying to backward through the graph a second time \(or directly "
                                              r"access saved tensors after they have already been freed\)\. .* "
                                              r"Specify retain_graph=True") as caught:
        _in_run(lambda torch: twice(torch, False))
    assert isinstance(caught.value, RuntimeError), "PyTorch raises a RuntimeError"


def test_adr0014_t37_a_new_forward_each_step_backs_through_its_own_graph():
    def steps(torch):
        w = torch.ones(4, requires_grad=True)
        for _ in range(3):
            (w * 2).sum().backward()
        return w.grad.tolist()

    assert _in_run(steps) == [6.0] * 4
