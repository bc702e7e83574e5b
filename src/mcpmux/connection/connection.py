"""One live server: open its transport, negotiate the era, and make deadline-bound requests.

A :class:`Connection` owns a task group that runs the transport and the SDK session; requests are
sent from the caller's task. Every request has a deadline (the server's ``timeout_ms`` unless the
call gives one); a deadline or a caller's cancellation sends ``notifications/cancelled``. Foreign
errors are mapped here (STYLE 6): JSON-RPC errors to :class:`ServerError`, deadlines to
:class:`MCPTimeoutError`, a lost transport to the evidence it left (``ServerExited``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Final

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientSession

from mcpmux.config.models import ServerConfig, Settings
from mcpmux.connection import _requests
from mcpmux.connection._dispatch import WatchedDispatcher
from mcpmux.connection._era import negotiate
from mcpmux.connection._errormap import FOREIGN_ERRORS
from mcpmux.connection._routing import build_hooks
from mcpmux.connection._streams import StreamWatch
from mcpmux.connection.callbacks import ClientCallbacks
from mcpmux.connection.info import ConnectionInfo
from mcpmux.errors import MCPMuxError, MCPTimeoutError, TransportError
from mcpmux.transports.base import TransportStreams

__all__ = ["CLIENT_INFO", "CLOSE_TIMEOUT_S", "Connection", "TransportFactory"]

logger = logging.getLogger(__name__)

CLIENT_INFO: Final = types.Implementation(name="mcpmux", version="0.1.0")
CLOSE_TIMEOUT_S: Final = 10.0
CONNECT_GRACE_S: Final = 0.5

TransportFactory = Callable[[], AbstractAsyncContextManager[TransportStreams]]
"""Opens the transport of one server; the default is ``mcpmux.transports.open_transport``."""


class Connection(_requests.Requests):
    """A live connection to one configured server.

    Use as ``async with Connection(server, settings) as conn:``, or call :meth:`connect` and
    :meth:`close` from one task (they enter and leave a task group).

    Args:
        server: the server's configuration.
        settings: the global settings (timeouts and limits the server inherits).
        callbacks: answers to server requests and observers of notifications.
        transport: opens the transport; ``open_transport(server, settings)`` by default.
        client_info: the name and version this client gives the server.
    """

    def __init__(
        self,
        server: ServerConfig,
        settings: Settings,
        *,
        callbacks: ClientCallbacks | None = None,
        transport: TransportFactory | None = None,
        client_info: types.Implementation | None = None,
    ) -> None:
        super().__init__(server.name, server.effective_timeout_s(settings))
        self.server = server
        self.settings = settings
        self.callbacks = callbacks or ClientCallbacks()
        self._transport = transport or self._default_transport
        self._client_info = client_info or CLIENT_INFO
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = anyio.Event()
        self._dispatcher: WatchedDispatcher | None = None
        self._info: ConnectionInfo | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Connection:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> ConnectionInfo:
        """Open the transport and negotiate, within the server's connect timeout.

        Raises:
            MCPTimeoutError: no usable session within the connect timeout.
            ServerExited: the child exited before the session was ready (beats a timeout).
            TransportError: the transport could not be opened.
            ProtocolVersionMismatch: no protocol version both sides speak.
            ServerError: the server rejected the handshake.
        """
        if self._tg is not None:
            raise RuntimeError(f"connection to {self.name!r} was already opened")
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        connected = False
        try:
            info: ConnectionInfo = await self._tg.start(self._serve)
            connected = True
        except BaseExceptionGroup as group:
            raise _single_leaf(group)  # noqa: B904 -- the leaf keeps its own cause
        finally:
            if not connected:
                await self.close()
        self._info = info
        return info

    async def close(self) -> None:
        """End the session and close the transport (stopping a child); bounded, idempotent."""
        self._closing.set()
        self._evidence.closing = True
        tg, self._tg = self._tg, None
        if tg is None:
            return
        # The group's own scope (a new one would break LIFO exit): shielded from an outer
        # cancellation so the transport can stop its child, and bounded in case it cannot.
        tg.cancel_scope.shield = True
        tg.cancel_scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S
        await tg.__aexit__(None, None, None)
        if tg.cancel_scope.cancelled_caught:
            logger.warning("closing server %r took longer than %g s", self.name, CLOSE_TIMEOUT_S)

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[ConnectionInfo]) -> None:
        limit = self.server.effective_connect_timeout_s(self.settings)
        started, deadline = time.perf_counter(), anyio.current_time() + limit
        failure: Exception | None = None
        # Bounds opening the transport; a grace later than the handshake's own deadline, so a child
        # that died meanwhile is still there to ask. Lifted after the handshake: the session lives on.
        with anyio.CancelScope(deadline=deadline + CONNECT_GRACE_S) as opening:
            async with self._transport() as streams:
                watch = StreamWatch(self.name, streams)
                self._evidence.streams, self._evidence.watch, opened = streams, watch, time.perf_counter()
                self._dispatcher = WatchedDispatcher(watch, self._evidence.record)
                async with self._new_session(self._dispatcher) as session:
                    # Failures leave the contexts normally; raised inside, task groups would wrap them.
                    failure = await self._handshake(session, deadline, limit)
                    # Past the handshake, the transport's own teardown must not be cut short.
                    opening.deadline = math.inf
                    if failure is None:
                        self._session = session
                        task_status.started(self._describe(session, streams, opened - started, opened))
                        await self._closing.wait()
        if failure is not None:
            raise failure
        if opening.cancelled_caught:
            raise MCPTimeoutError(self.name, "connect", limit)

    async def _handshake(self, session: ClientSession, deadline: float, limit: float) -> Exception | None:
        """Negotiate by ``deadline``; return the error that prevented it, if any."""
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                await negotiate(session, self.name, self.server.protocol)
            except MCPMuxError as exc:
                return exc
            except FOREIGN_ERRORS as exc:
                mapped = self._evidence.mapped("initialize", exc, limit, 0)
                mapped.__cause__ = exc
                return mapped
        if scope.cancelled_caught:
            # Evidence beats a timeout: a child that died meanwhile says why.
            return self._evidence.of_end("during the handshake") or MCPTimeoutError(self.name, "connect", limit)
        return None

    def _new_session(self, dispatcher: WatchedDispatcher) -> ClientSession:
        hooks = build_hooks(self.name, self.callbacks)
        return ClientSession(
            sampling_callback=hooks.sampling,
            elicitation_callback=hooks.elicitation,
            list_roots_callback=hooks.roots,
            message_handler=hooks.message_handler,
            client_info=self._client_info,
            dispatcher=dispatcher,
        )

    def _describe(
        self, session: ClientSession, streams: TransportStreams, transport_s: float, t0: float
    ) -> ConnectionInfo:
        return ConnectionInfo(
            server_info=session.server_info,
            protocol_version=session.protocol_version or "",
            capabilities=session.server_capabilities or types.ServerCapabilities(),
            instructions=session.instructions,
            describe=streams.describe,
            pid=streams.pid,
            transport_s=transport_s,
            handshake_s=time.perf_counter() - t0,
        )

    def _default_transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        from mcpmux.transports import open_transport

        return open_transport(self.server, self.settings)

    # -- state ---------------------------------------------------------------------------------

    @property
    def info(self) -> ConnectionInfo:
        """What the server said at connect time.

        Raises:
            RuntimeError: not connected yet.
        """
        if self._info is None:
            raise RuntimeError(f"connection to {self.name!r} is not open")
        return self._info

    @property
    def is_connected(self) -> bool:
        """Whether the session is up and its transport has not ended."""
        return self._info is not None and self._dispatcher is not None and not self._dispatcher.ended.is_set()

    async def wait_closed(self) -> TransportError | None:
        """Wait until the transport ends (or the connection is closed); return what ended it, if it said."""
        dispatcher = self._dispatcher
        if dispatcher is not None:
            await dispatcher.ended.wait()
        return self._evidence.of_end("")

    def stderr_tail(self) -> str:
        """The last stderr output of a stdio child (empty for network transports)."""
        return self._evidence.stderr_tail()


def _single_leaf(exc: BaseException) -> BaseException:
    """The one mcpmux error inside nested exception groups (a transport's task groups wrap), else ``exc``."""
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, MCPMuxError) else exc
