"""Attacks on the gateway's direct tool calls (:mod:`mcpmux.gateway.direct`) and their fast routing.

A direct call runs in its POST's task, outside the SDK's session machinery; a POST of an open
session goes straight to its transport (``SessionManager.serve_open_session``). What those
shortcuts must not lose: a session is its opener's alone, a cancellation reaches only its own
session's call, ids are correlated as the SDK correlates them, and a client that floods, reuses
ids or hangs up mid-call leaves nothing behind. A real gateway on a free 127.0.0.1 port, raw HTTP.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest

from mcpmux.gateway import Gateway
from mcpmux.gateway.http import HttpOptions, serve_http
from mcpmux.policy import StateStore
from mcpmux.web.security import HttpSecurity
from mcpmux.web.tokens import TokenStore
from tests.gateway.conftest import gateway_over, rich_server
from tests.gateway.test_direct_calls import Spy, call, hanging, odd_server, transcript
from tests.gateway.test_responses import HEADERS, INIT

pytestmark = [pytest.mark.anyio, pytest.mark.network]


@asynccontextmanager
async def served(
    cancelled: anyio.Event | None = None, tokens: TokenStore | None = None
) -> AsyncIterator[tuple[str, Gateway]]:
    stop = anyio.Event()
    options = HttpOptions(port=0, shutdown_timeout_s=1, security=HttpSecurity(tokens=tokens))
    async with (
        gateway_over({"core": rich_server("core", cancelled), "odd": odd_server()}) as gateway,
        anyio.create_task_group() as tg,
    ):
        port = await tg.start(serve_http, gateway, options, stop)
        try:
            yield f"http://127.0.0.1:{port}/mcp", gateway
        finally:
            stop.set()


async def open_session(http: httpx2.AsyncClient, url: str, **extra: str) -> dict[str, str]:
    opened = await http.post(url, json=INIT, headers=HEADERS | extra)
    assert opened.status_code == 200, opened.text
    headers = (
        HEADERS | extra | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    )
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
    await anyio.sleep(0.2)  # the gateway takes the session for direct calls in the session's own task
    return headers


def cancel(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


async def test_a_cancellation_from_another_session_or_with_a_lookalike_id_stops_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy, cancelled = Spy(monkeypatch), anyio.Event()
    with anyio.fail_after(60):
        async with served(cancelled) as (url, gateway), httpx2.AsyncClient(timeout=30) as http:
            victim, attacker = await open_session(http, url), await open_session(http, url)
            async with hanging(http, url, victim, 1) as answers:
                for forged in (1, "1", True, 1.0, None, [1], {"id": 1}):
                    assert (await http.post(url, json=cancel(forged), headers=attacker)).status_code == 202
                for lookalike in (True, 1.0, "1.0", [1], {"id": 1}):
                    assert (await http.post(url, json=cancel(lookalike), headers=victim)).status_code == 202
                await anyio.sleep(0.3)
                assert not answers and not cancelled.is_set() and gateway.in_flight == 1
                # "01" and 1 are one id, as the SDK correlates them: the victim's own cancellation counts.
                assert (await http.post(url, json=cancel("01"), headers=victim)).status_code == 202
            await cancelled.wait()
    assert transcript(answers[0])[2][0]["error"]["code"] == -32800
    assert spy.served == 1


async def test_a_session_is_its_openers_alone_on_the_fast_route_too(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    with StateStore(tmp_path / "state.db") as store:
        tokens = TokenStore(store)
        alice, bob = tokens.create("alice"), tokens.create("bob")
        with anyio.fail_after(60):
            async with served(tokens=tokens) as (url, _), httpx2.AsyncClient(timeout=30) as http:
                session = await open_session(http, url, Authorization=f"Bearer {alice}")
                nap = call(2, {"name": "odd__nap", "arguments": {"seconds": 0}})
                stolen = session | {"Authorization": f"Bearer {bob}"}
                assert (await http.post(url, json=nap, headers=stolen)).status_code == 404
                anonymous = {k: v for k, v in session.items() if k != "Authorization"}
                assert (await http.post(url, json=nap, headers=anonymous)).status_code == 401
                assert spy.served == 0
                own = await http.post(url, json=nap, headers=session)
                assert own.status_code == 200 and own.json()["result"]["content"][0]["text"] == "rested"
    assert spy.served == 1


async def test_an_id_reused_while_its_call_runs_gets_its_own_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)
    with anyio.fail_after(60):
        async with served() as (url, gateway), httpx2.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url)
            answers: dict[str, httpx2.Response] = {}

            async def post(label: str, seconds: float) -> None:
                body = call(7, {"name": "odd__nap", "arguments": {"seconds": seconds}})
                answers[label] = await http.post(url, json=body, headers=headers)

            async with anyio.create_task_group() as tg:
                tg.start_soon(post, "slow", 1.0)
                await anyio.sleep(0.3)
                tg.start_soon(post, "quick", 0)
            for response in answers.values():
                assert response.json() == {"jsonrpc": "2.0", "id": 7, "result": {
                    "content": [{"type": "text", "text": "rested"}], "isError": False,
                }}  # fmt: skip
            assert gateway.in_flight == 0
    assert spy.served == 1  # the second took the SDK's path: the id was taken


@pytest.mark.slow
async def test_clients_that_hang_up_mid_call_or_flood_leave_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)
    with anyio.fail_after(90):
        async with served() as (url, gateway), httpx2.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url)
            for i in range(5):  # each hangs up while its call runs (not on a timer: a loaded machine is late)
                body = call(100 + i, {"name": "odd__nap", "arguments": {"seconds": 0.6}})
                async with httpx2.AsyncClient(timeout=30) as impatient, anyio.create_task_group() as tg:
                    tg.start_soon(functools.partial(impatient.post, url, json=body, headers=headers))
                    await spy.reached(i + 1)  # the call runs on the server
                    tg.cancel_scope.cancel()

            async def one(i: int) -> None:
                body = call(1000 + i, {"name": "odd__measure", "arguments": {"text": str(i)}})
                answer = (await http.post(url, json=body, headers=headers)).json()
                assert answer["id"] == 1000 + i and answer["result"]["structuredContent"]["upper"] == str(i)

            async with anyio.create_task_group() as tg:
                for i in range(150):
                    tg.start_soon(one, i)
            for _ in range(600):  # the impatient clients' calls end on their own (0.6 s each), then nothing is left
                if not (gateway.in_flight or len(gateway.keepalive)):
                    break
                await anyio.sleep(0.05)
            assert gateway.in_flight == 0 and len(gateway.keepalive) == 0
    assert spy.served == 155
