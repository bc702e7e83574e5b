"""A real browser (headless Chromium) on a page of another site tries the gateway's WebSocket face.

The page is served on 127.0.0.1 under the name ``evil.example`` (Chromium's host resolver maps it,
as a rebinding DNS name would), so its origin is ``http://evil.example:PORT``. It opens
``ws://127.0.0.1:WSPORT`` with subprotocol ``mcp``, initializes and calls
``workspace__write_file``, and reports every event back to the server it came from. The same page
loaded from ``http://localhost:PORT`` is the control: it must get through.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.attacks.test_gateway_attacks import INITIALIZE, WRITE, workspace_config
from tests.gateway.serving import serve
from tests.peers.fixtures import stop_process_group

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.subprocess,
    pytest.mark.network,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"),
]

WAIT_S = 60
PAGE = """<!doctype html><title>page</title><script>
const report = (event) => fetch("/report?event=" + encodeURIComponent(event));
const ws = new WebSocket("ws://127.0.0.1:%(ws_port)d", "mcp");
ws.onopen = () => {
  report("open");
  ws.send(%(initialize)s);
  ws.send(JSON.stringify({jsonrpc: "2.0", method: "notifications/initialized"}));
  ws.send(%(write)s);
};
ws.onmessage = (message) => {
  report("message " + message.data);
  if (JSON.parse(message.data).id === 3) ws.close();
};
ws.onerror = () => report("error");
ws.onclose = (closed) => report("close " + closed.code);
</script>"""


class _Reports:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.changed = threading.Condition()

    def add(self, event: str) -> None:
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def wait_for_close(self) -> list[str]:
        with self.changed:
            ended = self.changed.wait_for(lambda: any(e.startswith("close") for e in self.events), WAIT_S)
            assert ended, f"the page did not finish in {WAIT_S} s: {self.events}"
            return list(self.events)


@contextmanager
def page_server(page: str) -> Iterator[tuple[int, _Reports]]:
    """A web server on 127.0.0.1 serving ``page`` at ``/`` and collecting ``/report?event=``."""
    reports = _Reports()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/report":
                reports.add(parse_qs(url.query)["event"][0])
                body = b""
            else:
                body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], reports
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT_S)


def visit(url: str, profile: Path) -> subprocess.Popen[bytes]:
    """Headless Chromium on ``url``, ``evil.example`` resolving to 127.0.0.1, no proxy."""
    assert CHROMIUM is not None
    argv = [
        CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-proxy-server",
        "--host-resolver-rules=MAP evil.example 127.0.0.1", f"--user-data-dir={profile}", url,
    ]  # fmt: skip
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def run_page(host: str, ws_port: int, profile: Path) -> list[str]:
    page = PAGE % {
        "ws_port": ws_port,
        "initialize": json.dumps(json.dumps(INITIALIZE)),
        "write": json.dumps(json.dumps(WRITE)),
    }
    with page_server(page) as (port, reports):
        browser = visit(f"http://{host}:{port}/", profile)
        try:
            return reports.wait_for_close()
        finally:
            stop_process_group(browser)


def test_a_page_of_another_site_in_a_real_browser_cannot_use_the_websocket(tmp_path: Path) -> None:
    written = tmp_path / "ws" / "pwned.txt"
    with serve(tmp_path, workspace_config(tmp_path), "--ws", "127.0.0.1:0") as serving:
        ws_port = int(serving.addresses["ws"].rpartition(":")[2])
        attack = run_page("evil.example", ws_port, tmp_path / "profile-attack")
        assert "open" not in attack and not any(e.startswith("message") for e in attack), attack
        assert not written.exists()
        control = run_page("localhost", ws_port, tmp_path / "profile-control")
        assert "open" in control, control
        assert written.read_text() == "pwned"
