"""Toolsets served by ``mcpmux serve`` (a subprocess) to real clients: SDK clients of both eras, the MCP Inspector."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.serving import MCPMUX, Serving, isolated_env, mcpmux, serve
from tests.peers.fixtures import inspector_cli, stdio_command
from tests.serve.test_serve_http import INIT, MCP_HEADERS, _Streams

pytestmark = [
    pytest.mark.xdist_group(__name__),
    pytest.mark.anyio,
    pytest.mark.peers,
    pytest.mark.subprocess,
    pytest.mark.network,
]

TOOLSETS = {
    "clock": {"description": "time only", "tools": ["time:*"]},
    "kit": {
        "tools": ["everything:*"],
        "resources": ["everything:*"],
        "prompts": ["everything:*"],
        "discovery": {"mode": "search", "always_load": ["everything:echo"]},
    },
}
TIME_TOOLS = {"time__get_current_time", "time__convert_time"}
CHANGING = Path(__file__).resolve().parents[1] / "fixtures" / "changing_server.py"


def toolset_config(root: Path, **extra: Any) -> Path:
    entries = []
    for name in ("time", "everything"):
        command, args = stdio_command(name)
        entries.append({"name": name, "type": "stdio", "command": command, "args": args})
    path = root / "mcpmux.json"
    document = {"mcp": {"servers": entries, "security": {"pinning": "off"}}, "toolsets": TOOLSETS, **extra}
    path.write_text(json.dumps(document))
    return path


def make_token(root: Path, config: Path, name: str, *toolsets: str) -> str:
    flags = [arg for toolset in toolsets for arg in ("--toolset", toolset)]
    created = mcpmux(root, config, "token", "create", name, *flags, "--json")
    assert created.returncode == 0, created.stderr
    token: str = json.loads(created.stdout)["token"]
    return token


@asynccontextmanager
async def client_at(url: str, token: str | None, mode: Any = "legacy") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        Client(_Streams(read, write), mode=mode) as client,
    ):
        yield client


def post(url: str, token: str | None) -> httpx2.Response:
    headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx2.post(url, content=json.dumps(INIT).encode(), headers=headers, timeout=10)


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serving, dict[str, str]]]:
    root = tmp_path_factory.mktemp("toolsets")
    config = toolset_config(root)
    tokens = {
        "clock": make_token(root, config, "clocker", "clock"),
        "kit": make_token(root, config, "kitter", "kit"),
        "both": make_token(root, config, "both", "clock", "kit"),
        "all": make_token(root, config, "admin"),
    }
    with serve(root, config, "--http", "127.0.0.1:0", "--sse") as serving:
        yield serving, tokens


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_bound_token_lists_and_calls_its_toolset_at_its_path(
    served: tuple[Serving, dict[str, str]], mode: Any
) -> None:
    serving, tokens = served
    with anyio.fail_after(60):
        async with client_at(serving.url + "/clock", tokens["clock"], mode) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TIME_TOOLS
            assert "UTC" in text(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_search_toolset_finds_and_calls_tools_of_a_real_server(
    served: tuple[Serving, dict[str, str]], mode: Any
) -> None:
    serving, tokens = served
    with anyio.fail_after(60):
        async with client_at(serving.url + "/kit", tokens["both"], mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["search_tools", "call_tool", "everything__echo"]
            found = await client.call_tool("search_tools", {"query": "add two numbers sum", "limit": 3})
            hits = [t["name"] for t in found.structured_content["tools"]]  # type: ignore[index]
            assert "everything__get-sum" in hits
            summed = await client.call_tool(
                "call_tool", {"name": "everything__get-sum", "arguments": {"a": 2, "b": 40}}
            )
            assert "42" in text(summed)
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert prompts and all(p.startswith("everything__") for p in prompts)


async def test_an_unbound_token_uses_every_path_and_the_whole_gateway(served: tuple[Serving, dict[str, str]]) -> None:
    serving, tokens = served
    with anyio.fail_after(60):
        async with client_at(serving.url, tokens["all"]) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names >= TIME_TOOLS and "everything__echo" in names
        async with client_at(serving.url + "/clock", tokens["all"]) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TIME_TOOLS


def test_a_bound_token_is_refused_with_403_outside_its_toolsets(served: tuple[Serving, dict[str, str]]) -> None:
    serving, tokens = served
    for path in ("/mcp", "/mcp/kit", "/api/tools", "/metrics", "/sse"):
        refused = post(serving.base + path, tokens["clock"])
        assert refused.status_code == 403, path
        assert "bound to its toolsets: use /mcp/clock" in refused.text
    assert post(serving.base + "/mcp/clock", tokens["clock"]).status_code == 200
    assert (
        httpx2.get(serving.base + "/healthz", headers={"Authorization": f"Bearer {tokens['clock']}"}).status_code == 200
    )


def test_an_unknown_toolset_path_is_a_404_naming_the_served_ones(served: tuple[Serving, dict[str, str]]) -> None:
    serving, tokens = served
    missing = post(serving.url + "/nope", tokens["all"])
    assert missing.status_code == 404
    assert missing.text == "No toolset 'nope' here; toolsets served: /mcp/clock, /mcp/kit"


async def test_each_toolset_is_also_served_over_legacy_sse(served: tuple[Serving, dict[str, str]]) -> None:
    serving, tokens = served
    headers = {"Authorization": f"Bearer {tokens['clock']}"}
    with anyio.fail_after(60):
        async with (
            sse_client(serving.base + "/sse/clock", headers=headers) as (read, write),
            Client(_Streams(read, write), mode="legacy") as client,
        ):
            assert {t.name for t in (await client.list_tools()).tools} == TIME_TOOLS
            assert "UTC" in text(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))


def test_the_inspector_lists_a_toolset_path_with_a_token(
    served: tuple[Serving, dict[str, str]], tmp_path: Path
) -> None:
    serving, tokens = served
    bearer = f"Authorization: Bearer {tokens['clock']}"
    listed = inspect(tmp_path, serving.url + "/clock", "--transport", "http", "--header", bearer)
    assert {t["name"] for t in listed["result"]["tools"]} == TIME_TOOLS


async def test_serve_toolset_over_stdio_serves_only_that_toolset(tmp_path: Path) -> None:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # Over stdio the gateway answers before its upstreams connect (5 s grace): on a loaded machine
    # the time server may come later, announced by list_changed, so the client waits for it.
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    config = toolset_config(tmp_path)
    env = {**isolated_env(tmp_path), "MCPMUX_CONFIG": str(config)}
    params = StdioServerParameters(command=MCPMUX, args=["serve", "--stdio", "--toolset", "clock"], env=env)
    with anyio.fail_after(90):
        async with (
            stdio_client(params) as (read, write),
            Client(_Streams(read, write), mode="legacy", message_handler=on_message) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            while names != TIME_TOOLS:
                assert names <= TIME_TOOLS, names  # nothing outside the toolset, ever
                await changed.wait()
                changed = anyio.Event()
                names = {t.name for t in (await client.list_tools()).tools}


async def test_serve_toolset_over_tcp_serves_only_that_toolset(tmp_path: Path) -> None:
    from mcpmux.config.models import TcpServerConfig
    from mcpmux.manager import Manager

    with serve(tmp_path, toolset_config(tmp_path), "--tcp", "127.0.0.1:0", "--toolset", "kit") as serving:
        with anyio.fail_after(60):
            async with Manager([TcpServerConfig(name="up", url=serving.addresses["tcp"])], catalog=False) as manager:
                listed = {t.name for t in manager.tools() if not t.synthetic}
                assert listed == {"up:search_tools", "up:call_tool", "up:everything__echo"}


async def test_serve_expose_serves_only_what_its_globs_name_without_a_toolset(tmp_path: Path) -> None:
    from mcpmux.config.models import Settings, TcpServerConfig
    from mcpmux.connection import Connection
    from mcpmux.errors import ServerError

    config = toolset_config(tmp_path)
    argv = ("--tcp", "127.0.0.1:0", "--expose", "time:get_*", "--expose", "everything:echo")
    with serve(tmp_path, config, *argv) as serving, anyio.fail_after(60):
        upstream = TcpServerConfig(name="up", url=serving.addresses["tcp"])
        async with Connection(upstream, Settings()) as conn:
            listed = {tool.name for tool in await conn.list_tools()}
            while listed != {"time__get_current_time", "everything__echo"}:
                assert listed <= {"time__get_current_time", "everything__echo"}, listed  # nothing else, ever
                await anyio.sleep(0.2)
                listed = {tool.name for tool in await conn.list_tools()}
            assert await conn.list_prompts() == []  # no prompt is named by the globs
            echoed = await conn.call_tool("everything__echo", {"message": "exposed"})
            assert "exposed" in str(echoed.content)
            # Asked for by name anyway: not there, as if the server had no such tool.
            with pytest.raises(ServerError, match="no tool named 'time__convert_time'"):
                await conn.call_tool("time__convert_time", {})
    both = mcpmux(tmp_path, config, "serve", "--tcp", "127.0.0.1:0", "--expose", "time:*", "--toolset", "clock")
    assert both.returncode == 2 and "--expose serves its own subset: not with --toolset or --agent" in both.stderr


@pytest.mark.slow
def test_token_create_refuses_an_unknown_toolset_and_serve_an_unknown_one(tmp_path: Path) -> None:
    config = toolset_config(tmp_path)
    created = mcpmux(tmp_path, config, "token", "create", "x", "--toolset", "nope")
    assert created.returncode == 2 and "unknown toolset 'nope' (known: clock, kit)" in created.stderr
    assert json.loads(mcpmux(tmp_path, config, "token", "list", "--json").stdout) == []
    served = mcpmux(tmp_path, config, "serve", "--tcp", "127.0.0.1:0", "--toolset", "nope")
    assert served.returncode == 2 and "unknown toolset 'nope'" in served.stderr


@pytest.mark.slow
def test_token_list_shows_the_toolsets_of_each_token(tmp_path: Path) -> None:
    config = toolset_config(tmp_path)
    make_token(tmp_path, config, "ci", "kit", "clock")
    listed = json.loads(mcpmux(tmp_path, config, "token", "list", "--json").stdout)
    assert [(t["name"], t["toolsets"]) for t in listed] == [("ci", ["clock", "kit"])]


def inspect(tmp_path: Path, *args: str) -> dict[str, Any]:
    scratch = tmp_path / "inspector-home"
    scratch.mkdir(exist_ok=True)
    done = subprocess.run(
        [*inspector_cli(), *args, "--method", "tools/list", "--format", "json"],
        capture_output=True, text=True, timeout=90, check=False, stdin=subprocess.DEVNULL,
        env={"HOME": str(scratch), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_change_under_a_toolset_wakes_its_clients_at_their_path(tmp_path: Path, mode: Any) -> None:
    server = {"name": "changing", "type": "stdio", "command": sys.executable, "args": [str(CHANGING)]}
    document = {
        "mcp": {"servers": [server], "security": {"pinning": "off"}},
        "toolsets": {"notes": {"tools": ["changing:*"]}},
    }
    config = tmp_path / "mcpmux.json"
    config.write_text(json.dumps(document))
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with serve(tmp_path, config, "--http", "127.0.0.1:0") as serving, anyio.fail_after(60):
        url = serving.url + "/notes"
        if mode == "legacy":
            async with (
                httpx2.AsyncClient(timeout=30) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                Client(_Streams(read, write), mode="legacy", message_handler=on_message) as client,
            ):
                await client.call_tool("changing__add_tool", {"name": "fresh_tool"})
                await changed.wait()
                assert "changing__fresh_tool" in {t.name for t in (await client.list_tools()).tools}
        else:
            async with client_at(url, None, mode) as client, client.listen(tools_list_changed=True) as events:
                await client.call_tool("changing__add_tool", {"name": "later_tool"})
                async for _event in events:
                    break
                assert "changing__later_tool" in {t.name for t in (await client.list_tools()).tools}
