"""The slash table, completion, transcripts and inline questions, in-process (no terminal)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

from mcpmux.agents.agent import AgentOptions, agent_session
from mcpmux.bridge.providers.openai import OpenAIProvider
from mcpmux.chat import slash_handlers
from mcpmux.chat.completion import ChatCompleter
from mcpmux.chat.interaction import ChatQuestions
from mcpmux.chat.render import Renderer
from mcpmux.chat.repl import ChatRepl
from mcpmux.chat.slash import TABLE, ChatState, find
from mcpmux.chat.transcript import Transcript
from mcpmux.config.models import Config, LLMConfig
from mcpmux.policy import StateStore
from tests.fixtures.scripted_llm import Reply, ScriptedLLM
from tests.manager.conftest import dynamic_server, factory, stdio

pytestmark = pytest.mark.anyio

ISSUE_COMMANDS = {
    "mcp",
    "mcp tools",
    "mcp resources",
    "mcp prompts",
    "mcp status",
    "mcp refresh",
    "mcp enable",
    "mcp disable",
    "call",
    "read",
    "prompt",
    "approve",
    "model",
    "clear",
    "save",
    "exit",
    "help",
    "login",
}


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[ChatState]:
    options = AgentOptions(
        catalog=False, store=StateStore(tmp_path / "s.db"), connection_factory=factory({"dyn": dynamic_server("dyn")})
    )
    console = Console(file=io.StringIO(), width=200, highlight=False)
    transcript = Transcript()
    renderer = Renderer(console, transcript)
    with anyio.fail_after(30):
        async with agent_session(Config(servers=(stdio("dyn"),)), None, options, renderer) as session:
            chat = ChatState(session, console, renderer, transcript, LLMConfig())
            ChatRepl(chat, tmp_path / "history")
            yield chat
    assert options.store is not None
    options.store.close()


def output(state: ChatState) -> str:
    file = state.console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def test_the_table_has_every_command_of_the_issue_each_with_help() -> None:
    assert set(TABLE) == ISSUE_COMMANDS
    assert all(command.summary for command in TABLE.values())
    assert find("/mcp tools dyn") == (TABLE["mcp tools"], "dyn")
    assert find("/mcp") == (TABLE["mcp"], "")
    assert find('/call dyn:add_tool {"new_name": "x"}') == (TABLE["call"], 'dyn:add_tool {"new_name": "x"}')
    assert find("/nope") is None


async def test_help_is_generated_from_the_docstrings(state: ChatState) -> None:
    await ChatRepl(state, Path(state.session.options.root or ".") / "unused").handle("/help")
    text = output(state)
    for command in TABLE.values():
        assert command.usage in text
        assert command.summary in text


async def test_slash_commands_work_without_a_model(state: ChatState, tmp_path: Path) -> None:
    repl = ChatRepl(state, tmp_path / "history")
    for line in (
        "/mcp",
        "/mcp status",
        "/mcp tools dyn",
        "/mcp resources",
        "/mcp prompts",
        "/mcp refresh dyn",
        "/read dyn memo://greeting",
        "/prompt dyn:review code=print(1)",
        "/call dyn:hang_not_here",
        "/call dyn:add_tool not-json",
        "/model",
        "/approve",
        "hello",
    ):
        await repl.handle(line)
    text = output(state)
    assert "connected" in text
    assert "dyn:add_tool" in text
    assert "hello from resources" in text
    assert "Please review: print(1)" in text
    assert "no tool" in text.lower()
    assert "not valid JSON" in text
    assert "no model configured" in text
    await repl.handle(f"/save {tmp_path / 'chat.md'}")
    await repl.handle(f"/save {tmp_path / 'chat.json'}")
    assert "hello from resources" in (tmp_path / "chat.md").read_text(encoding="utf-8")
    entries = json.loads((tmp_path / "chat.json").read_text(encoding="utf-8"))["entries"]
    assert {k: entries[0][k] for k in ("role", "name")} == {"role": "command", "name": None}
    await repl.handle("/exit")
    assert state.done


async def test_a_prompt_goes_into_the_conversation_and_the_model_answers(state: ChatState, tmp_path: Path) -> None:
    with ScriptedLLM([Reply("Looks fine.")]) as llm:
        state.session.provider = OpenAIProvider(LLMConfig(base_url=llm.base_url), "scripted", None)
        await ChatRepl(state, tmp_path / "history").handle('/prompt dyn:review {"code": "x = 1"}')
        await state.session.provider.aclose()
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": "Please review: x = 1"}
    assert "Looks fine." in output(state)


async def test_model_switches_the_model_and_clear_forgets_the_conversation(state: ChatState, tmp_path: Path) -> None:
    repl = ChatRepl(state, tmp_path / "history")
    await repl.handle("/model other-model")
    assert state.session.provider is not None
    assert state.session.provider.model == "other-model"
    state.session.loop().add_user_message("remember me")
    await repl.handle("/clear")
    assert state.session.loop().messages == []
    assert "openai other-model" in output(state)
    await state.session.provider.aclose()


def complete(state: ChatState, text: str) -> list[str]:
    completer = ChatCompleter(state.session.guard)
    return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]


async def test_completion_offers_commands_then_names(state: ChatState) -> None:
    assert complete(state, "/mc") == ["/mcp"]
    assert "tools" in complete(state, "/mcp t")
    assert complete(state, "/mcp tools d") == ["dyn"]
    assert "dyn:add_tool" in complete(state, "/call dyn:a")
    assert complete(state, "/prompt dyn:r") == ["dyn:review"]
    assert complete(state, "/read dyn m") == ["memo://greeting"]
    assert complete(state, "hello") == []


async def test_an_elicitation_form_asks_each_field_and_converts_answers() -> None:
    answers = iter(["y", "Ada", "abc", "36", "yes", "blue"])

    async def ask(question: str) -> str:
        return next(answers)

    questions = ChatQuestions(Console(file=io.StringIO()), ask)
    schema = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "age": {"type": "integer"},
            "ok": {"type": "boolean"},
            "color": {"type": "string", "enum": ["red", "blue"]},
        },
    }
    params = types.ElicitRequestFormParams(mode="form", message="Who are you?", requested_schema=schema)
    result = await questions.elicit("srv", params)
    assert result.action == "accept"
    assert result.content == {"name": "Ada", "age": 36, "ok": True, "color": "blue"}


async def test_declining_an_elicitation_sends_no_content() -> None:
    async def ask(question: str) -> str:
        return "n"

    params = types.ElicitRequestFormParams(mode="form", message="?", requested_schema={"type": "object"})
    result = await ChatQuestions(Console(file=io.StringIO()), ask).elicit("srv", params)
    assert (result.action, result.content) == ("decline", None)


def test_usage_errors_are_value_errors() -> None:
    assert issubclass(slash_handlers.UsageError, ValueError)


@pytest.mark.slow
async def test_approve_shows_high_scanner_findings_and_approves_only_with_yes(tmp_path: Path) -> None:
    import sys

    from pydantic import SecretStr

    from mcpmux.config.models import StdioServerConfig

    changing = str(Path(__file__).parents[1] / "fixtures" / "changing_server.py")
    server = StdioServerConfig(
        name="ch", command=sys.executable, args=(changing,), env={"TOOLS_VARIANT": SecretStr("poisoned")}
    )
    options = AgentOptions(catalog=False, store=StateStore(tmp_path / "s.db"))
    console = Console(file=io.StringIO(), width=200, highlight=False)
    transcript = Transcript()
    with anyio.fail_after(60):
        async with agent_session(Config(servers=(server,)), None, options, Renderer(console, transcript)) as session:
            chat = ChatState(session, console, Renderer(console, transcript), transcript, LLMConfig())
            repl = ChatRepl(chat, tmp_path / "history")
            assert "ch:read_notes" not in [t.name for t in session.guard.tools("ch")]  # quarantined on sight
            await repl.handle("/approve ch:read_notes")
            text = output(chat)
            assert "the scanner flagged what you are approving" in text and "[sensitive-path]" in text
            assert "nothing approved; approve anyway with /approve ch:read_notes --yes" in text
            assert "ch:read_notes" not in [t.name for t in session.guard.tools("ch")]
            await repl.handle("/approve ch:read_notes --yes")
            assert "approved 1 definition(s) of ch:read_notes" in output(chat)
            assert "ch:read_notes" in [t.name for t in session.guard.tools("ch")]
    options.store.close()


async def test_a_server_is_disabled_and_enabled_from_the_chat(state: ChatState, tmp_path: Path) -> None:
    repl = ChatRepl(state, tmp_path / "history")
    await repl.handle("/mcp disable dyn")
    assert state.session.guard.tools("dyn") == []
    await repl.handle("/mcp disable dyn")
    await repl.handle("/call dyn:add_tool {}")
    await repl.handle("/mcp disable")
    await repl.handle("/mcp disable nope")
    text = output(state)
    assert "disabled dyn" in text and "dyn was disabled already" in text
    assert "unavailable: disabled at run time" in text and "/mcp enable dyn" in text  # and how to enable it
    assert "usage: /mcp disable SERVER" in text
    assert "nope" in text
    await repl.handle("/mcp enable dyn")
    assert "enabled dyn" in output(state)
    assert [t.name for t in state.session.guard.tools("dyn") if t.name == "dyn:add_tool"] == ["dyn:add_tool"]
