"""The serve process's runtime: uvloop, and the SDK's client spans skipped when nobody traces."""

from __future__ import annotations

import asyncio

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.shared import jsonrpc_dispatcher

from mcpmux.gateway.runtime import loop_options, quiet_sdk_tracing


def test_the_serve_loop_is_uvloop_where_it_is_installed() -> None:
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert loop_options() == {"use_uvloop": True}
    assert anyio.run(loop_module, backend_options=loop_options()).startswith("uvloop")


async def _list(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema=schema)])


async def _echo(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=str((params.arguments or {})["text"]))])


@pytest.mark.anyio
async def test_quiet_tracing_replaces_the_dispatchers_spans_and_requests_still_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Restored after the test: the replacement is process-wide.
    monkeypatch.setattr(jsonrpc_dispatcher, "otel_span", jsonrpc_dispatcher.otel_span)
    monkeypatch.setattr(jsonrpc_dispatcher, "inject_trace_context", jsonrpc_dispatcher.inject_trace_context)
    original = jsonrpc_dispatcher.otel_span
    assert quiet_sdk_tracing() is True
    assert jsonrpc_dispatcher.otel_span is not original
    server = Server("echo", on_list_tools=_list, on_call_tool=_echo)
    with anyio.fail_after(10):
        async with Client(server, mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "hi"})
    assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "hi"
