"""A Streamable HTTP upstream that dies and comes back looks like a stdio server that restarted.

Real upstreams: server-everything (answers an unknown session with 400) and an SDK 2.x
``MCPServer`` (answers 404). Each is killed mid-session (and mid-call), the host must live on with
the server in a failure state that says why, and after a restart on the same port the next call
opens a new session and succeeds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Config, Settings, StreamableHttpServerConfig
from mcpmux.errors import TransportError
from mcpmux.manager import Manager, ServerState, StateChanged
from tests.peers.fixtures import everything_js, free_port, node22, run_listening

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

HTTP_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "http_server.py"
# Few retries: the breaker (5 failures a minute) must stay closed across one outage.
SETTINGS = Settings(connect_timeout_ms=20_000, timeout_ms=20_000, retry_attempts=1)
Upstream = Callable[[int | None], contextlib.AbstractContextManager[int]]


def everything(port: int | None) -> contextlib.AbstractContextManager[int]:
    return run_listening([str(node22()), str(everything_js()), "streamableHttp"], port=port)


def sdk_server(port: int | None) -> contextlib.AbstractContextManager[int]:
    return run_listening([sys.executable, str(HTTP_SERVER)], port=port)


UPSTREAMS = {"server-everything": (everything, "/mcp", "message"), "sdk-mcpserver": (sdk_server, "/mcp", "text")}


@contextlib.contextmanager
def upstream_on(kind: str, port: int | None = None) -> Iterator[int]:
    start, _path, _arg = UPSTREAMS[kind]
    with start(port) as bound:
        yield bound


def kill_listener(port: int) -> None:
    """SIGKILL the process group listening on ``port`` (the upstream dies without a word)."""
    import psutil

    for conn in psutil.net_connections("tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            os.killpg(os.getpgid(conn.pid), signal.SIGKILL)
            return
    raise AssertionError(f"nothing listens on {port}")


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def echo(mux: Manager, kind: str, word: str) -> str:
    argument = UPSTREAMS[kind][2]
    return text(await mux.call_tool("up:echo", {argument: word}))


async def wait_for_state(mux: Manager, states: set[ServerState]) -> None:
    async with mux.subscribe() as events:
        if mux.status()[0].state in states:
            return
        async for event in events:
            if isinstance(event, StateChanged) and event.new in states:
                return


def config_for(port: int) -> Config:
    server = StreamableHttpServerConfig(name="up", url=f"http://127.0.0.1:{port}/mcp")
    return Config(servers=(server,), settings=SETTINGS)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(UPSTREAMS))
async def test_a_killed_upstream_fails_the_server_not_the_host_and_a_restart_reconnects(kind: str) -> None:
    port = free_port()
    async with Manager(config_for(port), catalog=False, start=False) as mux:
        with upstream_on(kind, port), anyio.fail_after(60):
            await mux.refresh("up")
            assert "first" in await echo(mux, kind, "first")
            kill_listener(port)
            # The host lives on; the server is failed (after its retry) and says why.
            await wait_for_state(mux, {ServerState.FAILED})
            assert f"127.0.0.1:{port}" in mux.status()[0].reason
            with pytest.raises(TransportError):
                await echo(mux, kind, "while down")
        with upstream_on(kind, port), anyio.fail_after(60):
            assert "again" in await echo(mux, kind, "again")
            status = mux.status()[0]
            assert status.state is ServerState.CONNECTED
            assert status.restarts >= 1  # a new session, not the old one revived


@pytest.mark.parametrize("kind", sorted(UPSTREAMS))
async def test_an_upstream_restarted_between_calls_gets_a_new_session_on_the_next_call(kind: str) -> None:
    port = free_port()
    async with Manager(config_for(port), catalog=False, start=False) as mux:
        with upstream_on(kind, port), anyio.fail_after(60):
            await mux.refresh("up")
            assert "first" in await echo(mux, kind, "first")
            kill_listener(port)
        # Started again at once (in a thread: the host's loop runs on meanwhile, as it would): the
        # old session id is unknown to the new process (404 or 400), whether the host's event
        # stream or the call itself finds out first.
        with contextlib.ExitStack() as stack, anyio.fail_after(60):
            await anyio.to_thread.run_sync(stack.enter_context, upstream_on(kind, port))
            try:
                assert "second" in await echo(mux, kind, "second")
                assert mux.status()[0].restarts >= 1
            finally:
                await anyio.to_thread.run_sync(stack.close)


async def test_an_upstream_killed_mid_call_fails_the_call_at_once_with_the_cause() -> None:
    port = free_port()
    failed: list[BaseException] = []

    async with Manager(config_for(port), catalog=False, start=False) as mux:

        async def hanging_call() -> None:
            try:
                await mux.call_tool("up:hang", timeout=600)
            except TransportError as exc:
                failed.append(exc)

        with upstream_on("sdk-mcpserver", port), anyio.fail_after(60):
            await mux.refresh("up")
            async with anyio.create_task_group() as tg:
                tg.start_soon(hanging_call)
                await anyio.sleep(0.5)  # let the call reach the server (not a timing assertion)
                kill_listener(port)
    # Ended by the loss (within this test's 60 s bound), not by its 600 s deadline, and says where.
    assert failed, "the call did not fail"
    assert f"127.0.0.1:{port}" in str(failed[0])
