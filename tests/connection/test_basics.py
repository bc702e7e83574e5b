"""Connecting, listing every page, calling, reading and rendering over in-memory SDK servers."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from mcpmux.connection import ToolResult, raise_for_tool_error
from mcpmux.errors import ServerError, ToolError
from tests.connection.servers import connect, everything_server

pytestmark = pytest.mark.anyio


async def test_connect_reports_server_info_era_capabilities_and_timings() -> None:
    with anyio.fail_after(5):
        async with connect(everything_server()) as conn:
            info = conn.info
    assert info.server_info is not None
    assert (info.server_info.name, info.server_info.version) == ("fixture", "9.9")
    assert info.protocol_version == "2025-11-25"
    assert info.capabilities.tools is not None
    assert info.instructions == "use echo"
    assert 0 <= info.transport_s < 5
    assert 0 < info.handshake_s < 5
    assert info.connect_s == info.transport_s + info.handshake_s


async def test_everything_is_listed_called_read_and_rendered() -> None:
    with anyio.fail_after(5):
        async with connect(everything_server()) as conn:
            tools = await conn.list_tools()
            resources = await conn.list_resources()
            templates = await conn.list_resource_templates()
            prompts = await conn.list_prompts()
            echoed = await conn.call_tool("echo", {"text": "hi"})
            item = await conn.read_resource("fixture://items/7")
            prompt = await conn.get_prompt("greet", {"name": "Ada"})
            await conn.ping()
    assert {t.name for t in tools} == {"echo", "fail", "slow", "progress"}
    assert [str(r.uri) for r in resources] == ["fixture://static"]
    assert [t.uri_template for t in templates] == ["fixture://items/{item}"]
    assert [p.name for p in prompts] == ["greet"]
    assert ToolResult.of(echoed).text == "hi"
    assert isinstance(item.contents[0], types.TextResourceContents)
    assert item.contents[0].text == "item 7"
    assert isinstance(prompt.messages[0].content, types.TextContent)
    assert prompt.messages[0].content.text == "Hello, Ada!"


async def test_a_failing_tool_is_returned_not_raised_and_the_helper_raises() -> None:
    with anyio.fail_after(5):
        async with connect(everything_server()) as conn:
            result = await conn.call_tool("fail", {})
    assert result.is_error
    with pytest.raises(ToolError) as caught:
        raise_for_tool_error("mem", "fail", result)
    assert "it broke" in caught.value.text
    assert caught.value.tool == "fail"


async def test_a_json_rpc_error_becomes_server_error_with_code_and_method() -> None:
    with anyio.fail_after(5):
        async with connect(everything_server()) as conn:
            with pytest.raises(ServerError) as caught:
                await conn.read_resource("fixture://nowhere")
    assert caught.value.server == "mem"
    assert caught.value.method == "resources/read"
    assert isinstance(caught.value.code, int)


def test_tool_result_sorts_every_kind_of_block() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="a"),
            types.ImageContent(type="image", data="AA==", mime_type="image/png"),
            types.AudioContent(type="audio", data="AA==", mime_type="audio/wav"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="x://r", text="r", mime_type="text/plain")
            ),
            types.ResourceLink(type="resource_link", uri="x://l", name="l"),
            types.TextContent(type="text", text="b"),
        ],
        structured_content={"k": 1},
    )
    view = ToolResult.of(result)
    assert view.text == "a\nb"
    assert (len(view.images), len(view.audio), len(view.resources), len(view.links)) == (1, 1, 1, 1)
    assert view.structured == {"k": 1}
    assert not view.is_error
    assert view.raise_for_error("s", "t") is view
