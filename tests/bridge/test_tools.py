"""The bridge over a tool source: provider-ready tools, routing by table, and a real SDK server."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Image
from pydantic import BaseModel

from mcpmux.bridge import ModelResult, ToolBridge, ToolSource
from mcpmux.bridge.tools import shorten_description
from mcpmux.errors import NameCollision, ToolNotFound
from mcpmux.types.models import ToolInfo

pytestmark = pytest.mark.anyio


def info(name: str, description: str = "", schema: dict[str, Any] | None = None) -> ToolInfo:
    server, _, tool = name.partition(":")
    return ToolInfo.make(name=name, server=server, tool=tool, description=description, input_schema=schema or {})


class FakeSource:
    """An in-memory ToolSource that records calls."""

    def __init__(self, *tools: ToolInfo) -> None:
        self.listed = list(tools)
        self.calls: list[tuple[str, dict[str, Any] | None]] = []

    def tools(self) -> list[ToolInfo]:
        return list(self.listed)

    async def call_tool(self, name: str | ToolInfo, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        # The bridge hands back the ToolInfo it listed (resolved once); the canonical name is what counts here.
        name = name.name if isinstance(name, ToolInfo) else name
        self.calls.append((name, arguments))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{name} {json.dumps(arguments)}")])


def test_a_fake_source_satisfies_the_protocol() -> None:
    source: ToolSource = FakeSource()
    assert source.tools() == []


def test_tools_come_with_provider_names_and_normalised_schemas() -> None:
    source = FakeSource(
        info("web_scraper:search", "Scrape."), info("web:search", "Search the web.", {"type": "object"})
    )
    tools = ToolBridge(source).tools("openai")
    assert [(t.name, t.canonical) for t in tools] == [
        ("web__search", "web:search"),
        ("web_scraper__search", "web_scraper:search"),
    ]
    assert tools[0].parameters == {"type": "object", "properties": {}}
    assert tools[0].to_openai() == {
        "type": "function",
        "function": {
            "name": "web__search",
            "description": "Search the web.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    assert tools[0].to_anthropic() == {
        "name": "web__search",
        "description": "Search the web.",
        "input_schema": {"type": "object", "properties": {}},
    }
    assert tools[0].to_gemini() == {"name": "web__search", "description": "Search the web."}


def test_long_descriptions_are_cut_for_openai_only() -> None:
    long = "word " * 400
    source = FakeSource(info("docs:lookup", long))
    openai = ToolBridge(source).tools("openai")[0].description
    assert len(openai) <= 1024
    assert openai.endswith("…[description truncated]")
    assert ToolBridge(source).tools("anthropic")[0].description == long.strip()
    assert shorten_description("short", 1024) == "short"


def test_a_tool_without_description_is_described_by_its_names() -> None:
    assert ToolBridge(FakeSource(info("fs:stat"))).tools()[0].description == "Tool 'stat' of server 'fs'."


async def test_calls_route_through_the_table_to_the_canonical_name() -> None:
    source = FakeSource(info("web:search"), info("web_scraper:search"))
    bridge = ToolBridge(source)
    bridge.tools()
    result = await bridge.call("web_scraper__search", {"q": "mcp"})
    assert source.calls == [("web_scraper:search", {"q": "mcp"})]
    assert result.as_text() == 'web_scraper:search {"q": "mcp"}'
    handler = bridge.tools()[0].handler
    assert (await handler({"q": "x"})).as_text() == 'web:search {"q": "x"}'


async def test_an_unknown_provider_name_suggests_the_closest() -> None:
    bridge = ToolBridge(FakeSource(info("web:search"), info("web:fetch")))
    with pytest.raises(ToolNotFound) as caught:
        await bridge.call("web__serch", {})
    assert caught.value.suggestions[0] == "web__search"


def test_colliding_tools_are_an_error_naming_both() -> None:
    with pytest.raises(NameCollision) as caught:
        ToolBridge(FakeSource(info("a__b:c"), info("a:b__c"))).tools()
    assert {caught.value.first, caught.value.second} == {"a__b:c", "a:b__c"}


async def test_the_table_follows_the_source_when_tools_change() -> None:
    source = FakeSource(info("web:search"))
    bridge = ToolBridge(source)
    assert [t.name for t in bridge.tools()] == ["web__search"]
    source.listed.append(info("fs:read"))
    await bridge.call("fs__read", {})
    assert source.calls[-1][0] == "fs:read"


# -- a real SDK server, in-process ----------------------------------------------------------


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str
    home: Address


def build_server() -> MCPServer:
    server = MCPServer("demo")

    @server.tool()
    def register(person: Person) -> str:
        """Register a person at their address."""
        return f"{person.name} lives in {person.home.city}"

    @server.tool()
    def picture() -> Image:
        """A tiny PNG."""
        return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 100, format="png")

    @server.tool()
    def dump() -> str:
        """A lot of text."""
        return "line of text\n" * 50_000

    return server


class ClientSource:
    """A ToolSource over one SDK client: canonical names ``demo:<tool>``, resolved by a dict."""

    def __init__(self, client: Client, listed: list[types.Tool]) -> None:
        self._client = client
        self._by_canonical = {f"demo:{tool.name}": tool for tool in listed}

    def tools(self) -> list[ToolInfo]:
        return [ToolInfo(canonical, "demo", t) for canonical, t in self._by_canonical.items()]

    async def call_tool(self, name: str | ToolInfo, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        tool = name.definition if isinstance(name, ToolInfo) else self._by_canonical[name]
        return await self._client.call_tool(tool.name, arguments)


async def test_a_real_sdk_server_through_the_bridge() -> None:
    with anyio.fail_after(20):
        async with Client(build_server(), mode="legacy") as client:
            listed = (await client.list_tools()).tools
            bridge = ToolBridge(ClientSource(client, listed), max_result_bytes=64 * 1024)
            tools = {tool.name: tool for tool in bridge.tools("openai")}
            assert set(tools) == {"demo__register", "demo__picture", "demo__dump"}

            register = tools["demo__register"]
            assert "$ref" in json.dumps(next(t.input_schema for t in listed if t.name == "register"))
            assert "$ref" not in json.dumps(register.parameters)
            home = register.parameters["properties"]["person"]["properties"]["home"]
            assert home["properties"]["city"]["type"] == "string"
            person = {"name": "Ada", "home": {"street": "1 Loop", "city": "London"}}
            assert (await register.handler({"person": person})).as_text() == "Ada lives in London"

            picture: ModelResult = await bridge.call("demo__picture", {}, profile="anthropic")
            assert picture.content_parts("anthropic")[0]["type"] == "image"
            assert picture.as_text() == "[image: image/png, 108 bytes]"

            dump = await tools["demo__dump"].handler({})
            assert dump.truncated
            assert dump.original_bytes == len("line of text\n" * 50_000)
            assert len(dump.as_text().encode()) <= 64 * 1024
            assert "…[truncated: showed" in dump.as_text()

            gemini = {tool.name: tool.to_gemini() for tool in bridge.tools("gemini")}
            assert "parameters" not in gemini["demo__picture"]
            assert "additionalProperties" not in json.dumps(gemini["demo__register"])


@pytest.mark.subprocess
def test_the_bridge_does_not_import_the_manager_at_runtime() -> None:
    code = "import sys, mcpmux.bridge; print(sorted(m for m in sys.modules if m.startswith('mcpmux.manager')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_unchanged_tools_are_not_rebuilt_and_changed_ones_are() -> None:
    search = info("web:search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}})
    source = FakeSource(search)
    bridge = ToolBridge(source)
    first = bridge.tools()[0]
    assert bridge.tools()[0] is first
    source.listed = [info("web:search", "Search better.")]
    assert bridge.tools()[0].description == "Search better."
