"""The loop over the Anthropic Messages API (scripted server), and the message conversion."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcpmux.agents.agent import AgentOptions, agent_session
from mcpmux.bridge.providers import make_provider
from mcpmux.bridge.providers.anthropic import to_anthropic_messages
from mcpmux.config.models import BuiltinServerConfig, Config, LLMConfig
from mcpmux.policy import StateStore
from mcpmux.provider_names import get_profile
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM

pytestmark = [pytest.mark.anyio, pytest.mark.network]


@pytest.mark.slow
@pytest.mark.timeout(300)  # a bound: the first import of the anthropic SDK on a loaded machine took 30 s
async def test_a_tool_round_trip_over_the_messages_api(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    config = Config(servers=(BuiltinServerConfig(name="ws", builtin="workspace", root=tmp_path),))
    script = [Reply("Let me look.", tool_calls=[Call("ws__read_file", {"path": "notes.txt"})]), Reply("It is 42.")]
    with ScriptedLLM(script) as llm, StateStore(tmp_path / "s.db") as store, anyio.fail_after(120):
        llm_config = LLMConfig(provider="anthropic", base_url=llm.root_url, model="claude-test", api_key="sk-test")
        provider = make_provider(llm_config)
        async with agent_session(config, provider, AgentOptions(catalog=False, store=store, root=tmp_path)) as session:
            result = await session.loop().send("what is in notes.txt?")
    assert (result.text, result.tool_calls, result.usage.total_tokens) == ("It is 42.", 1, 30)
    first, second = llm.requests
    assert "ws (connected" in first["system"]
    assert all(get_profile("anthropic").is_valid(t["name"]) and "input_schema" in t for t in first["tools"])
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    tool_use = second["messages"][1]["content"][1]
    assert (tool_use["type"], tool_use["name"], tool_use["input"]) == (
        "tool_use",
        "ws__read_file",
        {"path": "notes.txt"},
    )
    tool_result = second["messages"][2]["content"][0]
    assert tool_result["tool_use_id"] == tool_use["id"]
    assert tool_result["content"].startswith("the answer is 42")


def test_tool_results_merge_into_one_user_turn_and_errors_are_flagged() -> None:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{oops"}} for i in (1, 2)]
    system, messages = to_anthropic_messages(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "[tool error] nope"},
            {"role": "tool", "tool_call_id": "c2", "content": "fine"},
            {"role": "user", "content": "and now?"},
        ]
    )
    assert system == "be brief"
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0]["input"] == {"invalid_json": "{oops"}
    results = messages[2]["content"]
    assert [b.get("is_error", False) for b in results[:2]] == [True, False]
    assert results[2] == {"type": "text", "text": "and now?"}
