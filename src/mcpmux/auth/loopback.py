"""The loopback redirect of a login (RFC 8252 section 7.3): one HTTP listener on 127.0.0.1.

The authorization server sends the browser to ``http://127.0.0.1:PORT/callback?code=...&state=...``;
the listener answers with a short page and hands the query to the login. Nothing but that one path
is served, and only on the loopback address.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectSendStream

__all__ = ["CALLBACK_PATH", "LoopbackRedirect", "parse_redirect"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
MAX_REQUEST_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>mcpmux</title>"
    "<p>{message} You can close this window and return to the terminal.</p>"
)


def parse_redirect(url_or_query: str) -> dict[str, str]:
    """The parameters of a redirect: a full URL pasted by a person, or the query of a request line."""
    query = urlsplit(url_or_query.strip()).query if "?" in url_or_query else url_or_query.strip()
    return {key: values[0] for key, values in parse_qs(query).items() if values}


@dataclass
class LoopbackRedirect:
    """A running listener: ``redirect_uri`` to register, ``results`` yields each callback's parameters."""

    redirect_uri: str
    results: anyio.abc.ObjectReceiveStream[dict[str, str]]

    @classmethod
    @asynccontextmanager
    async def open(cls, port: int = 0) -> AsyncIterator[LoopbackRedirect]:
        """Listen on ``127.0.0.1:port`` (a free port when 0, or when ``port`` is taken).

        Raises:
            OSError: no port could be bound.
        """
        try:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
        except OSError:
            if port == 0:
                raise
            logger.info("oauth: port %d is taken; the redirect uses a free port", port)
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)
        send, receive = anyio.create_memory_object_stream[dict[str, str]](4)
        failure: Exception | None = None
        async with listener, send, receive, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, lambda stream: _answer(stream, send))
            try:
                yield cls(f"http://127.0.0.1:{bound}{CALLBACK_PATH}", receive)
            except Exception as exc:  # noqa: BLE001 - re-raised below, outside the task group (not as a group)
                failure = exc
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure


async def _answer(stream: SocketStream, sink: MemoryObjectSendStream[dict[str, str]]) -> None:
    async with stream:
        data = b""
        with anyio.move_on_after(READ_TIMEOUT_S):
            while b"\r\n\r\n" not in data and len(data) < MAX_REQUEST_BYTES:
                try:
                    data += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        parts = data.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        target = parts[1] if len(parts) == 3 and parts[0] == "GET" else ""
        if urlsplit(target).path != CALLBACK_PATH:
            await _reply(stream, 404, "Not found.")
            return
        params = parse_redirect(target)
        if "error" in params:
            await _reply(stream, 400, f"The login failed: {params['error']}.")
        else:
            await _reply(stream, 200, "Logged in.")
        try:
            sink.send_nowait(params)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("oauth: an extra callback was ignored")


async def _reply(stream: SocketStream, status: int, message: str) -> None:
    body = _PAGE.format(message=message).encode()
    head = (
        f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    try:
        await stream.send(head.encode() + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        logger.debug("oauth: the browser left before the callback page was sent")
