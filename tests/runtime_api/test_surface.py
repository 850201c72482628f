"""ADR 0005, the surface: docs/torch-surface.md is what the code generates, and what is missing says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernbench.errors import KernbenchError
from kernbench.runtime_api.namespace.surface import render_surface
from kernbench.runtime_api.tensor.core import Tensor
from kernbench.runtime_api.unsupported import KNOWN_UNSUPPORTED, Namespace, UnsupportedError, tensor_getattr
from tests.cli import run_kernbench_in_process

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "torch-surface.md"


def test_adr0005_t29_the_committed_surface_page_is_what_the_code_generates(session):
    assert PAGE.read_text() == render_surface(session.torch), \
        "docs/torch-surface.md is stale: run python docs/torch_surface.py > docs/torch-surface.md"


def test_adr0005_t30_every_public_name_of_the_surface_is_on_the_page(session):
    torch = session.torch
    page = render_surface(torch)
    parts = {"torch": torch, "torch.ahbm": torch.ahbm, "torch.distributed": torch.distributed}
    for name, value in vars(torch).items():
        if isinstance(value, Namespace) and not name.startswith("_"):
            parts[f"torch.{name}"] = value
            parts.update({f"torch.{name}.{inner}": v for inner, v in vars(value).items() if isinstance(v, Namespace)})
    expected = [f"{path}.{name}" for path, part in parts.items() for name in dir(part) if not name.startswith("_")
                and not (isinstance(part, Namespace) and name not in vars(part))]
    sample = torch.from_numpy(np.zeros(2, dtype=np.float32))
    expected += [f"torch.Tensor.{name}" for name in {*dir(Tensor), *vars(sample)} if not name.startswith("_")]
    missing = [name for name in expected if f"| `{name}` |" not in page]
    assert len(expected) > 100 and not missing, f"names missing from the page: {missing}"


@pytest.mark.parametrize("path", ["torch.conv2d", "torch.nn.functional.conv2d", "torch.cuda.memory_summary",
                                  "torch.ahbm.memory_summary", "torch.nn.Conv2d"])
def test_adr0005_t31_an_unsupported_name_is_one_line_and_hasattr_is_false(session, path):
    owner_path, _, name = path.rpartition(".")
    owner = session.torch
    for part in owner_path.split(".")[1:]:
        owner = getattr(owner, part)
    assert not hasattr(owner, name)
    with pytest.raises(UnsupportedError) as caught:
        getattr(owner, name)
    shown = path.replace("torch.cuda.", "torch.ahbm.")
    assert str(caught.value).startswith(f"{shown} is not supported by kernbench (")
    assert str(caught.value).endswith("see docs/torch-surface.md)") and "\n" not in str(caught.value)
    assert isinstance(caught.value, AttributeError) and isinstance(caught.value, KernbenchError)


def test_adr0005_t32_a_missing_tensor_attribute_is_one_line(session):
    x = session.torch.ones(2)
    with pytest.raises(UnsupportedError, match=r"^torch\.Tensor\.to_sparse is not supported by kernbench "
                                               r"\(see docs/torch-surface\.md\)$"):
        tensor_getattr(x, "to_sparse")
    with pytest.raises(AttributeError) as caught:
        tensor_getattr(x, "__array_interface__")  # numpy's probe: a plain AttributeError, not a torch name
    assert not isinstance(caught.value, KernbenchError)


def test_adr0005_t33_the_known_unsupported_names_are_absent_and_listed(session):
    torch = session.torch
    owners = {"torch": torch, "torch.ahbm": torch.ahbm, "torch.distributed": torch.distributed,
              "torch.nn": torch.nn, "torch.utils": torch.utils, "torch.Tensor": Tensor}
    page = render_surface(torch)
    for path, why in KNOWN_UNSUPPORTED.items():
        owner_path, _, name = path.rpartition(".")
        assert not hasattr(owners[owner_path], name), f"{path} is provided: take it off KNOWN_UNSUPPORTED"
        assert f"| `{path}` | {why} |" in page


def test_adr0005_t34_kernbench_run_of_an_unsupported_name_exits_2_with_one_line(tmp_path):
    bench = tmp_path / "compiles.py"
    bench.write_text("def run(torch):\n    torch.compile(lambda x: x)\n")
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "kernbench: error: torch.compile is not supported by kernbench " \
                            "(see docs/torch-surface.md)\n"
