"""``mcpmux serve --http`` as a subprocess in front of real peers, reached by real clients."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.serving import Serving, mcpmux, serve, write_config

pytestmark = [
    pytest.mark.xdist_group(__name__),
    pytest.mark.anyio,
    pytest.mark.peers,
    pytest.mark.subprocess,
    pytest.mark.network,
]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    root = tmp_path_factory.mktemp("gateway")
    with serve(root, write_config(root), "--http", "127.0.0.1:0", "--sse", "--header-timeout", "1") as serving:
        yield serving


def post(url: str, body: bytes | Iterator[bytes], **headers: str) -> httpx2.Response:
    return httpx2.post(url, content=body, headers={**MCP_HEADERS, **headers}, timeout=10)


async def test_an_sdk_client_lists_and_calls_upstream_tools_in_the_handshake_era(gateway: Serving) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.url, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"time__get_current_time", "everything__echo", "everything__get-sum"} <= names
            assert text(await client.call_tool("everything__echo", {"message": "hi"})) == "Echo: hi"
            now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert "UTC" in text(now)


async def test_an_sdk_client_is_served_in_the_stateless_era(gateway: Serving) -> None:
    with anyio.fail_after(30):
        async with Client(gateway.url, mode="2026-07-28") as client:
            assert client.session.protocol_version == "2026-07-28"
            result = await client.call_tool("everything__get-sum", {"a": 2, "b": 3})
            assert "5" in text(result)


async def test_progress_from_the_upstream_reaches_the_http_client(gateway: Serving) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(30):
        async with Client(gateway.url, mode="legacy") as client:
            args = {"duration": 0.3, "steps": 3}
            await client.call_tool("everything__trigger-long-running-operation", args, progress_callback=on_progress)
    assert seen == [1, 2, 3]


def test_a_foreign_origin_is_refused_with_403_and_no_session(gateway: Serving) -> None:
    response = post(gateway.url, json.dumps(INIT).encode(), Origin="http://evil.example")
    assert response.status_code == 403
    assert "mcp-session-id" not in response.headers


def test_a_foreign_host_is_refused_with_421_and_no_session(gateway: Serving) -> None:
    response = post(gateway.url, json.dumps(INIT).encode(), Host="evil.example:80")
    assert response.status_code == 421
    assert "mcp-session-id" not in response.headers


def test_a_local_origin_opens_a_session_with_an_id_of_at_least_128_bits(gateway: Serving) -> None:
    response = post(gateway.url, json.dumps(INIT).encode(), Origin="http://localhost:3000")
    assert response.status_code == 200
    session = response.headers["mcp-session-id"]
    assert len(session) * 4 >= 128 and int(session, 16) >= 0


def test_a_body_over_4_mib_is_refused_with_413(gateway: Serving) -> None:
    response = post(gateway.url, b" " * (5 * 1024 * 1024))
    assert response.status_code == 413


def test_a_chunked_body_over_4_mib_is_refused_with_413(gateway: Serving) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(80):
            yield b" " * 65536

    response = post(gateway.url, chunks())
    assert response.status_code == 413


def test_a_client_trickling_its_headers_is_cut_off(gateway: Serving) -> None:
    host, port = gateway.base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 8:
            try:
                sock.sendall(b"X")
                sock.settimeout(0.3)
                if sock.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
    assert closed, "the server kept a trickling connection open"
    assert time.monotonic() - started < 5


def test_healthz_and_metrics_report_upstreams_and_calls(gateway: Serving) -> None:
    health = httpx2.get(gateway.base + "/healthz", timeout=10).json()
    assert health == {"ok": True, "servers": {"time": "connected", "everything": "connected"}}
    with anyio.from_thread.start_blocking_portal() as portal:
        portal.call(_echo_once, gateway.url)
    metrics = httpx2.get(gateway.base + "/metrics", timeout=10).text
    assert 'mcpmux_gateway_calls_total{server="everything",tool="echo",outcome="ok"}' in metrics
    assert 'mcpmux_gateway_call_duration_seconds_bucket{server="everything",tool="echo",le="+Inf"}' in metrics
    assert 'mcpmux_upstream_up{server="time",state="connected"} 1' in metrics


async def _echo_once(url: str) -> None:
    with anyio.fail_after(30):
        async with Client(url, mode="legacy") as client:
            await client.call_tool("everything__echo", {"message": "metrics"})


async def test_legacy_sse_is_served_behind_its_flag(gateway: Serving) -> None:
    from mcp.client.sse import sse_client

    with anyio.fail_after(30):
        async with sse_client(gateway.base + "/sse") as (read, write), Client(_Streams(read, write)) as client:
            assert "everything__echo" in {t.name for t in (await client.list_tools()).tools}


class _Streams:
    """A transport over an already open stream pair."""

    def __init__(self, read: object, write: object) -> None:
        self.pair = (read, write)

    async def __aenter__(self) -> tuple[object, object]:
        return self.pair

    async def __aexit__(self, *exc: object) -> None:
        return None


def test_a_non_loopback_bind_without_a_token_is_refused(tmp_path: Path) -> None:
    result = mcpmux(tmp_path, write_config(tmp_path, ()), "serve", "--http", "0.0.0.0:0")
    assert result.returncode == 2
    assert "without auth" in result.stderr and "mcpmux token create" in result.stderr


@pytest.mark.slow
async def test_tokens_are_required_once_created_and_sessions_are_bound_to_them(tmp_path: Path) -> None:
    config = write_config(tmp_path, ("time",))
    alice = json.loads(mcpmux(tmp_path, config, "token", "create", "alice", "--json").stdout)["token"]
    bob = json.loads(mcpmux(tmp_path, config, "token", "create", "bob", "--json").stdout)["token"]
    listed = json.loads(mcpmux(tmp_path, config, "token", "list", "--json").stdout)
    assert [t["name"] for t in listed] == ["alice", "bob"]
    assert alice not in (tmp_path / "data").joinpath("mcpmux", "state.db").read_bytes().decode(errors="replace")
    with serve(tmp_path, config, "--http", "127.0.0.1:0") as serving:
        body = json.dumps(INIT).encode()
        assert post(serving.url, body).status_code == 401
        assert post(serving.url, body, Authorization="Bearer nope").status_code == 401
        opened = post(serving.url, body, Authorization=f"Bearer {alice}")
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
        stolen = post(serving.url, ping, **{"Authorization": f"Bearer {bob}", "Mcp-Session-Id": session})
        assert stolen.status_code == 404
        assert httpx2.get(serving.base + "/healthz", timeout=10).status_code == 200
        assert httpx2.get(serving.base + "/metrics", timeout=10).status_code == 401
        headers = {"Authorization": f"Bearer {alice}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(serving.url, http_client=http) as (read, write),
            Client(_Streams(read, write), mode="legacy") as client,
        ):
            assert text(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))
        assert mcpmux(tmp_path, config, "token", "revoke", "alice").returncode == 0
        assert post(serving.url, body, Authorization=f"Bearer {alice}").status_code == 401


@pytest.mark.slow
async def test_json_responses_serve_calls_without_sse(tmp_path: Path) -> None:
    with serve(tmp_path, write_config(tmp_path, ("time",)), "--http", "127.0.0.1:0", "--json-response") as serving:
        opened = post(serving.url, json.dumps(INIT).encode())
        assert opened.headers["content-type"].startswith("application/json")
        with anyio.fail_after(30):
            async with Client(serving.url, mode="legacy") as client:
                assert "UTC" in text(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))


async def test_a_resource_subscription_is_forwarded_and_updates_come_back(gateway: Serving) -> None:
    updated = anyio.Event()
    seen: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            seen.append(message.params.uri)
            updated.set()

    with anyio.fail_after(30):
        async with Client(gateway.url, mode="legacy", message_handler=on_message) as client:
            uri = (await client.list_resources()).resources[0].uri
            subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            await client.session.send_request(subscribe, types.EmptyResult)
            await client.call_tool("everything__toggle-subscriber-updates", {})
            await updated.wait()
            # The last subscriber leaving takes the upstream subscription with it (server-everything answers).
            unsubscribe = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
            await client.session.send_request(unsubscribe, types.EmptyResult)
    assert uri in seen


@pytest.mark.slow
async def test_approval_reaches_clients_of_both_eras_over_http(tmp_path: Path) -> None:
    asked: list[str] = []

    async def approve(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "yes"})

    config = write_config(tmp_path, ("time",), require_approval=["time:get_current_time"])
    # Only a caller whose token may approve is asked (see tests/attacks/test_approval_attacks.py).
    approver = mcpmux(tmp_path, config, "token", "create", "approver", "--can-approve").stdout.strip()
    headers = {"Authorization": f"Bearer {approver}"}
    # Without the console: a client that cannot be asked would wait there for a person instead.
    with serve(tmp_path, config, "--http", "127.0.0.1:0", "--no-ui") as serving, anyio.fail_after(60):
        for mode in ("legacy", "2026-07-28"):
            for callback in (approve, None):
                async with (
                    httpx2.AsyncClient(headers=headers, timeout=30) as http,
                    streamable_http_client(serving.url, http_client=http) as (read, write),
                    Client(_Streams(read, write), mode=mode, elicitation_callback=callback) as client,  # type: ignore[arg-type]
                ):
                    result = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
                if callback is None:
                    assert result.is_error and "declined" in text(result)
                else:
                    assert "UTC" in text(result)
    assert len(asked) == 2 and all("Allow time:get_current_time" in question for question in asked)
