"""Enabling and disabling a server at run time: its connection, its tools, its calls, its events."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import ServerConfig, Settings
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.errors import ServerDisabled, ServerNotConfigured, ServerUnavailable
from mcpmux.manager import Manager, ServerState
from mcpmux.types.events import ListChanged, StateChanged
from tests.manager.conftest import dynamic_server, echo_server, factory, stdio

pytestmark = pytest.mark.anyio


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def manager(**kwargs: object) -> Manager:
    servers = {"web": echo_server("web", "search"), "dyn": dynamic_server("dyn")}
    configs = [stdio("web"), stdio("dyn")]
    return Manager(configs, connection_factory=factory(servers), catalog=False, **kwargs)  # type: ignore[arg-type]


def state(mux: Manager, name: str) -> ServerState:
    return next(s.state for s in mux.status() if s.name == name)


async def test_a_disabled_server_closes_its_connection_and_its_tools_prompts_and_resources_vanish() -> None:
    with anyio.fail_after(20):
        async with manager() as mux:
            assert mux.tools("dyn") and mux.prompts("dyn") and mux.resources("dyn")
            assert await mux.disable("dyn", "disabled by a test") is True
            assert state(mux, "dyn") is ServerState.DISABLED
            assert mux.supervisor("dyn").connection is None
            assert (mux.tools("dyn"), mux.prompts("dyn"), mux.resources("dyn")) == ([], [], [])
            assert [t.name for t in mux.tools()] == ["web:search"]
            assert mux.status()[1].reason == "disabled by a test"
            assert text(await mux.call_tool("web:search", {"text": "x"})) == "web:search:x"  # the others work


async def test_a_call_to_a_disabled_server_says_it_is_disabled_and_how_to_enable_it() -> None:
    with anyio.fail_after(20):
        async with manager() as mux:
            tool = mux.resolve_tool("web:search")
            await mux.disable("web")
            for call in (mux.call_tool("web:search"), mux.call_resolved(tool)):
                with pytest.raises(ServerDisabled) as caught:
                    await call
                assert isinstance(caught.value, ServerUnavailable)  # exit code 3, HTTP 503 like any unavailable one
                assert "disabled at run time" in str(caught.value)
                assert caught.value.hint is not None and "/api/servers/web/enable" in caught.value.hint
            with pytest.raises(ServerDisabled):
                await mux.read_resource("web", "memo://x")
            with pytest.raises(ServerDisabled):
                await mux.restart("web")  # a restart would not start it: enable is the verb
            with pytest.raises(ServerDisabled):
                await mux.refresh("web")


async def test_enabling_starts_the_server_again_and_its_tools_come_back() -> None:
    with anyio.fail_after(20):
        async with manager() as mux:
            pid_before = mux.supervisor("web").connects
            await mux.disable("web")
            assert await mux.enable("web") is True
            assert state(mux, "web") is ServerState.CONNECTED
            assert mux.supervisor("web").connects == pid_before + 1
            assert text(await mux.call_tool("web:search", {"text": "again"})) == "web:search:again"


async def test_disabling_twice_and_enabling_twice_change_nothing_the_second_time() -> None:
    with anyio.fail_after(20):
        async with manager() as mux:
            assert await mux.disable("web") is True
            assert await mux.disable("web") is False
            assert await mux.enable("web") is True
            assert await mux.enable("web") is False
            assert state(mux, "web") is ServerState.CONNECTED


async def test_an_unknown_server_cannot_be_enabled_or_disabled() -> None:
    with anyio.fail_after(20):
        async with manager() as mux:
            with pytest.raises(ServerNotConfigured):
                await mux.disable("nope")
            with pytest.raises(ServerNotConfigured):
                await mux.enable("nope")


async def test_listeners_are_told_the_lists_changed_and_the_state_moved() -> None:
    with anyio.fail_after(20):
        async with manager() as mux, mux.subscribe() as events:
            await mux.disable("dyn")
            seen: list[object] = []
            while not any(isinstance(e, StateChanged) and e.new is ServerState.DISABLED for e in seen):
                seen.append(await events.receive())
            kinds = {e.kind for e in seen if isinstance(e, ListChanged)}
            assert kinds == {"tools", "resources", "prompts"}
            # The lists were emptied before the state said so: a client re-listing on either sees no tools.
            first_state = next(i for i, e in enumerate(seen) if isinstance(e, StateChanged))
            assert all(isinstance(e, ListChanged) for e in seen[:first_state])


async def test_racing_enables_and_disables_end_in_the_last_word_without_hanging() -> None:
    with anyio.fail_after(60):
        async with manager() as mux:
            for _ in range(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(mux.disable, "web")
                    tg.start_soon(mux.enable, "web")
                    tg.start_soon(mux.disable, "web")
                    tg.start_soon(mux.disable, "web")
            await mux.disable("web")
            assert state(mux, "web") is ServerState.DISABLED
            assert mux.tools("web") == []
            await mux.enable("web")
            assert state(mux, "web") is ServerState.CONNECTED
            assert text(await mux.call_tool("web:search", {"text": "ok"})) == "web:search:ok"


async def test_a_disable_during_a_hanging_call_ends_the_call_and_the_server() -> None:
    with anyio.fail_after(30):
        async with manager() as mux:
            failures: list[BaseException] = []

            async def hang() -> None:
                try:
                    await mux.call_tool("dyn:hang")
                except Exception as exc:
                    failures.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(hang)
                await anyio.sleep(0.2)
                await mux.disable("dyn")
            assert failures and state(mux, "dyn") is ServerState.DISABLED


async def test_a_server_disabled_in_its_configuration_can_be_enabled_at_run_time() -> None:
    servers = {"off": echo_server("off", "t")}
    with anyio.fail_after(20):
        async with Manager([stdio("off", enabled=False)], connection_factory=factory(servers), catalog=False) as mux:
            with pytest.raises(ServerDisabled, match="disabled in the configuration"):
                await mux.call_tool("off:t")
            await mux.enable("off")
            assert text(await mux.call_tool("off:t", {"text": "on"})) == "off:t:on"
            await mux.refresh()  # a refresh of everything includes it now
            assert [t.name for t in mux.tools("off")] == ["off:t"]


async def test_a_lazy_server_never_started_can_be_disabled_and_stays_down() -> None:
    servers = {"web": echo_server("web", "search")}
    with anyio.fail_after(20):
        async with Manager([stdio("web")], connection_factory=factory(servers), catalog=False, start=False) as mux:
            await mux.disable("web")
            with pytest.raises(ServerDisabled):
                await mux.call_tool("web:search")
            assert mux.supervisor("web").connects == 0


async def test_a_restart_of_a_server_that_is_not_running_starts_it_once() -> None:
    # Found reading the supervisor: a restart of a server not started yet set the "close the
    # session" interrupt with no session to see it, so the first connection was closed at once
    # and a second child started in its place.
    made: list[str] = []
    inner = factory({"web": echo_server("web", "search"), "dyn": dynamic_server("dyn")})

    def counting(config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        made.append(config.name)
        return inner(config, settings, callbacks)

    configs = [stdio("web"), stdio("dyn")]
    with anyio.fail_after(20):
        async with Manager(configs, connection_factory=counting, catalog=False, start={"web"}) as mux:
            assert made == ["web"] and state(mux, "dyn") is ServerState.CONFIGURED
            await mux.restart("dyn")
            assert (await mux.read_resource("dyn", "memo://greeting")).contents
            await anyio.sleep(1.0)  # a second start, if any, would have begun by now
            assert made == ["web", "dyn"], made
            # A restart of a running server still closes it and starts a new one.
            await mux.restart("dyn")
            assert made == ["web", "dyn", "dyn"]
