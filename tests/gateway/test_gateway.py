"""The gateway in-process: names, routing, resources, prompts, completion, list_changed, progress, cancel."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcpmux._private.mcp_sdk import lowlevel_server
from mcpmux.config.models import SecurityConfig
from mcpmux.web.caller import stdio_channel
from tests.gateway.conftest import gateway_over, rich_server
from tests.manager.conftest import dynamic_server, echo_server, stdio

pytestmark = pytest.mark.anyio


def text(result: types.CallToolResult | types.ReadResourceResult) -> str:
    if isinstance(result, types.ReadResourceResult):
        return "".join(c.text for c in result.contents if isinstance(c, types.TextResourceContents))
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_tools_are_listed_under_gateway_names_and_calls_are_routed_back() -> None:
    servers = {"web": echo_server("web", "search"), "web_scraper": echo_server("web_scraper", "search", "fetch")}
    with anyio.fail_after(15):
        async with gateway_over(servers) as gateway, Client(gateway.server, mode="legacy") as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            assert names == ["web__search", "web_scraper__fetch", "web_scraper__search"]
            assert text(await client.call_tool("web_scraper__search", {"text": "b"})) == "web_scraper:search:b"
            assert text(await client.call_tool("web__search", {"text": "a"})) == "web:search:a"


async def test_an_empty_prefix_keeps_bare_names_and_the_separator_is_configurable() -> None:
    servers = {"web": echo_server("web", "search"), "time": echo_server("time", "now")}
    configs = (stdio("web", prefix=""), stdio("time"))
    with anyio.fail_after(15):
        async with gateway_over(servers, *configs, separator=".") as gateway, Client(gateway.server) as client:
            assert sorted(t.name for t in (await client.list_tools()).tools) == ["search", "time.now"]
            assert text(await client.call_tool("time.now", {"text": "x"})) == "time:now:x"


async def test_an_unknown_tool_is_a_protocol_error_and_a_denied_tool_is_neither_listed_nor_called() -> None:
    servers = {"fs": echo_server("fs", "read", "delete")}
    security = SecurityConfig(pinning="off", denied_tools=("fs:delete",))
    with anyio.fail_after(15):
        async with gateway_over(servers, security=security) as gateway, Client(gateway.server) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["fs__read"]
            with pytest.raises(MCPError, match="fs__delete"):
                await client.call_tool("fs__delete", {})
            rows = gateway.guard.audit.query()
            assert rows == [] or all(r.caller for r in rows)


async def test_the_audit_row_names_the_downstream_client() -> None:
    servers = {"fs": echo_server("fs", "read")}
    info = types.Implementation(name="inspector", version="9.9")
    with anyio.fail_after(15):
        async with gateway_over(servers) as gateway, Client(gateway.server, mode="legacy", client_info=info) as client:
            await client.call_tool("fs__read", {"text": "x"})
            rows = gateway.guard.audit.query()
            assert [(r.caller, r.name, r.outcome) for r in rows] == [("inspector/9.9", "fs:read", "ok")]


async def test_colliding_resource_uris_are_wrapped_per_server_and_read_back() -> None:
    servers = {"a": rich_server("a"), "b": rich_server("b")}
    with anyio.fail_after(15):
        async with gateway_over(servers) as gateway, Client(gateway.server, mode="legacy") as client:
            uris = sorted(r.uri for r in (await client.list_resources()).resources)
            assert uris == ["mcpmux://a/memo%3A%2F%2Fgreeting", "mcpmux://b/memo%3A%2F%2Fgreeting"]
            assert text(await client.read_resource("mcpmux://b/memo%3A%2F%2Fgreeting")) == "hello from b"
            templates = sorted(t.uri_template for t in (await client.list_resource_templates()).resource_templates)
            assert templates == ["a://notes/{topic}", "b://notes/{topic}"]
            assert text(await client.read_resource("b://notes/cats")) == "b notes on cats"
            with pytest.raises(MCPError, match="nowhere"):
                await client.read_resource("nowhere://x")


async def test_a_unique_resource_uri_is_kept_as_it_is() -> None:
    with anyio.fail_after(15):
        async with gateway_over({"a": rich_server("a")}) as gateway, Client(gateway.server) as client:
            assert [r.uri for r in (await client.list_resources()).resources] == ["memo://greeting"]
            assert text(await client.read_resource("memo://greeting")) == "hello from a"


async def test_prompts_are_namespaced_rendered_and_completed() -> None:
    servers = {"a": rich_server("a"), "b": rich_server("b")}
    with anyio.fail_after(15):
        async with gateway_over(servers) as gateway, Client(gateway.server, mode="legacy") as client:
            assert sorted(p.name for p in (await client.list_prompts()).prompts) == ["a__review", "b__review"]
            prompt = await client.get_prompt("b__review", {"code": "x = 1"})
            message = prompt.messages[0].content
            assert isinstance(message, types.TextContent) and message.text == "b please review: x = 1"
            done = await client.complete(types.PromptReference(name="a__review"), {"name": "code", "value": "x"})
            assert done.completion.values == ["a-x-1", "a-x-2"]
            ref = types.ResourceTemplateReference(uri="b://notes/{topic}")
            done = await client.complete(ref, {"name": "topic", "value": "c"})
            assert done.completion.values == ["b-c-1", "b-c-2"]


async def test_capabilities_follow_what_the_upstreams_have() -> None:
    with anyio.fail_after(15):
        async with gateway_over({"web": echo_server("web", "search")}) as gw, Client(gw.server, mode="legacy") as c:
            caps = c.session.initialize_result.capabilities  # type: ignore[union-attr]
            assert caps.tools is not None and caps.tools.list_changed
            assert caps.completions is None and caps.logging is None
        async with gateway_over({"a": rich_server("a")}) as gateway, Client(gateway.server, mode="legacy") as client:
            caps = client.session.initialize_result.capabilities  # type: ignore[union-attr]
            assert caps.prompts is not None and caps.resources is not None and caps.completions is not None


async def test_capabilities_are_worked_out_again_for_each_client_as_upstreams_arrive() -> None:
    with anyio.fail_after(15):
        async with gateway_over({"web": echo_server("web", "search"), "a": rich_server("a")}, stdio("web")) as gateway:
            async with Client(gateway.server, mode="legacy") as early:
                caps = early.session.initialize_result.capabilities  # type: ignore[union-attr]
                assert caps.completions is None and caps.logging is None  # web has neither
            await gateway.guard.manager.add_server(stdio("a"))
            async with Client(gateway.server, mode="legacy") as late:
                caps = late.session.initialize_result.capabilities  # type: ignore[union-attr]
                assert caps.completions is not None  # a completes prompt arguments
                assert caps.resources is not None and caps.resources.subscribe is False  # nobody subscribes
                assert [p.name for p in (await late.list_prompts()).prompts] == ["a__review"]
                ref = types.PromptReference(name="a__review")
                completed = await late.complete(ref, {"name": "code", "value": "x"})
                assert completed.completion.values == ["a-x-1", "a-x-2"]


async def test_while_upstreams_start_every_capability_is_offered_and_lists_wait_only_for_the_grace() -> None:
    with anyio.fail_after(15):
        async with gateway_over({"web": echo_server("web", "search")}) as gateway:
            attempted = anyio.Event()
            gateway.starting(attempted, grace_s=0.01)
            async with Client(gateway.server, mode="legacy") as early:
                caps = early.session.initialize_result.capabilities  # type: ignore[union-attr]
                assert caps.completions is not None and caps.logging is not None  # web has neither, but it might
                assert [t.name for t in (await early.list_tools()).tools] == ["web__search"]  # after the grace
            attempted = anyio.Event()
            gateway.starting(attempted, grace_s=60)
            async with Client(gateway.server, mode="legacy") as client, anyio.create_task_group() as tg:
                listed: list[str] = []

                async def list_tools() -> None:
                    listed.extend(t.name for t in (await client.list_tools()).tools)

                tg.start_soon(list_tools)
                await anyio.wait_all_tasks_blocked()
                assert listed == []  # waiting for the first attempts, not for the 60 s
                attempted.set()
            assert listed == ["web__search"]
            async with Client(gateway.server, mode="legacy") as late:
                caps = late.session.initialize_result.capabilities  # type: ignore[union-attr]
                assert caps.completions is None and caps.logging is None


async def test_list_changed_from_an_upstream_reaches_the_downstream_client() -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(15):
        async with (
            gateway_over({"dyn": dynamic_server("dyn")}) as gateway,
            Client(gateway.server, mode="legacy", message_handler=on_message) as client,
        ):
            await client.call_tool("dyn__add_tool", {"new_name": "fresh"})
            await changed.wait()
            assert "dyn__fresh" in [t.name for t in (await client.list_tools()).tools]


async def test_progress_notifications_pass_through_a_call() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(15):
        async with gateway_over({"a": rich_server("a")}) as gateway, Client(gateway.server, mode="legacy") as client:
            result = await client.call_tool("a__slow", {"steps": 3}, progress_callback=on_progress)
            assert text(result) == "a: done"
            assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_cancelling_a_downstream_call_cancels_the_upstream_call(mode: Any) -> None:
    # A stateless-era client that can be asked things runs its call parked in the gateway: leaving
    # the round must cancel it all the same.
    cancelled = anyio.Event()

    async def never_asked(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("nothing is asked here")

    with anyio.fail_after(15):
        async with (
            gateway_over({"a": rich_server("a", cancelled)}) as gateway,
            Client(gateway.server, mode=mode, elicitation_callback=never_asked) as client,
        ):
            with anyio.move_on_after(0.5):
                await client.call_tool("a__hang", {})
            await cancelled.wait()
            rows = gateway.guard.audit.query()
            assert [r.outcome for r in rows] == ["cancelled"]
            assert gateway._parked._calls == {}


async def test_list_changed_reaches_a_stateless_era_client_through_subscriptions_listen() -> None:
    with anyio.fail_after(15):
        async with (
            gateway_over({"dyn": dynamic_server("dyn")}) as gateway,
            Client(gateway.server, mode="2026-07-28") as client,
            client.listen(tools_list_changed=True) as events,
        ):
            await client.call_tool("dyn__add_tool", {"new_name": "later"})
            async for _event in events:
                break
            assert "dyn__later" in [t.name for t in (await client.list_tools()).tools]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sampling_and_elicitation_from_an_upstream_reach_the_downstream_client(mode: Any) -> None:
    # A handshake-era client is asked on its channel; a stateless-era one through input_required rounds.
    from tests.gateway.conformance_fixture import server as fixture

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="four"), model="m")

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "a@b.c"})

    with anyio.fail_after(15):
        async with gateway_over({"fx": fixture}) as gateway:
            async with Client(gateway.server, mode=mode, sampling_callback=sampling,
                              elicitation_callback=elicitation) as client:  # fmt: skip
                result = await client.call_tool("fx__test_sampling", {"prompt": "2+2?"})
                assert text(result) == "LLM response: four"
                result = await client.call_tool("fx__test_elicitation", {"message": "who?"})
                assert text(result) == 'User response: action=accept, content={"username": "ada", "email": "a@b.c"}'
            async with Client(gateway.server, mode=mode) as client:
                with pytest.raises(MCPError, match="the downstream client cannot answer it"):
                    await client.call_tool("fx__test_sampling", {"prompt": "2+2?"})
            assert gateway._parked._calls == {}


async def test_a_parked_call_is_resumed_only_by_its_caller_with_its_own_state() -> None:
    from mcpmux.gateway.stateless import ParkedCall, ParkedCalls

    class _Session:
        def check_client_capability(self, wanted: types.ClientCapabilities) -> bool:
            return True

    class _Ctx:
        session = _Session()

    calls = ParkedCalls()
    call = ParkedCall(_Ctx(), "token:alice")  # type: ignore[arg-type]
    calls.add(call)
    assert calls.resume(call.state, "token:alice") is call
    assert calls.resume(call.state, "token:bob") is None
    assert calls.resume(call.state.replace("token:alice", "token:bob"), "token:bob") is None
    assert calls.resume("call:guessed:token:alice", "token:alice") is None
    calls.done(call)
    assert calls.resume(call.state, "token:alice") is None


async def test_upstream_log_messages_reach_the_downstream_client_under_the_server_name() -> None:
    logged: list[types.LoggingMessageNotificationParams] = []
    got = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)
        got.set()

    with anyio.fail_after(15):
        async with (
            gateway_over({"a": rich_server("a")}) as gateway,
            Client(gateway.server, mode="legacy", logging_callback=on_log) as client,
        ):
            assert text(await client.call_tool("a__noisy", {})) == "logged"
            await got.wait()
    assert [(p.level, p.logger, p.data) for p in logged] == [("warning", "a.core", "careful")]


async def test_approval_is_asked_of_the_downstream_client_by_elicitation() -> None:
    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "yes"})

    security = SecurityConfig(pinning="off", require_approval=True)
    with anyio.fail_after(15):
        async with gateway_over({"fs": echo_server("fs", "write")}, security=security) as gateway:
            with stdio_channel():  # a client that may approve: the local one that started the gateway
                async with Client(gateway.server, mode="legacy", elicitation_callback=approve) as client:
                    assert text(await client.call_tool("fs__write", {"text": "x"})) == "fs:write:x"
            async with Client(gateway.server, mode="legacy", elicitation_callback=approve) as client:
                refused = await client.call_tool("fs__write", {"text": "z"})
                assert refused.is_error and "this caller may not approve" in text(refused)
            with stdio_channel():
                async with Client(gateway.server, mode="legacy") as client:
                    refused = await client.call_tool("fs__write", {"text": "y"})
                    assert refused.is_error and "declined" in text(refused)
            decisions = [(r.decision, r.outcome) for r in gateway.guard.audit.query()]
    assert len(asked) == 1 and "Allow fs:write" in asked[0]
    assert sorted(decisions) == [("asked", "ok"), ("denied", "refused"), ("denied", "refused")]


async def test_a_stateless_era_client_is_asked_for_approval_with_an_input_required_result() -> None:
    asked: list[str] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        decision = "yes" if '"x"' in params.message else "no"
        return types.ElicitResult(action="accept", content={"decision": decision})

    security = SecurityConfig(pinning="off", require_approval=True)
    with anyio.fail_after(15):
        async with gateway_over({"fs": echo_server("fs", "write")}, security=security) as gateway:
            with stdio_channel():
                async with Client(gateway.server, mode="2026-07-28", elicitation_callback=approve) as client:
                    assert text(await client.call_tool("fs__write", {"text": "x"})) == "fs:write:x"
                    refused = await client.call_tool("fs__write", {"text": "y"})
                    assert refused.is_error and "declined" in text(refused)
                async with Client(gateway.server, mode="2026-07-28") as client:
                    unasked = await client.call_tool("fs__write", {"text": "x"})
                    assert unasked.is_error and "declined" in text(unasked)
            decisions = [(r.decision, r.outcome) for r in gateway.guard.audit.query()]
    assert len(asked) == 2 and all("Allow fs:write" in question for question in asked)
    assert sorted(decisions) == [("asked", "ok"), ("denied", "refused"), ("denied", "refused")]


async def test_a_forged_or_foreign_request_state_is_refused() -> None:
    from mcp.client.session import ClientSession

    security = SecurityConfig(pinning="off", require_approval=True)
    yes = {"mcpmux-1": {"action": "accept", "content": {"decision": "yes"}}}
    with anyio.fail_after(15):
        async with (
            gateway_over({"fs": echo_server("fs", "write")}, security=security) as gateway,
            Client(gateway.server, mode="2026-07-28") as client,
        ):
            session: ClientSession = client.session
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await session.call_tool(
                    "fs__write", {"text": "x"}, input_responses=yes, request_state="call:guessed:",
                    allow_input_required=True,
                )  # fmt: skip
            assert gateway.guard.audit.query() == []


async def test_resource_update_notifications_use_the_uri_the_client_knows() -> None:
    with anyio.fail_after(15):
        async with gateway_over({"a": rich_server("a"), "b": rich_server("b")}) as gateway:
            surface = gateway.surface
            assert surface.downstream_uri("b", "memo://greeting") == "mcpmux://b/memo%3A%2F%2Fgreeting"
            assert surface.downstream_uri("a", "a://notes/x") == "a://notes/x"


def watched_server(calls: list[str]) -> MCPServer[Any]:
    """One resource, subscribe/unsubscribe recorded in ``calls``, and a tool that reports it updated."""
    server: MCPServer[Any] = MCPServer("w")

    @server.resource("memo://doc", name="doc")
    def doc() -> str:
        return "text"

    @server.tool()
    async def touch(ctx: Context) -> str:
        """Report memo://doc updated."""
        params = types.ResourceUpdatedNotificationParams(uri="memo://doc")
        await ctx.session.send_notification(types.ResourceUpdatedNotification(params=params))
        return "touched"

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        calls.append(f"subscribe {params.uri}")
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        calls.append(f"unsubscribe {params.uri}")
        return types.EmptyResult()

    lowlevel_server(server).add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel_server(server).add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    return server


async def test_resource_subscriptions_are_shared_upstream_and_updates_reach_only_subscribers() -> None:
    calls: list[str] = []
    sink, updates = anyio.create_memory_object_stream[str](16)

    def handler(name: str) -> Any:
        async def on_message(message: object) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                sink.send_nowait(name)

        return on_message

    async def touched(client: Client, expected: int) -> list[str]:
        """Who was told of the update that ``client`` triggers (``expected`` notifications, no more)."""
        await client.call_tool("w__touch", {})
        names = sorted([await updates.receive() for _ in range(expected)])
        await client.call_tool("w__touch", {})
        names2 = sorted([await updates.receive() for _ in range(expected)])
        assert names == names2 and updates.statistics().current_buffer_used == 0
        return names

    unsubscribe = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri="memo://doc"))
    with anyio.fail_after(20):
        async with (
            sink,
            updates,
            gateway_over({"w": watched_server(calls)}) as gateway,
            Client(gateway.server, mode="legacy", message_handler=handler("a")) as a,
            Client(gateway.server, mode="legacy", message_handler=handler("b")) as b,
            Client(gateway.server, mode="legacy", message_handler=handler("c")) as c,
        ):
            assert (await a.list_resources()).resources[0].uri == "memo://doc"
            for client in (a, b):
                subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri="memo://doc"))
                await client.session.send_request(subscribe, types.EmptyResult)
            assert calls == ["subscribe memo://doc"]
            assert await touched(c, 2) == ["a", "b"]
            await a.session.send_request(unsubscribe, types.EmptyResult)
            assert calls == ["subscribe memo://doc"]
            assert await touched(c, 1) == ["b"]
            await b.session.send_request(unsubscribe, types.EmptyResult)
            assert calls == ["subscribe memo://doc", "unsubscribe memo://doc"]


async def test_the_sdk_span_per_request_is_kept_only_when_opentelemetry_is_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.trace import NoOpTracerProvider

    from mcpmux._private.mcp_sdk import OpenTelemetryMiddleware
    from mcpmux.gateway import server as gateway_server

    def spans(gateway: Any) -> int:
        return sum(isinstance(m, OpenTelemetryMiddleware) for m in gateway.server.middleware)

    async with gateway_over({"web": echo_server("web", "search")}) as gateway:
        assert spans(gateway) == 0
    monkeypatch.setattr(gateway_server, "get_tracer_provider", NoOpTracerProvider)
    async with gateway_over({"web": echo_server("web", "search")}) as gateway:
        assert spans(gateway) == 1


async def test_an_unknown_resource_or_prompt_is_named_as_such_with_the_closest_names() -> None:
    with anyio.fail_after(15):
        async with gateway_over({"a": rich_server("a")}) as gateway, Client(gateway.server, mode="legacy") as client:
            expected = r"no resource named 'memo://greetings'; did you mean 'memo://greeting'"
            with pytest.raises(MCPError, match=expected) as read:
                await client.read_resource("memo://greetings")
            assert read.value.error.code == -32002  # 2025-11-25: "resource not found"
            assert read.value.error.data == {"uri": "memo://greetings"}
        async with gateway_over({"a": rich_server("a")}) as gw, Client(gw.server, mode="2026-07-28") as client:
            with pytest.raises(MCPError, match=expected) as read:
                await client.read_resource("memo://greetings")
            assert read.value.error.code == types.INVALID_PARAMS  # 2026-07-28, SEP-2164
            assert read.value.error.data == {"uri": "memo://greetings"}
            with pytest.raises(MCPError, match=r"no prompt named 'a__reveiw'; did you mean 'a__review'"):
                await client.get_prompt("a__reveiw", {"code": "x"})
