"""Failure injection, observed from the client side (mcpmux's Connection and the official SDK client)."""

from __future__ import annotations

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from mcpmux.config.models import Settings
from mcpmux.connection import ClientCallbacks
from mcpmux.errors import (
    AuthRequired,
    ConnectionClosed,
    MCPTimeoutError,
    MessageTooLarge,
    ProtocolError,
    ResponseTooLarge,
    ServerError,
    ServerExited,
)
from mcpmux.testing import MockServer, assert_called

pytestmark = [pytest.mark.anyio, pytest.mark.network, pytest.mark.subprocess]

DEADLINE_S = 60
SOME = ["memory", "stdio", "tcp", "websocket", "sse", "http"]


def build() -> MockServer:
    return MockServer("faulty").tool("flaky", result="fine").tool("steady", result="steady")


@pytest.mark.parametrize("transport", SOME)
async def test_an_injected_error_reaches_the_client_with_its_code_and_message(transport: str) -> None:
    mock = build().error(-32050, "upstream exploded", tool="flaky")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection() as conn:  # type: ignore[arg-type]
            with pytest.raises(ServerError, match="upstream exploded") as failed:
                await conn.call_tool("flaky", {"n": 1})
            assert failed.value.code == -32050
            assert (await conn.call_tool("steady", {})).content[0].text == "steady"  # type: ignore[union-attr]
    assert_called(mock, "flaky", n=1)


@pytest.mark.parametrize("transport", SOME)
async def test_a_hanging_tool_times_out_at_the_client_and_the_session_lives_on(transport: str) -> None:
    mock = build().hang(tool="flaky")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection() as conn:  # type: ignore[arg-type]
            with pytest.raises(MCPTimeoutError):
                await conn.call_tool("flaky", {}, timeout=0.5)
            assert (await conn.call_tool("steady", {})).content[0].text == "steady"  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", SOME)
async def test_a_crash_mid_call_ends_the_connection_and_the_client_is_told(transport: str) -> None:
    mock = build().crash(tool="flaky")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection() as conn:  # type: ignore[arg-type]
            with pytest.raises((ConnectionClosed, ServerExited, ServerError), match=r"(?i)closed|exited") as failed:
                await conn.call_tool("flaky", {})
            if transport == "stdio":
                assert isinstance(failed.value, ServerExited)
                assert "crashing (mock)" in failed.value.stderr_tail
            with pytest.raises((ConnectionClosed, ServerExited)):
                await conn.call_tool("steady", {})
    assert_called(mock, "flaky")


@pytest.mark.parametrize("transport", SOME)
async def test_garbage_output_is_a_protocol_error_and_the_next_call_works(transport: str) -> None:
    mock = build().garbage_output(tool="flaky")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection() as conn:  # type: ignore[arg-type]
            with pytest.raises(ProtocolError, match="invalid tools/call answer"):
                await conn.call_tool("flaky", {})
            assert (await conn.call_tool("steady", {})).content[0].text == "steady"  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["stdio", "tcp", "websocket"])
async def test_a_huge_result_above_the_cap_fails_only_its_own_request(transport: str) -> None:
    mock = build().huge_result(2, tool="flaky")
    settings = Settings(max_message_bytes=1024 * 1024)
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection(settings=settings) as conn:  # type: ignore[arg-type]
            # stdio and tcp fail that request only; websockets closes the connection (1009).
            with pytest.raises(ResponseTooLarge if transport != "websocket" else MessageTooLarge):
                await conn.call_tool("flaky", {})
            if transport != "websocket":
                assert (await conn.call_tool("steady", {})).content[0].text == "steady"  # type: ignore[union-attr]


async def test_a_huge_result_under_the_cap_arrives_whole() -> None:
    mock = build().huge_result(3, tool="flaky")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve("tcp") as served, served.connection() as conn:
            result = await conn.call_tool("flaky", {})
    assert len(result.content[0].text) == 3 * 1024 * 1024  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["memory", "stdio", "tcp", "http"])
async def test_list_changed_after_n_calls_announces_a_new_tool(transport: str) -> None:
    mock = build().list_changed_after(2)
    changed = anyio.Event()

    async def on_list_changed(server: str, kind: str) -> None:
        if kind == "tools":
            changed.set()

    callbacks = ClientCallbacks(on_list_changed=on_list_changed)
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection(callbacks=callbacks) as conn:  # type: ignore[arg-type]
            await conn.call_tool("steady", {})
            assert "added_after_2" not in {t.name for t in await conn.list_tools()}
            await conn.call_tool("flaky", {})
            await changed.wait()
            assert "added_after_2" in {t.name for t in await conn.list_tools()}


@pytest.mark.parametrize("transport", ["http", "sse", "websocket"])
async def test_a_bearer_token_is_required_and_accepted(transport: str) -> None:
    mock = build().require_bearer("s3cret-t0ken")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served:  # type: ignore[arg-type]
            with pytest.raises(AuthRequired):
                async with served.connection(headers={}):
                    pass
            async with served.connection() as conn:
                assert (await conn.call_tool("steady", {})).content[0].text == "steady"  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["memory", "stdio", "http"])
async def test_the_sdk_client_sees_the_injected_failures_too(transport: str) -> None:
    mock = build().error(-32050, "upstream exploded", tool="flaky").delay(0.05, tool="steady")
    with anyio.fail_after(DEADLINE_S):
        async with (
            mock.serve(transport) as served,  # type: ignore[arg-type]
            served.sdk_transport() as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            with pytest.raises(MCPError, match="upstream exploded"):
                await session.call_tool("flaky", {})
            assert (await session.call_tool("steady", {})).content[0].text == "steady"  # type: ignore[union-attr]
