"""SSE and Streamable HTTP, through the SDK's ``sse_client`` and ``streamable_http_client``.

We configure the SDK's HTTP client (an ``httpx2`` one: expanded headers, timeouts, TLS) and convert
foreign errors here, where they are met. The SDK surfaces failures in three ways, mapped as follows:

- raised from its context manager (SSE: the GET's status or connection error on entry; Streamable
  HTTP: a POST that cannot connect crashes the SDK's task group): re-raised as ours on exit;
- an HTTP error status of a POST becomes a JSON-RPC error answer, which hides the status: a response
  hook records it and an :class:`AuthRequired` / :class:`HTTPStatusError` item is put on the read
  stream just before that answer;
- exception items on the SDK's read stream: converted to :class:`TransportError` subclasses.

A lost peer ends the session like a dead child ends a stdio one (Streamable HTTP): a request that
cannot reach the server, a response cut off, or an answer saying the server no longer knows our
session (404, or server-everything's 400) puts the cause on the read stream and ends it, so calls
in flight fail at once with that cause and the supervisor reconnects. Without this the SDK's
request task raises into its task group, which took the whole session (and its host) down.
"""

from __future__ import annotations

import json
import logging
import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import NoReturn

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mcpmux.auth.attach import auth_for
from mcpmux.config.models import NetworkServerConfig, Settings, SseServerConfig, StreamableHttpServerConfig
from mcpmux.errors import (
    AuthRequired,
    ConnectFailed,
    ConnectionClosed,
    HTTPStatusError,
    SessionExpired,
    TransportError,
)
from mcpmux.transports.base import ReadStream, TransportStreams, WriteStream
from mcpmux.transports.framing import parse_message

__all__ = ["STREAM_IDLE_TIMEOUT_S", "map_http_error", "open_sse", "open_streamable_http"]

logger = logging.getLogger("mcpmux.transports")

_SDK_SSE_HANDLED = frozenset({"Error in sse_reader", "Encountered SSE exception", "Error in post_writer"})
"""What the SDK's ``sse_client`` logs with a traceback when an SSE stream breaks: the exception also reaches
the read stream, where mcpmux reports it (the server's state, its reason, the call's error)."""


class _HandledBySession(logging.Filter):
    """Demotes the SDK's report of a broken SSE stream to DEBUG: a user saw a traceback for a server that
    died although mcpmux handled it; ``-v``/debug logging still shows it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and record.getMessage() in _SDK_SSE_HANDLED:
            if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
                return False
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


logging.getLogger("mcp.client.sse").addFilter(_HandledBySession())

STREAM_IDLE_TIMEOUT_S = 300.0
"""Floor of the read timeout: a server may stay silent on an event stream for minutes."""

READ_BUFFER_ITEMS = 16
REPORT_TIMEOUT_S = 5.0
"""Bound on handing the session the cause of its end (it reads without pause; a bound all the same)."""
SESSION_HEADER = "mcp-session-id"

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
        error = AuthRequired(server, url, response.status_code, body)
        if "bearer" in response.headers.get("WWW-Authenticate", "").lower():
            error.hint = f"the server asks for OAuth: run `mcpmux login {server}` (or set an Authorization header)"
        return error
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
        self.ended: TransportError | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        status = response.status_code
        if response.extensions.get(_SYNTHETIC):
            return  # our stand-in for a request that never got an answer; its cause is reported already
        if status in (400, 404) and SESSION_HEADER in response.request.headers:
            await response.aread()
            if status == 404 or _names_the_session(response.content):
                # Spec (2025-11-25, session management): 404 to a request with a session id means
                # the session is gone; server-everything answers 400 "No valid session ID".
                await self.lose(SessionExpired(self.server, str(response.request.url), status))
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

    async def lose(self, cause: TransportError) -> NoReturn:
        """End the session with ``cause`` (once), then wait to be cancelled by the transport's exit.

        Called from inside an SDK request task: returning or raising would make the SDK write into
        a session that has ended, or crash its task group.
        """
        await self.end_session(cause)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def end_session(self, cause: TransportError) -> None:
        """Put ``cause`` on the read stream and close it: the session ends, its waiting requests fail with it."""
        if self.ended is not None:
            return
        self.ended = cause
        logger.info("%s", cause)
        sink = self.sink
        if sink is None:
            return
        with anyio.move_on_after(REPORT_TIMEOUT_S):
            try:
                while self.pending:
                    await sink.send(self.pending.pop(0))
                await sink.send(cause)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                logger.debug("server %r: session already gone, %s not reported", self.server, cause)
        sink.close()

    def convert(self, item: Item, url: str) -> Item:
        """An item of the SDK's read stream as an item of ours."""
        if isinstance(item, httpx2.HTTPError):
            return map_http_error(self.server, url, item)
        if isinstance(item, TransportError | SessionMessage):
            return item
        error = TransportError(self.server, f"transport failure: {item!r}")
        error.__cause__ = item
        return error


def _names_the_session(content: bytes) -> bool:
    """Whether a 400 body is a JSON-RPC error about the session, refused before any request id was read."""
    try:
        body = json.loads(content)
    except ValueError:
        return b"session" in content.lower()
    if not isinstance(body, dict) or body.get("id") is not None or not isinstance(body.get("error"), dict):
        return False
    return "session" in str(body["error"].get("message", "")).lower()


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


_SYNTHETIC = "mcpmux.synthetic"
"""Response extension marking a stand-in answer made by :class:`_LossGuard`."""


class _GuardedBody(httpx2.AsyncByteStream):
    """A response body whose network failure ends the session instead of raising into the SDK."""

    def __init__(self, inner: httpx2.AsyncByteStream, recorder: _StatusRecorder, url: str) -> None:
        self._inner, self._recorder, self._url = inner, recorder, url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except (httpx2.NetworkError, httpx2.RemoteProtocolError) as exc:
            # The peer went away mid-answer (killed, restarted, network cut).
            await self._recorder.lose(map_http_error(self._recorder.server, self._url, exc))

    async def aclose(self) -> None:
        await self._inner.aclose()


class _LossGuard(httpx2.AsyncBaseTransport):
    """Wraps the HTTP transport so that a lost peer ends the MCP session rather than crashing it.

    The SDK runs each request's POST in its session's task group and lets an ``httpx2`` error
    escape it; one refused connection then cancelled the session, and the error came out of the
    connection's close. Here a request that cannot be sent, or a body cut off, ends the session
    with the mapped error (:meth:`_StatusRecorder.lose`); the SDK's task then waits for the
    transport's exit, which cancels it: it writes nothing into a session that has ended.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, recorder: _StatusRecorder, url: str) -> None:
        self._inner, self._recorder, self._url = inner, recorder, url

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._recorder.ended is not None:
            if request.method == "DELETE":
                # Closing a session that is over: do not wait on a peer that is gone.
                return httpx2.Response(204, request=request, extensions={_SYNTHETIC: True})
            await anyio.sleep_forever()
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            if request.method == "DELETE":
                raise  # the SDK reports a failed DELETE itself
            await self._recorder.lose(map_http_error(self._recorder.server, self._url, exc))
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream), "an async transport returns an async body"
        response.stream = _GuardedBody(stream, self._recorder, self._url)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``*_PROXY``, honouring ``NO_PROXY``), as httpx would pick."""
    parsed = httpx2.URL(url)
    if urllib.request.proxy_bypass(parsed.host):
        return None
    return urllib.request.getproxies().get(parsed.scheme)


def _client_factory(
    server: NetworkServerConfig, settings: Settings, recorder: _StatusRecorder, *, guard: bool = False
) -> httpx2.AsyncClient:
    connect_s = server.effective_connect_timeout_s(settings)
    read_s = max(server.effective_timeout_s(settings), STREAM_IDLE_TIMEOUT_S)
    transport: httpx2.AsyncBaseTransport | None = None
    if guard:
        # An explicit transport turns off the client's own proxy lookup: do it here.
        inner = httpx2.AsyncHTTPTransport(verify=server.verify_tls, proxy=_proxy_for(server.url))
        transport = _LossGuard(inner, recorder, server.url)
    return httpx2.AsyncClient(
        headers={key: value.get_secret_value() for key, value in server.headers.items()},
        timeout=httpx2.Timeout(connect_s, connect=connect_s, read=read_s, write=read_s, pool=connect_s),
        verify=server.verify_tls,
        event_hooks={"response": [recorder]},
        transport=transport,
        auth=auth_for(server),
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
    async with _client_factory(server, settings, recorder, guard=True) as client:

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
