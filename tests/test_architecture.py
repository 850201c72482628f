"""ADR 0001: layering, packaging and the command line's error contract."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.cli import run_kernbench, run_kernbench_in_process

PACKAGE = Path(__file__).resolve().parent.parent / "kernbench"

# The layer of each top-level part of the package (adr/0001-architecture.md).
LAYERS = {
    "errors": 0, "lazy_names": 0, "run_caches": 0,
    "dtypes": 1, "numerics": 1,
    "topology": 2, "sim_engine": 2,
    "policy": 3,
    "machine": 4,
    "kernels": 5,
    "runtime_api": 6,
    "ccl": 7,
    "tp": 8, "data_parallel": 8, "dtensor": 8,
    "report": 9,
    "session": 10,
    "sweep": 11, "probe": 11, "web": 11,
    "cli": 12,
    "__main__": 13,
    "benches": 14,
}


def part_of(module_path: Path) -> str:
    relative = module_path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def kernbench_imports(path: Path) -> set[str]:
    """Top-level kernbench parts a module imports (absolute imports only; relative ones stay inside a part)."""
    parts = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            pieces = name.split(".")
            if pieces[0] == "kernbench" and len(pieces) > 1:
                parts.add(pieces[1])
    return parts


def test_adr0001_t1_no_module_imports_a_higher_layer():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue
        own = part_of(path)
        assert own in LAYERS, f"{path.relative_to(PACKAGE)}: part {own!r} has no layer in ADR 0001"
        for imported in kernbench_imports(path):
            assert imported in LAYERS, f"{path.relative_to(PACKAGE)} imports unknown part kernbench.{imported}"
            if imported != own and LAYERS[imported] >= LAYERS[own]:
                violations.append(f"{path.relative_to(PACKAGE)} ({own}, layer {LAYERS[own]}) imports "
                                  f"kernbench.{imported} (layer {LAYERS[imported]})")
    assert not violations, "\n".join(violations)


def module_imports(path: Path, modules: set[str]) -> set[str]:
    """The kernbench modules a module imports, `TYPE_CHECKING` imports too: `from a import b` imports module
    `a.b` where that is a module, else `a` (a package's `__init__` re-exporting its modules is no circle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return found & modules


def module_graph(package: str) -> dict[str, set[str]]:
    """Each module of `package` (a dotted name) and the modules of `package` it imports."""
    paths = {}
    for path in PACKAGE.parent.joinpath(*package.split(".")).rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {module: module_imports(path, set(paths)) - {module} for module, path in paths.items()}


def import_circles(package: str) -> list[list[str]]:
    """The sets of modules of `package` (a dotted name) that import each other round in a circle."""
    graph = module_graph(package)
    reaches = {}
    for module in graph:  # every module reachable from `module`
        seen, todo = set(), list(graph[module])
        while todo:
            other = todo.pop()
            if other not in seen:
                seen.add(other)
                todo.extend(graph[other])
        reaches[module] = seen
    circles = {frozenset(m for m in graph if m in reaches[module] and module in reaches[m]) for module in graph}
    return sorted(sorted(circle) for circle in circles if circle)


def test_adr0001_t7_no_import_circles():
    """A circle hides which module builds on which. In the Triton bridge, for one, a type the language patches
    need is named where they can import it without importing the builder that imports them
    (`triton_bridge.context.ProgramBuilder`)."""
    assert import_circles("kernbench") == []


# The parts of runtime_api, bottom-up (adr/0001-architecture.md, "Parts within a layer").
RUNTIME_API_PARTS = {
    "errors": 0, "device": 0, "unsupported": 0,
    "current_run": 1, "streams": 1, "autograd": 1,
    "layout": 2, "launch": 2,
    "ops": 3,
    "tensor": 4,
    "generators": 5,
    "context": 6,
    "spmd": 7, "nn": 7, "optim": 7, "data": 7,
    "namespace": 8,
}


def test_adr0001_t8_runtime_api_parts_import_only_parts_below_them():
    package = "kernbench.runtime_api"
    part = {module: module[len(package) + 1:].split(".")[0] for module in module_graph(package) if module != package}
    unplaced = sorted({name for name in part.values() if name not in RUNTIME_API_PARTS})
    assert not unplaced, f"parts of runtime_api with no place in ADR 0001: {unplaced}"
    violations = [f"{module} ({part[module]}) imports {other} ({part[other]})"
                  for module, imported in module_graph(package).items() if module in part
                  for other in imported if other in part and part[other] != part[module]
                  and RUNTIME_API_PARTS[part[other]] >= RUNTIME_API_PARTS[part[module]]]
    assert not violations, "\n".join(violations)


@pytest.mark.quick
def test_adr0001_t2_shipped_configs_resolve_outside_the_repo(tmp_path):
    result = run_kernbench_in_process("run", "ccl_allreduce", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "auto (ws=4): 4 OK" in result.stdout


@pytest.mark.quick
def test_adr0001_t3_user_error_is_one_message_with_status_2(tmp_path):
    result = run_kernbench_in_process("run", str(tmp_path / "missing_bench.py"), cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert "missing_bench.py" in result.stderr


@pytest.mark.quick
def test_adr0001_t4_module_and_script_entry_points_agree(tmp_path):
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("kernbench") == "kernbench.cli:main"
    result = run_kernbench("--help", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: kernbench")


@pytest.mark.quick
def test_adr0001_t5_the_repository_points_at_no_file_outside_it():
    """The repository explains itself: no text file in it refers to the `shared` folder beside the checkout."""
    import os
    import shutil
    import subprocess

    root = PACKAGE.parent
    outside = "../" + "shared"  # spelt in two pieces so that this file does not name it
    files = None
    if shutil.which("git") and (root / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=root, capture_output=True)
        if listed.returncode == 0:
            files = [root / name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if name]
    if files is None:  # no git: walk the tree, skipping git's own data, virtual environments and caches
        skipped = {".git", "__pycache__", ".pytest_cache", ".hypothesis", "node_modules", "build", "dist"}
        files = []
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [d for d in subfolders if d not in skipped and not d.endswith(".egg-info")
                             and not (Path(folder, d) / "pyvenv.cfg").exists()]
            files += [Path(folder, name) for name in names]
    offending = []
    for path in sorted(set(files)):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if outside in line:
                offending.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert not offending, f"files pointing at {outside} (outside the repository):\n" + "\n".join(offending)


def test_adr0001_t6_kernbench_run_answers_tritons_driver_queries_from_the_topology(tmp_path):
    """A bench that asks Triton's driver for the device at import time, as Triton's tutorials do."""
    bench = tmp_path / "asks_the_driver.py"
    bench.write_text(
        "import triton\n"
        "from triton.runtime import driver\n"
        "DEVICE = driver.active.get_active_torch_device()\n"
        "PROPERTIES = driver.active.utils.get_device_properties(DEVICE.index)\n"
        "def run(torch):\n"
        "    print(DEVICE, PROPERTIES['multiprocessor_count'], torch.spec['cube']['pe_layout']['pe_per_corner'])\n")
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    device, pes, per_corner = result.stdout.splitlines()[0].split()
    assert device == "ahbm:0" and int(pes) == 2 * 2 * 4 * int(per_corner)  # default.yaml: 2x2 cubes, 4 corners
