"""Attacks on the gateway's era translation (issue 22), against a real ``mcpmux serve --http``.

A stateless-era (2026-07-28) client is asked questions (the guard's approval, an upstream's
sampling or elicitation) through ``input_required`` results whose ``requestState`` names a call
parked in the gateway; its retry brings the answers. So:

- a forged ``requestState``, or one sealed for another caller, tool or arguments, must resume
  nothing (and call nothing upstream);
- a ``requestState`` whose call has ended must not start it again (replay), also when two retries
  race;
- a client claiming one era and sending the other's messages, or mixing protocol versions between
  the ``MCP-Protocol-Version`` header and the request's ``_meta`` envelope, gets a clear error and
  leaves the gateway serving everyone else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.serving import Serving, mcpmux, serve
from tests.gateway.test_era_matrix import _Streams, text, write_config

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.network]

MODERN, LEGACY = "2026-07-28", "2025-11-25"
WAIT_S = 60
ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
CAN_ANSWER: dict[str, Any] = {"elicitation": {}, "sampling": {}}
YES = {"action": "accept", "content": {"decision": "yes"}}
INVALID_STATE = "Invalid or expired requestState"


@dataclass
class Gateway:
    serving: Serving
    alice: str
    bob: str
    carol: str


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway over the matrix's handshake-era upstream; ``up__guarded`` needs approval."""
    root = tmp_path_factory.mktemp("era-attacks")
    config = write_config(root, LEGACY, "stdio", None)
    tokens = [
        json.loads(mcpmux(root, config, "token", "create", name, "--can-approve", "--json").stdout)["token"]
        for name in ("alice", "bob", "carol")
    ]
    with serve(root, config, "--http", "127.0.0.1:0") as serving:
        yield Gateway(serving, *tokens)


def envelope(version: str = MODERN, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        types.PROTOCOL_VERSION_META_KEY: version,
        types.CLIENT_INFO_META_KEY: {"name": "attacker", "version": "1"},
        types.CLIENT_CAPABILITIES_META_KEY: CAN_ANSWER if capabilities is None else capabilities,
    }


def post(gateway: Gateway, body: dict[str, Any], token: str | None = None, **headers: str) -> httpx2.Response:
    auth = {"Authorization": f"Bearer {token or gateway.alice}"}
    return httpx2.post(
        gateway.serving.url, content=json.dumps(body).encode(), headers={**ACCEPT, **auth, **headers}, timeout=WAIT_S
    )


def answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a JSON or SSE response."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        found: dict[str, Any] = json.loads(data[-1])
        return found
    parsed: dict[str, Any] = response.json()
    return parsed


def call(
    gateway: Gateway, name: str, arguments: dict[str, Any], token: str | None = None, **retry: Any
) -> dict[str, Any]:
    """One stateless-era ``tools/call`` (a retry when ``retry`` has ``requestState``/``inputResponses``)."""
    params = {"name": name, "arguments": arguments, "_meta": envelope(), **retry}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    return answer(post(gateway, body, token, **headers))


def upstream_calls(gateway: Gateway, tool: str) -> int:
    """How many calls of ``tool`` the upstream mock received."""
    counted = call(gateway, "up__count", {"tool": tool})
    return int(counted["result"]["content"][0]["text"])


def asked(gateway: Gateway, text: str, token: str | None = None) -> str:
    """Start a guarded call; return the ``requestState`` of the approval question it is parked on."""
    first = call(gateway, "up__guarded", {"text": text}, token)
    result = first["result"]
    assert result["resultType"] == "input_required" and "mcpmux-1" in result["inputRequests"], first
    state: str = result["requestState"]
    return state


@pytest.mark.slow
def test_a_forged_request_state_resumes_nothing(gateway: Gateway) -> None:
    before = upstream_calls(gateway, "guarded")
    for forged in ("call:guessed:", "v1.AAAA", "v1." + "A" * 300, "", "call:" + "x" * 5000):
        refused = call(gateway, "up__guarded", {"text": "x"}, requestState=forged, inputResponses={"mcpmux-1": YES})
        assert "error" in refused, (forged, refused)
        assert refused["error"]["code"] == types.INVALID_PARAMS or INVALID_STATE in refused["error"]["message"]
    assert upstream_calls(gateway, "guarded") == before


def test_a_request_state_is_bound_to_its_caller_tool_and_arguments(gateway: Gateway) -> None:
    before = upstream_calls(gateway, "guarded")
    state = asked(gateway, "mine")
    answers = {"mcpmux-1": YES}
    foreign = call(gateway, "up__guarded", {"text": "mine"}, gateway.bob, requestState=state, inputResponses=answers)
    assert "error" in foreign, foreign
    other_arguments = call(gateway, "up__guarded", {"text": "yours"}, requestState=state, inputResponses=answers)
    assert INVALID_STATE in other_arguments["error"]["message"]
    other_tool = call(gateway, "up__echo", {"text": "mine"}, requestState=state, inputResponses=answers)
    assert INVALID_STATE in other_tool["error"]["message"]
    assert upstream_calls(gateway, "guarded") == before
    # The rightful caller still resumes its call: the attempts above did not spoil it.
    resumed = call(gateway, "up__guarded", {"text": "mine"}, requestState=state, inputResponses=answers)
    assert resumed["result"]["content"][0]["text"] == "guarded: mine"
    assert upstream_calls(gateway, "guarded") == before + 1


def test_a_used_request_state_cannot_be_replayed(gateway: Gateway) -> None:
    before = upstream_calls(gateway, "guarded")
    state = asked(gateway, "once")
    answers = {"mcpmux-1": YES}
    first = call(gateway, "up__guarded", {"text": "once"}, requestState=state, inputResponses=answers)
    assert first["result"]["content"][0]["text"] == "guarded: once"
    replayed = call(gateway, "up__guarded", {"text": "once"}, requestState=state, inputResponses=answers)
    assert replayed["error"]["code"] == types.INVALID_PARAMS
    assert "no longer waits for an answer" in replayed["error"]["message"]
    assert upstream_calls(gateway, "guarded") == before + 1


async def test_racing_retries_of_one_request_state_run_the_call_once(gateway: Gateway) -> None:
    before = upstream_calls(gateway, "guarded")
    state = asked(gateway, "race")
    answers = {"mcpmux-1": YES}
    outcomes: list[dict[str, Any]] = []

    async def retry() -> None:
        arguments: dict[str, Any] = {"requestState": state, "inputResponses": answers}
        outcomes.append(
            await anyio.to_thread.run_sync(lambda: call(gateway, "up__guarded", {"text": "race"}, **arguments))
        )

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(retry)
    texts = [o["result"]["content"][0]["text"] for o in outcomes if "result" in o]
    assert texts and set(texts) == {"guarded: race"}, outcomes
    assert all(o["error"]["code"] == types.INVALID_PARAMS for o in outcomes if "error" in o), outcomes
    assert upstream_calls(gateway, "guarded") == before + 1


def test_a_client_claiming_one_era_and_speaking_the_other_gets_a_clear_error(gateway: Gateway) -> None:
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
    }  # fmt: skip
    opened = post(gateway, initialize)
    session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
    post(gateway, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **session)
    # A handshake-era session asking for the stateless era's subscription stream.
    listen = {"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": {"notifications": {}}}
    assert answer(post(gateway, listen, **session))["error"]["code"] == types.METHOD_NOT_FOUND
    # Stateless-era requests of methods the era removed.
    for method, params in (("resources/subscribe", {"uri": "memo://note"}), ("logging/setLevel", {"level": "debug"})):
        body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {**params, "_meta": envelope()}}
        refused = answer(post(gateway, body, **{"MCP-Protocol-Version": MODERN, "Mcp-Method": method}))
        assert refused["error"]["code"] == types.METHOD_NOT_FOUND, (method, refused)
    # A stateless-era request without its envelope.
    bare = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}
    refused = answer(post(gateway, bare, **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}))
    assert refused["error"]["code"] == types.INVALID_PARAMS and "envelope" in refused["error"]["message"]
    # A handshake-era request without a session: refused, and the id the refusal names opens nothing.
    echo = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "up__echo", "arguments": {"text": "x"}},
    }
    orphan = post(gateway, echo)
    assert orphan.status_code == 400
    if "mcp-session-id" in orphan.headers:
        assert post(gateway, echo, **{"Mcp-Session-Id": orphan.headers["mcp-session-id"]}).status_code == 404
    # The handshake-era session itself is unharmed.
    assert answer(post(gateway, echo, **session))["result"]["content"][0]["text"] == "echo: x"


def test_mixed_protocol_versions_between_header_and_envelope_are_refused(gateway: Gateway) -> None:
    echo = {"name": "up__echo", "arguments": {"text": "x"}}
    cases = [
        (MODERN, envelope(LEGACY)),  # the header says one era, the envelope the other
        (f"{MODERN}, {LEGACY}", envelope()),  # two versions in one header
        ("2099-01-01", envelope()),  # a version nobody speaks
        (MODERN, envelope("2099-01-01")),
    ]
    for header, meta in cases:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**echo, "_meta": meta}}
        response = post(gateway, body, **{"MCP-Protocol-Version": header, "Mcp-Method": "tools/call"})
        refused = answer(response)
        assert response.status_code == 400 and "error" in refused, (header, meta, refused)
    # The handshake era's header on a request in the stateless era's envelope, without a session.
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**echo, "_meta": envelope()}}
    assert post(gateway, body, **{"MCP-Protocol-Version": LEGACY}).status_code == 400


def test_one_client_cannot_leave_unbounded_calls_parked(gateway: Gateway) -> None:
    # Each parked call outlives its request (with its upstream call in flight) until answered or
    # expired: a client could otherwise leave any number behind, one cheap request each.
    from mcpmux.gateway.stateless import MAX_PARKED_PER_CALLER

    states = [asked(gateway, f"p{n}", gateway.carol) for n in range(MAX_PARKED_PER_CALLER)]
    refused = call(gateway, "up__guarded", {"text": "one more"}, gateway.carol)
    assert refused["error"]["code"] == types.INVALID_REQUEST, refused
    assert "already wait for its answers" in refused["error"]["message"]
    asked(gateway, "another client", gateway.bob)  # the bound is per client
    answered = call(gateway, "up__guarded", {"text": "p0"}, gateway.carol, requestState=states[0],
                    inputResponses={"mcpmux-1": YES})  # fmt: skip
    assert answered["result"]["content"][0]["text"] == "guarded: p0"
    asked(gateway, "room again", gateway.carol)


async def test_the_gateway_serves_clients_of_both_eras_after_the_attacks(gateway: Gateway) -> None:
    headers = {"Authorization": f"Bearer {gateway.bob}"}
    with anyio.fail_after(WAIT_S):
        for mode in ("legacy", MODERN):
            async with (
                httpx2.AsyncClient(headers=headers, timeout=WAIT_S) as http,
                streamable_http_client(gateway.serving.url, http_client=http) as (read, write),
                Client(_Streams(read, write), mode=mode) as client,  # type: ignore[arg-type]
            ):
                result = await client.call_tool("up__echo", {"text": mode})
                assert text(result) == f"echo: {mode}"
