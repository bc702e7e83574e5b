"""``host.add_tools``: Python functions as guarded tools of the host, through every face."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from pydantic import BaseModel, Field

from mcpmux import Host
from mcpmux.config.models import Config, SecurityConfig
from mcpmux.errors import ConfigError, InvalidArguments, ToolDenied, UsageError
from mcpmux.policy import StateStore

pytestmark = pytest.mark.anyio


class Order(BaseModel):
    """An order to price."""

    item: str = Field(description="what is ordered")
    quantity: int = 1


class Price(BaseModel):
    item: str
    total: float


def add(a: int, b: int = 1) -> int:
    """Add two numbers.

    Args:
        a: the first number.
        b: the number to add to it.
    """
    return a + b


async def price(order: Order) -> Price:
    """Price an order (async, a pydantic model in and out)."""
    await anyio.lowlevel.checkpoint()
    return Price(item=order.item, total=2.5 * order.quantity)


def price_noted(order: Order, note: str) -> Price:
    """Price an order with a note (a model beside another parameter)."""
    return Price(item=f"{order.item} ({note})", total=2.5 * order.quantity)


def delete_everything(confirm: bool) -> str:
    """Delete every order."""
    return "deleted"


def broken(reason: str) -> str:
    """Fail on purpose."""
    raise RuntimeError(f"the ledger is locked: {reason}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_functions_join_a_started_host_with_schemas_from_hints_and_docstrings(store: StateStore) -> None:
    with anyio.fail_after(30):
        async with Host(Config(), store=store, catalog=False) as host:
            await host.add_tools([add, price])
            tools = {t.name: t for t in host.tools()}
            assert {"python:add", "python:price"} <= tools.keys()
            schema = tools["python:add"].input_schema
            assert schema["properties"]["a"]["description"] == "the first number."
            assert schema["properties"]["b"]["default"] == 1 and schema["required"] == ["a"]
            assert tools["python:add"].description == "Add two numbers."
            assert text(await host.call_tool("python:add", {"a": 2, "b": 3})) == "5"
            # One pydantic model as the only parameter: its fields are the tool's arguments.
            flat = tools["python:price"].input_schema
            assert set(flat["properties"]) == {"item", "quantity"} and flat["required"] == ["item"]
            assert flat["properties"]["quantity"]["default"] == 1
            assert flat["properties"]["item"]["description"] == "what is ordered"
            priced = await host.call_tool("python:price", {"item": "tea", "quantity": 4})
            assert priced.structured_content == {"item": "tea", "total": 10.0}
            assert tools["python:price"].output_schema is not None
            with pytest.raises(InvalidArguments, match="argument 'quantity'"):
                await host.call_tool("python:price", {"item": "tea", "quantity": "many"})
            # Beside other parameters, a model stays nested under its parameter's name.
            await host.add_tools([price_noted], server="more")
            nested = next(t for t in host.tools() if t.name == "more:price_noted").input_schema
            assert set(nested["properties"]) == {"order", "note"}
            noted = await host.call_tool("more:price_noted", {"order": {"item": "tea"}, "note": "rush"})
            assert noted.structured_content == {"item": "tea (rush)", "total": 2.5}


async def test_functions_added_before_start_start_with_the_host(store: StateStore) -> None:
    host = Host(Config(), store=store, catalog=False)
    await host.add_tools([add], server="calc")
    with anyio.fail_after(30):
        async with host:
            assert text(await host.call_tool("calc:add", {"a": 1})) == "2"


async def test_an_exception_in_a_function_is_a_tool_error_with_its_message(store: StateStore) -> None:
    with anyio.fail_after(30):
        async with Host(Config(), store=store, catalog=False) as host:
            await host.add_tools([broken])
            result = await host.call_tool("python:broken", {"reason": "audit"})
            assert result.is_error and "the ledger is locked: audit" in text(result)
            rows = host.audit.query(server="python")
            assert rows[0].outcome == "tool-error"


async def test_policy_rules_deny_a_function_like_any_tool(store: StateStore) -> None:
    config = Config(security=SecurityConfig(denied_tools=("python:delete_*",)))
    with anyio.fail_after(30):
        async with Host(config, store=store, catalog=False) as host:
            await host.add_tools([add, delete_everything])
            assert "python:delete_everything" not in [t.name for t in host.tools()]
            with pytest.raises(ToolDenied):
                await host.call_tool("python:delete_everything", {"confirm": True})


async def test_strict_pinning_does_not_hold_back_the_programs_own_functions(store: StateStore) -> None:
    config = Config(security=SecurityConfig(pinning="strict"))
    with anyio.fail_after(30):
        async with Host(config, store=store, catalog=False) as host:
            await host.add_tools([add])
            assert text(await host.call_tool("python:add", {"a": 1})) == "2"


async def test_nameless_or_clashing_functions_and_taken_names_are_refused(store: StateStore) -> None:
    async with Host(Config(), store=store, catalog=False) as host:
        with pytest.raises(UsageError, match="no name"):
            await host.add_tools([lambda: 1])
        with pytest.raises(UsageError, match="two functions"):
            await host.add_tools([add, add])
        with pytest.raises(UsageError, match="not a server name"):
            await host.add_tools([add], server="Bad Name")
        await host.add_tools([add])
        with pytest.raises(ConfigError, match="already exists"):
            await host.add_tools([price])


async def test_functions_are_served_by_the_gateway_over_http_to_an_sdk_client_under_the_rules(
    store: StateStore,
) -> None:
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from mcpmux.gateway.http import HttpOptions
    from mcpmux.serve.run import ServeOptions, serve

    announced: list[str] = []
    ready = anyio.Event()

    def announce(line: str) -> None:
        announced.append(line)
        if line.startswith("serving http://"):
            ready.set()

    config = Config(security=SecurityConfig(denied_tools=("python:delete_*",)))
    options = ServeOptions(
        http=HttpOptions(host="127.0.0.1", port=0), functions=(add, price, broken, delete_everything)
    )
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve(config, options, store=store, announce=announce))
            await ready.wait()
            url = announced[-1].removeprefix("serving ")
            async with Client(url, mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == {"python__add", "python__price", "python__broken"}
                assert text(await client.call_tool("python__add", {"a": 40, "b": 2})) == "42"
                priced = await client.call_tool("python__price", {"item": "tea"})
                assert priced.structured_content == {"item": "tea", "total": 2.5}
                failed = await client.call_tool("python__broken", {"reason": "x"})
                assert failed.is_error and "RuntimeError: the ledger is locked: x" in text(failed)
                with pytest.raises(MCPError, match="no tool named 'python__delete_everything'"):
                    await client.call_tool("python__delete_everything", {"confirm": True})  # denied: never listed
            tg.cancel_scope.cancel()
    rows = [(r.tool, r.outcome) for r in store_rows(store)]
    assert ("add", "ok") in rows and ("broken", "tool-error") in rows and ("delete_everything", "ok") not in rows


def store_rows(store: StateStore) -> list[Any]:
    from mcpmux.policy import AuditLog

    return AuditLog(store).query(server="python")


async def test_the_agent_loop_calls_functions_through_the_guard(store: StateStore) -> None:
    from mcpmux.bridge.loop import AgentLoop
    from mcpmux.bridge.providers import make_provider
    from mcpmux.config.models import LLMConfig
    from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM

    script = [Reply(tool_calls=[Call("python__add", {"a": 1, "b": 2})]), Reply("three")]
    with ScriptedLLM(script) as llm, anyio.fail_after(60):
        async with Host(Config(), store=store, catalog=False, face="chat") as host:
            await host.add_tools([add])
            provider = make_provider(LLMConfig(base_url=llm.base_url, model="m", api_key="k"))
            try:
                result = await AgentLoop(host, provider).send("add 1 and 2")
            finally:
                await provider.aclose()
        assert result.text == "three"
        assert llm.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": "3"}
