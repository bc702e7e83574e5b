"""The manager over in-process servers: namespacing, routing, failures, list_changed, call slots."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer

from mcpmux.config.models import Settings
from mcpmux.errors import Busy, CommandNotFound, ServerUnavailable, ToolNotFound
from mcpmux.manager import Manager, ServerState
from mcpmux.types.events import ListChanged, StateChanged
from tests.manager.conftest import dynamic_server, echo_server, factory, stdio

pytestmark = pytest.mark.anyio


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def manager(servers: dict[str, MCPServer[Any]], *configs: Any, **kwargs: Any) -> Manager:
    configs = configs or tuple(stdio(name) for name in servers)
    return Manager(list(configs), connection_factory=factory(servers), catalog=False, **kwargs)


async def test_tools_of_every_server_are_listed_under_canonical_names_and_routed() -> None:
    servers = {"web": echo_server("web", "search"), "web_scraper": echo_server("web_scraper", "search", "fetch")}
    with anyio.fail_after(10):
        async with manager(servers) as mux:
            names = [t.name for t in mux.tools()]
            assert names == ["web:search", "web_scraper:search", "web_scraper:fetch"]
            assert text(await mux.call_tool("web:search", {"text": "a"})) == "web:search:a"
            assert text(await mux.call_tool("web_scraper:search", {"text": "b"})) == "web_scraper:search:b"
            info = mux.tools("web_scraper")[0]
            assert (info.server, info.tool, info.description) == ("web_scraper", "search", "search of web_scraper")


async def test_an_unknown_tool_suggests_the_closest_names() -> None:
    with anyio.fail_after(10):
        async with manager({"web": echo_server("web", "search")}) as mux:
            with pytest.raises(ToolNotFound) as caught:
                await mux.call_tool("web:serch")
            assert caught.value.suggestions[0] == "web:search"


async def test_one_server_failing_to_start_leaves_the_others_working() -> None:
    servers = {"good": echo_server("good", "ping")}
    with anyio.fail_after(10):
        async with manager(servers, stdio("good"), stdio("broken")) as mux:
            status = {s.name: s for s in mux.status()}
            assert status["good"].state is ServerState.CONNECTED
            assert status["broken"].state is ServerState.FAILED
            assert "not found on PATH" in (status["broken"].last_error or "")
            assert text(await mux.call_tool("good:ping")) == "good:ping:"
            with pytest.raises(ServerUnavailable, match="its tools are unknown"):
                await mux.call_tool("broken:anything")
            # The next call asks for a new start, and gets the evidence, not a timeout.
            with pytest.raises(CommandNotFound):
                await mux.supervisor("broken").connection_for_call()


async def test_prefixes_replace_the_server_name_and_an_empty_prefix_drops_it() -> None:
    servers = {"alpha": echo_server("alpha", "one"), "beta": echo_server("beta", "two")}
    with anyio.fail_after(10):
        async with manager(servers, stdio("alpha", prefix="a"), stdio("beta", prefix="")) as mux:
            assert sorted(t.name for t in mux.tools()) == ["a:one", "two"]
            assert text(await mux.call_tool("two", {"text": "x"})) == "beta:two:x"


async def test_a_shared_namespace_keeps_the_first_server_and_reports_the_conflict() -> None:
    servers = {"first": echo_server("first", "same"), "second": echo_server("second", "same")}
    with anyio.fail_after(10):
        async with manager(servers, stdio("first", prefix=""), stdio("second", prefix="")) as mux:
            assert text(await mux.call_tool("same")) == "first:same:"
            assert mux.registry.conflicts() == {"same": ["first", "second"]}


async def test_list_changed_is_followed_and_announced() -> None:
    with anyio.fail_after(10):
        async with manager({"dyn": dynamic_server("dyn")}) as mux, mux.subscribe() as events:
            assert "dyn:late" not in [t.name for t in mux.tools()]
            await mux.call_tool("dyn:add_tool", {"new_name": "late"})
            async for event in events:
                if isinstance(event, ListChanged):
                    break
            assert event == ListChanged("dyn", "tools")
            assert "dyn:late" in [t.name for t in mux.tools()]
            assert text(await mux.call_tool("dyn:late")) == "new"


async def test_resources_and_prompts_are_reachable_as_tools() -> None:
    with anyio.fail_after(10):
        async with manager({"dyn": dynamic_server("dyn")}) as mux:
            read = next(t for t in mux.tools() if t.name == "dyn:read_resource")
            assert read.synthetic and "memo://greeting" in read.description
            result = await mux.call_tool("dyn:read_resource", {"uri": "memo://greeting"})
            block = result.content[0]
            assert isinstance(block, types.EmbeddedResource)
            assert getattr(block.resource, "text", None) == "hello from resources"
            prompt = await mux.call_tool("dyn:get_prompt", {"name": "review", "arguments": {"code": "x = 1"}})
            assert "Please review: x = 1" in text(prompt)
            assert [p.name for p in mux.prompts()] == ["dyn:review"]
            rendered = await mux.get_prompt("dyn:review", {"code": "y"})
            assert "Please review: y" in str(rendered.messages[0].content)


async def test_calls_beyond_the_slots_and_the_queue_are_refused_as_busy() -> None:
    settings = Settings(max_concurrent_calls=1, max_queued_calls=0)
    with anyio.fail_after(10):
        async with manager({"dyn": dynamic_server("dyn")}, settings=settings) as mux, anyio.create_task_group() as tg:
            tg.start_soon(mux.call_tool, "dyn:hang")
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(Busy, match="1 calls running and 0 queued"):
                await mux.call_tool("dyn:add_tool", {"new_name": "x"})
            tg.cancel_scope.cancel()


async def test_state_changes_are_recorded_with_reasons_and_published() -> None:
    mux = manager({"one": echo_server("one", "t")}, start=False)
    with anyio.fail_after(10):
        async with mux, mux.subscribe() as events:
            assert mux.status()[0].state is ServerState.CONFIGURED
            await mux.refresh("one")
            seen = []
            async for event in events:
                assert isinstance(event, StateChanged)
                seen.append(event.new)
                if event.new is ServerState.CONNECTED:
                    break
            assert seen == [ServerState.STARTING, ServerState.CONNECTED]
            history = [t.state for t in mux.status()[0].history]
            assert history == [ServerState.CONFIGURED, ServerState.STARTING, ServerState.CONNECTED]


async def test_restart_add_and_remove_servers_at_run_time() -> None:
    servers = {"one": echo_server("one", "a"), "two": echo_server("two", "b")}
    with anyio.fail_after(10):
        async with manager(servers, stdio("one")) as mux:
            await mux.add_server(stdio("two"))
            assert text(await mux.call_tool("two:b")) == "two:b:"
            await mux.restart("one")
            assert mux.supervisor("one").restarts == 1
            assert text(await mux.call_tool("one:a")) == "one:a:"
            await mux.remove_server("two")
            assert [t.name for t in mux.tools()] == ["one:a"]
            with pytest.raises(ToolNotFound):
                await mux.call_tool("two:b")


async def test_a_disabled_server_is_never_started() -> None:
    with anyio.fail_after(10):
        async with manager({"off": echo_server("off", "t")}, stdio("off", enabled=False)) as mux:
            assert mux.status()[0].state is ServerState.DISABLED
            with pytest.raises(ServerUnavailable, match="disabled"):
                await mux.supervisor("off").connection_for_call()


async def test_lists_are_relisted_when_their_2026_ttl_hint_expires() -> None:
    from mcp.server import Server, ServerRequestContext

    from mcpmux.connection import Connection
    from tests.connection.servers import in_memory

    listed: list[int] = []

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        listed.append(len(listed))
        tools = [types.Tool(name=f"t{i}", input_schema={"type": "object"}) for i in range(len(listed))]
        return types.ListToolsResult(tools=tools, ttl_ms=50)

    lowlevel: Server[Any] = Server("stateless", on_list_tools=list_tools)

    def connect(config: Any, settings: Settings, callbacks: Any) -> Connection:
        return Connection(config, settings, callbacks=callbacks, transport=lambda: in_memory(lowlevel))

    mux = Manager([stdio("sl", protocol="2026-07-28")], connection_factory=connect, catalog=False)
    with anyio.fail_after(10):
        async with mux, mux.subscribe() as events:
            assert mux.supervisor("sl").connection.protocol_version == "2026-07-28"  # type: ignore[union-attr]
            assert [t.name for t in mux.tools()] == ["sl:t0"]
            async for event in events:  # no list_changed in this era: the ttl (floored to 1 s) drives it
                if isinstance(event, ListChanged):
                    break
            assert [t.name for t in mux.tools()] == ["sl:t0", "sl:t1"]
