"""Toolsets: what a toolset's gateway lists and serves, in process (the served paths: test_toolsets_served.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcpmux.config.loader import load_file
from mcpmux.config.models import Config, DiscoveryConfig, SecurityConfig, ToolsetConfig
from mcpmux.errors import ConfigError, ToolDenied
from mcpmux.gateway import Downstream, Gateway
from mcpmux.gateway.server import list_cache_hint
from mcpmux.host import Host
from mcpmux.policy import StateStore
from mcpmux.policy.toolsets import Toolset, toolset_named
from tests.gateway.conftest import rich_server
from tests.manager.conftest import Upstream, dynamic_server, echo_server, factory, stdio

pytestmark = pytest.mark.anyio

TOOLSETS = {
    "reader": ToolsetConfig(
        description="read-only", tools=("fs:read_*", "a:slow", "dyn:*"), resources=("a:memo://*",), prompts=()
    ),
    "writer": ToolsetConfig(tools=("fs:write_*",), prompts=("a:review",), resources=("a:a://notes/*",)),
}


def servers() -> dict[str, Upstream]:
    return {
        "fs": echo_server("fs", "read_file", "read_dir", "write_file"),
        "web": echo_server("web", "search"),
        "a": rich_server("a"),
        "dyn": dynamic_server("dyn"),
    }


@asynccontextmanager
async def host_of(
    upstreams: Mapping[str, Upstream], toolsets: dict[str, ToolsetConfig], **config: Any
) -> AsyncIterator[tuple[Host, Downstream]]:
    downstream = Downstream()
    whole = Config(
        servers=tuple(stdio(name, **config.pop(name, {})) for name in upstreams),
        security=SecurityConfig(pinning="off", denied_tools=("web:*",)),
        toolsets=toolsets,
        **config,
    )
    with StateStore(":memory:") as store:
        host = Host(
            whole, face="gateway", store=store, approver=downstream.relay.approve,
            connection_factory=factory(upstreams), catalog=False, callbacks=downstream.client_callbacks(),
        )  # fmt: skip
        async with host:
            yield host, downstream


@asynccontextmanager
async def toolset_gateway(
    name: str, upstreams: Mapping[str, Upstream] | None = None, **config: Any
) -> AsyncIterator[Gateway]:
    async with host_of(upstreams or servers(), TOOLSETS, **config) as (host, downstream):
        gateway = Gateway(host, downstream=downstream, toolset=toolset_named(host.config, name))
        async with anyio.create_task_group() as tg:
            await tg.start(gateway.run)
            yield gateway
            tg.cancel_scope.cancel()


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_a_toolset_lists_only_its_tools_resources_and_prompts() -> None:
    with anyio.fail_after(15):
        async with toolset_gateway("reader") as gateway, Client(gateway.server, mode="legacy") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"fs__read_file", "fs__read_dir", "a__slow", "dyn__add_tool", "dyn__hang"}
            assert [r.uri for r in (await client.list_resources()).resources] == ["memo://greeting"]
            assert (await client.list_resource_templates()).resource_templates == []
            # No prompt pattern: the prompts capability is not even advertised.
            assert client.session.initialize_result.capabilities.prompts is None  # type: ignore[union-attr]
            assert text(await client.call_tool("fs__read_file", {"text": "x"})) == "fs:read_file:x"


async def test_a_tool_outside_the_toolset_is_refused_exactly_like_a_denied_tool() -> None:
    with anyio.fail_after(15):
        async with toolset_gateway("reader") as gateway, Client(gateway.server, mode="legacy") as client:
            errors = {}
            for name in ("fs__write_file", "web__search"):  # outside the toolset / denied by a rule
                with pytest.raises(MCPError) as caught:
                    await client.call_tool(name, {"text": "x"})
                errors[name] = caught.value.error
            hidden, denied = errors["fs__write_file"], errors["web__search"]
            assert hidden.code == denied.code == types.INVALID_PARAMS
            assert hidden.message.startswith("no tool named 'fs__write_file'")
            assert denied.message.startswith("no tool named 'web__search'")
            # Suggestions name only tools the caller may see.
            visible = {t.name for t in (await client.list_tools()).tools}
            suggested = set(re.findall(r"'([^']+)'", hidden.message.partition("did you mean")[2]))
            assert suggested and suggested <= visible


async def test_the_library_view_refuses_a_hidden_tool_with_tool_denied_and_audits_it() -> None:
    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS) as (host, _):
            view = host.with_toolset(toolset_named(host.config, "reader"))
            assert "fs:write_file" not in {t.name for t in view.tools()}
            with pytest.raises(ToolDenied) as caught:
                await view.call_tool("fs:write_file", {"text": "x"})
            assert caught.value.rule == "toolsets.reader (no pattern matches)"
            with pytest.raises(ToolDenied):
                await view.read_resource("a", "a://notes/secret")
            with pytest.raises(ToolDenied):
                await view.get_prompt("a:review", {"code": "x"})
            rows = host.audit.query()
            assert sorted((r.tool, r.decision, r.outcome) for r in rows) == [
                ("get_prompt", "denied", "refused"), ("read_resource", "denied", "refused"),
                ("write_file", "denied", "refused"),
            ]  # fmt: skip
            # The host itself is not narrowed by a view taken of it.
            assert text(await host.call_tool("fs:write_file", {"text": "y"})) == "fs:write_file:y"


async def test_resources_templates_and_prompts_of_a_toolset_are_served_and_the_rest_is_not_found() -> None:
    with anyio.fail_after(15):
        async with toolset_gateway("writer") as gateway, Client(gateway.server, mode="legacy") as client:
            assert [p.name for p in (await client.list_prompts()).prompts] == ["a__review"]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["a://notes/{topic}"]
            read = await client.read_resource("a://notes/toolsets")
            assert "a notes on toolsets" in read.contents[0].text  # type: ignore[union-attr]
            with pytest.raises(MCPError):
                await client.read_resource("memo://greeting")
            rendered = await client.get_prompt("a__review", {"code": "1+1"})
            assert "please review" in rendered.messages[0].content.text  # type: ignore[union-attr]


async def test_list_changed_under_a_toolset_wakes_its_clients_and_the_new_tool_is_listed() -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(15):
        async with (
            toolset_gateway("reader") as gateway,
            Client(gateway.server, mode="legacy", message_handler=on_message) as client,
        ):
            await client.call_tool("dyn__add_tool", {"new_name": "fresh"})
            await changed.wait()
            assert "dyn__fresh" in {t.name for t in (await client.list_tools()).tools}


async def test_list_changed_under_a_toolset_reaches_a_stateless_era_client_through_listen() -> None:
    with anyio.fail_after(15):
        async with (
            toolset_gateway("reader") as gateway,
            Client(gateway.server, mode="2026-07-28") as client,
            client.listen(tools_list_changed=True) as events,
        ):
            await client.call_tool("dyn__add_tool", {"new_name": "later"})
            async for _event in events:
                break
            assert "dyn__later" in {t.name for t in (await client.list_tools()).tools}


# -- cache hints -----------------------------------------------------------------------------------


def test_a_list_hint_is_the_smallest_ttl_and_private_if_any_part_is() -> None:
    assert list_cache_hint([(5000, False), (2000, False)], 60_000) == (2000, "public")
    assert list_cache_hint([(5000, False), None], 60_000) == (5000, "public")
    assert list_cache_hint([None, None], 60_000) == (60_000, "public")
    assert list_cache_hint([(5000, True), (9000, False)], 60_000) == (5000, "private")
    assert list_cache_hint([], 30_000) == (30_000, "public")


async def test_the_gateway_lists_carry_ttl_and_scope_computed_from_stateless_upstreams() -> None:
    public = MCPServer("fast", cache_hints={"tools/list": CacheHint(ttl_ms=4000, scope="public")})
    private = MCPServer("slow", cache_hints={"tools/list": CacheHint(ttl_ms=9000, scope="private")})
    for server in (public, private):
        server.add_tool(lambda: "ok", name="read_thing", description="read a thing")
    toolsets = {
        "both": ToolsetConfig(tools=("fast:*", "slow:*")),
        "fast": ToolsetConfig(tools=("fast:*",)),
        "none": ToolsetConfig(tools=("nothing:*",)),
    }
    modern = {"protocol": "2026-07-28"}
    with anyio.fail_after(15):
        async with host_of({"fast": public, "slow": private}, toolsets, fast=modern, slow=modern) as (host, down):
            for name, ttl, scope in (("both", 4000, "private"), ("fast", 4000, "public"), ("none", 60_000, "public")):
                gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, name))
                async with Client(gateway.server, mode="2026-07-28") as client:
                    listed = await client.list_tools()
                    assert (listed.ttl_ms, listed.cache_scope) == (ttl, scope), name


async def test_a_handshake_era_upstream_counts_as_the_configured_list_ttl() -> None:
    discovery = DiscoveryConfig(list_ttl_ms=1234)
    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS, discovery=discovery) as (host, down):
            gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, "reader"))
            async with Client(gateway.server, mode="2026-07-28") as client:
                listed = await client.list_tools()
                assert (listed.ttl_ms, listed.cache_scope) == (1234, "public")
                resources = await client.list_resources()
                assert resources.ttl_ms == 1234


# -- configuration ---------------------------------------------------------------------------------


def test_toolsets_and_discovery_load_from_yaml_and_merge_by_name(tmp_path: Any) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(
        "mcp: {servers: [{name: fs, command: echo}]}\n"
        "discovery: auto:30\n"
        "toolsets:\n"
        "  dev: {tools: 'fs:*', discovery: {mode: search, always_load: ['fs:read_*']}}\n"
        "  ops: {tools: [fs:read_file], description: operators}\n"
    )
    config = load_file(path)
    assert config.discovery.mode == "auto:30" and config.discovery.searching(31) and not config.discovery.searching(30)
    dev = toolset_named(config, "dev")
    assert dev.tools == ("fs:*",) and dev.discovery.mode == "search" and dev.discovery.always_load == ("fs:read_*",)
    assert toolset_named(config, "ops").discovery.mode == "auto:30"  # the global setting


@pytest.mark.parametrize(
    ("text_", "wanted"),
    [
        ("toolsets: {Dev: {}}", "String should match pattern"),
        ("toolsets: {dev: {tools: [x], nope: 1}}", "nope"),
        ("discovery: sometimes", "not a discovery mode"),
        ("discovery: auto:-1", "not a discovery mode"),
    ],
)
def test_invalid_toolsets_and_discovery_are_rejected_with_their_place(tmp_path: Any, text_: str, wanted: str) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text("mcp: {servers: []}\n" + text_ + "\n")
    with pytest.raises(ConfigError) as caught:
        load_file(path)
    assert wanted in str(caught.value)


def test_an_unknown_toolset_is_a_config_error_naming_the_known_ones() -> None:
    config = Config(toolsets=TOOLSETS)
    with pytest.raises(ConfigError, match="unknown toolset 'nope' \\(known: reader, writer\\)"):
        toolset_named(config, "nope")


def test_toolset_patterns_are_case_sensitive_and_exact() -> None:
    from mcpmux.types.models import ToolInfo

    toolset = Toolset("t", tools=("fs:read_*",))
    tool = ToolInfo.make  # a plain definition under each name
    assert toolset.has_tool(tool(name="fs:read_file", server="fs", tool="read_file"))
    for name in ("FS:read_file", "fs:READ_file", "fs:read\u200b_file", "fѕ:read_file", "fs2:read_file"):
        server, _, bare = name.partition(":")
        assert not toolset.has_tool(tool(name=name, server=server, tool=bare)), name
