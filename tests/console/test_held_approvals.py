"""A gateway call that its own client may not approve waits for a person at the console (real processes).

A separate SDK client (``mcp`` ClientSession over Streamable HTTP, a token without ``--can-approve``)
calls a tool that needs approval; the console lists the call with its caller, tool, redacted
arguments and rule; "approve once" gives the client its result at once, "deny" an error, and no
answer within ``gateway_approvers.console_timeout_s`` denies.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.console.serving import Console, console, write_console_config

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.subprocess, pytest.mark.network, pytest.mark.anyio]

WAIT_S = 60


async def _call_get_sum(served: Console, token: str) -> types.CallToolResult:
    headers = {"Authorization": f"Bearer {served.tokens[token]}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=WAIT_S) as http,
        streamable_http_client(served.serving.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await session.call_tool("everything__get-sum", {"a": 2, "b": 3, "api_key": "sk-secret-value"})


async def _held_id(client: httpx.AsyncClient) -> tuple[str, str]:
    with anyio.fail_after(WAIT_S):
        while True:
            html = (await client.get("/ui/approvals")).text
            found = re.search(r'data-held="([^"]+)"', html)
            if found:
                return found.group(1), html
            await anyio.sleep(0.1)


async def _answer(served: Console, decision: str) -> tuple[types.CallToolResult, str]:
    results: list[types.CallToolResult] = []
    async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as client:
        login = await client.post("/ui/login", data={"secret": served.tokens["admin"]}, headers={"Origin": served.base})
        assert login.status_code == 303
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await _call_get_sum(served, "agent"))

            tg.start_soon(call)
            held, html = await _held_id(client)
            csrf = re.search(r'name="csrf" value="([^"]+)"', html)
            assert csrf is not None
            answered = await client.post(
                f"/ui/approvals/{held}", data={"csrf": csrf.group(1), "decision": decision},
                headers={"Origin": served.base},
            )  # fmt: skip
            assert answered.status_code == 303
    return results[0], html


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> object:
    root = tmp_path_factory.mktemp("held")
    config = write_console_config(root, ("everything",), require_approval=["everything:get-sum"])
    with console(root, config) as running:
        yield running


@pytest.mark.slow
async def test_an_approved_call_reaches_its_waiting_client_at_once(served: Console) -> None:
    result, html = await _answer(served, "yes")
    assert not result.is_error
    assert "5" in str(result.content[0].text if isinstance(result.content[0], types.TextContent) else result)
    assert "token:agent" in html and "everything:get-sum" in html
    assert "sk-secret-value" not in html  # redacted as the audit log redacts


async def test_a_denied_call_gets_a_refusal(served: Console) -> None:
    result, _ = await _answer(served, "no")
    assert result.is_error
    text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
    assert "not approved" in text


@pytest.mark.slow
async def test_no_answer_in_time_denies(tmp_path: Path) -> None:
    config = write_console_config(tmp_path, ("everything",), require_approval=["everything:get-sum"],
                                  gateway_approvers={"console_timeout_s": 1})  # fmt: skip
    with console(tmp_path, config) as running:
        with anyio.fail_after(WAIT_S):
            result = await _call_get_sum(running, "agent")
    assert result.is_error


async def test_a_rest_call_to_the_gateways_api_waits_for_a_person_too(served: Console) -> None:
    responses: list[httpx.Response] = []
    call = {"tool_id": "everything:get-sum", "arguments": {"a": 20, "b": 22, "api_key": "sk-secret-value"}}
    headers = {"Authorization": f"Bearer {served.tokens['agent']}"}
    async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S) as client:
        login = await client.post("/ui/login", data={"secret": served.tokens["admin"]}, headers={"Origin": served.base})
        assert login.status_code == 303
        async with anyio.create_task_group() as tg:

            async def rest() -> None:
                async with httpx.AsyncClient(base_url=served.base, timeout=WAIT_S, headers=headers) as api:
                    responses.append(await api.post("/api/tools/execute", json=call))

            tg.start_soon(rest)
            held, html = await _held_id(client)
            assert "token:agent" in html and "sk-secret-value" not in html
            csrf = re.search(r'name="csrf" value="([^"]+)"', html)
            assert csrf is not None
            answered = await client.post(
                f"/ui/approvals/{held}", data={"csrf": csrf.group(1), "decision": "yes"},
                headers={"Origin": served.base},
            )  # fmt: skip
            assert answered.status_code == 303
    assert responses[0].status_code == 200, responses[0].text
    assert "42" in str(responses[0].json()["content"])
