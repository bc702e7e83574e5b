"""Attacks on the gateway's network faces (issue 15), against a real ``mcpmux serve`` on 127.0.0.1.

- Cross-site WebSocket hijacking: a web page opens ``ws://127.0.0.1:PORT`` (subprotocol ``mcp``)
  and writes files through ``workspace__write_file``. Refused by Origin before any MCP message,
  by Host (DNS rebinding), and by token once tokens exist.
- Host and Origin allow-lists bypassed by prefix (``http://localhost:80@evil.example``).
- ``/healthz`` telling an anonymous caller which servers run when tokens are required.
- Tokens created or revoked while the gateway runs must count at once.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Subprotocol

from tests.gateway.serving import Serving, mcpmux, serve

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.network]

EVIL = "https://evil.example"
WAIT_S = 30
MCP = Subprotocol("mcp")
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}},
}  # fmt: skip
WRITE = {
    "jsonrpc": "2.0", "id": 3, "method": "tools/call",
    "params": {"name": "workspace__write_file", "arguments": {"path": "pwned.txt", "content": "pwned"}},
}  # fmt: skip


def workspace_config(root: Path) -> Path:
    """The built-in workspace server rooted in ``root/ws``, writes not asked about: the worst case."""
    (root / "ws").mkdir(exist_ok=True)
    workspace = {"name": "workspace", "type": "builtin", "root": str(root / "ws")}
    path = root / "mcpmux.json"
    security = {"pinning": "off", "require_approval": False}
    path.write_text(json.dumps({"mcp": {"servers": [workspace], "security": security}}))
    return path


def create_token(root: Path, config: Path, name: str) -> str:
    done = mcpmux(root, config, "token", "create", name)
    assert done.returncode == 0, done.stderr
    assert "next request" in done.stderr
    return done.stdout.strip()


def revoke_token(root: Path, config: Path, name: str) -> None:
    done = mcpmux(root, config, "token", "revoke", name)
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def ws_client(
    address: str, *, origin: str | None = None, host: str | None = None, token: str | None = None,
    subprotocols: list[Subprotocol] | None = None,
) -> AsyncIterator[ClientConnection]:  # fmt: skip
    """A websockets client on ``address`` (ws://127.0.0.1:PORT); ``host`` names another Host."""
    port = int(address.rpartition(":")[2])
    headers = {"Origin": origin} if origin else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    # A page reached through a rebinding DNS name sends that name as Host: connect to loopback, send the name.
    uri = f"ws://{host or '127.0.0.1'}:{port}"
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    with anyio.fail_after(WAIT_S):
        async with connect(
            uri, sock=sock, subprotocols=subprotocols or [MCP], additional_headers=headers, open_timeout=WAIT_S
        ) as ws:
            yield ws


async def rpc(ws: ClientConnection, message: dict[str, object]) -> dict[str, object]:
    """Send one request and return its response (skipping notifications)."""
    await ws.send(json.dumps(message))
    with anyio.fail_after(WAIT_S):
        while True:
            reply: dict[str, object] = json.loads(await ws.recv())
            if reply.get("id") == message["id"]:
                return reply


async def hijack(ws: ClientConnection) -> dict[str, object]:
    """What the attacking page does once connected: initialize, then write a file."""
    await rpc(ws, INITIALIZE)
    await ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    return await rpc(ws, WRITE)


async def refused_status(address: str, **kwargs: object) -> int:
    with pytest.raises(InvalidStatus) as refused:
        async with ws_client(address, **kwargs) as ws:  # type: ignore[arg-type]
            await hijack(ws)
    return refused.value.response.status_code


@pytest.fixture(scope="module")
def open_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serving, Path]]:
    """``serve --ws`` on a machine without tokens."""
    root = tmp_path_factory.mktemp("ws-open")
    with serve(root, workspace_config(root), "--ws", "127.0.0.1:0") as serving:
        yield serving, root


@pytest.fixture(scope="module")
def tokened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serving, Path, str]]:
    """``serve --ws --http`` on a machine with a token."""
    root = tmp_path_factory.mktemp("ws-tokens")
    config = workspace_config(root)
    token = create_token(root, config, "alice")
    with serve(root, config, "--ws", "127.0.0.1:0", "--http", "127.0.0.1:0") as serving:
        yield serving, root, token


# -- cross-site WebSocket hijacking -------------------------------------------------------------


async def test_a_cross_site_page_cannot_open_the_websocket(open_ws: tuple[Serving, Path]) -> None:
    serving, root = open_ws
    assert await refused_status(serving.addresses["ws"], origin=EVIL) == 403
    assert not (root / "ws" / "pwned.txt").exists()


async def test_a_rebinding_dns_name_as_host_is_refused_on_the_websocket(open_ws: tuple[Serving, Path]) -> None:
    serving, root = open_ws
    assert await refused_status(serving.addresses["ws"], host="evil.example") == 421
    assert await refused_status(serving.addresses["ws"], host="localhost.evil.example") == 421
    assert not (root / "ws" / "pwned.txt").exists()


async def test_a_local_client_without_origin_still_uses_the_websocket_without_tokens(
    open_ws: tuple[Serving, Path],
) -> None:
    serving, root = open_ws
    async with ws_client(serving.addresses["ws"], origin="http://localhost:5173") as ws:
        assert ws.subprotocol == MCP
        reply = await hijack(ws)
    assert "error" not in reply, reply
    assert (root / "ws" / "pwned.txt").read_text() == "pwned", reply
    (root / "ws" / "pwned.txt").unlink()


@pytest.mark.slow
async def test_the_websocket_needs_a_valid_token_once_tokens_exist(tokened: tuple[Serving, Path, str]) -> None:
    serving, root, token = tokened
    address = serving.addresses["ws"]
    assert await refused_status(address) == 401
    assert await refused_status(address, token="mcpmux_not-a-token") == 401
    assert await refused_status(address, subprotocols=[MCP, Subprotocol("mcpmux.bearer.wrong")]) == 401
    # A valid token does not let a cross-site page in: Origin is checked first.
    assert await refused_status(address, origin=EVIL, token=token) == 403
    bearer = Subprotocol(f"mcpmux.bearer.{token}")
    assert await refused_status(address, origin=EVIL, subprotocols=[MCP, bearer]) == 403
    assert not (root / "ws" / "pwned.txt").exists()


async def test_the_websocket_takes_the_token_as_a_header_or_as_a_subprotocol(
    tokened: tuple[Serving, Path, str],
) -> None:
    serving, _, token = tokened
    async with ws_client(serving.addresses["ws"], token=token) as ws:
        await rpc(ws, INITIALIZE)
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        tools = await rpc(ws, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert "workspace__write_file" in json.dumps(tools)
    bearer = Subprotocol(f"mcpmux.bearer.{token}")
    async with ws_client(serving.addresses["ws"], origin="http://localhost", subprotocols=[MCP, bearer]) as ws:
        assert ws.subprotocol == MCP  # the token is never echoed back
        assert "error" not in await rpc(ws, INITIALIZE)


@pytest.mark.slow
async def test_a_call_over_the_websocket_is_audited_under_its_token_name(tmp_path: Path) -> None:
    config = workspace_config(tmp_path)
    token = create_token(tmp_path, config, "carol")
    with serve(tmp_path, config, "--ws", "127.0.0.1:0") as serving:
        async with ws_client(serving.addresses["ws"], token=token) as ws:
            assert "error" not in await hijack(ws)
        assert serving.terminate() == 0  # audit rows are written behind the call, and all of them at exit
    rows = json.loads(mcpmux(tmp_path, config, "audit", "--json").stdout)
    assert [(row["name"], row["caller"]) for row in rows] == [("workspace:write_file", "token:carol")]


async def test_the_tcp_face_refuses_to_start_where_tokens_exist(tokened: tuple[Serving, Path, str]) -> None:
    _, root, _ = tokened
    done = mcpmux(root, root / "mcpmux.json", "serve", "--tcp", "127.0.0.1:0")
    assert done.returncode == 2
    assert done.stderr.startswith("Error: ") and "--tcp-without-tokens" in done.stderr


def _page_post_to(port: int) -> bytes:
    """What a browser sends for ``fetch("http://127.0.0.1:PORT", {method: "POST", mode: "no-cors", body})``.

    A text/plain POST needs no preflight; its body carries one JSON-RPC message per line.
    """
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    body = "\n" + "\n".join(json.dumps(m) for m in (INITIALIZE, note, WRITE)) + "\n"
    head = (
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {EVIL}\r\n"
        f"Content-Type: text/plain;charset=UTF-8\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return (head + body).encode()


def _exchange(port: int, payload: bytes) -> bytes:
    """Send ``payload`` and read until the peer closes or stays silent."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_a_page_posting_json_rpc_lines_to_the_tcp_face_is_cut_off(tmp_path: Path) -> None:
    with serve(tmp_path, workspace_config(tmp_path), "--tcp", "127.0.0.1:0") as serving:
        port = int(serving.addresses["tcp"].rpartition(":")[2])
        assert _exchange(port, _page_post_to(port)) == b""
        assert not (tmp_path / "ws" / "pwned.txt").exists()
        # A client that speaks JSON-RPC from its first byte is served as before.
        assert b'"id":1' in _exchange(port, json.dumps(INITIALIZE).encode() + b"\n")


# -- Host and Origin compared exactly --------------------------------------------------------------

FOREIGN_ORIGINS = [
    "http://localhost:80@evil.example",
    "http://localhost@evil.example",
    "http://127.0.0.1:1@evil.example",
    "http://localhost:8080.evil.example",
    "http://localhost.evil.example",
    "http://localhost.evil.example:8080",
    "http://127.0.0.1.evil.example",
    "http://LOCALHOST.EVIL.EXAMPLE",
    "http://localhost.",
    "http://localhost.:8080",
    "http://[::1].evil.example",
    "http://[::1]@evil.example",
    "http://evil.example/http://localhost",
    "http://localhost:*",
    "http://localhost:",
    "null",
    "https://evil.example",
    "file://",
    "chrome-extension://abcdefghijklmnop",
    "http://localhost:8080, https://evil.example",
]
FOREIGN_HOSTS = [
    "localhost:80@evil.example",
    "localhost@evil.example",
    "localhost.evil.example",
    "localhost.evil.example:8080",
    "127.0.0.1.evil.example",
    "LOCALHOST.EVIL.EXAMPLE",
    "localhost.",
    "localhost.:8080",
    "[::1].evil.example",
    "::1",
    "evil.example",
    "localhost:8080/evil",
    "",
]
LOCAL_ORIGINS = ["http://localhost:{port}", "http://127.0.0.1:{port}", "http://[::1]:{port}", "HTTP://LocalHost:{port}"]
LOCAL_HOSTS = ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}", "LOCALHOST:{port}", "localhost"]


@pytest.fixture(scope="module")
def open_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    root = tmp_path_factory.mktemp("http-open")
    with serve(root, workspace_config(root), "--http", "127.0.0.1:0", "--ws", "127.0.0.1:0") as serving:
        yield serving


def post_initialize(serving: Serving, **headers: str) -> int:
    body = json.dumps(INITIALIZE).encode()
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx2.post(serving.url, content=body, headers={**accept, **headers}, timeout=WAIT_S).status_code


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
async def test_a_foreign_origin_is_refused_however_it_is_dressed(open_http: Serving, origin: str) -> None:
    assert post_initialize(open_http, Origin=origin) == 403
    assert await refused_status(open_http.addresses["ws"], origin=origin) == 403


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_a_foreign_host_is_refused_however_it_is_dressed(open_http: Serving, host: str) -> None:
    assert post_initialize(open_http, Host=host) == 421


@pytest.mark.parametrize("origin", LOCAL_ORIGINS)
def test_a_local_origin_on_any_port_is_accepted(open_http: Serving, origin: str) -> None:
    assert post_initialize(open_http, Origin=origin.format(port=5173)) == 200


@pytest.mark.parametrize("host", LOCAL_HOSTS)
def test_a_local_host_is_accepted(open_http: Serving, host: str) -> None:
    port = open_http.base.rpartition(":")[2]
    assert post_initialize(open_http, Host=host.format(port=port)) == 200


def test_a_client_without_origin_is_accepted_as_documented(open_http: Serving) -> None:
    assert post_initialize(open_http) == 200


# -- /healthz ------------------------------------------------------------------------------------------


def test_healthz_says_only_ok_to_an_anonymous_caller_when_tokens_are_required(
    tokened: tuple[Serving, Path, str],
) -> None:
    serving, _, token = tokened
    anonymous = httpx2.get(serving.base + "/healthz", timeout=WAIT_S)
    assert anonymous.status_code == 200 and anonymous.text == "ok"
    wrong = httpx2.get(serving.base + "/healthz", headers={"Authorization": "Bearer nope"}, timeout=WAIT_S)
    assert wrong.text == "ok"
    known = httpx2.get(serving.base + "/healthz", headers={"Authorization": f"Bearer {token}"}, timeout=WAIT_S)
    assert known.json()["servers"] == {"workspace": "connected"}


# -- tokens created and revoked while serving ----------------------------------------------------------


@pytest.mark.slow
async def test_a_token_created_while_serving_is_required_and_accepted_at_once(tmp_path: Path) -> None:
    config = workspace_config(tmp_path)
    with serve(tmp_path, config, "--http", "127.0.0.1:0", "--ws", "127.0.0.1:0") as serving:
        assert post_initialize(serving) == 200
        first = create_token(tmp_path, config, "first")
        assert post_initialize(serving) == 401
        assert post_initialize(serving, Authorization=f"Bearer {first}") == 200
        assert await refused_status(serving.addresses["ws"]) == 401
        second = create_token(tmp_path, config, "second")
        assert post_initialize(serving, Authorization=f"Bearer {second}") == 200
        revoke_token(tmp_path, config, "first")
        assert post_initialize(serving, Authorization=f"Bearer {first}") == 401
        assert await refused_status(serving.addresses["ws"], token=first) == 401
        assert post_initialize(serving, Authorization=f"Bearer {second}") == 200


@pytest.mark.slow
async def test_a_websocket_whose_token_is_revoked_is_closed_at_its_next_message(
    tmp_path: Path,
) -> None:
    config = workspace_config(tmp_path)
    token = create_token(tmp_path, config, "mallory")
    with serve(tmp_path, config, "--ws", "127.0.0.1:0") as serving:
        async with ws_client(serving.addresses["ws"], token=token) as ws:
            assert "error" not in await rpc(ws, INITIALIZE)
            revoke_token(tmp_path, config, "mallory")
            with pytest.raises(ConnectionClosed) as closed:
                await hijack(ws)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert not (tmp_path / "ws" / "pwned.txt").exists()
