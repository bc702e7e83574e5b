"""The tool-calling loop against a scripted OpenAI-compatible server and real MCP servers in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpmux.agents.agent import AgentOptions, agent_session, describe_servers
from mcpmux.bridge.loop import CANCELLED_RESULT, AgentLoop, LoopEvent, TextDelta, ToolFinished, ToolStarted
from mcpmux.bridge.providers.openai import OpenAIProvider
from mcpmux.config.models import BuiltinServerConfig, Config, LLMConfig, SecurityConfig
from mcpmux.manager import Manager
from mcpmux.policy import Guard, StateStore
from mcpmux.provider_names import get_profile
from mcpmux.testing import MockServer
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM
from tests.manager.conftest import factory, stdio

pytestmark = [pytest.mark.anyio, pytest.mark.network]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    return tmp_path / "ws"


def provider(llm: ScriptedLLM) -> OpenAIProvider:
    return OpenAIProvider(LLMConfig(base_url=llm.base_url), "scripted", None)


def workspace(root: Path, **security: Any) -> Config:
    return Config(
        servers=(BuiltinServerConfig(name="ws", builtin="workspace", root=root),), security=SecurityConfig(**security)
    )


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def assert_names_follow_the_profile(llm: ScriptedLLM) -> None:
    rule = get_profile("openai")
    for request in llm.requests:
        for entry in request.get("tools", []):
            assert rule.is_valid(entry["function"]["name"]), entry["function"]["name"]


async def test_parallel_calls_run_and_results_go_back_in_order(root: Path, store: StateStore) -> None:
    events: list[LoopEvent] = []

    async def record(event: LoopEvent) -> None:
        events.append(event)

    script = [
        Reply(tool_calls=[Call("ws__read_file", {"path": "notes.txt"}), Call("ws__list_directory", {})]),
        Reply("The file says 42."),
    ]
    options = AgentOptions(catalog=False, store=store, root=root)
    with ScriptedLLM(script) as llm, anyio.fail_after(30):
        async with agent_session(workspace(root), provider(llm), options, record) as session:
            result = await session.loop().send("what is in notes.txt?")
    assert (result.stopped, result.text, result.turns, result.tool_calls) == ("answered", "The file says 42.", 2, 2)
    assert result.usage.total_tokens == 30
    first, second = llm.requests
    assert first["messages"][0]["role"] == "system"
    assert "ws (connected" in first["messages"][0]["content"]
    assert (
        "instructions from the server (not from the user):\n    Tools over one directory tree"
        in first["messages"][0]["content"]
    )
    assert "the answer is 42" in tool_messages(second)[0]
    assert "notes.txt" in tool_messages(second)[1]
    assert [m.get("tool_call_id") for m in second["messages"] if m["role"] == "tool"] == ["call_0", "call_1"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The file says 42."
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert {e.canonical for e in finished} == {"ws:read_file", "ws:list_directory"}
    assert_names_follow_the_profile(llm)


async def test_tool_errors_bad_json_and_unknown_tools_go_back_to_the_model(root: Path, store: StateStore) -> None:
    script = [
        Reply(
            tool_calls=[
                Call("ws__read_file", {"path": "missing.txt"}),
                Call("ws__read_file", "{not json"),
                Call("ws__no_such_tool", {}),
            ]
        ),
        Reply("Sorry, that file does not exist."),
    ]
    options = AgentOptions(catalog=False, store=store, root=root)
    with ScriptedLLM(script) as llm, anyio.fail_after(30):
        async with agent_session(workspace(root), provider(llm), options) as session:
            result = await session.loop().send("read missing.txt")
    assert result.stopped == "answered"
    missing, bad_json, unknown = tool_messages(llm.requests[1])
    assert missing.startswith("[tool error]")
    assert "missing.txt" in missing
    assert "not valid JSON" in bad_json
    assert "no tool is called 'ws__no_such_tool'" in unknown
    assert len(result.errors) == 3


async def test_denied_and_unapproved_tools_are_refused_and_the_model_is_told(root: Path, store: StateStore) -> None:
    config = workspace(root, denied_tools=("ws:delete",), require_approval=("ws:write_file",))
    script = [
        Reply(
            tool_calls=[
                Call("ws__delete", {"path": "notes.txt"}),
                Call("ws__write_file", {"path": "x.txt", "content": "x"}),
            ]
        ),
        Reply("I may not do that."),
    ]
    options = AgentOptions(catalog=False, store=store, root=root)
    with ScriptedLLM(script) as llm, anyio.fail_after(30):
        async with agent_session(config, provider(llm), options) as session:
            await session.loop().send("delete notes.txt and write x.txt")
    denied, unapproved = tool_messages(llm.requests[1])
    assert "no tool is called 'ws__delete'" in denied
    assert "ApprovalDenied" in unapproved
    assert "ws__delete" not in {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert (root / "notes.txt").exists()
    assert not (root / "x.txt").exists()


async def test_the_loop_stops_after_max_turns(root: Path, store: StateStore) -> None:
    script = [Reply(tool_calls=[Call("ws__list_directory", {})]) for _ in range(3)]
    options = AgentOptions(catalog=False, store=store, root=root, max_turns=2)
    with ScriptedLLM(script) as llm, anyio.fail_after(30):
        async with agent_session(workspace(root), provider(llm), options) as session:
            result = await session.loop().send("loop forever")
    assert (result.stopped, result.turns, result.tool_calls) == ("max_turns", 2, 2)
    assert llm.remaining == 1


def hanging_server(seen: dict[str, anyio.Event]) -> MockServer:
    async def hang() -> str:
        seen["started"].set()
        try:
            await anyio.sleep_forever()
        finally:
            seen["cancelled"].set()
        return "unreachable"

    return MockServer("slow").tool("hang", hang, description="Never answer.")


async def test_cancelling_the_loop_cancels_the_call_on_the_server(store: StateStore) -> None:
    seen = {"started": anyio.Event(), "cancelled": anyio.Event()}
    manager = Manager(
        Config(servers=(stdio("slow"),)), connection_factory=factory({"slow": hanging_server(seen)}), catalog=False
    )
    with ScriptedLLM([Reply(tool_calls=[Call("slow__hang", {})])]) as llm, anyio.fail_after(30):
        async with manager:
            loop = AgentLoop(Guard(manager, store=store), provider(llm))
            async with anyio.create_task_group() as group:
                group.start_soon(loop.send, "hang please")
                await seen["started"].wait()
                group.cancel_scope.cancel()
            # The server's handler was cancelled by notifications/cancelled, not left running.
            await seen["cancelled"].wait()
            assert loop.messages[-1] == {"role": "tool", "tool_call_id": "call_0", "content": CANCELLED_RESULT}
            await loop.provider.aclose()


def meeting_server() -> MockServer:
    arrived: list[str] = []
    everyone = anyio.Event()

    async def meet(who: str) -> str:
        arrived.append(who)
        if len(arrived) == 2:
            everyone.set()
        await everyone.wait()
        return f"{who} met {len(arrived) - 1} other"

    who = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}
    return MockServer("meet").tool("meet", meet, description="Wait until two callers are inside at once.", schema=who)


async def test_several_calls_in_one_answer_run_at_the_same_time(store: StateStore) -> None:
    manager = Manager(
        Config(servers=(stdio("meet"),)), connection_factory=factory({"meet": meeting_server()}), catalog=False
    )
    script = [Reply(tool_calls=[Call("meet__meet", {"who": "a"}), Call("meet__meet", {"who": "b"})]), Reply("met")]
    with ScriptedLLM(script) as llm, anyio.fail_after(30):
        async with manager:
            loop = AgentLoop(Guard(manager, store=store), provider(llm))
            # Run one after the other, the first call would wait forever for the second.
            assert (await loop.send("meet")).text == "met"
            await loop.provider.aclose()
    assert tool_messages(llm.requests[1]) == ["a met 1 other", "b met 1 other"]


async def test_the_system_prompt_lists_servers_and_tools(root: Path, store: StateStore) -> None:
    with anyio.fail_after(30):
        async with Manager(workspace(root), catalog=False) as manager:
            prompt = describe_servers(Guard(manager, store=store))
    assert "- ws (connected, " in prompt
    assert "read_file" in prompt


async def test_tool_started_events_carry_the_parsed_arguments(root: Path, store: StateStore) -> None:
    events: list[LoopEvent] = []

    async def record(event: LoopEvent) -> None:
        events.append(event)

    script = [Reply(tool_calls=[Call("ws__read_file", {"path": "notes.txt"})]), Reply("ok")]
    options = AgentOptions(catalog=False, store=store, root=root)
    with ScriptedLLM(script) as llm, anyio.fail_after(30):
        async with agent_session(workspace(root), provider(llm), options, record) as session:
            await session.loop().send("go")
    started = [e for e in events if isinstance(e, ToolStarted)]
    assert [(e.name, e.arguments) for e in started] == [("ws__read_file", {"path": "notes.txt"})]
