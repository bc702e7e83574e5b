"""Every transport x every era of a MockServer, through mcpmux's Connection and the official SDK client."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from mcpmux.errors import ProtocolError, ServerError, UsageError
from mcpmux.testing import TRANSPORTS, MockServer, Served, assert_called

pytestmark = [pytest.mark.anyio, pytest.mark.network, pytest.mark.subprocess]

ERAS = ("2025-11-25", "2026-07-28")
DEADLINE_S = 60


def build() -> MockServer:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return (
        MockServer("demo")
        .tool("echo", result="fixed answer", schema=schema, annotations={"readOnlyHint": True}, description="Echo.")
        .tool("total", result={"sum": 3})
        .resource("mem://notes/a.txt", "note A", mime_type="text/plain")
        .resource("mem://blob", b"\x00\x01binary")
        .resource_template("mem://notes/{name}", name="notes")
        .prompt("greet", "Hello {who}!", arguments=["who"], description="Greets.")
    )


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_mcpmux_connection_sees_the_whole_mock_on_every_transport_and_era(transport: str, era: str) -> None:
    mock = build()
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection(protocol=era) as conn:  # type: ignore[arg-type]
            assert conn.protocol_version == era
            tools = {tool.name: tool for tool in await conn.list_tools()}
            assert tools["echo"].description == "Echo."
            assert tools["echo"].input_schema["required"] == ["text"]
            assert tools["echo"].annotations is not None and tools["echo"].annotations.read_only_hint is True
            echo = await conn.call_tool("echo", {"text": "hi"})
            assert echo.content[0].text == "fixed answer"  # type: ignore[union-attr]
            total = await conn.call_tool("total", {})
            assert total.structured_content == {"sum": 3}
            text = await conn.read_resource("mem://notes/a.txt")
            assert text.contents[0].text == "note A"  # type: ignore[union-attr]
            blob = await conn.read_resource("mem://blob")
            assert isinstance(blob.contents[0], types.BlobResourceContents)
            templates = await conn.list_resource_templates()
            assert [t.uri_template for t in templates] == ["mem://notes/{name}"]
            prompt = await conn.get_prompt("greet", {"who": "Ada"})
            assert prompt.messages[0].content.text == "Hello Ada!"  # type: ignore[union-attr]
    call = assert_called(mock, "echo", text="hi")
    assert call.protocol_version == era
    assert [c.tool for c in mock.calls] == ["echo", "total"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_official_sdk_client_uses_the_mock_in_both_eras(transport: str) -> None:
    mock = build()
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served:  # type: ignore[arg-type]
            async with served.sdk_transport() as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.protocol_version == "2025-11-25"
                assert init.server_info.name == "demo"
                result = await session.call_tool("echo", {"text": "legacy"})
                assert result.content[0].text == "fixed answer"  # type: ignore[union-attr]
            async with Client(served.sdk_transport(), mode="2026-07-28") as client:
                tools = await client.list_tools()
                assert {t.name for t in tools.tools} == {"echo", "total"}
                result = await client.call_tool("echo", {"text": "modern"})
                assert result.content[0].text == "fixed answer"  # type: ignore[union-attr]
    assert [(c.arguments["text"], c.protocol_version) for c in mock.calls] == [
        ("legacy", "2025-11-25"),
        ("modern", "2026-07-28"),
    ]


@pytest.mark.parametrize("transport", ["memory", "stdio", "tcp", "http"])
async def test_a_legacy_only_mock_is_met_with_the_handshake_and_refuses_the_stateless_era(transport: str) -> None:
    mock = build().era("2025-11-25")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served:  # type: ignore[arg-type]
            async with served.connection(protocol="auto") as conn:
                assert conn.protocol_version == "2025-11-25"
            assert (await _modern_refusal(served)).error.code == types.METHOD_NOT_FOUND


async def _modern_refusal(served: Served) -> MCPError:
    refused: list[MCPError] = []
    try:
        async with Client(served.sdk_transport(), mode="2026-07-28") as client:
            await client.list_tools()
    except* MCPError as group:
        pending: list[BaseException] = [group]
        while pending:
            item = pending.pop()
            if isinstance(item, BaseExceptionGroup):
                pending.extend(item.exceptions)
            elif isinstance(item, MCPError):
                refused.append(item)
    assert refused, "the stateless-era request was answered"
    return refused[0]


@pytest.mark.parametrize("transport", ["memory", "stdio", "tcp", "http"])
async def test_a_stateless_only_mock_refuses_initialize_and_mcpmux_moves_to_its_era(transport: str) -> None:
    mock = build().era("2026-07-28")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served:  # type: ignore[arg-type]
            async with served.connection(protocol="auto") as conn:
                assert conn.protocol_version == "2026-07-28"
                assert (await conn.call_tool("echo", {"text": "x"})).content[0].text == "fixed answer"  # type: ignore[union-attr]
            async with served.sdk_transport() as (read, write), ClientSession(read, write) as session:
                with pytest.raises(MCPError) as refused:
                    await session.initialize()
            assert refused.value.error.code == types.UNSUPPORTED_PROTOCOL_VERSION


@pytest.mark.parametrize("transport", ["memory", "stdio", "http"])
async def test_protocol_version_drift_is_what_the_client_is_told(transport: str) -> None:
    mock = build().protocol_version("2025-03-26")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served:  # type: ignore[arg-type]
            async with served.connection(protocol="2025-11-25") as conn:
                assert conn.protocol_version == "2025-03-26"
            async with served.sdk_transport() as (read, write), ClientSession(read, write) as session:
                assert (await session.initialize()).protocol_version == "2025-03-26"


async def test_a_version_no_client_speaks_fails_the_connection_with_a_protocol_error() -> None:
    mock = build().protocol_version("1999-01-01")
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve("memory") as served:
            with pytest.raises(ProtocolError):
                async with served.connection(protocol="2025-11-25"):
                    pass


async def test_a_missing_tool_or_resource_is_a_json_rpc_error_naming_what_exists() -> None:
    with anyio.fail_after(DEADLINE_S):
        async with build().serve("memory") as served, served.connection() as conn:
            with pytest.raises(ServerError, match="echo, total"):
                await conn.call_tool("nope", {})
            with pytest.raises(ServerError, match="mem://nope"):
                await conn.read_resource("mem://nope")


def test_a_mock_with_python_handlers_cannot_cross_to_a_child_without_a_module_path() -> None:
    mock = MockServer("demo").tool("echo", lambda text: text)
    with pytest.raises(UsageError, match="Python handlers") as refused:
        mock.to_spec()
    assert "module" in (refused.value.hint or "")


async def test_a_child_imports_a_mock_with_handlers_from_a_module_path() -> None:
    mock = MockServer("handlers")
    with anyio.fail_after(DEADLINE_S):
        async with (
            mock.serve("stdio", module="tests.testing.handler_mock:build") as served,
            served.connection() as conn,
        ):
            result = await conn.call_tool("shout", {"text": "hi"})
    assert result.content[0].text == "HI!"  # type: ignore[union-attr]
    assert_called(mock, "shout", text="hi")


def test_a_bearer_token_is_refused_on_a_transport_without_headers() -> None:
    with pytest.raises(UsageError, match="cannot carry"):
        MockServer("demo").require_bearer("t0k3n").serve("tcp")
