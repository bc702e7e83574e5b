"""Disabling and enabling a server at run time, from the console and the REST API (real processes).

A real ``mcpmux serve --http`` fronts server-everything and mcp-server-time. A separate SDK client
stays connected to ``/mcp``: when an admin disables ``everything`` it is told the tool list changed,
the list no longer has everything's tools, a call to one fails saying the server is disabled and how
to enable it, and the child process is gone; the time server keeps working. Enabling starts a new
child and the tools come back. Both verbs leave audit rows naming who did it.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import psutil
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.console.serving import Console, console, write_console_config
from tests.gateway.serving import mcpmux

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.subprocess, pytest.mark.network, pytest.mark.anyio]

WAIT_S = 60


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("switch")
    config = write_console_config(root, ("everything", "time"))
    with console(root, config) as running:
        yield running


class Listener:
    """An SDK client on ``/mcp`` that counts ``tools/list_changed`` notifications."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.changed = anyio.Event()

    async def names(self) -> list[str]:
        return [t.name for t in (await self.session.list_tools()).tools]

    def expect_change(self) -> None:
        self.changed = anyio.Event()

    async def changed_since_expected(self) -> None:
        with anyio.fail_after(WAIT_S):
            await self.changed.wait()


@asynccontextmanager
async def sdk_client(served: Console) -> AsyncIterator[Listener]:
    listener: list[Listener] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and listener:
            listener[0].changed.set()

    headers = {"Authorization": f"Bearer {served.tokens['agent']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=WAIT_S) as http,
        streamable_http_client(served.serving.url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        listener.append(Listener(session))
        yield listener[0]


@asynccontextmanager
async def signed_in(served: Console) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as client:
        login = await client.post("/ui/login", data={"secret": served.tokens["admin"]}, headers={"Origin": served.base})
        assert login.status_code == 303
        yield client


async def _console_action(client: httpx.AsyncClient, served: Console, server: str, action: str) -> str:
    page = (await client.get(f"/ui/servers/{server}")).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    done = await client.post(
        f"/ui/servers/{server}/{action}", data={"csrf": csrf.group(1)}, headers={"Origin": served.base}
    )
    assert done.status_code == 303, done.text
    return (await client.get(f"/ui/servers/{server}")).text


def _pid(page: str) -> int:
    found = re.search(r"pid (\d+)", page)
    assert found is not None, page
    return int(found.group(1))


async def _gone(pid: int) -> None:
    with anyio.fail_after(WAIT_S):
        while True:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return
            except psutil.NoSuchProcess:
                return
            await anyio.sleep(0.05)


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.slow
async def test_an_admin_disables_a_server_in_the_console_and_a_connected_client_sees_it_go_and_come_back(
    served: Console,
) -> None:
    async with sdk_client(served) as mcp, signed_in(served) as client:
        assert "everything__echo" in await mcp.names()
        pid = _pid((await client.get("/ui/servers/everything")).text)
        mcp.expect_change()
        page = await _console_action(client, served, "everything", "disable")
        assert "data-state>disabled<" in page and 'data-action="enable"' in page
        assert "disabled at run time by console:token:admin" in page
        await _gone(pid)
        await mcp.changed_since_expected()
        names = await mcp.names()
        assert not [n for n in names if n.startswith("everything__")] and "time__get_current_time" in names
        refused = await mcp.session.call_tool("everything__echo", {"message": "hi"})
        assert refused.is_error and "disabled" in _text(refused) and "enable" in _text(refused)
        working = await mcp.session.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not working.is_error  # the other server is untouched

        mcp.expect_change()
        page = await _console_action(client, served, "everything", "enable")
        assert "data-state>connected<" in page and 'data-action="disable"' in page
        assert _pid(page) != pid
        await mcp.changed_since_expected()
        assert "everything__echo" in await mcp.names()
        echoed = await mcp.session.call_tool("everything__echo", {"message": "back"})
        assert "back" in _text(echoed)
    home = Path(served.serving.env["HOME"])
    rows = json.loads(mcpmux(home, home / "mcpmux.json", "audit", "--json", "--limit", "200").stdout)
    verbs = {(r["tool"], r["caller"], r["outcome"]) for r in rows}
    assert ("mcpmux/disable", "console:token:admin", "ok") in verbs
    assert ("mcpmux/enable", "console:token:admin", "ok") in verbs


async def test_the_rest_api_disables_and_enables_a_server_with_an_admin_token(served: Console) -> None:
    admin = {"Authorization": f"Bearer {served.tokens['admin']}"}
    async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S, headers=admin) as api:
        off = await api.post("/api/servers/everything/disable")
        assert off.status_code == 200 and off.json()["state"] == "disabled", off.text
        assert off.json()["tools"] == 0
        states = {s["name"]: s["state"] for s in (await api.get("/api/servers")).json()}
        assert states == {"everything": "disabled", "time": "connected"}
        call = await api.post("/api/tools/execute", json={"tool_id": "everything:echo", "arguments": {"message": "x"}})
        assert call.status_code == 503 and call.json()["title"] == "ServerDisabled", call.text
        assert "/api/servers/everything/enable" in call.json()["hint"]
        sources = {t["source"] for t in (await api.get("/api/tools")).json()}
        assert sources == {"time"}
        on = await api.post("/api/servers/everything/enable")
        assert on.status_code == 200 and on.json()["state"] == "connected", on.text
        again = {"tool_id": "everything:echo", "arguments": {"message": "y"}}
        echoed = await api.post("/api/tools/execute", json=again)
        assert echoed.status_code == 200 and echoed.json()["success"]
