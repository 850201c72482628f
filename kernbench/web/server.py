"""The local server of `kernbench web`: the page's three files and its data, on 127.0.0.1 only.

It serves a fixed set of paths — the page, its script and style sheet
(shipped in `kernbench/web/static/`) and `/data.json` — and nothing else,
so no file of the machine is reachable through it. It listens on the
loopback address only, and answers only requests whose `Host` is that
address or `localhost` at its port, so a web page elsewhere cannot reach it
through a DNS name that resolves to 127.0.0.1. Every response carries a
content security policy allowing only the server's own scripts, styles and
data: the page cannot load anything from the network, and a test that it
works offline is a test that it loads at all.

It answers as a well-behaved server does under load: each request on a
thread of its own, a listen queue as deep as the system allows (the
standard library's 5 left most of 200 clients that came at once
unanswered), an idle connection closed after `IDLE_S`, and a client that
goes away mid-answer is its own business, not a traceback on the terminal;
any other failure of one request is one line on stderr.
"""

from __future__ import annotations

import json
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from kernbench.errors import KernbenchError

ADDRESS = "127.0.0.1"
STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/style.css": ("style.css", "text/css; charset=utf-8")}
POLICY = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
IDLE_S = 10  # a connection that sends nothing for this long is closed, freeing its thread


class WebServerError(KernbenchError):
    """The server cannot start: the port is taken or not allowed."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = socket.SOMAXCONN

    def handle_error(self, request, client_address) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return  # the client went away or went quiet: nothing to answer, nothing to report
        print(f"kernbench: web: a request from {client_address[0]}:{client_address[1]} failed: "
              f"{type(error).__name__}: {error}", file=sys.stderr)


def static_file(name: str) -> bytes:
    """One of the page's files, as shipped in the package."""
    return resources.files("kernbench.web").joinpath("static", name).read_bytes()


def make_server(data: dict, port: int) -> ThreadingHTTPServer:
    """A server on 127.0.0.1:`port` (0: a free port) serving the page and `data`; call `serve_forever`."""
    body = json.dumps(data, separators=(",", ":")).encode()
    files = {path: (static_file(name), kind) for path, (name, kind) in STATIC.items()}
    files["/data.json"] = (body, "application/json")

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_S

        def do_GET(self):  # noqa: N802 (http.server's name)
            self._answer(send_body=True)

        def do_HEAD(self):  # noqa: N802
            self._answer(send_body=False)

        def _answer(self, send_body: bool) -> None:
            port_now = self.server.server_address[1]
            if self.headers.get("Host") not in (f"{ADDRESS}:{port_now}", f"localhost:{port_now}"):
                self._send(421, b"kernbench web answers only at its own address\n", "text/plain", send_body)
                return
            content = files.get(self.path.split("?", 1)[0])
            if content is None:
                self._send(404, b"not found\n", "text/plain", send_body)
                return
            self._send(200, *content, send_body)

        def _send(self, status: int, payload: bytes, kind: str, send_body: bool) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Content-Security-Policy", POLICY)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if send_body:
                self.wfile.write(payload)

        def log_message(self, format, *args):  # noqa: A002 (http.server's signature): requests are not news
            pass

    try:
        server = _Server((ADDRESS, port), Handler)
    except OSError as error:
        raise WebServerError(f"--port {port}: cannot listen on {ADDRESS}:{port}: {error.strerror or error}"
                             + ("; choose another with --port, or --port 0 for any free one" if port else "")) from None
    return server
