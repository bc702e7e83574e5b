"""Progressive discovery: search_tools and call_tool instead of every definition, in process."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcpmux.config.models import DiscoveryConfig, ToolsetConfig
from mcpmux.gateway import Gateway
from mcpmux.policy.toolsets import toolset_named
from tests.gateway.conftest import rich_server
from tests.gateway.test_toolsets import host_of, servers, text
from tests.manager.conftest import echo_server

pytestmark = pytest.mark.anyio

SEARCH = ToolsetConfig(tools=("fs:*", "a:*", "dyn:*"), discovery=DiscoveryConfig(mode="search"))
PINNED = ToolsetConfig(tools=("fs:*",), discovery=DiscoveryConfig(mode="search", always_load=("fs:read_dir",)))
AUTO = ToolsetConfig(tools=("fs:*",), discovery=DiscoveryConfig(mode="auto:2"))
SMALL = ToolsetConfig(tools=("fs:read_*",), discovery=DiscoveryConfig(mode="auto:2"))
TOOLSETS = {
    "search": SEARCH,
    "pinned": PINNED,
    "auto": AUTO,
    "small": SMALL,
    "reader": ToolsetConfig(tools=("fs:read_*",)),
}


async def listed(name: str, mode: Any = "legacy") -> list[str]:
    async with host_of(servers(), TOOLSETS) as (host, down):
        gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, name))
        async with Client(gateway.server, mode=mode) as client:
            return [t.name for t in (await client.list_tools()).tools]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_search_mode_lists_only_the_two_meta_tools(mode: Any) -> None:
    with anyio.fail_after(15):
        assert await listed("search", mode) == ["search_tools", "call_tool"]


async def test_always_load_tools_are_listed_beside_the_meta_tools() -> None:
    with anyio.fail_after(15):
        assert await listed("pinned") == ["search_tools", "call_tool", "fs__read_dir"]


async def test_auto_switches_to_search_only_above_its_threshold() -> None:
    with anyio.fail_after(15):
        assert await listed("auto") == ["search_tools", "call_tool"]  # three tools > 2
        assert sorted(await listed("small")) == ["fs__read_dir", "fs__read_file"]  # two tools: listed


async def test_search_returns_full_definitions_of_the_best_matches() -> None:
    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS) as (host, down):
            gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, "search"))
            async with Client(gateway.server, mode="legacy") as client:
                found = await client.call_tool("search_tools", {"query": "progress steps", "limit": 2})
                tools = found.structured_content["tools"]  # type: ignore[index]
                assert tools[0]["name"] == "a__slow"
                assert tools[0]["inputSchema"]["properties"]["steps"]["type"] == "integer"
                assert json.loads(text(found)) == {"tools": tools}
                nothing = await client.call_tool("search_tools", {"query": "kubernetes"})
                assert nothing.structured_content == {"tools": []} and "No tool matches" in text(nothing)


async def test_call_tool_calls_a_visible_tool_through_the_guard_and_is_audited() -> None:
    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS) as (host, down):
            gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, "search"))
            async with Client(gateway.server, mode="legacy") as client:
                called = await client.call_tool("call_tool", {"name": "fs__write_file", "arguments": {"text": "hi"}})
                assert text(called) == "fs:write_file:hi"
                # A tool found by a search may also be called directly.
                assert text(await client.call_tool("fs__read_file", {"text": "x"})) == "fs:read_file:x"
            rows = host.audit.query()
            assert sorted((r.name, r.outcome) for r in rows) == [("fs:read_file", "ok"), ("fs:write_file", "ok")]


async def test_progress_reaches_the_client_through_call_tool() -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS) as (host, down):
            gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, "search"))
            async with Client(gateway.server, mode="legacy") as client:
                arguments = {"name": "a__slow", "arguments": {"steps": 2}}
                result = await client.call_tool("call_tool", arguments, progress_callback=on_progress)
                assert text(result) == "a: done" and seen == [1, 2]


@pytest.mark.parametrize(
    ("arguments", "wanted"),
    [
        ({}, "needs `name`"),
        ({"name": 3}, "needs `name`"),
        ({"name": "fs__read_file", "arguments": [1]}, "must be an object"),
        ({"name": "call_tool"}, "cannot call call_tool"),
        ({"name": "search_tools"}, "cannot call search_tools"),
        ({"name": "nope__nothing"}, "no tool named 'nope__nothing'"),
    ],
)
async def test_call_tool_refuses_malformed_calls_as_invalid_params(arguments: dict[str, Any], wanted: str) -> None:
    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS) as (host, down):
            gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, "search"))
            async with Client(gateway.server, mode="legacy") as client:
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("call_tool", arguments)
                assert caught.value.error.code == types.INVALID_PARAMS and wanted in caught.value.error.message


@pytest.mark.parametrize("arguments", [{}, {"query": ""}, {"query": "x", "limit": 0}, {"query": "x", "limit": True}])
async def test_search_tools_refuses_malformed_queries(arguments: dict[str, Any]) -> None:
    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS) as (host, down):
            gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, "search"))
            async with Client(gateway.server, mode="legacy") as client:
                with pytest.raises(MCPError) as caught:
                    await client.call_tool("search_tools", arguments)
                assert caught.value.error.code == types.INVALID_PARAMS


async def test_the_meta_tools_are_not_served_when_everything_is_listed() -> None:
    with anyio.fail_after(15):
        async with host_of(servers(), TOOLSETS) as (host, down):
            gateway = Gateway(host, downstream=down, toolset=toolset_named(host.config, "reader"))
            async with Client(gateway.server, mode="legacy") as client:
                with pytest.raises(MCPError, match="no tool named 'search_tools'"):
                    await client.call_tool("search_tools", {"query": "read"})


async def test_global_discovery_applies_to_the_whole_gateway() -> None:
    upstreams = {f"s{i}": echo_server(f"s{i}", *(f"tool_{j}" for j in range(5))) for i in range(3)}
    upstreams["a"] = rich_server("a")
    discovery = DiscoveryConfig(mode="auto:10", always_load=("a:*",))
    with anyio.fail_after(15):
        async with host_of(upstreams, {}, discovery=discovery) as (host, down):
            gateway = Gateway(host, downstream=down)
            async with Client(gateway.server, mode="2026-07-28") as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert names[:2] == ["search_tools", "call_tool"] and set(names[2:]) == {
                    "a__slow",
                    "a__hang",
                    "a__noisy",
                }
                found = await client.call_tool("search_tools", {"query": "s1 tool_3"})
                assert found.structured_content["tools"][0]["name"] == "s1__tool_3"  # type: ignore[index]


# -- the benchmark's harness (bench/bench_discovery.py) on the recorded real tool sets ----------------


def _bench() -> Any:
    import importlib
    import sys
    from pathlib import Path

    folder = str(Path(__file__).resolve().parents[2] / "bench")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module("bench_discovery")


def test_the_recorded_tool_sets_hold_50_reference_and_200_recorded_definitions_with_their_sources() -> None:
    data = json.loads(_bench().DEFINITIONS.read_text())
    assert len(data["reference"]) == 50 and len(data["recorded"]) == 200
    assert all(entry["source"] and entry["definition"]["inputSchema"] for entry in data["recorded"])
    assert {e["server"] for e in data["reference"]} == {"everything", "filesystem", "memory", "time", "git"}


@pytest.mark.slow
async def test_the_token_report_covers_every_mode_and_search_lists_far_less() -> None:
    bench = _bench()
    with anyio.fail_after(120):
        rows = await bench.token_rows(bench.counters())
    assert len(rows) == 2 * len(bench.MODES)
    by_mode = {(row[0], row[1]): row for row in rows}
    big = "reference + 200 recorded (250)"
    assert by_mode[(big, "all")][2] == 250 and by_mode[(big, "search")][2] == 2
    assert by_mode[(big, "search")][3] < by_mode[(big, "all")][3]


async def test_search_hit_rates_on_the_labelled_queries_are_reported() -> None:
    bench = _bench()
    with anyio.fail_after(120):
        top1, top3, rows = await bench.hit_rates()
    assert len(rows) == 30
    # BM25 over fixed data is deterministic: a floor, not a measurement that could flake.
    assert 0 <= top1 <= top3 <= 1 and top3 >= 0.6
