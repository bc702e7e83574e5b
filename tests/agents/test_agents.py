"""Agents: config, the guard's allow-list, ``run --agent``, and ``ask_NAME`` over MCP (model or sampling).

Real parts: the changing fixture server (a child process), the scripted OpenAI-compatible model
(tests/fixtures/scripted_llm.py, over HTTP), ``mcpmux`` itself as a child process, and the
official SDK's client answering sampling requests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpmux import Host
from mcpmux.agents.ask import AgentTools
from mcpmux.bridge.providers.sampling import TEXT_PROTOCOL
from mcpmux.config import load_config
from mcpmux.config.models import AgentConfig, Config, Settings, StdioServerConfig
from mcpmux.errors import ConfigError, ToolDenied, UsageError
from mcpmux.policy import StateStore
from mcpmux.servers.functions import function_server
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM
from tests.forkserver import MCPMUX
from tests.gateway.serving import isolated_env

pytestmark = pytest.mark.anyio

CHANGING = str(Path(__file__).parents[1] / "fixtures" / "changing_server.py")
WAIT_S = 90


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


def reader(**extra: Any) -> dict[str, Any]:
    return {"instructions": "Only ever read notes; answer briefly.", "tools": ["ch:read_*"], **extra}


def config_with(agents: dict[str, Any], **llm: Any) -> Config:
    server = StdioServerConfig(name="ch", command=sys.executable, args=(CHANGING,))
    return Config(
        servers=(server,), settings=Settings(connect_timeout_ms=20_000), agents=agents, llm=llm or {}
    )  # fmt: skip


def write_config(root: Path, agents: dict[str, Any], llm: dict[str, Any] | None = None) -> Path:
    tree: dict[str, Any] = {
        "mcp": {"servers": [{"name": "ch", "type": "stdio", "command": sys.executable, "args": [CHANGING]}]},
        "agents": agents,
    }
    if llm:
        tree["llm"] = llm
    path = root / "mcpmux.yaml"
    path.write_text(json.dumps(tree), encoding="utf-8")  # JSON is YAML
    return path


# -- configuration ---------------------------------------------------------------------------------


def test_agents_load_from_the_config_file_by_name(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"reader": reader(model="small-model")})
    config = load_config(path)
    agent = config.agent("reader")
    assert agent == AgentConfig(name="reader", model="small-model", instructions=reader()["instructions"],
                                tools=("ch:read_*",))  # fmt: skip
    with pytest.raises(UsageError, match="no agent 'writer' is configured"):
        config.agent("writer")


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"instructions": "x"}, "exactly one of tools"),
        ({"tools": ["a:*"], "toolset": "ops"}, "exactly one of tools"),
        ({"tools": []}, "an empty list allows nothing"),
        ({"tools": ["a:*"], "colour": "red"}, "colour"),
    ],
)
def test_an_invalid_agent_is_a_config_error_naming_it(tmp_path: Path, entry: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        load_config(write_config(tmp_path, {"reader": entry}))
    assert "agents.reader" in str(raised.value)


def test_an_agent_name_must_make_a_tool_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ask_Bad Name"):
        load_config(write_config(tmp_path, {"Bad Name": reader()}))


# -- the guard holds an agent to its tools --------------------------------------------------------


@pytest.mark.subprocess
async def test_an_agent_lists_and_calls_only_its_tools_and_the_rest_is_refused_and_audited(
    store: StateStore,
) -> None:
    with anyio.fail_after(WAIT_S):
        async with Host(config_with({"reader": reader()}), store=store, catalog=False) as host:
            agent = host.for_agent("reader")
            assert [t.name for t in agent.tools()] == ["ch:read_notes"]
            assert {t.name for t in host.tools()} >= {"ch:read_notes", "ch:delete_notes"}  # the host is unchanged
            with pytest.raises(ToolDenied, match="agent 'reader': not in its tools"):
                await agent.call_tool("ch:delete_notes", {"path": "x"})
            result = await agent.call_tool("ch:read_notes", {"path": "x"})
            assert "notes of x" in str(result.content[0])
            rows = {(r.tool, r.decision, r.caller) for r in host.audit.query(server="ch")}
            assert ("delete_notes", "denied", "agent:reader") in rows and (
                "read_notes",
                "allowed",
                "agent:reader",
            ) in rows


def test_a_toolset_agent_without_toolsets_is_a_usage_error() -> None:
    config = config_with({"ops": {"toolset": "ops"}})
    from mcpmux.policy import agent_scope

    with pytest.raises(UsageError, match="toolset 'ops', which is not configured"):
        agent_scope(config, config.agent("ops"))


# -- mcpmux run --agent ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.subprocess
def test_run_agent_sends_only_its_tools_and_instructions_and_a_refused_call_reaches_the_model(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[Call("ch__delete_notes", {"path": "a"})]), Reply("I may only read.")]
    with ScriptedLLM(script) as llm:
        path = write_config(tmp_path, {"reader": reader(model="reader-model")}, {"base_url": llm.base_url})
        run = subprocess.run(
            [MCPMUX, "--config", str(path), "run", "--agent", "reader", "delete the notes"],
            capture_output=True, text=True, timeout=WAIT_S, env=isolated_env(tmp_path), stdin=subprocess.DEVNULL,
            check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert "I may only read." in run.stdout
        first, second = llm.requests
    assert first["model"] == "reader-model"
    assert [t["function"]["name"] for t in first["tools"]] == ["ch__read_notes"]
    assert "Only ever read notes" in first["messages"][0]["content"]
    refused = second["messages"][-1]  # never listed to it, so not even a name the loop knows
    assert refused["role"] == "tool" and refused["content"] == (
        "[tool error] BadToolCall: no tool is called 'ch__delete_notes'; available: ch__read_notes"
    )
    assert "deleted" not in json.dumps(second)


@pytest.mark.subprocess
def test_run_with_an_unknown_agent_is_a_usage_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"reader": reader()}, {"base_url": "http://127.0.0.1:9/v1"})
    run = subprocess.run(
        [MCPMUX, "--config", str(path), "run", "--agent", "writer", "hi"], capture_output=True, text=True,
        timeout=WAIT_S, env=isolated_env(tmp_path), stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert run.returncode == 2 and "no agent 'writer' is configured" in run.stderr


# -- ask_NAME: an agent as an MCP tool -------------------------------------------------------------


def text_of(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


class TextProtocolClient:
    """A client whose 'model' follows mcpmux's text protocol: call read_notes once, then answer."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.requests.append(params)
        last = params.messages[-1].content
        seen = last.text if isinstance(last, types.TextContent) else ""
        if seen.startswith("Result of ch__read_notes"):
            answer = "The notes: " + seen.splitlines()[1]
        else:
            answer = json.dumps({"tool": "ch__read_notes", "arguments": {"path": "todo.txt"}})
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text=answer), model="client-model")


@pytest.mark.slow
@pytest.mark.subprocess
async def test_serve_agent_exposes_only_ask_and_samples_the_callers_model_by_text_protocol(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"reader": reader()})
    model = TextProtocolClient()
    params = StdioServerParameters(
        command=MCPMUX, args=["--config", str(path), "serve", "--agent", "reader"], env=isolated_env(tmp_path)
    )
    with anyio.fail_after(WAIT_S):
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, sampling_callback=model) as session,
        ):
            await session.initialize()
            tools: list[types.Tool] = []
            while not tools:  # a stdio gateway answers before its upstreams connect
                tools = (await session.list_tools()).tools
                await anyio.sleep(0.1)
            assert [t.name for t in tools] == ["agents__ask_reader"]
            assert tools[0].input_schema["required"] == ["task"]
            result = await session.call_tool("agents__ask_reader", {"task": "what is on my todo list?"})
    assert not result.is_error, text_of(result)
    assert text_of(result) == "The notes: notes of todo.txt"
    system = model.requests[0].system_prompt or ""
    assert TEXT_PROTOCOL.splitlines()[0] in system and "ch__read_notes" in system and "delete_notes" not in system
    assert "Only ever read notes" in system


@pytest.mark.slow
@pytest.mark.subprocess
async def test_serve_agent_with_a_configured_model_never_samples_the_client(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[Call("ch__read_notes", {"path": "b"})]), Reply("read b")]
    asked: list[Any] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params)
        raise AssertionError("the client was sampled")

    with ScriptedLLM(script) as llm:
        path = write_config(tmp_path, {"reader": reader(model="m1")}, {"base_url": llm.base_url})
        params = StdioServerParameters(
            command=MCPMUX, args=["--config", str(path), "serve", "--agent", "reader"], env=isolated_env(tmp_path)
        )
        with anyio.fail_after(WAIT_S):
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write, sampling_callback=sampling) as s,
            ):
                await s.initialize()
                result = await s.call_tool("agents__ask_reader", {"task": "read b"})
        assert text_of(result) == "read b" and not asked
        assert llm.requests[0]["model"] == "m1"


@pytest.mark.subprocess
async def test_ask_samples_with_tools_when_the_client_declares_sampling_tools(store: StateStore) -> None:
    """The native path: tools in the sampling request, tool_use back, tool_result in the next turn."""
    seen: list[types.CreateMessageRequestParams] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResultWithTools:
        seen.append(params)
        last = params.messages[-1].content
        if isinstance(last, list) and isinstance(last[0], types.ToolResultContent):
            result = last[0].content[0]
            assert isinstance(result, types.TextContent)
            return types.CreateMessageResultWithTools(
                role="assistant", content=[types.TextContent(text=f"done: {result.text}")], model="m"
            )
        use = types.ToolUseContent(id="u1", name="ch__read_notes", input={"path": "n"})
        return types.CreateMessageResultWithTools(role="assistant", content=[use], model="m", stop_reason="toolUse")

    with anyio.fail_after(WAIT_S):
        async with Host(config_with({"reader": reader()}), store=store, catalog=False) as host:
            server = function_server([AgentTools(host, provider=lambda c, a: None).function("reader")], name="agents")
            capabilities = types.SamplingCapability(tools=types.SamplingToolsCapability())
            async with Client(
                server, mode="legacy", sampling_callback=sampling, sampling_capabilities=capabilities
            ) as client:
                result = await client.call_tool("ask_reader", {"task": "read n"})
    assert text_of(result) == "done: notes of n"
    assert [t.name for t in seen[0].tools or []] == ["ch__read_notes"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_chat_agent_uses_its_model_and_tools_and_slash_calls_outside_them_are_refused(tmp_path: Path) -> None:
    import pexpect

    script = [Reply(tool_calls=[Call("ch__read_notes", {"path": "n"})]), Reply("the notes are fine")]
    with ScriptedLLM(script) as llm:
        write_config(tmp_path, {"reader": reader(model="chat-model")}, {"base_url": llm.base_url})
        env = dict(isolated_env(tmp_path), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1")
        child = pexpect.spawn(
            MCPMUX, ["chat", "--agent", "reader"], cwd=str(tmp_path), env=env, encoding="utf-8", timeout=60,
            dimensions=(50, 160),
        )  # fmt: skip
        try:
            child.expect("you>")
            child.send('/call ch:delete_notes {"path": "n"}\r')
            child.expect_exact("not in its tools")
            child.expect("you>")
            child.send("how are my notes?\r")
            child.expect_exact("the notes are fine")
            child.expect("you>")
        finally:
            child.close(force=True)
        first = llm.requests[0]
    assert first["model"] == "chat-model"
    assert [t["function"]["name"] for t in first["tools"]] == ["ch__read_notes"]
    assert "Only ever read notes" in first["messages"][0]["content"]


def test_the_toolsets_hook_checks_an_agents_toolset_by_name_and_reads_its_tools() -> None:
    """Until the toolsets section lands (issue 22, part A), the hook is driven by hand."""
    from mcpmux.config.loader import _agent_problems
    from mcpmux.policy import agent_scope

    sections: dict[str, Any] = {
        "agents": {"ops": {"toolset": "ops"}, "x": {"toolset": "nope"}},
        "toolsets": {"ops": {}},
    }
    problems = _agent_problems(sections)
    assert [(p.path, p.reason) for p in problems] == [("agents.x.toolset", "no toolset 'nope' (toolsets: ops)")]
    assert _agent_problems({"agents": {"x": {"toolset": "nope"}}}) == []  # no toolsets section: nothing to check

    config = config_with({"ops": {"toolset": "ops"}})
    object.__setattr__(config, "toolsets", {"ops": {"tools": ["ch:read_*", "ch:list_*"]}})
    assert agent_scope(config, config.agent("ops")).patterns == ("ch:read_*", "ch:list_*")
