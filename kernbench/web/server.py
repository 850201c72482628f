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
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from kernbench.errors import KernbenchError

ADDRESS = "127.0.0.1"
STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/style.css": ("style.css", "text/css; charset=utf-8")}
POLICY = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"


class WebServerError(KernbenchError):
    """The server cannot start: the port is taken or not allowed."""


def static_file(name: str) -> bytes:
    """One of the page's files, as shipped in the package."""
    return resources.files("kernbench.web").joinpath("static", name).read_bytes()


def make_server(data: dict, port: int) -> ThreadingHTTPServer:
    """A server on 127.0.0.1:`port` (0: a free port) serving the page and `data`; call `serve_forever`."""
    body = json.dumps(data, separators=(",", ":")).encode()
    files = {path: (static_file(name), kind) for path, (name, kind) in STATIC.items()}
    files["/data.json"] = (body, "application/json")

    class Handler(BaseHTTPRequestHandler):
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
        server = ThreadingHTTPServer((ADDRESS, port), Handler)
    except OSError as error:
        raise WebServerError(f"--port {port}: cannot listen on {ADDRESS}:{port}: {error.strerror or error}"
                             + ("; choose another with --port, or --port 0 for any free one" if port else "")) from None
    server.daemon_threads = True
    return server
