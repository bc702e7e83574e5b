"""A tiny HTTP/1.1 server standing in for a replica behind nginx.

Run as ``python -m tests.replicas.tiny_upstream NAME LOG`` with its port in ``PORT``.

Every request is appended to LOG (``METHOD PATH`` per line) before it is answered, so a test can
count executions. Answers:

- ``/sse``: an event stream; the first event is written at once, the second only after a request
  to ``/release`` on this same server (so a test sees whether the first arrived unbuffered);
- ``/headers``: the request's headers as a JSON object (names lower-cased);
- ``/accel``: its name, with ``X-Accel-Redirect: /nginx-healthz`` (a header nginx would obey);
- ``/die``: the process exits without answering (a replica killed mid-request);
- anything else: ``NAME`` as plain text.

Every answer carries ``X-Upstream: NAME``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

RELEASE_TIMEOUT_S = 60.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    name = ""
    log_path = Path()
    released = threading.Event()
    log_lock = threading.Lock()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the executions log is the record."""

    def _record(self) -> None:
        with self.log_lock, self.log_path.open("a") as log:
            log.write(f"{self.command} {self.path}\n")

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._record()
        if self.path == "/die":
            os._exit(1)
        if self.path == "/sse":
            self._stream()
            return
        if self.path == "/release":
            self.released.set()
        body = self.name.encode()
        if self.path == "/headers":
            body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Upstream", self.name)
        if self.path == "/accel":
            self.send_header("X-Accel-Redirect", "/nginx-healthz")
        self.end_headers()
        self.wfile.write(body)

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("X-Upstream", self.name)
        self.end_headers()
        self.wfile.write(b"data: first\n\n")
        self.wfile.flush()
        self.released.wait(RELEASE_TIMEOUT_S)
        self.wfile.write(b"data: second\n\n")
        self.wfile.flush()
        self.close_connection = True

    do_GET = _answer
    do_POST = _answer
    do_DELETE = _answer


def main() -> None:
    name, log, port = sys.argv[1], Path(sys.argv[2]), int(os.environ["PORT"])
    _Handler.name, _Handler.log_path = name, log
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
