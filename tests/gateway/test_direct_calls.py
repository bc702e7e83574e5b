"""Direct tool calls (:mod:`mcpmux.gateway.direct`): the same answers as on the SDK's path, for less.

Every exchange here is made twice over real HTTP against a gateway served by uvicorn on a free
127.0.0.1 port: once with direct calls on, once with the gateway refusing them (the SDK's
dispatcher then serves every call, as before direct calls existed), and the two transcripts must
be equal message for message. A spy on :meth:`DirectCall.run` proves which path served what.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from mcpmux.gateway import Gateway
from mcpmux.gateway.direct import DirectCall
from mcpmux.gateway.http import HttpOptions, serve_http
from mcpmux.testing import MockServer
from tests.gateway.conftest import gateway_over, rich_server

pytestmark = [pytest.mark.anyio, pytest.mark.network]

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _init(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    client = {"name": "raw", "version": "1"}
    params = {"protocolVersion": "2025-11-25", "capabilities": capabilities or {}, "clientInfo": client}
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def odd_server() -> MockServer:
    """Tools whose answers exercise the result's shapes: an error, structured content, a nap."""

    def fail(reason: str) -> str:
        raise ValueError(f"refused: {reason}")

    def measure(text: str) -> dict[str, Any]:
        return {"length": len(text), "upper": text.upper()}

    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "rested"

    reason = {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    shape = {"type": "object", "properties": {"length": {"type": "integer"}, "upper": {"type": "string"}}}
    seconds = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}
    return (
        MockServer("odd")
        .tool("fail", fail, description="Always fails.", schema=reason)
        .tool("measure", measure, description="Structured content.", schema=text, output_schema=shape)
        .tool("nap", nap, description="Sleep, then answer.", schema=seconds)
    )


class Spy:
    """Counts the calls :class:`DirectCall` served."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.served = 0
        self._bumped = anyio.Event()
        run = DirectCall.run

        async def counted(call: DirectCall, handler: Any) -> None:
            self.served += 1
            self._bumped.set()
            self._bumped = anyio.Event()
            await run(call, handler)

        monkeypatch.setattr(DirectCall, "run", counted)

    async def reached(self, served: int) -> None:
        """Returns once ``served`` calls have reached the direct path."""
        while self.served < served:
            await self._bumped.wait()


@asynccontextmanager
async def served(
    direct: bool, monkeypatch: pytest.MonkeyPatch, cancelled: anyio.Event | None = None
) -> AsyncIterator[tuple[str, Gateway]]:
    if not direct:
        monkeypatch.setattr(Gateway, "_serves_directly", lambda self: False)
    stop = anyio.Event()
    with anyio.fail_after(60):
        async with (
            gateway_over({"core": rich_server("core", cancelled), "odd": odd_server()}) as gateway,
            anyio.create_task_group() as tg,
        ):
            port = await tg.start(serve_http, gateway, HttpOptions(port=0, shutdown_timeout_s=1), stop)
            try:
                yield f"http://127.0.0.1:{port}/mcp", gateway
            finally:
                stop.set()


@asynccontextmanager
async def session(
    url: str, capabilities: dict[str, Any] | None = None
) -> AsyncIterator[tuple[httpx2.AsyncClient, dict[str, str]]]:
    async with httpx2.AsyncClient(timeout=30) as http:
        opened = await http.post(url, json=_init(capabilities), headers=HEADERS)
        assert opened.status_code == 200, opened.text
        headers = HEADERS | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
        await _settle()
        yield http, headers


async def _settle() -> None:
    # The gateway hands the session to direct calls when it handles notifications/initialized,
    # in the session's own task: a call posted at once may still take the SDK's path (that is
    # correct, but these tests want to know which path served what).
    await anyio.sleep(0.2)


@asynccontextmanager
async def hanging(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str], request_id: int
) -> AsyncIterator[list[httpx2.Response]]:
    """``core__hang`` called in the background (for 0.3 s when the block starts); its answer is in the
    yielded list once the block ends (the block must make it end)."""
    answers: list[httpx2.Response] = []

    async def hang() -> None:
        answers.append(await http.post(url, json=call(request_id, {"name": "core__hang"}), headers=headers))

    async with anyio.create_task_group() as tg:
        tg.start_soon(hang)
        await anyio.sleep(0.3)
        yield answers


def call(request_id: int | str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def transcript(response: httpx2.Response) -> tuple[int, str, list[Any]]:
    """Status, media type and the JSON-RPC messages of an answer (SSE events in order, or the one body)."""
    media = response.headers.get("content-type", "").split(";")[0]
    if media == "text/event-stream":
        messages = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    else:
        messages = [response.json()] if response.content else []
    return response.status_code, media, messages


EXCHANGES: list[dict[str, Any]] = [
    call(1, {"name": "odd__nap", "arguments": {"seconds": 0}}),
    call("two", {"name": "odd__measure", "arguments": {"text": "abc"}}),
    call(3, {"name": "odd__fail", "arguments": {"reason": "no"}}),  # the upstream answers a JSON-RPC error
    call(4, {"name": "core__noisy", "arguments": {}}),  # a log line first: an SSE answer
    call(5, {"name": "nobody__nothing", "arguments": {}}),  # unknown: -32602
    call(6, {"name": "odd__measure", "arguments": {"text": 5}}),  # arguments refused by the guard
    call(7, {"arguments": {}}),  # no name: the SDK's own error
    call(8, {"name": "odd__nap", "arguments": "not an object"}),
    call(9, {"name": "odd__nap", "arguments": {"seconds": 0}, "requestState": "forged"}),
    call(10, {"name": "odd__nap", "arguments": {"seconds": 0}, "_meta": {"trace": "x"}}),
]


async def _transcripts(direct: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int]:
    spy = Spy(monkeypatch)
    async with served(direct, monkeypatch) as (url, _), session(url) as (http, headers):
        answers = [transcript(await http.post(url, json=exchange, headers=headers)) for exchange in EXCHANGES]
    return answers, spy.served


async def test_every_kind_of_answer_is_the_same_on_the_direct_path_as_on_the_sdks() -> None:
    with pytest.MonkeyPatch.context() as patches:
        sdk, none_direct = await _transcripts(False, patches)
    with pytest.MonkeyPatch.context() as patches:
        direct, served_directly = await _transcripts(True, patches)
    assert none_direct == 0
    # Calls 1-6 and 10 are direct; 7-8 fail the params checks and 9 carries requestState: the SDK's.
    assert served_directly == 7
    for exchange, on_sdk, on_direct in zip(EXCHANGES, sdk, direct, strict=True):
        assert on_direct == on_sdk, f"request {exchange['id']}: {on_direct} != {on_sdk}"
    by_id = {str(messages[-1].get("id")): (media, messages) for _, media, messages in direct}
    assert by_id["1"][1][0]["result"]["content"][0]["text"] == "rested"
    assert by_id["two"][1][0]["result"]["structuredContent"] == {"length": 3, "upper": "ABC"}
    assert by_id["3"][1][0]["error"]["message"] == "refused: no"  # the upstream's JSON-RPC error, relayed
    assert by_id["6"][1][0]["result"]["isError"] is True  # refused by the guard's argument check
    assert by_id["7"][1][0]["error"]["code"] == types.INVALID_PARAMS
    assert by_id["9"][1][0]["error"]["message"] == "Invalid or expired requestState"
    media, noisy = by_id["4"]
    assert media == "text/event-stream" and noisy[0]["method"] == "notifications/message"
    assert noisy[0]["params"]["data"] == "careful" and noisy[-1]["result"]["content"][0]["text"] == "logged"
    assert by_id["5"][1][0]["error"]["code"] == types.INVALID_PARAMS


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "sdk"])
async def test_a_cancelled_call_answers_request_cancelled_and_stops_upstream(
    direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy, cancelled = Spy(monkeypatch), anyio.Event()
    async with served(direct, monkeypatch, cancelled) as (url, _), session(url) as (http, headers):
        async with hanging(http, url, headers, 41) as answers:
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
            assert (await http.post(url, json=cancel, headers=headers)).status_code == 202
        with anyio.fail_after(30):
            await cancelled.wait()
    assert transcript(answers[0]) == (200, "application/json", [
        {"jsonrpc": "2.0", "id": 41, "error": {"code": -32800, "message": "Request cancelled"}}
    ])  # fmt: skip
    assert spy.served == (1 if direct else 0)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "sdk"])
async def test_a_session_deleted_mid_call_answers_500_and_stops_upstream(
    direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled = anyio.Event()
    async with served(direct, monkeypatch, cancelled) as (url, _), session(url) as (http, headers):
        async with hanging(http, url, headers, 51) as answers:
            assert (await http.delete(url, headers=headers)).status_code == 200
        with anyio.fail_after(30):
            await cancelled.wait()
        after = await http.post(url, json=call(52, {"name": "odd__nap", "arguments": {"seconds": 0}}), headers=headers)
    status, _, messages = transcript(answers[0])
    assert status == 500 and messages[0]["error"]["message"] == "Session terminated before the request completed"
    assert after.status_code == 404


@pytest.mark.parametrize(
    ("capabilities", "meta"),
    [({"sampling": {}}, None), ({"elicitation": {}}, None), ({}, {"progressToken": "p"})],
    ids=["sampling", "elicitation", "progress"],
)
async def test_calls_that_may_need_the_back_channel_keep_the_sdks_path(
    capabilities: dict[str, Any], meta: dict[str, Any] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    async with served(True, monkeypatch) as (url, _), session(url, capabilities) as (http, headers):
        params: dict[str, Any] = {"name": "core__slow", "arguments": {"steps": 2}} | ({"_meta": meta} if meta else {})
        status, media, messages = transcript(await http.post(url, json=call(61, params), headers=headers))
    assert status == 200 and messages[-1]["result"]["content"][0]["text"] == "core: done"
    if meta:
        assert media == "text/event-stream" and [m["params"]["progress"] for m in messages[:-1]] == [1, 2]
    assert spy.served == 0


async def test_an_sdk_client_without_callbacks_is_served_directly_and_concurrently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = Spy(monkeypatch)
    async with served(True, monkeypatch) as (url, gateway), Client(url, mode="legacy") as client:
        await _settle()
        results: list[str] = []

        async def one(i: int) -> None:
            result = await client.call_tool("odd__measure", {"text": "x" * i})
            assert result.structured_content == {"length": i, "upper": "X" * i}
            results.append(str(i))

        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(one, i)
        assert len(results) == 40
        assert gateway.in_flight == 0 and not len(gateway.keepalive)
    assert spy.served == 40


def test_the_direct_path_is_documented_where_a_user_reads_about_the_gateway() -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "direct" in readme.split("## Gateway: `mcpmux serve`")[1].split("\n## ")[0]
