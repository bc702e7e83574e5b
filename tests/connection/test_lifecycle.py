"""Era selection, the connect deadline, and a transport that ends under a request."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Settings
from mcpmux.connection import ClientCallbacks, Connection, ToolResult
from mcpmux.errors import (
    AuthRequired,
    ConnectionClosed,
    MCPTimeoutError,
    ProtocolVersionMismatch,
    ServerError,
    ServerExited,
)
from mcpmux.transports.base import TransportStreams
from tests.connection.lowlevel import BEHAVIOURS, TOOL_COUNT, Recorder, paged_server
from tests.connection.servers import Reply, Script, Wire, config, connect, initialize_reply, scripted

pytestmark = pytest.mark.anyio


def _scripted(answer: Script, **fields: Any) -> Connection:
    exit_code = fields.pop("exit_code", lambda: None)
    stderr = fields.pop("stderr", "")
    return Connection(
        config(**fields), Settings(), transport=lambda: scripted(answer, exit_code=exit_code, stderr=stderr)
    )


def _error(message: dict[str, Any], code: int, text: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": text} | ({"data": data} if data is not None else {})
    return {"jsonrpc": "2.0", "id": message["id"], "error": error}


def _discover_reply(message: dict[str, Any]) -> dict[str, Any]:
    result = {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}},
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "public",
    }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


async def test_auto_speaks_the_handshake_without_a_discover_probe() -> None:
    wire: Wire = []
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder()), wire=wire) as conn:
            assert conn.info.protocol_version == "2025-11-25"
    methods = [m.get("method") for m in wire]
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert "server/discover" not in methods


async def test_a_pinned_2026_era_discovers_and_then_works() -> None:
    wire: Wire = []
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder()), wire=wire, protocol="2026-07-28") as conn:
            assert conn.info.protocol_version == "2026-07-28"
            assert len(await conn.list_tools()) == TOOL_COUNT + len(BEHAVIOURS)
            assert not (await conn.call_tool("t1", {})).is_error
            await conn.ping()
    assert wire[0]["method"] == "server/discover"
    assert "initialize" not in [m.get("method") for m in wire]


async def test_in_the_2026_era_input_required_is_answered_by_the_callbacks() -> None:
    async def elicitation(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    callbacks = ClientCallbacks(elicitation=elicitation)
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder()), protocol="2026-07-28", callbacks=callbacks) as conn:
            result = await conn.call_tool("ask", {})
    assert ToolResult.of(result).text == "hello Ada"


async def test_a_pinned_2026_era_against_a_handshake_only_server_is_a_version_mismatch() -> None:
    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        return _error(message, types.METHOD_NOT_FOUND, "Method not found") if "id" in message else None

    with anyio.fail_after(5), pytest.raises(ProtocolVersionMismatch) as caught:
        async with _scripted(answer, protocol="2026-07-28"):
            pass
    assert caught.value.wanted == "2026-07-28"


async def test_auto_moves_to_the_2026_era_when_the_handshake_names_only_modern_versions() -> None:
    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("method") == "initialize":
            supported = {"supported": ["2026-07-28"], "requested": "2025-11-25"}
            return _error(message, types.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", supported)
        if message.get("method") == "server/discover":
            return _discover_reply(message)
        return None

    with anyio.fail_after(5):
        async with _scripted(answer) as conn:
            assert conn.info.protocol_version == "2026-07-28"


async def test_a_handshake_with_an_unknown_version_is_a_version_mismatch() -> None:
    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("method") == "initialize":
            reply = initialize_reply(message)
            reply["result"]["protocolVersion"] = "1999-01-01"
            return reply
        return None

    with anyio.fail_after(5), pytest.raises(ProtocolVersionMismatch) as caught:
        async with _scripted(answer):
            pass
    assert caught.value.offered == "1999-01-01"


async def _silent(message: dict[str, Any]) -> None:
    return None


async def test_a_silent_server_fails_the_connect_deadline() -> None:
    started = time.perf_counter()
    with anyio.fail_after(5), pytest.raises(MCPTimeoutError) as caught:
        async with _scripted(_silent, connect_timeout_ms=200):
            pass
    assert caught.value.operation == "connect"
    assert caught.value.timeout_s == pytest.approx(0.2)
    assert time.perf_counter() - started < 2


async def test_a_child_that_died_during_connect_beats_the_timeout() -> None:
    with anyio.fail_after(5), pytest.raises(ServerExited) as caught:
        async with _scripted(_silent, connect_timeout_ms=200, exit_code=lambda: 3, stderr="fatal: no config"):
            pass
    assert (caught.value.exit_code, caught.value.stderr_tail) == (3, "fatal: no config")


def _dies_on_call(exc: Exception) -> Script:
    async def answer(message: dict[str, Any]) -> dict[str, Any] | Exception | None:
        if message.get("method") == "initialize":
            return initialize_reply(message)
        if message.get("method") == "tools/call":
            return exc
        return None

    return answer


async def test_a_crash_mid_call_fails_the_call_at_once_with_the_exit_and_stderr() -> None:
    crash = ServerExited("mem", 139, "Segmentation fault")
    with anyio.fail_after(2):
        async with _scripted(_dies_on_call(crash), timeout_ms=60_000) as conn:
            with pytest.raises(ServerExited) as caught:
                await conn.call_tool("anything", {})
            assert await conn.wait_closed() is not None
            assert not conn.is_connected
    assert (caught.value.exit_code, caught.value.stderr_tail) == (139, "Segmentation fault")
    assert "during tools/call" in str(caught.value)


async def test_a_connection_lost_without_evidence_is_connection_closed_with_the_stderr_tail() -> None:
    async def answer(message: dict[str, Any]) -> dict[str, Any] | Exception | None:
        if message.get("method") == "initialize":
            return initialize_reply(message)
        return RuntimeError("stream broke") if message.get("method") == "tools/call" else None

    with anyio.fail_after(2):
        async with _scripted(answer, timeout_ms=60_000, stderr="last words") as conn:
            with pytest.raises(ConnectionClosed, match="last words"):
                await conn.call_tool("anything", {})
            with pytest.raises(ConnectionClosed):
                await conn.ping()


async def test_an_http_status_before_a_json_rpc_error_is_the_error_raised() -> None:
    async def answer(message: dict[str, Any]) -> list[Reply] | dict[str, Any] | None:
        if message.get("method") == "initialize":
            return initialize_reply(message)
        if message.get("method") == "tools/call":
            status = AuthRequired("mem", "http://127.0.0.1:1/mcp", 401)
            return [status, _error(message, types.INTERNAL_ERROR, "Server returned an error response")]
        if message.get("method") == "tools/list":
            return _error(message, types.INTERNAL_ERROR, "no listing today")
        return None

    with anyio.fail_after(5):
        async with _scripted(answer) as conn:
            with pytest.raises(AuthRequired):
                await conn.call_tool("anything", {})
            with pytest.raises(ServerError):  # a later error without a status stays a server error
                await conn.list_tools()


async def test_closing_twice_is_harmless_and_info_needs_a_connection() -> None:
    conn = connect(paged_server(Recorder()))
    with pytest.raises(RuntimeError):
        _ = conn.info
    with anyio.fail_after(5):
        await conn.connect()
        await conn.close()
        await conn.close()
    assert not conn.is_connected


def _never_opens(left: list[str]) -> Callable[[], AbstractAsyncContextManager[TransportStreams]]:
    @asynccontextmanager
    async def transport() -> AsyncIterator[TransportStreams]:
        try:
            await anyio.sleep_forever()
            yield cast(TransportStreams, None)  # pragma: no cover - never reached: the deadline comes first
        finally:
            left.append("left")

    return transport


async def test_a_transport_that_never_opens_fails_the_connect_deadline_and_is_left() -> None:
    left: list[str] = []
    conn = Connection(config(connect_timeout_ms=200), Settings(), transport=_never_opens(left))
    with anyio.fail_after(5), pytest.raises(MCPTimeoutError) as caught:
        await conn.connect()
    assert (caught.value.operation, left) == ("connect", ["left"])
    assert not conn.is_connected
    await conn.close()  # nothing left to close


async def test_a_connect_cancelled_by_its_caller_leaves_the_transport_and_stays_cancelled() -> None:
    left: list[str] = []
    conn = Connection(config(connect_timeout_ms=60_000), Settings(), transport=_never_opens(left))
    with anyio.fail_after(5):
        with anyio.move_on_after(0.1) as scope:
            await conn.connect()
        assert scope.cancelled_caught
    assert left == ["left"]
    assert not conn.is_connected


async def test_when_closed_calls_back_once_the_transport_ends_and_a_forgotten_callback_never() -> None:
    crash = ServerExited("mem", 139, "Segmentation fault")
    calls: list[str] = []
    ended = anyio.Event()
    with anyio.fail_after(2):
        async with _scripted(_dies_on_call(crash), timeout_ms=60_000) as conn:
            forget = conn.when_closed(lambda: calls.append("forgotten"))
            conn.when_closed(ended.set)
            forget()
            assert calls == [] and conn.closed_reason() is None
            with pytest.raises(ServerExited):
                await conn.call_tool("anything", {})
            await ended.wait()
            assert not conn.is_connected
            assert isinstance(conn.closed_reason(), ServerExited)
            conn.when_closed(lambda: calls.append("late"))  # already ended: called at once
    assert calls == ["late"]


async def test_when_closed_on_a_connection_never_opened_calls_back_at_once() -> None:
    calls: list[int] = []
    _scripted(_silent).when_closed(lambda: calls.append(1))()
    assert calls == [1]
