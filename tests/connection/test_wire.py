"""Paging, deadlines, cancellation on the wire, error mapping, callbacks and notifications."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Settings
from mcpmux.connection import MAX_PAGES, ClientCallbacks, ListKind
from mcpmux.errors import MCPTimeoutError, ProtocolError, ServerError
from tests.connection.lowlevel import BEHAVIOURS, TOOL_COUNT, Recorder, paged_server
from tests.connection.servers import Wire, config, connect, everything_server, initialize_reply, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]


def _cancels(wire: Wire) -> list[dict[str, Any]]:
    return [m for m in wire if m.get("method") == "notifications/cancelled"]


def _call_ids(wire: Wire, tool: str) -> list[Any]:
    return [m["id"] for m in wire if m.get("method") == "tools/call" and m["params"]["name"] == tool]


async def test_every_list_follows_every_page() -> None:
    wire: Wire = []
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder()), wire=wire) as conn:
            tools = await conn.list_tools()
            resources = await conn.list_resources()
            templates = await conn.list_resource_templates()
            prompts = await conn.list_prompts()
    assert [t.name for t in tools] == [f"t{i}" for i in range(TOOL_COUNT)] + list(BEHAVIOURS)
    assert len(resources) == len(templates) == len(prompts) == TOOL_COUNT
    assert sum(1 for m in wire if m.get("method") == "tools/list") == 6


async def test_a_listing_that_never_ends_is_a_protocol_error() -> None:
    pages = 0

    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal pages
        if message.get("method") == "initialize":
            return initialize_reply(message)
        if message.get("method") == "tools/list":
            pages += 1
            return {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [], "nextCursor": f"c{pages}"}}
        return None

    from mcpmux.connection import Connection

    with anyio.fail_after(5):
        async with Connection(config(), Settings(), transport=lambda: scripted(answer)) as conn:
            with pytest.raises(ProtocolError, match=f"after {MAX_PAGES} pages"):
                await conn.list_tools()
    assert pages == MAX_PAGES


@pytest.mark.parametrize("listed_first", [False, True], ids=["unlisted", "listed"])
async def test_a_deadline_raises_mcp_timeout_and_cancels_the_request_on_the_wire(listed_first: bool) -> None:
    wire: Wire = []
    recorder = Recorder()
    with anyio.fail_after(5):
        async with connect(paged_server(recorder), wire=wire) as conn:
            if listed_first:  # a listed tool takes the hot path, where the SDK request holds the deadline
                await conn.list_tools()
            with pytest.raises(MCPTimeoutError) as caught:
                await conn.call_tool("hang", {}, timeout=0.2)
            await conn.ping()  # the session survives a timed-out call
    assert isinstance(caught.value, TimeoutError)
    assert (caught.value.server, caught.value.operation, caught.value.timeout_s) == ("mem", "tools/call", 0.2)
    assert [c["params"]["requestId"] for c in _cancels(wire)] == _call_ids(wire, "hang")


async def test_the_server_default_deadline_applies_when_the_call_gives_none() -> None:
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder()), timeout_ms=150) as conn:
            with pytest.raises(MCPTimeoutError) as caught:
                await conn.call_tool("hang", {})
    assert caught.value.timeout_s == pytest.approx(0.15)


async def test_a_caller_cancellation_cancels_the_request_on_the_wire_and_stops_the_handler() -> None:
    wire: Wire = []
    recorder = Recorder()
    with anyio.fail_after(5):
        async with connect(paged_server(recorder), wire=wire) as conn:
            async with anyio.create_task_group() as tg:
                tg.start_soon(conn.call_tool, "hang", {})
                await recorder.hanging.wait()
                tg.cancel_scope.cancel()
            await conn.ping()
    assert [c["params"]["requestId"] for c in _cancels(wire)] == _call_ids(wire, "hang")
    assert recorder.cancelled == [str(i) for i in _call_ids(wire, "hang")]


async def test_a_json_rpc_error_keeps_code_message_and_data() -> None:
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder())) as conn:
            with pytest.raises(ServerError) as caught:
                await conn.call_tool("reject", {})
    error = caught.value
    assert (error.server, error.method, error.code) == ("mem", "tools/call", types.INVALID_PARAMS)
    assert (error.error_message, error.data) == ("bad argument", {"field": "x"})


async def test_server_requests_are_answered_by_the_callbacks() -> None:
    recorder = Recorder()
    asked: list[tuple[str, str]] = []

    async def sampling(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append((server, "sampling"))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="4"), model="m")

    async def elicitation(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            asked.append((server, f"url {params.url}"))
            return types.ElicitResult(action="accept")
        asked.append((server, "form"))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(server: str) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv", name="srv")])

    callbacks = ClientCallbacks(sampling=sampling, elicitation=elicitation, roots=roots)
    with anyio.fail_after(5):
        async with connect(paged_server(recorder), callbacks=callbacks) as conn:
            for tool in ("sample", "elicit_form", "elicit_url", "roots"):
                assert not (await conn.call_tool(tool, {})).is_error
    assert asked == [("mem", "sampling"), ("mem", "form"), ("mem", "url https://example.invalid/login")]
    assert recorder.answers["sample"].content.text == "4"
    assert recorder.answers["elicit_form"].content == {"name": "Ada"}
    assert recorder.answers["elicit_url"].action == "accept"
    assert str(recorder.answers["roots"].roots[0].uri) == "file:///srv"


async def test_without_callbacks_the_server_is_told_the_feature_is_not_supported() -> None:
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder())) as conn:
            assert conn.info.capabilities is not None
            with pytest.raises(ServerError, match="Sampling not supported"):
                await conn.call_tool("sample", {})


async def test_a_raising_callback_becomes_an_error_answer_not_a_dead_session() -> None:
    async def sampling(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        raise RuntimeError("no model configured")

    with anyio.fail_after(5):
        async with connect(paged_server(Recorder()), callbacks=ClientCallbacks(sampling=sampling)) as conn:
            with pytest.raises(ServerError, match="no model configured"):
                await conn.call_tool("sample", {})
            await conn.ping()


async def test_notifications_reach_their_handlers_and_the_server_logger(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    all_seen = anyio.Event()

    def note(event: str) -> None:
        seen.append(event)
        if len(seen) == 5:
            all_seen.set()

    async def on_log(server: str, params: types.LoggingMessageNotificationParams) -> None:
        note(f"log {params.level} {params.data}")

    async def on_list_changed(server: str, kind: ListKind) -> None:
        note(f"changed {kind}")

    async def on_resource_updated(server: str, uri: str) -> None:
        note(f"updated {uri}")

    callbacks = ClientCallbacks(on_log=on_log, on_list_changed=on_list_changed, on_resource_updated=on_resource_updated)
    caplog.set_level(logging.INFO, logger="mcpmux.server.mem")
    with anyio.fail_after(5):
        async with connect(paged_server(Recorder()), callbacks=callbacks) as conn:
            await conn.call_tool("notify", {})
            await all_seen.wait()
    assert sorted(seen) == sorted(
        ["log warning disk almost full", "changed tools", "changed resources", "changed prompts", "updated r://1"]
    )
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name == "mcpmux.server.mem"] == [
        ("mcpmux.server.mem", logging.WARNING, "disk almost full")
    ]


async def test_progress_reaches_the_call_and_the_connection_observer() -> None:
    per_call: list[tuple[float, float | None, str | None]] = []
    observed: list[float] = []
    both = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        per_call.append((progress, total, message))

    async def observer(server: str, params: types.ProgressNotificationParams) -> None:
        observed.append(params.progress)
        if len(observed) == 2:
            both.set()

    with anyio.fail_after(5):
        async with connect(everything_server(), callbacks=ClientCallbacks(on_progress=observer)) as conn:
            result = await conn.call_tool("progress", {}, on_progress=on_progress)
            await both.wait()
    assert not result.is_error
    assert sorted(per_call) == [(1.0, 2.0, "half"), (2.0, 2.0, "done")]
    assert sorted(observed) == [1.0, 2.0]
