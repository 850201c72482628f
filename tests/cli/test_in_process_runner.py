"""`tests/cli.py`'s in-process runner gives what the command gives and leaves the test process as it found it."""

from __future__ import annotations

import os
import signal
import sys

import kernbench.cli  # noqa: F401 (imported before the snapshot: importing kernbench sets BLAS thread variables)
from tests.cli import run_kernbench_in_process

# A bench that changes what a process-wide run could: the working directory, the environment, sys.path, the
# modules imported (a sibling of the bench), SIGALRM; then exits with a status of its own outside any rank.
MESSY_BENCH = '''
import os
import signal
import sys

import helper_of_the_bench


def run(torch):
    os.chdir("/")
    os.environ["LEFT_BEHIND"] = "1"
    sys.path.append("/nowhere")
    signal.signal(signal.SIGALRM, lambda *_: None)
    print(helper_of_the_bench.GREETING, os.environ["GIVEN"])
    sys.exit(3)
'''


def test_the_runner_gives_the_commands_output_and_status_and_puts_the_process_back(tmp_path):
    (tmp_path / "helper_of_the_bench.py").write_text("GREETING = 'hello'\n")
    (tmp_path / "messy.py").write_text(MESSY_BENCH)
    cwd, environ, path, modules = os.getcwd(), dict(os.environ), list(sys.path), set(sys.modules)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGALRM, signal.SIGINT)}
    result = run_kernbench_in_process("run", "messy.py", cwd=tmp_path, env={"GIVEN": "there"})
    assert (result.returncode, result.stdout) == (3, "hello there\n"), result.stderr
    assert os.getcwd() == cwd
    assert {k: v for k, v in os.environ.items() if environ.get(k) != v} == {} and set(environ) <= set(os.environ)
    assert sys.path == path
    assert "helper_of_the_bench" not in sys.modules and set(sys.modules) >= modules
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
    missing = run_kernbench_in_process("run", "missing.py", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("kernbench: error: ") and missing.stdout == ""
