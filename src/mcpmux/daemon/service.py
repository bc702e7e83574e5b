"""The daemon process: one per user, on a Unix socket, serving every client from the warm pool.

Start-up: take the lock file (``flock``; a second daemon that loses the race says which pid serves
and exits 0), start the watchdog (children die with the daemon), bind the socket 0600 in the
private runtime directory. Each connection: the peer's uid is checked with ``SO_PEERCRED``
(another user's process is closed unanswered), its first request is read (bounded in size and
time), then it speaks MCP with the gateway of its instance (:mod:`.pool`), or, attached with
all of its configuration (``connect --all``), with a gateway of its own over the pool
(:mod:`.session`), every message tagged with the peer's pid for the audit log. The daemon
stops on SIGTERM/SIGINT, on ``mcpmux/stop``, or after ``linger_s`` with no client and no server.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteStream

from mcpmux.attach.attach import (
    ATTACH,
    ATTACH_ALL,
    ATTACH_KNOWN,
    MAX_ATTACH_BYTES,
    STATUS,
    STOP,
    TOOLS,
    Attach,
    AttachAll,
    error_reply,
    result_reply,
)
from mcpmux.attach.paths import socket_path
from mcpmux.attach.wire import UNKNOWN_KEY
from mcpmux.config.models import DEFAULT_MAX_MESSAGE_BYTES
from mcpmux.daemon.known import KEY_CHARS
from mcpmux.daemon.peer import peer_credentials
from mcpmux.daemon.pool import REAP_INTERVAL_S, Instance, Pool, Refused
from mcpmux.daemon.session import serve_all, tagged
from mcpmux.daemon.watchdog import Watchdog
from mcpmux.errors import ConfigError, MCPMuxError
from mcpmux.policy import StateStore
from mcpmux.processes._reaper import (
    AVAILABLE as REAPER_AVAILABLE,
    GUARDIAN_ENV,
    SWEEP_SIGNAL,
    adopt_guardian,
    guardian_argv,
    has_children,
)
from mcpmux.transports.tcp import framed_streams
from mcpmux.types.json_shapes import JSONObject
from mcpmux.web.caller import LocalCaller

__all__ = [
    "ATTACH_TIMEOUT_S",
    "DEFAULT_LINGER_S",
    "GUARDIAN_GRACE_S",
    "DaemonOptions",
    "already_serving",
    "guardian_command",
    "serve_daemon",
]

logger = logging.getLogger(__name__)

_HUNG_UP = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)
"""What a client that went away makes a connection's reads and writes raise."""

DEFAULT_LINGER_S = 60.0
ATTACH_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 15.0
KNOWN_KEPT = 256
"""How many attaches the daemon keeps by the digest of their commands' inputs (the newest used)."""
MAX_KNOWN_TIMEOUT_S = 7 * 24 * 3600.0
SWEEP_CHECK_S = 2.0
"""How often an idle daemon looks whether it may have its guardian sweep strays (a ``/proc`` scan)."""
GUARDIAN_GRACE_S = 3.0
"""How long a dead daemon's servers have between SIGTERM and SIGKILL (from its guardian)."""


@dataclass(frozen=True, slots=True)
class DaemonOptions:
    """How long the daemon outlives its last client and server, and where it listens."""

    linger_s: float = DEFAULT_LINGER_S
    socket: Path | None = None


def guardian_command(argv: list[str]) -> list[str] | None:
    """``argv`` (the daemon's command) run under a guardian, or ``None`` when it runs as it is.

    On Linux the daemon runs as the child of a guardian (:mod:`mcpmux.processes._reaper`), the one
    reaper of the daemon and all its servers, which then need no reaper process each; it ends
    whatever the daemon leaves behind, however the daemon ended. ``None`` elsewhere, and in the
    guardian's own child.
    """
    if not REAPER_AVAILABLE or GUARDIAN_ENV in os.environ:
        return None
    return guardian_argv(argv, grace_s=GUARDIAN_GRACE_S)


PID_WAIT_S = 2.0
"""How long a reader waits for the pid of a daemon that has just taken the lock (it writes it next)."""


def already_serving(lock: Path) -> int | None:
    """The pid recorded by the daemon that holds ``lock`` (-1 if it wrote none within :data:`PID_WAIT_S`),
    or ``None`` if no daemon holds it."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _recorded_pid(fd)
    finally:
        os.close(fd)
    return None


def _recorded_pid(fd: int) -> int:
    # The holder takes the lock, then truncates the file and writes its pid: a reader racing it to the
    # file finds it empty for a moment (two daemons starting at once), so it reads again, bounded.
    deadline = time.monotonic() + PID_WAIT_S
    while True:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit() or time.monotonic() >= deadline:
            return int(text) if text.isdigit() else -1
        time.sleep(0.01)


async def serve_daemon(options: DaemonOptions, announce: Callable[[str], None]) -> int:
    """Serve until stopped; 0 also when another daemon already serves (it is announced).

    Raises:
        DaemonUnavailable: the runtime directory or socket path is not this user's alone.
    """
    path = options.socket or socket_path()
    lock = path.with_suffix(".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            announce(f"a daemon already serves {path} (pid {already_serving(lock)}); nothing to do")
            return 0
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        await _serve_locked(path, options, announce)
    finally:
        os.close(fd)  # releases the lock
    return 0


async def _serve_locked(path: Path, options: DaemonOptions, announce: Callable[[str], None]) -> None:
    _unlink(path)  # a killed daemon's socket: we hold the lock, no one serves it
    guardian = adopt_guardian()
    # Without a guardian (not Linux, or `daemon run` started some other way), a watchdog of our own.
    watchdog = await Watchdog.start() if guardian is None else None
    store = StateStore()
    try:
        async with await anyio.create_unix_listener(path, mode=0o600) as listener:
            inode = os.stat(path).st_ino
            try:
                async with anyio.create_task_group() as tg:
                    daemon = _Daemon(tg, store, options, path, watchdog=watchdog, guardian=guardian)
                    tg.start_soon(daemon.watch)
                    tg.start_soon(_stop_on_signal, daemon.stopping)
                    tg.start_soon(listener.serve, daemon.serve_one, tg)
                    announce(f"serving {path} (pid {os.getpid()})")
                    await daemon.stopping.wait()
                    await daemon.shutdown()
                    tg.cancel_scope.cancel()
            finally:
                _unlink(path, inode)
    finally:
        if watchdog is not None:
            await watchdog.close()
        store.close()
    announce("stopped")


class _Daemon:
    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        store: StateStore,
        options: DaemonOptions,
        path: Path,
        *,
        watchdog: Watchdog | None,
        guardian: int | None,
    ) -> None:
        self.pool, self.store = Pool(tg, store), store
        self.options, self.path = options, path
        self.watchdog, self.guardian = watchdog, guardian
        self.known: OrderedDict[tuple[str, str], tuple[JSONObject, JSONObject]] = OrderedDict()
        self._swept = True  # nothing ran yet: nothing to sweep
        self._next_sweep_check = 0.0
        self.stopping = anyio.Event()
        self.connections = 0
        self.started = time.time()
        self._quiet_since = time.monotonic()

    async def watch(self) -> None:
        """Stop idle servers, keep the watchdog's list current, stop the daemon when nothing uses it."""
        while True:
            self.pool.reap_idle()
            if self.watchdog is not None:
                await self.watchdog.track(self.pool.pids())
            self._sweep_strays()
            if self.connections or self.pool.instances:
                self._quiet_since = time.monotonic()
            elif time.monotonic() - self._quiet_since >= self.options.linger_s:
                logger.info("no client and no server for %.0f s; stopping", self.options.linger_s)
                self.stopping.set()
                return
            await anyio.sleep(REAP_INTERVAL_S)

    def _sweep_strays(self) -> None:
        """Once no server runs, have the guardian end what stopped servers left outside their groups.

        A server's process group is ended with it; a descendant that left the group (``setsid``,
        a double fork) is orphaned to the guardian, which ends it now (or when the daemon exits).
        While any server runs (an instance, or any child process of the daemon), a stray may be one
        of that server's: it is left alone until then.
        """
        if self.pool.instances:
            self._swept = False
        elif not self._swept and self.guardian is not None and time.monotonic() >= self._next_sweep_check:
            self._next_sweep_check = time.monotonic() + SWEEP_CHECK_S
            if has_children(os.getpid()):
                return  # a server no instance holds (a session's own per-call server) may own a stray: later
            self._swept = True
            if os.getppid() != self.guardian:  # it died (and its signal stops us): the pid is not its
                logger.warning("the guardian (pid %d) is gone; stopping", self.guardian)
                self.stopping.set()
                return
            os.kill(self.guardian, SWEEP_SIGNAL)

    async def shutdown(self) -> None:
        self.pool.stop_all()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            for instance in self.pool.instances:
                await instance.stopped.wait()

    async def serve_one(self, stream: anyio.abc.SocketStream) -> None:
        """One client's connection; whatever happens to it ends that connection only, never the daemon."""
        self.connections += 1
        try:
            async with stream:
                await self._answer(stream)
        except _HUNG_UP as exc:
            logger.info("a client hung up before its answer was sent: %s", type(exc).__name__)
        finally:
            self.connections -= 1
            self._quiet_since = time.monotonic()

    async def _answer(self, stream: anyio.abc.SocketStream) -> None:
        try:
            await self._serve_one(stream)
        except _HUNG_UP:
            raise
        except Exception as exc:  # a bug in one request's handling: say so to the client and in the log
            if isinstance(exc, ExceptionGroup) and exc.split(_HUNG_UP)[1] is None:
                raise anyio.BrokenResourceError from exc  # only hang-ups, from the session's tasks
            logger.exception("a request failed unexpectedly; the connection is closed, the daemon serves on")
            message = f"the daemon failed this request ({type(exc).__name__}: {exc}); its log has the details"
            with anyio.move_on_after(ATTACH_TIMEOUT_S), suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.send(error_reply(message, -32603))

    async def _serve_one(self, stream: anyio.abc.SocketStream) -> None:
        peer = peer_credentials(stream.extra(SocketAttribute.raw_socket))
        if not peer.same_user:
            logger.warning("refused a connection from uid %d (pid %d): not this user", peer.uid, peer.pid)
            return
        buffered = BufferedByteStream(stream)
        request = await _first_request(buffered)
        if request is None:
            return
        method, params = request
        if method == STATUS:
            await stream.send(result_reply(self.status()))
        elif method == STOP:
            await stream.send(result_reply({"pid": os.getpid(), "stopping": True}))
            self.stopping.set()
        elif method == ATTACH:
            await self._attach(buffered, stream, params, peer.pid)
        elif method == ATTACH_KNOWN:
            await self._attach_known(buffered, stream, params, peer.pid)
        elif method == ATTACH_ALL:
            await self._attach_all(buffered, stream, params, peer.pid)
        elif method == TOOLS:
            await self._tools(stream, params)
        else:
            await stream.send(error_reply(f"unknown first request {method!r}", -32601))

    async def _attach(
        self, buffered: BufferedByteStream, stream: anyio.abc.SocketStream, params: Any, pid: int
    ) -> None:
        params = params if isinstance(params, dict) else {}
        try:
            attach = Attach.from_params(params)
            known = _known_entry(params.get("known"), attach)
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            await stream.send(error_reply(f"invalid attach request: {exc}", -32602))
            return
        await self._serve_attached(buffered, stream, attach, pid, known=known, params=params)

    async def _attach_known(
        self, buffered: BufferedByteStream, stream: anyio.abc.SocketStream, params: Any, pid: int
    ) -> None:
        """An attach by the digest of a command's inputs: the one an earlier command of those inputs sent."""
        params = params if isinstance(params, dict) else {}
        key, name = params.get("key"), params.get("name")
        kept = self.known.get((key, name)) if isinstance(key, str) and isinstance(name, str) else None
        attach = None if kept is None else Attach.from_params(kept[0])
        if attach is None or kept is None or not self.pool.warm(attach):
            why = "no attach of these inputs" if kept is None else "its instance is not running"
            await stream.send(error_reply(f"{why}: send the whole entry", UNKNOWN_KEY))
            return
        self.known.move_to_end((key, name))
        await self._serve_attached(buffered, stream, attach, pid, meta=kept[1])

    async def _serve_attached(
        self,
        buffered: BufferedByteStream,
        stream: anyio.abc.SocketStream,
        attach: Attach,
        pid: int,
        *,
        known: tuple[str, JSONObject] | None = None,
        params: JSONObject | None = None,
        meta: JSONObject | None = None,
    ) -> None:
        try:
            instance = await self.pool.acquire(attach)
        except Refused as exc:
            await stream.send(error_reply(str(exc)))
            return
        try:
            if known is not None and params is not None:
                self._keep(known[0], attach.server.name, params, known[1])
            reply: JSONObject = {"daemon_pid": os.getpid(), "server_pid": instance.pid, "instance": instance.key[:12]}
            if meta is not None:
                reply["meta"] = meta
            await stream.send(result_reply(reply))
            await _serve_mcp(instance, buffered, pid, attach.settings.max_message_bytes)
        finally:
            self.pool.release(instance)

    def _keep(self, key: str, name: str, params: JSONObject, meta: JSONObject) -> None:
        """Keep an attach under the digest of its command's inputs (the newest :data:`KNOWN_KEPT`)."""
        entry = {k: v for k, v in params.items() if k != "known"}
        self.known[(key, name)] = (entry, meta)
        self.known.move_to_end((key, name))
        while len(self.known) > KNOWN_KEPT:
            self.known.popitem(last=False)

    async def _tools(self, stream: anyio.abc.SocketStream, params: Any) -> None:
        """The instance's tools as its guard lists them (what ``Host.tools()`` gives the CLI), then close."""
        try:
            attach = Attach.from_params(params if isinstance(params, dict) else {})
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            await stream.send(error_reply(f"invalid tools request: {exc}", -32602))
            return
        try:
            instance = await self.pool.acquire(attach)
        except Refused as exc:
            await stream.send(error_reply(str(exc)))
            return
        try:
            tools = [_listed(t) for t in instance.host.tools()]
            await stream.send(result_reply({"tools": tools}))
        finally:
            self.pool.release(instance)

    async def _attach_all(
        self, buffered: BufferedByteStream, stream: anyio.abc.SocketStream, params: Any, pid: int
    ) -> None:
        try:
            attach = AttachAll.from_params(params if isinstance(params, dict) else {})
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            await stream.send(error_reply(f"invalid attach-all request: {exc}", -32602))
            return
        await stream.send(result_reply({"daemon_pid": os.getpid(), "servers": len(attach.config.servers)}))
        await serve_all(self.pool, attach, buffered, pid, self.store)

    def status(self) -> JSONObject:
        return {
            "pid": os.getpid(),
            "socket": str(self.path),
            "uptime_s": round(time.time() - self.started, 1),
            "clients": self.connections - 1,
            "watchdog_pid": self.guardian if self.watchdog is None else self.watchdog.pid,
            "guardian": self.guardian is not None,
            "servers": [i.describe() for i in self.pool.instances],
        }


def _known_entry(known: Any, attach: Attach) -> tuple[str, JSONObject] | None:
    """The ``known`` part of an attach: the digest to keep it under and what a command needs then.

    Raises:
        ValueError: it is not one (the attach is refused: a client sends it well-formed or not at all).
    """
    if known is None:
        return None
    if not isinstance(known, dict):
        raise ValueError("known must be an object")
    key, name, meta = known.get("key"), known.get("name"), known.get("meta")
    if not (isinstance(key, str) and len(key) == KEY_CHARS and all(c in "0123456789abcdef" for c in key)):
        raise ValueError(f"known.key must be {KEY_CHARS} lowercase hex digits")
    if name != attach.server.name:
        raise ValueError("known.name must be the attached server's name")
    if not isinstance(meta, dict):
        raise ValueError("known.meta must be an object")
    timeout_s, max_bytes, secrets = meta.get("timeout_s"), meta.get("max_message_bytes"), meta.get("secrets")
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s <= MAX_KNOWN_TIMEOUT_S):
        raise ValueError(f"known.meta.timeout_s must be a number of seconds up to {MAX_KNOWN_TIMEOUT_S:g}")
    if not (isinstance(max_bytes, int) and max_bytes > 0):
        raise ValueError("known.meta.max_message_bytes must be a positive integer")
    if not (isinstance(secrets, list) and all(isinstance(v, str) for v in secrets)):
        raise ValueError("known.meta.secrets must be a list of strings")
    return key, {"timeout_s": float(timeout_s), "max_message_bytes": max_bytes, "secrets": secrets}


def _listed(tool: Any) -> JSONObject:
    """One :class:`~mcpmux.manager.ToolInfo` as the thin client renders it (the fields of ``tools --json``)."""
    fields = ("server", "tool", "title", "description", "input_schema", "output_schema", "annotations", "synthetic")
    return {name: getattr(tool, name) for name in fields}


async def _first_request(stream: BufferedByteStream) -> tuple[str, Any] | None:
    """The method and params of the connection's first line; ``None`` (connection closed) if it is not one."""
    try:
        with anyio.fail_after(ATTACH_TIMEOUT_S):
            line = await stream.receive_until(b"\n", MAX_ATTACH_BYTES)
        message = json.loads(line)
    except (TimeoutError, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.EndOfStream, ValueError) as exc:
        logger.warning("closed a connection without a valid first request: %s", type(exc).__name__)
        return None
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        logger.warning("closed a connection whose first line is not a JSON-RPC request")
        return None
    return message["method"], message.get("params")


async def _serve_mcp(instance: Instance, stream: BufferedByteStream, pid: int, max_bytes: int) -> None:
    server = instance.gateway.server
    name = instance.attach.server.name
    limit = max(max_bytes, DEFAULT_MAX_MESSAGE_BYTES)
    async with (
        framed_streams(name, stream, limit, f"client pid {pid}") as streams,
        tagged(streams.read, LocalCaller(pid)) as read,
    ):
        try:
            await server.run(read, streams.write, server.create_initialization_options())
        except MCPMuxError as exc:
            logger.warning("session of pid %d with %s ended: %s", pid, name, exc)


def _unlink(path: Path, inode: int | None = None) -> None:
    """Remove the socket file (only if it is still the one we bound, when ``inode`` is given)."""
    try:
        if inode is None or os.stat(path).st_ino == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass


async def _stop_on_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for received in signals:
            logger.info("received %s; stopping", signal.Signals(received).name)
            stop.set()
            return
