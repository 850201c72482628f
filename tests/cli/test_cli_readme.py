"""ADR 0019: every command-line example in README.md prints what the README shows.

A ```console block is `$ kernbench ...` followed by its expected standard
output, where a line `...` stands for any number of lines; a ```python
block whose first line is `# NAME.py` is a file the examples use. Blocks
run in README order in one folder, as a reader would type them. The
package's own path prints as `…` (it depends on where kernbench is
installed), and `kernbench web` runs on a free port and is stopped with
Ctrl-C after its first line. The other commands run in the test's process
(`tests/cli.py`): what they print is what the command prints.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys

from tests.cli import REPO_ROOT, run_kernbench_in_process, sigint_at_default

README = REPO_ROOT / "README.md"
BLOCK = re.compile(r"^```(console|python)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def examples() -> list[tuple[str, str]]:
    return BLOCK.findall(README.read_text())


def pattern(expected: list[str]) -> re.Pattern:
    parts = [r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected]
    return re.compile("".join(parts))


def environment() -> dict:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "100"}


def run_example(words: list[str], cwd) -> str:
    if words[1] == "web":
        child = subprocess.Popen([sys.executable, "-m", "kernbench", *words[1:], "--port", "0"], cwd=cwd,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(),
                                 preexec_fn=sigint_at_default)
        first = child.stdout.readline()
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=20) == 0, child.stderr.read()
        return re.sub(r"127\.0\.0\.1:\d+/", "127.0.0.1:8765/", first)
    result = run_kernbench_in_process(*words[1:], cwd=cwd, env={"COLUMNS": "100"})
    assert result.returncode == 0, f"{' '.join(words)}: {result.stderr}"
    return result.stdout


def test_adr0019_t15_every_command_line_example_in_the_readme_prints_what_it_shows(tmp_path):
    commands = set()
    for kind, body in examples():
        lines = body.splitlines()
        if kind == "python":
            name = re.fullmatch(r"# (\w+\.py)", lines[0]) if lines else None
            if name:
                (tmp_path / name.group(1)).write_text(body)
            continue
        if not lines or not lines[0].startswith("$ kernbench "):
            continue
        words = shlex.split(lines[0][2:])
        commands.add(words[1])
        output = run_example(words, tmp_path).replace(str(REPO_ROOT / "kernbench"), "…/kernbench")
        assert pattern(lines[1:]).fullmatch(output), f"README example `{lines[0]}` printed:\n{output}"
    assert commands >= {"run", "list", "topo", "probe", "web"}
