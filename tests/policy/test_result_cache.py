"""Result caching against server-everything: idempotent tools only unless forced, canonical keys,
hits and misses in the audit rows and the gateway's /metrics, ``cache=False`` / ``--no-cache``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from mcpmux import Host
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.manager import ToolInfo
from mcpmux.policy import StateStore
from mcpmux.policy.cache import ResultCache, cache_key
from tests.gateway.serving import serve
from tests.peers.fixtures import stdio_command

DEADLINE_S = 60


def everything(cache: dict[str, Any] | None) -> StdioServerConfig:
    command, args = stdio_command("everything")
    entry: dict[str, Any] = {"name": "ev", "command": command, "args": args, "cache": cache}
    return StdioServerConfig.model_validate(entry)


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.peers
async def test_idempotent_results_are_kept_and_the_audit_says_hit_or_miss(store: StateStore) -> None:
    config = Config(servers=(everything({"ttl_s": 600}),), security=SecurityConfig(pinning="off"))
    with anyio.fail_after(DEADLINE_S):
        async with Host(config, store=store, catalog=False) as host:
            first = await host.call_tool("ev:get-sum", {"a": 2, "b": 3})
            again = await host.call_tool("ev:get-sum", {"b": 3, "a": 2})  # same canonical arguments
            other = await host.call_tool("ev:get-sum", {"a": 2, "b": 4})
            assert text(first) == text(again) and text(other) != text(first)
            fresh = await host.call_tool("ev:get-sum", {"a": 2, "b": 3}, cache=False)
            assert text(fresh) == text(first)

            rows = list(reversed(host.audit.query(limit=4)))
            assert [r.outcome for r in rows] == ["ok", "cache-hit", "ok", "ok"]
            assert rows[0].rule.endswith("cache miss") and rows[2].rule.endswith("cache miss")
            assert not rows[3].rule.endswith("cache miss")  # cache=False: not a cacheable call
            assert host.cache.stats() == {("ev", "get-sum"): (1, 2)}

            # toggle-simulated-logging is not idempotent: never kept, each call reaches the server.
            on = await host.call_tool("ev:toggle-simulated-logging", {})
            off = await host.call_tool("ev:toggle-simulated-logging", {})
            assert text(on) != text(off)
            await host.call_tool("ev:toggle-simulated-logging", {})  # leave it as it was after `on`


@pytest.mark.anyio
@pytest.mark.peers
async def test_force_caches_a_tool_without_the_hints_and_the_kept_result_is_served(store: StateStore) -> None:
    cache = {"tools": ["toggle-*"], "force": True}
    config = Config(servers=(everything(cache),), security=SecurityConfig(pinning="off"))
    with anyio.fail_after(DEADLINE_S):
        async with Host(config, store=store, catalog=False) as host:
            on = await host.call_tool("ev:toggle-simulated-logging", {})
            kept = await host.call_tool("ev:toggle-simulated-logging", {})
            assert text(kept) == text(on)  # a fresh call would have toggled it back
            off = await host.call_tool("ev:toggle-simulated-logging", {}, cache=False)
            assert text(off) != text(on)
            assert [r.outcome for r in host.audit.query(limit=3)] == ["ok", "cache-hit", "ok"]
            sums = [await host.call_tool("ev:get-sum", {"a": 1, "b": 1}) for _ in range(2)]
            assert host.cache.stats().get(("ev", "get-sum")) is None and len(sums) == 2  # not in `tools`


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
async def test_the_gateway_serves_hits_and_counts_them_in_metrics(tmp_path: Path) -> None:
    command, args = stdio_command("everything")
    entry = {"name": "ev", "type": "stdio", "command": command, "args": args, "cache": {"tools": ["get-sum"]}}
    path = tmp_path / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": [entry], "security": {"pinning": "off"}}}))
    with serve(tmp_path, path, "--http", "127.0.0.1:0") as serving, anyio.fail_after(DEADLINE_S):
        async with Client(serving.url, mode="legacy") as client:
            for _ in range(3):
                assert "5" in text(await client.call_tool("ev__get-sum", {"a": 2, "b": 3}))
        metrics = httpx2.get(serving.base + "/metrics", timeout=10).text
    assert 'mcpmux_cache_hits_total{server="ev",tool="get-sum"} 2' in metrics
    assert 'mcpmux_cache_misses_total{server="ev",tool="get-sum"} 1' in metrics


# -- the cache alone -----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entries_expire_and_a_result_ttl_shortens_or_forbids_keeping() -> None:
    server = everything({"ttl_s": 10})
    tool = ToolInfo.make(name="ev:t", server="ev", tool="t", annotations={"readOnlyHint": True, "idempotentHint": True})
    clock = Clock()
    cache = ResultCache(clock)
    result = types.CallToolResult(content=[types.TextContent(text="x")])
    cache.store(server, tool, {"a": 1}, None, result)
    clock.now = 9.9
    assert cache.lookup(tool, {"a": 1}, None) is not None
    clock.now = 10.1
    assert cache.lookup(tool, {"a": 1}, None) is None

    short = types.CallToolResult(content=[types.TextContent(text="y")], _meta={"ttlMs": 500})
    cache.store(server, tool, {"a": 2}, None, short)
    clock.now += 0.6
    assert cache.lookup(tool, {"a": 2}, None) is None
    never = types.CallToolResult(content=[types.TextContent(text="z")], _meta={"ttlMs": 0})
    cache.store(server, tool, {"a": 3}, None, never)
    assert cache.lookup(tool, {"a": 3}, None) is None
    cache.store(server, tool, {"a": 4}, None, types.CallToolResult(content=[], is_error=True))
    assert cache.lookup(tool, {"a": 4}, None) is None


def test_private_results_are_kept_per_caller_and_public_ones_shared() -> None:
    server = everything({})
    tool = ToolInfo.make(name="ev:t", server="ev", tool="t", annotations={"readOnlyHint": True, "idempotentHint": True})
    cache = ResultCache()
    cache.store(server, tool, {}, "token:alice", types.CallToolResult(content=[types.TextContent(text="mine")]))
    assert cache.lookup(tool, {}, "token:bob") is None
    assert cache.lookup(tool, {}, "token:alice") is not None
    public = types.CallToolResult(content=[types.TextContent(text="all")], _meta={"cacheScope": "public"})
    cache.store(server, tool, {"q": 1}, "token:alice", public)
    assert cache.lookup(tool, {"q": 1}, "token:bob") is not None
    assert cache_key(tool, {"b": [1, {"y": 2, "x": 1}], "a": "é"}) == cache_key(
        tool, {"a": "é", "b": [1, {"x": 1, "y": 2}]}
    )
