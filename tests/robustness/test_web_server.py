"""ADR 0019, "The server under bad input and load": files with fields of the wrong type, ports out of range, a
report naming a file of its choosing, clients that hang up, and 200 clients at once."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from kernbench.report import run_report
from kernbench.session import Session
from kernbench.sim_engine import write_chrome_trace
from tests.cli import run_kernbench_in_process
from tests.robustness.harness import assert_one_error_line, started


def _bench(torch):
    x = torch.ones(64)
    y = x + x
    torch.ahbm.synchronize()
    del y


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    """A run's report and trace as `kernbench run --json --trace` writes them (as parsed JSON)."""
    session = Session("default", timing_only=True)
    session.run(_bench, session.torch)
    folder = tmp_path_factory.mktemp("run")
    write_chrome_trace(session.ctx.machine.oplog, folder / "trace.json")
    return json.loads(json.dumps(run_report(session.ctx))), json.loads((folder / "trace.json").read_text())


def _edited(data: dict, edit) -> dict:
    data = json.loads(json.dumps(data))
    edit(data)
    return data


BAD_REPORTS = [
    (lambda r: r.update(total_time_ps="soon"), "total_time_ps: found 'soon' (a string); expected a finite number"),
    (lambda r: r["pes"][0].update(utilization=[1]), "pes[0].utilization: found a list; expected a finite number"),
    (lambda r: r.update(kernels={"k": 1}), "kernels: found a mapping; expected a list of rows"),
    (lambda r: r["kernels"][0].pop("start_ps"), "kernels[0]: missing 'start_ps'; expected a finite number"),
    (lambda r: r["resources"].insert(0, 7), "resources[0]: found 7; expected a row (a mapping)"),
    (lambda r: r["resources"][0].update(kind=["hbm"]), "resources[0].kind: found a list; expected a string"),
    (lambda r: r.update(topology=["default"]), "topology: found a list; expected a topology's name or path"),
]
BAD_TRACES = [
    (lambda t: t.update(traceEvents=7), "traceEvents: found 7; expected a list of events"),
    (lambda t: t["traceEvents"].append({"ph": "X", "pid": 0, "tid": 0, "ts": "late", "dur": 1}),
     "].ts: found 'late' (a string); expected a finite number"),
    (lambda t: t["traceEvents"].append({"ph": "X", "pid": [0], "tid": 0, "ts": 1, "dur": 1}),
     "].pid: found a list; expected a number or a string"),
    (lambda t: t["traceEvents"].append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": 3}),
     "].args: found 3; expected a mapping with a name (a string)"),
]


@pytest.mark.parametrize("which, edit, expected", [("report", *case) for case in BAD_REPORTS]
                         + [("trace", *case) for case in BAD_TRACES])
def test_adr0019_t39_a_field_of_the_wrong_type_is_one_line_naming_the_file_and_the_field(run_files, tmp_path,
                                                                                         which, edit, expected):
    report, trace = run_files
    given = tmp_path / f"{which}.json"
    given.write_text(json.dumps(_edited(report if which == "report" else trace, edit)))
    result = run_kernbench_in_process("web", str(given), "--port", "0", cwd=tmp_path)
    assert_one_error_line(result, f"kernbench: error: {given}: ", expected)


@pytest.mark.parametrize("port", ["-1", "99999", "http", "80.5"])
def test_adr0019_t40_a_port_out_of_range_is_refused_by_the_argument_parser_with_status_2(tmp_path, port):
    result = run_kernbench_in_process("web", "--port", port, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (f"kernbench web: error: argument --port: {port!r}: expected a port "
                                              "from 0 to 65535 (0 picks a free one)")
    assert "Traceback" not in result.stderr


def test_adr0019_t41_a_report_naming_a_file_makes_the_server_read_nothing_it_was_not_given(run_files, tmp_path):
    report, _ = run_files
    secret = tmp_path / "secret.txt"
    secret.write_text("the first line of a private file\n")
    given = tmp_path / "report.json"
    given.write_text(json.dumps(_edited(report, lambda r: r.update(topology=str(secret)))))
    result = run_kernbench_in_process("web", str(given), "--port", "0", cwd=tmp_path)
    assert_one_error_line(result, f"kernbench: error: {given}: topology: the run was on {str(secret)!r}, not a shipped "
                                  "topology, and kernbench web reads only the files named on its command line; "
                                  "name the machine with --topology FILE\n")
    assert "private" not in result.stderr
    # The shipped topology a run was made on is drawn by its name, wherever that run's kernbench was installed.
    moved = _edited(report, lambda r: r.update(topology="/elsewhere/kernbench/configs/topology/default.yaml"))
    given.write_text(json.dumps(moved))
    child = _serve(str(given), cwd=tmp_path)
    _, err = _stop(child)
    assert err == "kernbench: stopped\n"


def _serve(*args: str, cwd) -> subprocess.Popen:
    """`kernbench web ARGS --port 0`, once it serves; its port is `child.port`."""
    child = started("web", *args, "--port", "0", cwd=cwd)
    assert child.first_line.startswith("kernbench: serving http://127.0.0.1:"), child.first_line
    child.port = int(child.first_line.split(":")[3].split("/")[0])
    return child


def _stop(child: subprocess.Popen) -> tuple[int, str]:
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    return child.returncode, err


def _request(port: int, path: str, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := client.recv(1 << 16):
            answer += chunk
    return answer


def test_adr0019_t42_clients_that_hang_up_print_nothing_and_200_at_once_are_all_answered(tmp_path):
    child = _serve("--topology", "large", cwd=tmp_path)  # 1.5 MB of page data: a hang-up lands mid-answer
    for _ in range(50):
        with socket.create_connection(("127.0.0.1", child.port)) as rude:
            rude.sendall(f"GET /data.json HTTP/1.1\r\nHost: 127.0.0.1:{child.port}\r\n\r\n".encode())
            rude.recv(16)
            rude.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, not a close
    answers = []

    def one() -> None:
        began = time.monotonic()
        try:
            answered = _request(child.port, "/", timeout=5).startswith(b"HTTP/1.0 200 ")
        except OSError:
            answered = False
        # A connection the listen queue dropped is retried by the client's TCP after a second.
        answers.append(answered and time.monotonic() - began < 1)

    clients = [threading.Thread(target=one) for _ in range(200)]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    status, err = _stop(child)
    assert sum(answers) == 200, f"{200 - sum(answers)} of 200 clients had no answer within a second"
    assert status == 0 and err == "kernbench: stopped\n", "a client that hangs up is no traceback"
