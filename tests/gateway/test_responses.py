"""How the HTTP face answers a request: one JSON body unless something else has to come first.

Also the limits of the HTTP parser in front of it (the size of a request head).

The gateway runs in this process over in-process upstreams and is served by uvicorn on a free
127.0.0.1 port; the requests are raw HTTP (to see the media type and the frames) or an SDK client.
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

from mcpmux.gateway import Gateway, responses as responses_module
from mcpmux.gateway.http import HttpOptions, serve_http
from mcpmux.testing import MockServer
from tests.gateway.conftest import gateway_over, rich_server

pytestmark = [pytest.mark.anyio, pytest.mark.network]

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


def napper() -> MockServer:
    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "rested"

    seconds = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}
    return MockServer("nap").tool("nap", nap, description="Sleep, saying nothing, then answer.", schema=seconds)


@asynccontextmanager
async def served(gateway: Gateway) -> AsyncIterator[str]:
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_http, gateway, HttpOptions(port=0, shutdown_timeout_s=1), stop)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop.set()


@asynccontextmanager
async def session(url: str) -> AsyncIterator[tuple[httpx2.AsyncClient, dict[str, str]]]:
    """A raw HTTP client with an initialized 2025-11-25 session; yields it and the headers to send."""
    async with httpx2.AsyncClient(timeout=20) as http:
        opened = await http.post(url, json=INIT, headers=HEADERS)
        assert opened.status_code == 200, opened.text
        headers = HEADERS | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
        yield http, headers


def call(request_id: int, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments} | ({"_meta": meta} if meta else {})
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def events(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, in order."""
    return [json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")]


@pytest.fixture
async def url() -> AsyncIterator[str]:
    with anyio.fail_after(30):
        async with gateway_over({"core": rich_server("core"), "nap": napper()}) as gateway, served(gateway) as url:
            yield url


async def test_a_quick_call_is_answered_with_one_json_body(url: str) -> None:
    async with session(url) as (http, headers):
        response = await http.post(url, json=call(1, "nap__nap", {"seconds": 0}), headers=headers)
    assert response.headers["content-type"] == "application/json"
    assert response.headers["mcp-session-id"] == headers["mcp-session-id"]
    answer = response.json()
    assert answer["id"] == 1
    assert answer["result"]["content"][0]["text"] == "rested"


async def test_progress_makes_the_answer_an_sse_stream_ending_with_the_result(url: str) -> None:
    async with session(url) as (http, headers):
        request = call(2, "core__slow", {"steps": 3}, meta={"progressToken": "p"})
        response = await http.post(url, json=request, headers=headers)
    assert response.headers["content-type"] == "text/event-stream"
    messages = events(response.text)
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3]
    assert {m["params"]["progressToken"] for m in messages[:-1]} == {"p"}
    assert messages[-1]["id"] == 2 and messages[-1]["result"]["content"][0]["text"] == "core: done"


async def test_a_call_quiet_past_the_window_opens_the_stream_and_keeps_it_alive(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(responses_module, "SSE_AFTER_S", 0.2)
    async with session(url) as (http, headers):
        response = await http.post(url, json=call(3, "nap__nap", {"seconds": 0.7}), headers=headers)
    assert response.headers["content-type"] == "text/event-stream"
    assert response.text.count(": ping") >= 2
    (answer,) = events(response.text)
    assert answer["id"] == 3 and answer["result"]["content"][0]["text"] == "rested"


async def test_a_cancelled_call_is_answered_with_request_cancelled(url: str) -> None:
    async with session(url) as (http, headers):
        answer: list[httpx2.Response] = []

        async def hang() -> None:
            answer.append(await http.post(url, json=call(4, "core__hang", {}), headers=headers))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang)
            await anyio.sleep(0.3)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}
            assert (await http.post(url, json=cancel, headers=headers)).status_code == 202
    assert answer[0].headers["content-type"] == "application/json"
    assert answer[0].json()["error"]["code"] == -32800


async def test_an_upstream_sampling_request_reaches_an_http_client_mid_call() -> None:
    from tests.gateway.conformance_fixture import server as fixture

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="four"), model="m")

    with anyio.fail_after(30):
        async with (
            gateway_over({"fx": fixture}) as gateway,
            served(gateway) as url,
            Client(url, mode="legacy", sampling_callback=sampling) as client,
        ):
            result = await client.call_tool("fx__test_sampling", {"prompt": "2+2?"})
            assert [b.text for b in result.content if isinstance(b, types.TextContent)] == ["LLM response: four"]


async def test_requests_the_transport_does_not_defer_keep_the_sdk_answers(url: str) -> None:
    async with session(url) as (http, headers):
        only_json = headers | {"Accept": "application/json"}
        refused = await http.post(url, json=call(5, "nap__nap", {"seconds": 0}), headers=only_json)
        assert refused.status_code == 406
        broken = await http.post(url, content=b"{not json", headers=headers)
        assert broken.status_code == 400 and broken.json()["error"]["code"] == types.PARSE_ERROR
        missing = {k: v for k, v in headers.items() if k != "mcp-session-id"}
        assert (await http.post(url, json=call(6, "nap__nap", {"seconds": 0}), headers=missing)).status_code == 400


async def test_a_request_head_over_64_kib_is_refused_with_431_and_one_under_it_is_served(url: str) -> None:
    async with httpx2.AsyncClient(timeout=20) as http:
        big = {f"x-filler-{i}": "v" * 1000 for i in range(100)}
        refused = await http.post(url, json=INIT, headers=HEADERS | big)
        assert refused.status_code == 431
        fine = {f"x-filler-{i}": "v" * 1000 for i in range(40)}
        assert (await http.post(url, json=INIT, headers=HEADERS | fine)).status_code == 200
