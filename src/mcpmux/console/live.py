"""Live updates: server-sent events telling open pages what changed (server states, held calls).

Each event names what changed (``servers`` or ``approvals``); the page re-fetches itself and swaps
its live regions (``static/app.js``). Events carry no data of their own, so nothing leaks through
them, and a slow page loses nothing but intermediate states. A comment every
:data:`HEARTBEAT_S` keeps proxies from closing the stream and notices a gone browser.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from mcpmux.console.sessions import COOKIE

if TYPE_CHECKING:
    from mcpmux.console.context import ConsoleContext

__all__ = ["HEARTBEAT_S", "EventStream"]

logger = logging.getLogger(__name__)

HEARTBEAT_S = 15.0
_BUFFER = 32


class EventStream:
    """``GET /ui/events``: a ``text/event-stream`` for a signed-in browser (ASGI app)."""

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if self.ctx.sessions.get(request.cookies.get(COOKIE)) is None:
            await PlainTextResponse("Sign in first: no console session", status_code=401)(scope, receive, send)
            return
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"x-accel-buffering", b"no")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"retry: 3000\n\n", "more_body": True})
        changes, changed = anyio.create_memory_object_stream[str](_BUFFER)
        async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
            events = await stack.enter_async_context(self.ctx.guard.events())
            tg.start_soon(_forward_states, events, changes.clone())
            if self.ctx.pending is not None:
                held = await stack.enter_async_context(self.ctx.pending.changes())
                tg.start_soon(_forward, held, changes.clone(), "approvals")
            changes.close()
            tg.start_soon(_until_disconnect, receive, tg.cancel_scope)
            await _write(changed, send)
            tg.cancel_scope.cancel()


async def _forward_states(events: MemoryObjectReceiveStream[object], out: MemoryObjectSendStream[str]) -> None:
    async with out:
        async for _ in events:
            _offer(out, "servers")


async def _forward(source: MemoryObjectReceiveStream[str], out: MemoryObjectSendStream[str], name: str) -> None:
    async with out:
        async for _ in source:
            _offer(out, name)


def _offer(out: MemoryObjectSendStream[str], name: str) -> None:
    # A page that is behind re-reads the whole page on the events still queued.
    with contextlib.suppress(anyio.WouldBlock):
        out.send_nowait(name)


async def _until_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _write(changed: MemoryObjectReceiveStream[str], send: Send) -> None:
    while True:
        with anyio.move_on_after(HEARTBEAT_S):
            try:
                name = await changed.receive()
            except anyio.EndOfStream:
                return  # the host is stopping
            await send(
                {"type": "http.response.body", "body": f"event: {name}\ndata: {name}\n\n".encode(), "more_body": True}
            )
            continue
        await send({"type": "http.response.body", "body": b": heartbeat\n\n", "more_body": True})
