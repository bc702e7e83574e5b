"""Gateway replicas attacked: forged owners in session ids, requestState and the console's cookie, a
peer that breaks off mid-answer, forwarding loops, and requests that try to be forwarded without a token.

One real replica on a real PostgreSQL; the "other replicas" are rows written into its registry by
the test, pointing at a loopback socket the test controls.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import httpx
import psycopg
import pytest

from tests.gateway.serving import Serving, mcpmux
from tests.replicas.conftest import free_port, replica_config, start_replica
from tests.serve.test_serve_http import INIT, MCP_HEADERS
from tests.sources.conftest import postgres_server

__all__ = ["postgres_server"]

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


@contextmanager
def breaking_peer() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback socket that reads a request and closes without answering; yields its port and what it read."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(5)
                with suppress(OSError):
                    received.append(connection.recv(65536))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], received
    finally:
        stop.set()
        thread.join(timeout=10)
        server.close()


def register_peer(url: str, replica_id: str, port: int) -> None:
    """A registry row as a live replica would keep it (heartbeat now)."""
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(
            "INSERT INTO mcpmux_replicas (id, advertise, host, pid, version, started_at, heartbeat_at, sessions,"
            " in_flight) VALUES (%s, %s, 'ghost', 1, 'x', 0, extract(epoch from now()) + 3600, 0, 0)",
            (replica_id, f"http://127.0.0.1:{port}"),
        )


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory, postgres_server: str) -> Iterator[tuple[Serving, str, str]]:
    """One replica for the module (each test registers peers of its own names)."""
    root = tmp_path_factory.mktemp("replica")
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = "postgresql+psycopg://" + postgres_server.removeprefix("postgresql://").rsplit("/", 1)[0] + f"/{name}"
    config = replica_config(root, url)
    token = mcpmux(root, config, "token", "create", "alice").stdout.strip()
    with start_replica(root, config, "r1", free_port()) as served:
        yield served, token, url


def post(serving: Serving, token: str | None, body: object, **headers: str) -> httpx.Response:
    sent = {**MCP_HEADERS, **headers, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx.post(serving.url, content=json.dumps(body).encode(), headers=sent, timeout=30)


@pytest.mark.slow
def test_a_session_id_naming_an_unknown_or_malformed_replica_is_404_and_reaches_no_one(
    replica: tuple[Serving, str, str],
) -> None:
    serving, token, _ = replica
    for forged in ("nobody~abc", "r1~not-a-session", "../../etc~x", "~", "a" * 300 + "~x", "r2~" + "f" * 48):
        answer = post(serving, token, PING, **{"mcp-session-id": forged})
        assert answer.status_code in (400, 404), (forged, answer.status_code, answer.text)
    assert post(serving, token, INIT).status_code == 200  # still serving


def test_a_peer_that_breaks_off_mid_answer_is_a_clear_502_and_the_request_goes_nowhere_else(
    replica: tuple[Serving, str, str],
) -> None:
    serving, token, url = replica
    with breaking_peer() as (port, received):
        register_peer(url, "ghost2", port)
        time.sleep(1.5)  # past the registry's re-read limit (one read per second for unknown names)
        answer = post(serving, token, PING, **{"mcp-session-id": "ghost2~" + "0" * 48})
        assert answer.status_code == 502, answer.text
        assert "replica ghost2" in answer.text and "broke off" in answer.text
        assert len(received) == 1 and b"mcp-session-id: ghost2~" in received[0].lower()
        # It was forwarded once, with the caller's token (the owner authenticates it again) and a mark.
        assert f"bearer {token}".encode().lower() in received[0].lower()
        assert b"x-mcpmux-forwarded-by: r1" in received[0].lower()
    assert post(serving, token, INIT).status_code == 200


def test_a_forwarded_request_is_never_forwarded_again(replica: tuple[Serving, str, str]) -> None:
    serving, token, url = replica
    with breaking_peer() as (port, received):
        register_peer(url, "ghost3", port)
        time.sleep(1.5)
        marked = {"mcp-session-id": "ghost3~" + "0" * 48, "x-mcpmux-forwarded-by": "ghost3"}
        answer = post(serving, token, PING, **marked)
        assert answer.status_code == 404 and received == []  # served here: no such session


def test_nothing_is_forwarded_without_a_valid_token(replica: tuple[Serving, str, str]) -> None:
    serving, _, url = replica
    with breaking_peer() as (port, received):
        register_peer(url, "ghost4", port)
        time.sleep(1.5)
        for token in (None, "mcpmux_forged"):
            answer = post(serving, token, PING, **{"mcp-session-id": "ghost4~" + "0" * 48})
            assert answer.status_code == 401
        assert received == []


def test_a_request_state_naming_another_replica_is_checked_where_it_lands_when_that_one_is_gone(
    replica: tuple[Serving, str, str],
) -> None:
    serving, token, _ = replica
    meta = {
        "io.modelcontextprotocol/clientInfo": {"name": "x", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    }
    for state in ("gone~v1.AAAA", "r1~v1.forged", "no-separator", "~", "r1~" + "A" * 5000):
        params = {"name": "time__get_current_time", "arguments": {}, "requestState": state, "_meta": meta}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        headers = {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "time__get_current_time",
        }
        answer = post(serving, token, call, **headers)
        assert answer.status_code in (200, 400), answer.text
        assert '"error"' in answer.text and "UTC" not in answer.text, answer.text


@pytest.mark.slow
def test_a_console_cookie_naming_a_peer_that_breaks_off_is_served_here(replica: tuple[Serving, str, str]) -> None:
    serving, _, url = replica
    with breaking_peer() as (port, received):
        register_peer(url, "ghost6", port)
        time.sleep(1.5)
        page = httpx.get(f"{serving.base}/ui/servers", headers={"Cookie": "mcpmux_replica=ghost6"}, timeout=30)
        # Forwarded once; it broke off; the console answered here (not signed in: to the sign-in page).
        assert page.status_code in (302, 303, 502) and len(received) == 1
        hostile = httpx.get(f"{serving.base}/ui/servers", headers={"Cookie": "mcpmux_replica=../../x"}, timeout=30)
        assert hostile.status_code in (302, 303) and len(received) == 1
