"""Optional methods a server does not implement (-32601) are empty answers, never failures.

Servers built on the SDK 1.x low-level API advertise ``resources`` and answer
``resources/templates/list`` with -32601; many servers have no completion or logging handler.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import MCPServer, Server, ServerRequestContext

from mcpmux.config.models import Settings, StreamableHttpServerConfig
from mcpmux.connection import Connection
from mcpmux.errors import ServerError
from tests.connection.servers import Wire, connect
from tests.transports.conftest import running_uvicorn

pytestmark = pytest.mark.anyio


def resources_without_templates() -> Server[Any]:
    """A low-level SDK server with tools, resources and prompts but no templates, completion or logging."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="query", input_schema={"type": "object"})])

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri="memo://insights", name="insights")])

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="demo")])

    return Server(
        "sqlite-like", on_list_tools=list_tools, on_list_resources=list_resources, on_list_prompts=list_prompts
    )


def _methods(wire: Wire) -> list[str]:
    return [str(message["method"]) for message in wire if "method" in message]


async def test_a_template_list_the_server_does_not_implement_is_empty_and_the_tools_stay() -> None:
    with anyio.fail_after(10):
        async with connect(resources_without_templates()) as conn:
            assert conn.info.capabilities.resources is not None
            templates = await conn.list_resource_templates()
            tools = await conn.list_tools()
            resources = await conn.list_resources()
    assert templates == []
    assert [tool.name for tool in tools] == ["query"]
    assert [str(resource.uri) for resource in resources] == ["memo://insights"]


async def test_a_missing_optional_list_is_asked_once_per_connection() -> None:
    wire: Wire = []
    with anyio.fail_after(10):
        async with connect(resources_without_templates(), wire=wire) as conn:
            assert await conn.list_resource_templates() == []
            assert await conn.list_resource_templates() == []
    assert _methods(wire).count("resources/templates/list") == 1


async def test_completion_the_server_does_not_implement_is_empty() -> None:
    ref = types.PromptReference(name="demo")
    with anyio.fail_after(10):
        async with connect(resources_without_templates()) as conn:
            result = await conn.complete(ref, {"name": "table", "value": "us"})
    assert result.completion.values == []


async def test_logging_level_the_server_does_not_implement_is_a_no_op(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="mcpmux.connection")
    with anyio.fail_after(10):
        async with connect(resources_without_templates()) as conn:
            await conn.set_logging_level("debug")
            await conn.ping()
    assert any("does not implement logging/setLevel" in record.getMessage() for record in caplog.records)


async def test_other_errors_of_an_optional_method_are_still_raised() -> None:
    async def broken_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
        raise ValueError("database is locked")

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    server: Server[Any] = Server(
        "broken", on_list_resources=list_resources, on_list_resource_templates=broken_templates
    )
    with anyio.fail_after(10):
        async with connect(server) as conn:
            with pytest.raises(ServerError) as caught:
                await conn.list_resource_templates()
    assert caught.value.code != types.METHOD_NOT_FOUND
    assert "database is locked" in str(caught.value)


@pytest.mark.network
async def test_over_streamable_http_missing_completion_and_logging_are_empty_and_a_no_op() -> None:
    server = MCPServer("plain")  # no completion handler, no logging capability

    @server.tool()
    def echo(text: str) -> str:
        return text

    ref = types.PromptReference(name="demo")
    with anyio.fail_after(30):
        async with running_uvicorn(server.streamable_http_app()) as port:
            http = StreamableHttpServerConfig(name="plain", url=f"http://127.0.0.1:{port}/mcp")
            async with Connection(http, Settings()) as conn:
                completion = await conn.complete(ref, {"name": "table", "value": "us"})
                await conn.set_logging_level("debug")
                templates = await conn.list_resource_templates()
                assert conn.is_connected
                echoed = await conn.call_tool("echo", {"text": "still here"})
    assert completion.completion.values == []
    assert templates == []
    assert not echoed.is_error
