"""One supervisor per server: its connection's life, states, reconnects, call slots and lists.

The supervisor's ``run`` loop is the only task that opens and closes the server's connection
(a :class:`Connection` must be entered and left by one task). Callers ask for a live connection
with :meth:`Supervisor.connection_for_call`, which starts the server on demand (lazy start, or a
restart after a crash) and fails fast while the circuit breaker is open.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from mcpmux.config.models import ServerConfig, Settings
from mcpmux.connection.factory import ConnectionFactory
from mcpmux.errors import (
    AuthRequired,
    Busy,
    CommandNotFound,
    ConfigError,
    ConnectionClosed,
    MCPMuxError,
    MCPTimeoutError,
    ProtocolVersionMismatch,
    ServerDisabled,
    ServerUnavailable,
    TransportError,
)
from mcpmux.manager._slots import CallSlots
from mcpmux.manager.backoff import CircuitBreaker, backoff_delay
from mcpmux.manager.hints import explain_timeout
from mcpmux.manager.registry import Registry, ServerCatalog
from mcpmux.processes.usage import MB, process_usage
from mcpmux.types.callbacks import ClientCallbacks
from mcpmux.types.events import EventHub, ListChanged, StateChanged
from mcpmux.types.models import ServerState, Transition

if TYPE_CHECKING:
    from mcpmux.connection import Connection

__all__ = ["HEALTHY_UPTIME_S", "ConnectionFactory", "Supervisor"]

logger = logging.getLogger(__name__)

ListsStored = Callable[[ServerConfig, ServerCatalog, "Connection"], None]

HEALTHY_UPTIME_S = 60.0
RELIST_DEBOUNCE_S = 0.05
HISTORY_LIMIT = 50
MEMORY_CHECK_S = 2.0  # how often a child with ``max_rss_mb`` is measured
# Failures that another attempt cannot fix: wait for the user (or the next call) instead of retrying.
_PERMANENT = (CommandNotFound, AuthRequired, ProtocolVersionMismatch, ConfigError)


def _default_factory(server: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
    # Imported here: a manager serving lazy servers from the catalog never loads the SDK client.
    from mcpmux.connection.connection import Connection

    return Connection(server, settings, callbacks=callbacks)


class Supervisor:
    """Keeps one server connected (or says precisely why it is not)."""

    def __init__(
        self,
        config: ServerConfig,
        settings: Settings,
        *,
        callbacks: ClientCallbacks,
        registry: Registry,
        events: EventHub,
        connect_limiter: anyio.CapacityLimiter,
        transient_limiter: anyio.CapacityLimiter | None = None,
        on_lists: ListsStored | None = None,
        factory: ConnectionFactory | None = None,
    ) -> None:
        self.config, self.settings, self.name = config, settings, config.name
        self._callbacks, self._registry, self._events = callbacks, registry, events
        self._connect_limiter, self._on_lists = connect_limiter, on_lists
        # A transient server holds one of these while it runs (see ``Settings.max_transient_servers``).
        self._transient_limiter = transient_limiter if config.lifecycle == "transient" else None
        self._parking = False
        # Events made when first waited for (most servers never park, get disabled or change a list):
        # until then a setter has nobody to wake.
        self._parked: anyio.Event | None = None
        self._factory = factory or _default_factory
        self.state = ServerState.CONFIGURED if config.enabled else ServerState.DISABLED
        self.reason = "configured" if config.enabled else "disabled in the configuration"
        self.history: deque[Transition] = deque([Transition(time.time(), self.state, self.reason)], HISTORY_LIMIT)
        self.connection: Connection | None = None
        self.last_error: MCPMuxError | None = None
        self.connected_at: float | None = None
        self.connects = 0
        self._want = False
        self._disabled = not config.enabled
        self._disabled_reason = "disabled in the configuration"
        self._withdrawn: anyio.Event | None = None
        self._stopping = False
        self._restart = False
        self._memory_restart = False
        self._memory_strikes = 0
        self._woken = False
        """A wake-up (want, disable, stop) not yet seen by the loop's sleep."""
        self._wake: anyio.Event | None = None
        """What the loop's sleep waits on: made when it first sleeps (the first connect needs no sleep)."""
        self._attempt_done: anyio.Event | None = None
        """Set when an attempt finishes: made when first waited for."""
        self._attempts = 0
        self._ended = False
        self._session_scope: anyio.CancelScope | None = None
        self._interrupted = False
        """An interrupt for the live session (stop, restart, disable, park) not yet seen by its watch."""
        self._watching: anyio.CancelScope | None = None
        """The scope of a watch with tasks (:meth:`_watch_with_tasks`): an interrupt cancels it."""
        self._nudge: anyio.Event | None = None
        """What a watch without tasks waits on, set by the connection's end or by a nudge (:meth:`_watch`)."""
        self._watched: tuple[anyio.abc.TaskGroup, Connection] | None = None
        self._relisting = False
        self._relist: anyio.Event | None = None
        """What the re-lister waits on; a list change is pending when :attr:`_relist_kinds` is not empty."""
        self._relist_kinds: set[str] = set()
        self._slots = CallSlots(settings.max_concurrent_calls)
        self.breaker = CircuitBreaker()

    # -- what the manager asks -------------------------------------------------------------

    @property
    def restarts(self) -> int:
        """How many times the server was connected again after its first connection."""
        return max(self.connects - 1, 0)

    def is_stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping

    @property
    def wanted(self) -> bool:
        """Whether a connection is wanted now (the loop is connecting or will)."""
        return self._want

    def want(self) -> None:
        """Ask for a live connection: start now, or cut a reconnect wait short."""
        if not self._disabled:
            self._want = True
            self._wake_up()

    @property
    def disabled(self) -> bool:
        """Whether the server is disabled (by its configuration or at run time): no connection, no tools."""
        return self._disabled

    @property
    def disabled_reason(self) -> str:
        """Why the server is disabled (meaningful while :attr:`disabled`)."""
        return self._disabled_reason

    def disable(self, reason: str = "disabled at run time") -> bool:
        """Stop the server and keep it stopped until :meth:`enable`; say whether it was enabled.

        The run loop closes the connection (the child is stopped and reaped), empties the server's
        lists in the index and sets the state ``disabled`` (:meth:`wait_disabled`); new calls fail
        at once, calls in flight end with the connection.
        """
        if self._disabled:
            return False
        self._disabled, self._want, self._disabled_reason = True, False, reason
        self._withdrawn = anyio.Event()
        self._interrupt_session()
        self._wake_up()
        if self._session_scope is not None and self.connection is None:
            self._session_scope.cancel()  # mid-connect: a disabled server must not come up
        return True

    async def wait_disabled(self) -> None:
        """Wait until a :meth:`disable` took effect: connection closed, lists emptied, state ``disabled``."""
        while self._disabled and not self._ended and self.state is not ServerState.DISABLED:
            if self._withdrawn is None:
                self._withdrawn = anyio.Event()
            await self._withdrawn.wait()

    def enable(self) -> bool:
        """Allow connections again (the caller asks for one with :meth:`want`); say whether it was disabled."""
        if not self._disabled:
            return False
        self._disabled = False
        if self._withdrawn is not None:
            self._withdrawn.set()  # a disable not yet in effect is overtaken: its waiters go on
        if self._session_scope is not None:
            self._restart = True  # that disable is still ending the session: the loop connects again at once
        else:
            self._fresh_interrupt()  # no session saw that disable's interrupt: the next one must not
        self.breaker = CircuitBreaker()  # failures from before the disable say nothing about the next start
        self.last_error = None
        if self.state is ServerState.DISABLED:
            self._set(ServerState.CONFIGURED, "enabled")
        return True

    def restart(self) -> None:
        """Close the connection (if any) and connect again at once."""
        if self._session_scope is not None:
            # A session is live or connecting: it ends, and the loop connects again at once. With
            # none, the interrupt would be seen by the next session, which would close at once.
            self._restart = True
            self._interrupt_session()
        self.want()

    def stop(self) -> None:
        """End the run loop at once, even mid-connect; the connection is closed by the loop's own task."""
        self._stopping = True
        self._interrupt_session()
        self._wake_up()
        if self._session_scope is not None and self.connection is None:
            # A connect can take its whole connect timeout: a stop (Ctrl-C) must not wait for it.
            # A live session is not cancelled: the interrupt ends its watch and the loop closes it
            # (a cancelled tree is re-cancelled at every turn of the event loop until the child is
            # stopped: most of the CPU of stopping 50 servers at once).
            self._session_scope.cancel()

    @property
    def transient(self) -> bool:
        """Whether the server runs only while calls need it (``lifecycle: transient``)."""
        return self.config.lifecycle == "transient"

    def park(self) -> None:
        """Stop a transient server once no call holds or waits for it; the next call starts it again."""
        if not self.transient or self._parking or self.connection is None or not self._idle():
            return
        self._parking, self._want = True, False
        self._parked = anyio.Event()
        self._interrupt_session()

    def _idle(self) -> bool:
        return self._slots.used == 0 and self._slots.queued == 0

    def notify_list_changed(self, kind: str) -> None:
        """A ``list_changed`` notification arrived: re-list ``kind`` soon (bursts are coalesced)."""
        self._relist_kinds.add(kind)
        if self._relist is not None:
            self._relist.set()
        self._start_relister()

    def _start_relister(self) -> None:
        """Start the live connection's re-lister if it is not running (it starts when first needed)."""
        watched = self._watched
        if watched is not None and not self._relisting:
            self._relisting = True
            watched[0].start_soon(self._relister, watched[1])
        elif watched is None and self._nudge is not None:
            self._nudge.set()  # a watch without a task group: it watches again with one (see _watch)

    async def relist(self) -> None:
        """Connect if needed and list everything the server offers again."""
        async with self.call_slot():  # a transient server stays up for the listing, and stops after
            connection = await self.connection_for_call()
            await self._refresh(connection, None)

    @property
    def attempts(self) -> int:
        """How many connect attempts have finished (success or not) since supervision began."""
        return self._attempts

    async def wait_attempt(self, after: int | None = None) -> None:
        """Wait until a connect attempt finishes after the first ``after`` ones (default: the current count).

        Pass the :attr:`attempts` read before asking for a connection: an attempt that ends
        before this wait begins still counts. Returns at once once the run loop has ended.
        """
        mark = self._attempts if after is None else after
        while self._attempts <= mark and not self._ended:
            if self._attempt_done is None:
                self._attempt_done = anyio.Event()
            await self._attempt_done.wait()

    # -- calls --------------------------------------------------------------------------------

    async def connection_for_call(self) -> Connection:
        """A live connection, starting the server if needed.

        Raises:
            ServerUnavailable: disabled, or the circuit breaker is open.
            MCPTimeoutError: no connection within the connect timeout.
            TransportError: the start failed (the evidence of the last attempt).
        """
        if self._disabled:
            raise ServerDisabled(self.name, self._disabled_reason)
        connection = self.connection
        if connection is not None and connection.is_connected and not self._parking:
            return connection  # the hot path: no deadline scope to set up
        limit = self.config.effective_connect_timeout_s(self.settings) + 1.0
        try:
            with anyio.fail_after(limit):
                return await self._await_connection()
        except MCPMuxError:
            raise
        except TimeoutError as exc:
            error = MCPTimeoutError(self.name, "connect", limit)
            explain_timeout(self.config, error)
            raise error from exc

    async def _await_connection(self) -> Connection:
        while True:
            if self._disabled:
                raise ServerDisabled(self.name, self._disabled_reason)
            if self._parking:  # a transient server on its way down: start it again once it is down
                if self._parked is None:
                    self._parked = anyio.Event()
                await self._parked.wait()
                continue
            connection = self.connection
            if connection is not None and connection.is_connected:
                return connection
            self._raise_if_open()
            if self._ended or self._stopping:
                raise ServerUnavailable(self.name, "its supervision was stopped")
            mark = self._attempts
            self.want()
            await self.wait_attempt(mark)
            if self.connection is None and self.last_error is not None:
                raise self.last_error.with_traceback(None)

    def _raise_if_open(self) -> None:
        retry_after = self.breaker.retry_after()
        if retry_after is not None:
            cause = f"circuit open after repeated failures (last: {self.last_error})"
            raise ServerUnavailable(self.name, cause, retry_after_s=retry_after)

    @asynccontextmanager
    async def call_slot(self) -> AsyncIterator[None]:
        """Hold one of the server's call slots; queue for one, or raise :class:`Busy` past the queue limit."""
        if not self.take_slot():
            await self.queue_for_slot()
        try:
            yield
        finally:
            self.release_slot()

    def take_slot(self) -> bool:
        """Take a free call slot at once; ``False`` when the call must :meth:`queue_for_slot`.

        The hot path of :meth:`call_slot` without a trip through the event loop (``acquire()``
        yields once even when a token is free): the call's own awaits are its checkpoints.
        Give the slot back with :meth:`release_slot`.
        """
        return self._slots.take()

    async def queue_for_slot(self) -> None:
        """Wait for a call slot in turn, or raise :class:`Busy` past the queue limit."""
        slots = self._slots
        if slots.queued >= self.settings.max_queued_calls:
            raise Busy(self.name, slots.used, slots.queued)
        await slots.wait()

    def release_slot(self) -> None:
        """Give back the slot of :meth:`take_slot` or :meth:`queue_for_slot` (a transient server may stop)."""
        self._slots.release()
        self.park()

    def live_connection(self) -> Connection | None:
        """The connection if it is live and usable now (the hot path of :meth:`connection_for_call`)."""
        connection = self.connection
        if connection is not None and connection.is_connected and not (self._parking or self._disabled):
            return connection
        return None

    # -- the run loop -----------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect whenever a connection is wanted; reconnect with backoff; stop when told."""
        task_status.started()
        attempt = 0
        while not self.is_stopping():
            if self._disabled:
                self._withdraw()
            if not self._want:
                await self._sleep_until_woken(None)
                continue
            connected_for: float | None = None
            with anyio.CancelScope() as self._session_scope:
                if self._transient_limiter is None:
                    connected_for = await self._session()
                else:
                    async with self._transient_limiter:
                        connected_for = await self._session()
            self._session_scope = None
            if self.is_stopping():
                break
            if self._disabled:
                self._restart = self._memory_restart = self._parking = False
                self._unpark()
                attempt = 0
                continue
            if self._parking:
                self._parking, attempt = False, 0
                self._set(ServerState.CONFIGURED, "stopped after its last call (lifecycle: transient)")
                self._unpark()
                continue
            if self._restart:
                self._restart, attempt = False, 0
                if self._memory_restart:
                    await self._back_off_memory(connected_for)
                continue
            if connected_for is not None and connected_for >= HEALTHY_UPTIME_S:
                attempt = 0
            attempt += 1
            attempt = self._after_failure(attempt)
            if attempt:
                await self._sleep_until_woken(backoff_delay(attempt))
        if self._disabled:
            self._withdraw()
        else:
            self._set(ServerState.CONFIGURED, "stopped")
        self._ended = True
        self._unpark()
        self._signal_attempt()

    def _after_failure(self, attempt: int) -> int:
        """Set the state after a failed or lost session; return the attempt number, or 0 to stop trying."""
        error = self.last_error
        reason = str(error) if error is not None else "connection closed"
        retries = self.config.retry_attempts if self.config.retry_attempts is not None else self.settings.retry_attempts
        auto = self.config.auto_reconnect if self.config.auto_reconnect is not None else self.settings.auto_reconnect
        if isinstance(error, _PERMANENT) or not auto or attempt > retries:
            self._want = False
            state = ServerState.NEEDS_AUTH if isinstance(error, AuthRequired) else ServerState.FAILED
            self._set(state, reason)
            return 0
        self._set(ServerState.DEGRADED, f"{reason} (reconnect attempt {attempt} of {retries})")
        return attempt

    def _wake_up(self) -> None:
        self._woken = True
        if self._wake is not None:
            self._wake.set()

    async def _sleep_until_woken(self, delay: float | None) -> None:
        if self._woken:
            await anyio.lowlevel.checkpoint()
        else:
            if self._wake is None:
                self._wake = anyio.Event()
            with anyio.move_on_after(delay if delay is not None else float("inf")):
                await self._wake.wait()
        if self._woken:
            self._woken, self._wake = False, None

    async def _session(self) -> float | None:
        """Connect, serve until the connection ends; return seconds connected (``None``: never connected)."""
        self._set(ServerState.STARTING, "connecting")
        connection = self._factory(self.config, self.settings, self._callbacks)
        try:
            # A free slot is taken without a turn of the event loop (acquire() always yields once).
            if not _take_nowait(self._connect_limiter):
                await self._connect_limiter.acquire()
            try:
                info = await connection.connect()
            finally:
                self._connect_limiter.release()
            await self._refresh(connection, None)
        except Exception as exc:  # noqa: BLE001 - not swallowed: kept as the server's failure and reason
            # Whatever one server's start raises is this server's failure, never the host's.
            failure = self._as_failure(exc, "connecting")
            await self._close(connection)
            self._record_failure(failure)
            self._signal_attempt()
            return None
        except BaseException:
            await self._close(connection)  # cancelled (stop, Ctrl-C): the child is still stopped and reaped
            raise
        started = time.monotonic()
        self.connection, self.connected_at, self.last_error = connection, time.time(), None
        self.connects += 1
        self.breaker.record_success()
        self._set(ServerState.CONNECTED, f"{info.describe} (protocol {info.protocol_version})")
        self._signal_attempt()
        self.park()  # a transient server started only to list (no call waits for it) stops again
        lost = await self._serve(connection)
        if lost is not None and not (self._stopping or self._restart or self._parking or self._disabled):
            self._record_failure(lost)
        return time.monotonic() - started

    async def _serve(self, connection: Connection) -> MCPMuxError | None:
        """Watch the live connection until it ends, then close it; return why it was lost, if it was."""
        try:
            lost = await self._watch(connection)
        except anyio.get_cancelled_exc_class():
            self.connection = None
            closed = await self._close(connection)
            if closed is None or self._stopping:
                raise
            # The connection's task group failed and cancelled this task with it; the failure ended
            # with the close. anyio cancellation is level-triggered: a real outer cancellation
            # still reaches the loop's next checkpoint.
            return closed
        except BaseException:
            self.connection = None
            await self._close(connection)
            raise
        self.connection = None
        closed = await self._close(connection)
        if closed is not None and (lost is None or type(lost) is ConnectionClosed):
            lost = closed  # the transport's own account of the end says more
        return lost

    async def _close(self, connection: Connection) -> MCPMuxError | None:
        """Close ``connection`` in this task (which opened it); return what its end raised, if anything."""
        try:
            # Connection.close shields and bounds itself.
            await connection.close()
        except Exception as exc:  # noqa: BLE001 - not swallowed: returned as the reason the server was lost
            return self._as_failure(exc, "closing")
        return None

    def _as_failure(self, exc: Exception, during: str) -> MCPMuxError:
        """``exc`` as this server's failure: itself, the one mcpmux error in a group, or a wrapped foreign error."""
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if isinstance(leaf, MCPMuxError):
            return leaf
        logger.warning("server %r: unexpected failure while %s", self.name, during, exc_info=exc)
        failure = TransportError(self.name, f"unexpected failure while {during}: {exc!r}")
        failure.__cause__ = exc
        return failure

    def _interrupt_session(self) -> None:
        """End the live session's watch (the loop then closes it): the event for later, the scope for now."""
        self._interrupted = True
        if self._nudge is not None:
            self._nudge.set()
        elif self._watching is not None:
            self._watching.cancel()

    async def _watch(self, connection: Connection) -> MCPMuxError | None:
        # No task per thing watched (50 servers connect with fewer tasks for the event loop to
        # run): the end of the connection is waited for here, and the re-lister starts when a
        # list changes or expires. A task group only when something runs beside the wait: most
        # servers never send a list change, and for them one event is enough, set by the
        # connection's end, an interrupt or the first change (the watch then goes on with tasks).
        # Not a cancel scope: cancelling the wait cost ~65 calls per server when 50 stop at once.
        lost: list[MCPMuxError] = []
        limit_mb = getattr(self.config, "max_rss_mb", None)
        pid = connection.info.pid if limit_mb is not None else None
        try:
            while not lost and not self._interrupted:
                if self._watch_needs_tasks(connection, pid):
                    await self._watch_with_tasks(connection, lost, pid, limit_mb)
                    break
                if await self._wait_end_or_nudge(connection):
                    lost.append(connection.closed_reason() or ConnectionClosed(self.name, "connection closed"))
        finally:
            self._watching, self._watched = None, None
        self._interrupted = False  # seen: the session ends
        return lost[0] if lost else None

    async def _wait_end_or_nudge(self, connection: Connection) -> bool:
        """Wait until ``connection`` ends or the watch is nudged; say whether the connection ended."""
        self._nudge = nudge = anyio.Event()
        forget = connection.when_closed(nudge.set)
        try:
            await nudge.wait()
        finally:
            self._nudge = None
            forget()
        return not connection.is_connected

    def _watch_needs_tasks(self, connection: Connection, pid: int | None) -> bool:
        """Whether something runs beside the wait for the connection's end (a re-lister, health, memory)."""
        return bool(self._relist_kinds or self.settings.health_interval_ms or pid is not None) or bool(
            _expiring_lists(connection)
        )

    async def _watch_with_tasks(
        self,
        connection: Connection,
        lost: list[MCPMuxError],
        pid: int | None,
        limit_mb: float | None,
    ) -> None:
        async with anyio.create_task_group() as tg:
            self._watching, self._watched, self._relisting = tg.cancel_scope, (tg, connection), False
            if self._interrupted:
                tg.cancel_scope.cancel()
            if self._relist_kinds or _expiring_lists(connection):
                self._start_relister()  # else at the first list_changed
            if self.settings.health_interval_ms:
                tg.start_soon(self._health, connection, lost, tg.cancel_scope)
            if pid is not None and limit_mb is not None:
                tg.start_soon(self._memory_watch, pid, limit_mb, tg.cancel_scope)
            lost.append(await connection.wait_closed() or ConnectionClosed(self.name, "connection closed"))
            tg.cancel_scope.cancel()

    async def _health(self, connection: Connection, lost: list[MCPMuxError], scope: anyio.CancelScope) -> None:
        interval = (self.settings.health_interval_ms or 0) / 1000
        while True:
            await anyio.sleep(interval)
            try:
                await connection.ping(timeout=min(interval, 10.0))
            except MCPMuxError as exc:
                lost.append(exc)
                scope.cancel()
                return

    async def _memory_watch(self, pid: int, limit_mb: float, scope: anyio.CancelScope) -> None:
        """Restart the child once its process tree holds more than ``limit_mb`` of resident memory."""
        while True:
            await anyio.sleep(MEMORY_CHECK_S)
            usage = await anyio.to_thread.run_sync(process_usage, pid)
            if usage is None or usage.rss_bytes <= limit_mb * MB:
                continue
            reason = f"restarting: {usage.rss_bytes / MB:.0f} MB resident, above max_rss_mb {limit_mb:g}"
            logger.warning("server %r: %s", self.name, reason)
            self._set(ServerState.STARTING, reason)
            self._restart = self._memory_restart = True
            scope.cancel()
            return

    async def _back_off_memory(self, connected_for: float | None) -> None:
        """After a restart past ``max_rss_mb``: restarts that keep coming within a healthy uptime back off.

        A limit below the server's normal footprint would otherwise restart it every check.
        """
        self._memory_restart = False
        quick = connected_for is None or connected_for < HEALTHY_UPTIME_S
        self._memory_strikes = self._memory_strikes + 1 if quick else 1
        if self._memory_strikes > 1:
            delay = backoff_delay(self._memory_strikes - 1)
            limit = getattr(self.config, "max_rss_mb", None)
            strikes = self._memory_strikes
            reason = f"restarted {strikes} times in a row past max_rss_mb {limit:g}; next start in {delay:.1f} s"
            self._set(ServerState.DEGRADED, reason)
            await self._sleep_until_woken(delay)

    async def _relister(self, connection: Connection) -> None:
        while True:
            expiring = _expiring_lists(connection)
            if not self._relist_kinds:
                self._relist = anyio.Event()
                with anyio.move_on_after(min(expiring.values(), default=math.inf)):
                    await self._relist.wait()
            if self._relist_kinds:
                # A server may announce several changes at once (server-everything sends five).
                await anyio.sleep(RELIST_DEBOUNCE_S)
            else:
                # The 2026-07-28 era has no unsolicited list_changed: a list's ttlMs says when it is stale.
                soonest = min(expiring.values())
                self._relist_kinds |= {kind for kind, ttl in expiring.items() if ttl <= soonest + RELIST_DEBOUNCE_S}
            self._relist = None
            kinds, self._relist_kinds = self._relist_kinds, set()
            try:
                await self._refresh(connection, kinds)
            except MCPMuxError as exc:
                logger.warning("server %r: re-listing %s failed: %s", self.name, ", ".join(sorted(kinds)), exc)

    async def _refresh(self, connection: Connection, kinds: set[str] | None) -> None:
        """List what the server offers (only ``kinds`` if given) and update the registry."""
        old = self._registry.catalog(self.name) or ServerCatalog()
        everything = kinds is None
        kinds = kinds or {"tools", "resources", "prompts"}
        tools = tuple(await connection.list_tools()) if "tools" in kinds else old.tools
        resources, templates = old.resources, old.templates
        if "resources" in kinds:
            resources = tuple(await connection.list_resources())
            templates = tuple(await connection.list_resource_templates())
        prompts = tuple(await connection.list_prompts()) if "prompts" in kinds else old.prompts
        new = ServerCatalog(tools, resources, templates, prompts)
        self._registry.update(self.name, new)
        if self._on_lists is not None:
            self._on_lists(self.config, new, connection)
        if not everything:
            for kind, before, after in (("tools", old.tools, tools), ("resources", old.resources, resources)):
                if before != after:
                    self._events.publish(ListChanged(self.name, kind))
            if old.prompts != prompts:
                self._events.publish(ListChanged(self.name, "prompts"))

    # -- bookkeeping ---------------------------------------------------------------------------

    def _record_failure(self, exc: MCPMuxError) -> None:
        explain_timeout(self.config, exc)
        self.last_error = exc
        self.breaker.record_failure()
        # INFO, not WARNING: the failure is kept in the state and published as an event; the
        # faces decide how loudly to report it.
        logger.info("%s", exc)

    def _signal_attempt(self) -> None:
        # Count first, then wake: a waiter checks the count, so a replaced event loses no wake-up.
        self._attempts += 1
        done, self._attempt_done = self._attempt_done, None
        if done is not None:
            done.set()

    def _fresh_interrupt(self) -> None:
        self._interrupted = False

    def _unpark(self) -> None:
        """Wake the calls waiting for a parking server to be down."""
        if self._parked is not None:
            self._parked.set()

    def _withdraw(self) -> None:
        """A disabled server offers nothing: empty its lists (their listeners told), then say it is disabled."""
        if self.state is ServerState.DISABLED:
            return
        self._signal_attempt()  # a connect cut short by the disable: its waiters re-check and fail fast
        self._fresh_interrupt()  # set by the disable; the loop is idle, so no session is watching it
        old = self._registry.catalog(self.name)
        if old is not None and old != ServerCatalog():
            self._registry.update(self.name, ServerCatalog())
            for kind, items in (("tools", old.tools), ("resources", old.resources or old.templates),
                                ("prompts", old.prompts)):  # fmt: skip
                if items:
                    self._events.publish(ListChanged(self.name, kind))
        self._set(ServerState.DISABLED, self._disabled_reason)
        if self._withdrawn is not None:
            self._withdrawn.set()

    def _set(self, state: ServerState, reason: str) -> None:
        old = self.state
        self.state, self.reason = state, reason
        self.history.append(Transition(time.time(), state, reason))
        if old is not state:
            self._events.publish(StateChanged(self.name, old, state, reason))

    def describe_target(self) -> str:
        """The pid and command of a running child, or the URL / in-process description."""
        connection = self.connection
        if connection is not None:
            return connection.info.describe
        config: Any = self.config
        if getattr(config, "url", None):
            return str(config.url)
        if getattr(config, "command", None):
            return " ".join([config.command, *config.args])
        return f"builtin {getattr(config, 'kind', config.name)}"


def _take_nowait(limiter: anyio.CapacityLimiter) -> bool:
    try:
        limiter.acquire_nowait()
    except anyio.WouldBlock:
        return False
    return True


_LIST_KINDS = {"tools/list": "tools", "resources/list": "resources", "resources/templates/list": "resources",
               "prompts/list": "prompts"}  # fmt: skip
TTL_FLOOR_S = 1.0
TTL_CAP_S = 24 * 3600.0


def _expiring_lists(connection: Connection) -> dict[str, float]:
    """Seconds until each list kind with a ``ttlMs`` hint goes stale (floored, so a tiny hint cannot spin)."""
    expiring: dict[str, float] = {}
    for method, ttl_ms in connection.list_ttl_ms.items():
        kind = _LIST_KINDS.get(method)
        if kind is not None and ttl_ms > 0:
            seconds = min(max(ttl_ms / 1000, TTL_FLOOR_S), TTL_CAP_S)
            expiring[kind] = min(seconds, expiring.get(kind, seconds))
    return expiring
