"""``mcpmux serve`` over stdio, tcp and websocket, to third-party and mcpmux clients; graceful shutdown."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import psutil
import pytest
from mcp import Client

from mcpmux.config.models import TcpServerConfig, WebSocketServerConfig
from mcpmux.manager import Manager
from tests.gateway.serving import MCPMUX, isolated_env, serve, write_config
from tests.peers.fixtures import inspector_cli

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def inspect(tmp_path: Path, *args: str) -> dict[str, object]:
    scratch = tmp_path / "inspector-home"
    scratch.mkdir(exist_ok=True)
    done = subprocess.run(
        [*inspector_cli(), *args, "--format", "json"],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        env={"HOME": str(scratch), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    result: dict[str, object] = json.loads(done.stdout)
    return result


def stdio_target(tmp_path: Path, config: Path) -> list[str]:
    env = isolated_env(tmp_path)
    names = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
    pairs = [f"MCPMUX_CONFIG={config}", *(f"{k}={env[k]}" for k in names)]
    return [arg for pair in pairs for arg in ("-e", pair)] + [MCPMUX, "serve", "--stdio"]


@pytest.mark.slow
def test_the_inspector_lists_and_calls_tools_over_stdio(tmp_path: Path) -> None:
    target = stdio_target(tmp_path, write_config(tmp_path, ("everything",)))
    listed = inspect(tmp_path, *target, "--method", "tools/list")
    assert "everything__echo" in {t["name"] for t in listed["result"]["tools"]}  # type: ignore[index]
    called = inspect(tmp_path, *target, "--method", "tools/call", "--tool-name", "everything__echo",
                     "--tool-arg", "message=hello")  # fmt: skip
    assert called["result"]["content"][0]["text"] == "Echo: hello"  # type: ignore[index]


@pytest.mark.slow
def test_the_inspector_lists_and_calls_tools_over_http(tmp_path: Path) -> None:
    with serve(tmp_path, write_config(tmp_path, ("everything",)), "--http", "127.0.0.1:0") as serving:
        listed = inspect(tmp_path, serving.url, "--method", "tools/list")
        assert "everything__get-sum" in {t["name"] for t in listed["result"]["tools"]}  # type: ignore[index]
        called = inspect(tmp_path, serving.url, "--method", "tools/call", "--tool-name", "everything__get-sum",
                         "--tool-arg", "a=2", "b=40")  # fmt: skip
        assert "42" in called["result"]["content"][0]["text"]  # type: ignore[index]


async def test_another_mcpmux_uses_the_gateway_over_tcp_and_websocket(tmp_path: Path) -> None:
    config = write_config(tmp_path, ("time",))
    with serve(tmp_path, config, "--tcp", "127.0.0.1:0", "--ws", "127.0.0.1:0") as serving:
        upstreams = [
            TcpServerConfig(name="overtcp", url=serving.addresses["tcp"]),
            WebSocketServerConfig(name="overws", url=serving.addresses["ws"]),
        ]
        with anyio.fail_after(30):
            async with Manager(upstreams, catalog=False) as manager:
                names = {t.name for t in manager.tools()}
                assert {"overtcp:time__get_current_time", "overws:time__get_current_time"} <= names
                for server in ("overtcp", "overws"):
                    result = await manager.call_tool(f"{server}:time__get_current_time", {"timezone": "UTC"})
                    assert "UTC" in text(result)


@pytest.mark.slow
async def test_sigterm_lets_the_call_in_flight_finish_then_stops_the_upstreams(tmp_path: Path) -> None:
    with serve(
        tmp_path, write_config(tmp_path, ("everything",)), "--http", "127.0.0.1:0", real_process=True
    ) as serving:
        children = psutil.Process(serving.process.pid).children(recursive=True)
        assert children
        result, took = None, 0.0
        with anyio.fail_after(30):
            try:
                async with Client(serving.url, mode="legacy") as client:
                    # The SDK's call_tool lists the tools after the result when it has not seen the
                    # tool's output schema: list them now, or that request would race the shutdown.
                    await client.list_tools()
                    args = {"duration": 1.5, "steps": 3}

                    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                        # The call is running upstream (not merely sent: on a loaded machine a timer
                        # could fire before the request reached the gateway): now stop the gateway.
                        if progress == 1:
                            serving.process.terminate()

                    started = time.monotonic()
                    result = await client.call_tool(
                        "everything__trigger-long-running-operation", args, progress_callback=on_progress
                    )
                    took = time.monotonic() - started
            except* httpx2.ConnectError:
                # The gateway stops once the call is answered, as told: a client that is still closing
                # (its last request or session DELETE) may find it gone. Only after the answer, though.
                assert result is not None
        assert result is not None and took >= 1.4
        assert "completed" in text(result).lower()
        assert await anyio.to_thread.run_sync(serving.process.wait, 15) == 0
        assert "stopped" in serving.log()
        assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
