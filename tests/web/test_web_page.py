"""ADR 0019: `kernbench web` as a user runs it — the local server, and the page in a real headless browser.

The run shown is made here: four ranks all-reduce and add on the default
machine, written as `kernbench run --json/--trace` writes them. The server
is a child `kernbench web REPORT TRACE --port 0`; the browser is Debian's
Chromium driven through its DevTools protocol (`cdp.py`), and the browser
test skips when none is installed. Its screenshot is left in the test's
temporary folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from kernbench.report import run_report
from kernbench.session import Session
from kernbench.sim_engine import write_chrome_trace
from kernbench.web.utilization_scale import IDLE, colour
from tests.cli import REPO_ROOT, sigint_at_default
from tests.web.cdp import Browser, find_browser

def _rank(rank, torch):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm")
    x = torch.ones(1 << 15, dtype=torch.float16)
    torch.distributed.all_reduce(x)
    y = x + x  # a device op: a kernel on the rank's SIP
    torch.ahbm.synchronize()
    del y
    torch.distributed.destroy_process_group()


def _bench(torch):
    torch.multiprocessing.spawn(_rank, args=(torch,), nprocs=torch.ahbm.device_count())


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("web")
    session = Session("default", timing_only=True)
    session.run(_bench, session.torch)
    report = folder / "report.json"
    report.write_text(json.dumps(run_report(session.ctx)))
    trace = folder / "trace.json"
    write_chrome_trace(session.ctx.machine.oplog, trace)
    return folder, report, trace, session.ctx.topology


@pytest.fixture(scope="module")
def server(run_files):
    folder, report, trace, _ = run_files
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    child = subprocess.Popen([sys.executable, "-m", "kernbench", "web", str(report), str(trace), "--port", "0"],
                             cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": path}, preexec_fn=sigint_at_default)
    line = child.stdout.readline()  # `kernbench: serving http://127.0.0.1:PORT/ (Ctrl-C to stop)`
    if not line.startswith("kernbench: serving http://127.0.0.1:"):
        child.kill()
        pytest.fail(f"kernbench web did not start: {line!r} {child.stderr.read()}")
    url = line.split()[2]
    yield child, url
    if child.poll() is None:
        child.kill()
        child.wait()


def fetch(url: str, host: str | None = None):
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.quick
def test_adr0019_t13_the_server_is_local_serves_only_its_page_and_stops_on_ctrl_c(server):
    child, url = server
    assert url.startswith("http://127.0.0.1:")
    for path, kind in (("", "text/html"), ("app.js", "text/javascript"), ("style.css", "text/css"),
                       ("data.json", "application/json")):
        status, headers, body = fetch(url + path)
        assert status == 200 and headers["Content-Type"].startswith(kind) and body
        assert headers["Content-Security-Policy"].startswith("default-src 'self'")
    data = json.loads(fetch(url + "data.json")[2])
    assert data["report"]["collectives"] and data["timeline"]["rows"]
    assert fetch(url + "../../etc/passwd")[0] == 404 and fetch(url + "static/app.js")[0] == 404
    assert fetch(url, host="attacker.example:80")[0] == 421
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=10) == 0
    assert child.stderr.read() == "kernbench: stopped\n"


def rgb(fill: str) -> str:
    """`#rrggbb` as a browser's computed style writes it."""
    return "rgb({}, {}, {})".format(*(int(fill[i:i + 2], 16) for i in (1, 3, 5)))


def _check_busy_stack_is_drawn_busy(browser, report: dict, topology) -> None:
    """The busiest HBM stack is filled with the legend's colour at its utilization; an idle one with the legend's
    idle grey; hovering the busy one says how busy it was."""
    hbm = {row["resource"]: row["utilization"] for row in report["resources"] if row["kind"] == "hbm"}
    busy = max(hbm, key=hbm.get)
    idle = next(f"sip{s}.cube{c}.hbm" for s in range(topology.n_sips) for c in range(topology.cubes_per_sip)
                if f"sip{s}.cube{c}.hbm" not in hbm)
    fills, stops, ramp, idle_swatch = browser.evaluate(
        "(() => { const fill = (name) => getComputedStyle(document.querySelector("
        f"`#machine [data-kind=hbm][data-name=\"${{name}}\"]`)).fill;"
        f" const ramp = document.querySelector('#legend .ramp');"
        f" return [[fill('{busy}'), fill('{idle}')], JSON.parse(ramp.dataset.stops),"
        " getComputedStyle(ramp).backgroundImage,"
        " getComputedStyle(document.querySelector('#legend .idle')).backgroundColor]; })()")
    # the legend's ramp at the stack's utilization, as the gradient draws it (linear between its stops)
    (u0, c0), (u1, c1) = next((a, b) for a, b in zip(stops, stops[1:]) if a[0] <= hbm[busy] <= b[0])
    t = (hbm[busy] - u0) / (u1 - u0)
    on_ramp = [int(c0[i:i + 2], 16) * (1 - t) + int(c1[i:i + 2], 16) * t for i in (1, 3, 5)]
    drawn = [int(part) for part in fills[0][4:-1].split(",")]
    assert all(abs(a - b) <= 1 for a, b in zip(drawn, on_ramp)), (fills[0], on_ramp)
    assert fills[0] == rgb(colour(hbm[busy])) and fills[1] == rgb(IDLE) == idle_swatch != fills[0]
    assert all(rgb(fill) in ramp for _, fill in stops), ramp  # the ramp is drawn through the scale's stops
    x, y = browser.evaluate(f"(() => {{ const r = document.querySelector('#machine [data-name=\"{busy}\"]')"
                            ".getBoundingClientRect(); return [r.x + 10, r.y + r.height / 2]; })()")
    browser.mouse("mouseMoved", x, y)
    assert f"HBM busy {100 * hbm[busy]:.1f}%" in browser.evaluate("document.getElementById('tooltip').textContent")


@pytest.mark.quick
def test_adr0019_t14_the_page_draws_the_run_and_responds_in_a_headless_browser(run_files, tmp_path):
    executable = find_browser()
    if executable is None:
        pytest.skip("no Chromium or Chrome on PATH (Debian: apt-get install chromium)")
    folder, report, trace, topology = run_files
    from kernbench.web import make_server, page_data

    served = make_server(page_data(topology, json.loads(report.read_text()), json.loads(trace.read_text())), 0)
    threading.Thread(target=served.serve_forever, daemon=True).start()
    browser = Browser(executable, tmp_path / "profile")
    try:
        browser.send("Page.navigate", {"url": f"http://127.0.0.1:{served.server_address[1]}/"}, session=True)
        browser.wait_for("document.body && document.body.dataset.ready === 'true'")
        pes, links = browser.evaluate("['pe', 'link'].map((k) => "
                                      "document.querySelectorAll(`#machine [data-kind=${k}]`).length)")
        inter_sip = len(topology.all_inter_sip_links())
        assert pes == topology.total_pes
        assert links == topology.n_sips * (len(topology.noc_links(0)) + 2) + inter_sip

        _check_busy_stack_is_drawn_busy(browser, json.loads(report.read_text()), topology)

        x, y, name = browser.evaluate("(() => { const pe = document.querySelector('#machine [data-name=\"sip1.cube2.pe3\"]');"
                                      " const r = pe.getBoundingClientRect();"
                                      " return [r.x + r.width / 2, r.y + r.height / 2, pe.dataset.name]; })()")
        browser.mouse("mouseMoved", x, y)
        hidden, tip = browser.evaluate("[document.getElementById('tooltip').hidden,"
                                       " document.getElementById('tooltip').textContent]")
        assert not hidden and tip.startswith(f"{name} (corner ") and "TCM" in tip

        before = browser.evaluate("(() => { const c = document.getElementById('timeline'); c.scrollIntoView();"
                                  " const r = c.getBoundingClientRect();"
                                  " return [r.x + r.width * 0.6, r.y + r.height / 2, +c.dataset.t0, +c.dataset.t1]; })()")
        browser.mouse("mouseWheel", before[0], before[1], deltaX=0, deltaY=-600)
        deadline = time.monotonic() + 5
        while (after := browser.evaluate("[+document.getElementById('timeline').dataset.t0,"
                                         " +document.getElementById('timeline').dataset.t1]")) == before[2:]:
            assert time.monotonic() < deadline, "the timeline did not zoom"
            time.sleep(0.05)
        assert after[1] - after[0] < (before[3] - before[2]) / 2 and before[2] <= after[0] < after[1] <= before[3]

        browser.evaluate("window.scrollTo(0, 0)")
        browser.mouse("mouseMoved", x, y)
        shot = tmp_path / "kernbench-web.png"
        browser.screenshot(shot)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert browser.console_errors() == []
    finally:
        browser.close()
        served.shutdown()
        served.server_close()
