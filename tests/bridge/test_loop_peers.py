"""The loop end to end with server-everything over stdio: parallel calls, roots, sampling, elicitation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux.agents.agent import AgentOptions, agent_session
from mcpmux.bridge.providers.openai import OpenAIProvider
from mcpmux.config.models import Config, LLMConfig, Settings, StdioServerConfig
from mcpmux.policy import StateStore
from mcpmux.provider_names import get_profile
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


def everything() -> Config:
    command, args = stdio_command("everything")
    server = StdioServerConfig(name="ev", command=command, args=tuple(args))
    return Config(servers=(server,), settings=Settings(connect_timeout_ms=20_000, timeout_ms=20_000))


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_everything_parallel_calls_and_roots(store: StateStore, tmp_path: Path) -> None:
    script = [
        Reply(
            tool_calls=[
                Call("ev__echo", {"message": "hi"}),
                Call("ev__get-sum", {"a": 2, "b": 3}),
                Call("ev__get-roots-list", {}),
            ]
        ),
        Reply("done"),
    ]
    options = AgentOptions(catalog=False, store=store, root=tmp_path)
    with ScriptedLLM(script) as llm, anyio.fail_after(60):
        async with agent_session(
            everything(), OpenAIProvider(LLMConfig(base_url=llm.base_url), "m", None), options
        ) as session:
            result = await session.loop().send("echo hi and add 2 and 3")
    assert result.text == "done"
    echo, total, roots = tool_messages(llm.requests[1])
    assert echo == "Echo: hi"
    assert "5" in total
    assert tmp_path.as_uri() in roots
    assert "Everything Server" in llm.requests[0]["messages"][0]["content"]  # its instructions
    rule = get_profile("openai")
    assert all(rule.is_valid(t["function"]["name"]) for t in llm.requests[0]["tools"])


@pytest.mark.slow
async def test_a_sampling_request_is_shown_approved_and_answered_by_the_model(store: StateStore) -> None:
    shown: list[types.CreateMessageRequestParams] = []

    async def approve(server: str, params: types.CreateMessageRequestParams) -> bool:
        shown.append(params)
        return True

    def sampling_reply(request: dict[str, Any]) -> Reply:
        assert "tools" not in request
        assert request["max_tokens"] == 50
        assert "Write a haiku" in request["messages"][-1]["content"]
        return Reply("Autumn moonlight, a worm digs silently")

    script = [
        Reply(tool_calls=[Call("ev__trigger-sampling-request", {"prompt": "Write a haiku", "maxTokens": 50})]),
        sampling_reply,
        Reply("The server got its haiku."),
    ]
    options = AgentOptions(catalog=False, store=store, sampling_approver=approve)
    with ScriptedLLM(script) as llm, anyio.fail_after(60):
        async with agent_session(
            everything(), OpenAIProvider(LLMConfig(base_url=llm.base_url), "m", None), options
        ) as session:
            result = await session.loop().send("trigger sampling")
    assert result.text == "The server got its haiku."
    assert len(shown) == 1
    assert "Autumn moonlight" in tool_messages(llm.requests[2])[0]


@pytest.mark.slow
async def test_without_an_approver_sampling_is_declined_and_elicitation_too(store: StateStore) -> None:
    script = [
        Reply(
            tool_calls=[
                Call("ev__trigger-sampling-request", {"prompt": "x", "maxTokens": 5}),
                Call("ev__trigger-elicitation-request", {}),
            ]
        ),
        Reply("ok"),
    ]
    options = AgentOptions(catalog=False, store=store)
    with ScriptedLLM(script) as llm, anyio.fail_after(60):
        async with agent_session(
            everything(), OpenAIProvider(LLMConfig(base_url=llm.base_url), "m", None), options
        ) as session:
            result = await session.loop().send("trigger both")
    assert result.text == "ok"
    sampling, elicitation = tool_messages(llm.requests[1])
    assert "declined" in sampling
    assert "decline" in elicitation.lower()
    assert len(llm.requests) == 2  # the model was not asked to sample
