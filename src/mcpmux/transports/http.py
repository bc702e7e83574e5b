"""SSE and Streamable HTTP, through the SDK's ``sse_client`` and ``streamable_http_client``.

We configure the SDK's HTTP client (an ``httpx2`` one: expanded headers, timeouts, TLS) and convert
foreign errors here, where they are met. The SDK surfaces failures in three ways, mapped as follows:

- raised from its context manager (SSE: the GET's status or connection error on entry; Streamable
  HTTP: a POST that cannot connect crashes the SDK's task group): re-raised as ours on exit;
- an HTTP error status of a POST becomes a JSON-RPC error answer, which hides the status: a response
  hook records it and an :class:`AuthRequired` / :class:`HTTPStatusError` item is put on the read
  stream just before that answer;
- exception items on the SDK's read stream: converted to :class:`TransportError` subclasses.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mcpmux.config.models import NetworkServerConfig, Settings, SseServerConfig, StreamableHttpServerConfig
from mcpmux.errors import AuthRequired, ConnectFailed, ConnectionClosed, HTTPStatusError, TransportError
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.framing import parse_message

__all__ = ["STREAM_IDLE_TIMEOUT_S", "map_http_error", "open_sse", "open_streamable_http"]

logger = logging.getLogger("mcpmux.transports")

STREAM_IDLE_TIMEOUT_S = 300.0
"""Floor of the read timeout: a server may stay silent on an event stream for minutes."""

READ_BUFFER_ITEMS = 16

Item = SessionMessage | Exception
SdkStreams = tuple[ReadStream[Item], WriteStream[SessionMessage]]
Opened = AbstractAsyncContextManager[SdkStreams]


def map_http_error(server: str, url: str, exc: httpx2.HTTPError) -> TransportError:
    """The mcpmux error for an ``httpx2`` error met while talking to ``url``."""
    if isinstance(exc, httpx2.HTTPStatusError):
        return _status_error(server, str(exc.request.url), exc.response)
    if isinstance(exc, httpx2.ConnectTimeout):
        return ConnectFailed(server, url, f"connect timed out ({exc})")
    if isinstance(exc, httpx2.ConnectError):
        tls = _tls_cause(exc)
        return ConnectFailed(server, url, f"TLS: {tls}" if tls else str(exc) or "connection failed")
    if isinstance(exc, httpx2.TransportError):
        return ConnectionClosed(server, f"connection to {url} failed: {exc!r}")
    return TransportError(server, f"HTTP request to {url} failed: {exc!r}")


def _status_error(server: str, url: str, response: httpx2.Response) -> HTTPStatusError:
    try:
        body = response.text
    except httpx2.ResponseNotRead:
        body = ""
    if response.status_code in (401, 403):
        return AuthRequired(server, url, response.status_code, body)
    return HTTPStatusError(server, url, response.status_code, body)


def _tls_cause(exc: BaseException) -> str | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return None


class _StatusRecorder:
    """Response hook that turns an HTTP error status into an error item for the read stream.

    The item is queued without blocking (the hook runs inside the SDK's request); if the stream's
    buffer is full it waits in ``pending`` and goes out before the next item the SDK delivers, so
    it always precedes the JSON-RPC error the SDK derives from the same response.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self.pending: list[Exception] = []
        self.sink: MemoryObjectSendStream[Item] | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        status = response.status_code
        if not (status in (401, 403, 404) or status >= 500) or response.request.method == "DELETE":
            return
        await response.aread()
        if _is_jsonrpc_error(response.content):
            return  # a protocol answer sent with an error status; the session reads it as such
        error = _status_error(self.server, str(response.request.url), response)
        if self.sink is not None and not self.pending:
            try:
                self.sink.send_nowait(error)
                return
            except anyio.WouldBlock:
                pass
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                logger.debug("server %r: session gone, %s not reported", self.server, error)
                return
        self.pending.append(error)

    def convert(self, item: Item, url: str) -> Item:
        """An item of the SDK's read stream as an item of ours."""
        if isinstance(item, httpx2.HTTPError):
            return map_http_error(self.server, url, item)
        if isinstance(item, TransportError | SessionMessage):
            return item
        error = TransportError(self.server, f"transport failure: {item!r}")
        error.__cause__ = item
        return error


def _is_jsonrpc_error(content: bytes) -> bool:
    try:
        return hasattr(parse_message(content).message, "error")
    except ValidationError:
        return False


async def _forward(
    source: ReadStream[Item], sink: MemoryObjectSendStream[Item], recorder: _StatusRecorder, url: str
) -> None:
    async with sink:
        try:
            async for item in source:
                while recorder.pending:
                    await sink.send(recorder.pending.pop(0))
                await sink.send(recorder.convert(item, url))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("http reader stopped, the session closed its stream")


def _client_factory(server: NetworkServerConfig, settings: Settings, recorder: _StatusRecorder) -> httpx2.AsyncClient:
    connect_s = server.effective_connect_timeout_s(settings)
    read_s = max(server.effective_timeout_s(settings), STREAM_IDLE_TIMEOUT_S)
    return httpx2.AsyncClient(
        headers={key: value.get_secret_value() for key, value in server.headers.items()},
        timeout=httpx2.Timeout(connect_s, connect=connect_s, read=read_s, write=read_s, pool=connect_s),
        verify=server.verify_tls,
        event_hooks={"response": [recorder]},
    )


@asynccontextmanager
async def _mapped(
    server: NetworkServerConfig, opener: Callable[[], Opened], recorder: _StatusRecorder
) -> AsyncIterator[TransportStreams]:
    sink, receive = anyio.create_memory_object_stream[Item](READ_BUFFER_ITEMS)
    recorder.sink = sink
    try:
        async with opener() as (read, write), anyio.create_task_group() as tg:
            tg.start_soon(_forward, read, sink, recorder, server.url)
            yield TransportStreams(read=receive, write=write, describe=server.url)
            tg.cancel_scope.cancel()
    except (httpx2.HTTPError, ExceptionGroup) as exc:
        found = _find_http_error(exc)
        if found is None:
            raise
        raise map_http_error(server.name, server.url, found) from exc
    finally:
        receive.close()
        sink.close()


def _find_http_error(exc: BaseException) -> httpx2.HTTPError | None:
    if isinstance(exc, httpx2.HTTPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find_http_error(inner)
            if found is not None:
                return found
    return None


@asynccontextmanager
async def open_streamable_http(
    server: StreamableHttpServerConfig, settings: Settings
) -> AsyncIterator[TransportStreams]:
    """Open a Streamable HTTP session with ``server.url``.

    Raises:
        ConnectFailed: refused, unknown host, TLS failure (raised when the connection is left).
        AuthRequired, HTTPStatusError: put on the read stream before the failed request's answer.
    """
    recorder = _StatusRecorder(server.name)
    async with _client_factory(server, settings, recorder) as client:

        def opener() -> Opened:
            return streamable_http_client(server.url, http_client=client)

        async with _mapped(server, opener, recorder) as streams:
            yield streams


@asynccontextmanager
async def open_sse(server: SseServerConfig, settings: Settings) -> AsyncIterator[TransportStreams]:
    """Open a legacy HTTP+SSE session with ``server.url``.

    Raises:
        ConnectFailed: refused, unknown host, TLS failure.
        AuthRequired: the event stream was answered with 401 or 403.
        HTTPStatusError: the event stream was answered with another error status.
    """
    recorder = _StatusRecorder(server.name)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return _client_factory(server, settings, recorder)

    def opener() -> Opened:
        return sse_client(server.url, httpx_client_factory=factory)

    async with _mapped(server, opener, recorder) as streams:
        yield streams
