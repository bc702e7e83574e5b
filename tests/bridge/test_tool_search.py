"""Too many tools: BM25 search over tools, and the loop loading only what the model searched for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpmux.bridge.loop import AgentLoop
from mcpmux.bridge.providers.openai import OpenAIProvider
from mcpmux.bridge.tool_search import SEARCH_TOOL_NAME, ToolIndex, ToolSelection, estimate_tokens
from mcpmux.bridge.tools import ToolBridge
from mcpmux.config.models import Config, LLMConfig
from mcpmux.manager import Manager
from mcpmux.policy import Guard, StateStore
from mcpmux.provider_names import get_profile
from mcpmux.testing import MockServer
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM
from tests.manager.conftest import factory, stdio

pytestmark = pytest.mark.anyio

VERBS = ("create", "read", "update", "delete", "list", "search", "archive", "export", "import", "sync")
OBJECTS = ("issue", "invoice", "calendar_event", "email", "contact", "file", "ticket", "deploy", "metric", "user")
SERVERS = ("crm", "ops")


PARAMETERS = {
    "type": "object",
    "properties": {
        "target_id": {"type": "string", "default": ""},
        "note": {"type": "string", "default": ""},
        "limit": {"type": "integer", "default": 10},
    },
}


def catalog_server(name: str) -> MockServer:
    """100 tools with realistic descriptions and three parameters each."""
    server = MockServer(name)
    for verb in VERBS:
        for obj in OBJECTS:

            def handler(target_id: str = "", note: str = "", limit: int = 10, verb: str = verb, obj: str = obj) -> str:
                return f"{verb} {obj} {target_id}"  # verb and obj are bound here, not parameters of the tool

            description = (
                f"{verb.capitalize()} a {obj.replace('_', ' ')} in the {name} system. Use it when the user asks "
                f"to {verb} one {obj.replace('_', ' ')} by id; it returns the {obj.replace('_', ' ')} as JSON "
                "with its fields, owner, timestamps and links."
            )
            server.tool(f"{verb}_{obj}", handler, description=description, schema=PARAMETERS)
    return server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


@pytest.fixture
def manager() -> Manager:
    servers = {name: catalog_server(name) for name in SERVERS}
    config = Config(servers=tuple(stdio(name) for name in SERVERS))
    return Manager(config, connection_factory=factory(servers), catalog=False)


def names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


async def test_bm25_ranks_names_and_parameters(manager: Manager, store: StateStore) -> None:
    with anyio.fail_after(30):
        async with manager:
            tools = ToolBridge(Guard(manager, store=store)).tools("openai")
    index = ToolIndex(tools)
    try:
        assert index.search("delete invoice", 3)[0].name == "crm__delete_invoice"
        assert {t.name for t in index.search("calendar event", 20)} >= {"ops__read_calendar_event"}
        assert index.search("target_id", 1)  # parameter names are indexed
        assert index.search("?!", 5) == []
    finally:
        index.close()


async def test_past_the_threshold_the_model_searches_and_gets_the_tools_it_found(
    manager: Manager, store: StateStore
) -> None:
    script = [
        Reply(tool_calls=[Call(SEARCH_TOOL_NAME, {"query": "archive invoice", "limit": 2})]),
        Reply(tool_calls=[Call("crm__archive_invoice", {"target_id": "INV-7"})]),
        Reply("Archived."),
    ]
    with ScriptedLLM(script) as llm, anyio.fail_after(30):
        async with manager:
            selection = ToolSelection(threshold=40, always_load=["ops:list_user"])
            loop = AgentLoop(
                Guard(manager, store=store),
                OpenAIProvider(LLMConfig(base_url=llm.base_url), "m", None),
                selection=selection,
            )
            result = await loop.send("archive invoice INV-7")
            await loop.provider.aclose()
    assert result.text == "Archived."
    first, second, third = llm.requests
    assert names(first) == [SEARCH_TOOL_NAME, "ops__list_user"]
    assert "crm__archive_invoice" in names(second)
    assert len(names(second)) == 4
    assert third["messages"][-1]["content"] == "archive invoice INV-7"
    assert all(get_profile("openai").is_valid(name) for request in llm.requests for name in names(request))


async def test_tool_search_saves_most_tool_definition_tokens_on_200_tools(manager: Manager, store: StateStore) -> None:
    with anyio.fail_after(30):
        async with manager:
            tools = ToolBridge(Guard(manager, store=store)).tools("openai")
    assert len(tools) == 200
    selection = ToolSelection(threshold=40)
    selection.update(tools)
    everything = estimate_tokens(t.to_openai() for t in tools)
    before_search = estimate_tokens(selection.definitions())
    selection.search({"query": "delete invoice"})
    after_search = estimate_tokens(selection.definitions())
    print(
        f"tool tokens (JSON chars / 4), 200 tools: all {everything}, search only {before_search}, "
        f"after one search (8 tools) {after_search}"
    )
    assert before_search < everything * 0.02
    assert after_search < everything * 0.1
