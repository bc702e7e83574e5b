"""Attacks on the deployment files (issue 23): the shipped nginx.conf in front of real upstreams, and the
image's entrypoint fed hostile environment values.

- Request smuggling through nginx (Content-Length with Transfer-Encoding, two Content-Lengths): refused,
  the replica never sees a request.
- Bodies above the replicas' 4 MiB cap, declared or chunked: refused at nginx, never forwarded.
- A response header nginx would obey (``X-Accel-Redirect``): a replica's answer is passed, never
  turned into an internal redirect.
- A replica killed while it streams: the client's stream ends, it never hangs.
- Shell syntax and globs in MCPMUX_ALLOW_HOSTS / MCPMUX_REPLICA_ID: literal arguments, nothing runs.
- Through nginx to real replicas (the compose stack): DNS rebinding (a foreign Host), a foreign Origin,
  no token, and forged session ids (naming a replica, an address, a path, 5 KB long) are refused, and
  every replica stays up.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.deploy.files import ENTRYPOINT, entrypoint_env, fake_mcpmux
from tests.deploy.stack import CALL_TIMEOUT_S, running_stack
from tests.replicas.nginx import start_nginx
from tests.replicas.test_nginx import TIMEOUT
from tests.replicas.upstreams import Upstream, running_upstream

pytestmark = [pytest.mark.subprocess, pytest.mark.network]

READ_DEADLINE_S = 30.0
SMUGGLING = [
    b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n"
    b"GET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n",
]


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    with running_upstream("a", tmp_path) as a:
        yield a


def raw_exchange(port: int, payload: bytes) -> bytes:
    """Send ``payload`` on one connection; everything nginx answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=READ_DEADLINE_S) as sock:
        sock.sendall(payload)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


@pytest.mark.parametrize("payload", SMUGGLING, ids=["cl-and-te", "two-content-lengths"])
def test_a_smuggled_request_is_refused_before_any_replica_sees_it(
    upstream: Upstream, tmp_path: Path, payload: bytes
) -> None:
    with start_nginx([upstream.port], tmp_path) as (port, _process):
        answer = raw_exchange(port, payload)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert answer.count(b"HTTP/1.1 ") == 1
    assert upstream.executions() == []


def test_a_body_above_the_cap_stops_at_nginx_declared_or_chunked(upstream: Upstream, tmp_path: Path) -> None:
    big = b"x" * (4 * 1024 * 1024 + 1)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    with start_nginx([upstream.port], tmp_path) as (port, _process), httpx.Client(timeout=TIMEOUT) as client:
        declared = client.post(f"http://127.0.0.1:{port}/mcp", content=big)
        chunked = client.post(f"http://127.0.0.1:{port}/mcp", content=chunks())
        fits = client.post(f"http://127.0.0.1:{port}/mcp", content=big[:-1])
    assert declared.status_code == chunked.status_code == 413
    assert fits.status_code == 200
    assert upstream.executions() == ["POST /mcp"]


def test_a_replica_cannot_make_nginx_redirect_internally(upstream: Upstream, tmp_path: Path) -> None:
    with start_nginx([upstream.port], tmp_path) as (port, _process):
        response = httpx.get(f"http://127.0.0.1:{port}/accel", timeout=TIMEOUT)
    # Obeyed, X-Accel-Redirect would answer with nginx's own /nginx-healthz ("ok") instead.
    assert response.text == "a"
    assert response.headers["X-Upstream"] == "a"


def test_a_replica_killed_mid_stream_ends_the_clients_stream(tmp_path: Path) -> None:
    with (
        running_upstream("a", tmp_path) as a,
        start_nginx([a.port], tmp_path) as (port, _process),
        httpx.stream("GET", f"http://127.0.0.1:{port}/sse", timeout=TIMEOUT) as response,
    ):
        lines = response.iter_lines()
        assert next(lines) == "data: first"
        a.kill()
        try:
            rest = [line for line in lines if line]
        except httpx.RemoteProtocolError:
            rest = []  # the stream was cut: an error the client sees, not a hang
    assert rest == []


def test_shell_syntax_in_the_environment_stays_literal(tmp_path: Path) -> None:
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    (workdir / "decoy-a").touch()
    (workdir / "decoy-b").touch()
    argv_file = fake_mcpmux(tmp_path / "bin")
    hostile = "$(touch pwned-1) `touch pwned-2` ; touch pwned-3 * a|b"
    env = entrypoint_env(
        {
            "MCPMUX_DB": "postgresql+psycopg://u:p@db/x",
            "MCPMUX_ADVERTISE": "http://r1:8080",
            "MCPMUX_ALLOW_HOSTS": hostile,
            "MCPMUX_REPLICA_ID": 'r1"; touch pwned-4; "',
        },
        tmp_path / "bin",
    )
    done = subprocess.run(["sh", str(ENTRYPOINT)], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    argv = argv_file.read_text().splitlines()
    hosts = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--allow-host"]
    assert sorted(hosts) == sorted(hostile.split())
    assert argv[argv.index("--replica-id") + 1] == 'r1"; touch pwned-4; "'
    assert sorted(p.name for p in workdir.iterdir()) == ["decoy-a", "decoy-b"]
    assert not list(tmp_path.rglob("pwned-*"))


FORGED_SESSIONS = ["deadbeef", "mcpmux-2.deadbeef", "mcpmux-9:http://127.0.0.1:1/", "../../etc/passwd", "x" * 5000]


@pytest.mark.slow
@pytest.mark.peers
def test_through_the_balancer_foreign_hosts_origins_and_forged_sessions_are_refused(tmp_path: Path) -> None:
    list_tools = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
    with running_stack(tmp_path) as stack, httpx.Client(base_url=stack.base, timeout=CALL_TIMEOUT_S) as client:
        auth = {"Authorization": f"Bearer {stack.token}"}
        post = auth | {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        assert client.post("/mcp", headers=post | {"Host": "evil.example"}, content=list_tools).status_code == 421
        assert (
            client.post("/mcp", headers=post | {"Origin": "https://evil.example"}, content=list_tools).status_code
            == 403
        )
        no_token = {k: v for k, v in post.items() if k != "Authorization"}
        assert client.post("/mcp", headers=no_token, content=list_tools).status_code == 401
        for forged in FORGED_SESSIONS:
            headers = post | {"Mcp-Session-Id": forged, "Mcp-Protocol-Version": "2025-11-25"}
            answer = client.post("/mcp", headers=headers, content=list_tools)
            assert answer.status_code == 404, (forged[:40], answer.status_code, answer.text[:200])
        assert [client.get("/healthz").text for _ in stack.replicas] == ["ok"] * len(stack.replicas)
        assert all(replica.process.poll() is None for replica in stack.replicas)
