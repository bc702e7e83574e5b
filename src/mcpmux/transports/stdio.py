"""The stdio transport: a child process speaking newline-delimited JSON-RPC on stdin/stdout.

Ours rather than the SDK's ``stdio_client`` (DESIGN section 2): it resolves the command first,
gives the child an allow-listed environment, runs it inside the server's sandbox when one is set
(:func:`~mcpmux.processes.sandbox.sandbox_command`), caps message size, keeps stderr (ring buffer,
log file, logger), reports the child's exit on the read stream, and stops its whole process group
and, on Linux, every descendant (:mod:`mcpmux.processes._reaper`: a reaper per server, or in the
daemon one guardian for all), even if mcpmux is SIGKILLed.

Built on ``anyio.open_process``: the same structured-concurrency primitives as the rest of mcpmux,
byte streams that fit the framer, and any anyio backend. On asyncio, stderr is read from a loop
reader callback on a pipe of ours (:meth:`StderrSink.follow`), and on Linux the exit is seen by a
loop reader on the child's pidfd (:meth:`ExitWatch.notify`): the exit reporter's task starts only
at the exit. Elsewhere anyio's stderr stream is drained by a task and a task waits for the exit.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, closing, contextmanager
from functools import partial
from pathlib import Path

import anyio
from anyio.abc import AsyncResource, Process
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from mcpmux.config.display import looks_secret, redact
from mcpmux.config.models import Settings, StdioServerConfig
from mcpmux.errors import CommandNotFound, ServerExited, TransportError
from mcpmux.processes._reaper import per_process_reaper, reaper_argv
from mcpmux.processes.sandbox import package_runner_note, sandbox_command
from mcpmux.transports._process import ExitWatch, stop_process
from mcpmux.transports._stderr import StderrSink
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.direct import DirectReplies, asyncio_loop
from mcpmux.transports.framing import LineFramer, LineWriter, pump_lines

__all__ = [
    "INHERITED_ENV_PREFIXES",
    "INHERITED_ENV_VARS",
    "NETWORK_ENV_VARS",
    "child_environment",
    "open_stdio",
    "resolve_command",
]

logger = logging.getLogger("mcpmux.transports")

_WINDOWS_ENV = ("APPDATA", "COMSPEC", "LOCALAPPDATA", "PATHEXT", "PROGRAMDATA", "SYSTEMDRIVE", "SYSTEMROOT",
                "TEMP", "TMP", "USERPROFILE", "WINDIR")  # fmt: skip
NETWORK_ENV_VARS: tuple[str, ...] = (
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
)  # fmt: skip
"""Trust stores and proxies: without them ``npx``/``uvx`` fail behind a TLS-inspecting proxy."""
INHERITED_ENV_VARS: tuple[str, ...] = (
    "HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER",
    *NETWORK_ENV_VARS,
    *(_WINDOWS_ENV if sys.platform == "win32" else ()),
)  # fmt: skip
"""Variables a child inherits from mcpmux's environment; others need ``settings.env_passthrough`` or ``env``."""
INHERITED_ENV_PREFIXES: tuple[str, ...] = ("LC_",)
"""Prefixes of inherited variables (the locale categories)."""
_INHERITED = frozenset(INHERITED_ENV_VARS)

EXIT_REPORT_GRACE_S = 0.5
WRITER_FLUSH_S = 0.5
Item = SessionMessage | Exception


def child_environment(
    server: StdioServerConfig, parent: Mapping[str, str] | None = None, *, passthrough: Sequence[str] = ()
) -> dict[str, str]:
    """The exact environment the child of ``server`` gets: the allow-listed part of ``parent``
    (``os.environ`` by default) overlaid with the server's configured ``env``.

    ``passthrough`` (``settings.env_passthrough``) adds names and globs (``CORP_*``) to the
    allow-list. Values holding shell functions (``() {...``) are never inherited.
    """
    source = os.environ if parent is None else parent
    # The names first, the values of the inherited ones only (os.environ decodes on every access).
    inherited = [
        key
        for key in (_environ_names() if parent is None else source)
        if key in _INHERITED or key.startswith(INHERITED_ENV_PREFIXES) or (passthrough and _passes(key, passthrough))
    ]
    env = {key: value for key in inherited if not (value := source[key]).startswith("()")}
    env.setdefault("PATH", os.defpath)
    env.update({key: secret.get_secret_value() for key, secret in server.env.items()})
    return env


def _environ_names() -> list[str]:
    """The names in ``os.environ``, without its Python-level decoding call per name (50 children start at once)."""
    if not os.supports_bytes_environ:  # pragma: no cover - Windows keeps str names
        return list(os.environ)
    encoding = sys.getfilesystemencoding()
    return [name.decode(encoding, "surrogateescape") for name in os.environb]


def _secrets_of(server: StdioServerConfig) -> frozenset[str]:
    """What to mask in the child's stderr and descriptions: its interpolated values and credential-like env."""
    configured = {v.get_secret_value() for k, v in server.env.items() if looks_secret(k, v.get_secret_value())}
    return server.secret_values | configured


def _passes(key: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)


def resolve_command(server: StdioServerConfig, search_path: str) -> str:
    """The absolute path of the server's command, searched on ``search_path`` (the child's PATH).

    Raises:
        CommandNotFound: no executable of that name on the path (or at that location).
    """
    command = server.command
    if os.sep in command and not os.path.isabs(command) and server.cwd is not None:
        command = str(Path(server.cwd) / command)
    found = shutil.which(command, path=search_path)
    if found is None:
        raise CommandNotFound(server.name, server.command, search_path)
    return os.path.abspath(found)


@asynccontextmanager
async def open_stdio(server: StdioServerConfig, settings: Settings) -> AsyncIterator[TransportStreams]:
    """Start the server's process and yield its message streams; stop and reap it on exit.

    When the child exits, a :class:`ServerExited` item (exit code, stderr tail) ends the read
    stream, which then closes, so requests still waiting fail at once.

    Raises:
        CommandNotFound: the command is not on the child's PATH.
        TransportError: the process could not be started, or its required sandbox is unavailable.
    """
    env = child_environment(server, passthrough=settings.env_passthrough)
    executable = resolve_command(server, env["PATH"])
    wrapped = per_process_reaper()  # not in a daemon under a guardian: it is the reaper of all
    loop = asyncio_loop()
    # On asyncio the child's stderr is a pipe of ours, read from a loop callback (StderrSink.follow);
    # elsewhere anyio's stream, read by a task (StderrSink.drain).
    err_read, err_write = os.pipe() if loop is not None else (-1, subprocess.PIPE)
    try:
        process = await _spawn(server, executable, env, wrapped, err_write)
    except BaseException:
        if loop is not None:
            os.close(err_read)
        raise
    finally:
        if loop is not None:
            os.close(err_write)  # the child has its copy
    secrets = _secrets_of(server)
    sink = StderrSink(server.name, secrets)
    read_send, read_receive = anyio.create_memory_object_stream[Item](0)
    assert process.stdin is not None, "spawned with pipes"
    write = LineWriter(process.stdin)
    direct = DirectReplies(write)
    framer = LineFramer(server.name, settings.max_message_bytes, direct)
    exit_watch = ExitWatch(process)  # one wait for the exit: the reporter's, and the stop's if it comes later
    # Closing both ends here too: a task cancelled before its first step never closes its own.
    with read_send, read_receive, _following(sink, err_read, loop), closing(exit_watch):
        async with anyio.create_task_group() as tg:
            if process.stderr is not None:
                tg.start_soon(sink.drain, process.stderr)
            stdout = _StdoutForwarder(process, framer, read_send)
            tg.start_soon(stdout.run)
            note = package_runner_note(server)
            report = partial(_report_exit, server.name, exit_watch, stdout, read_send, sink, note)
            # On asyncio (Linux) the reporter starts once the child has exited: no task waits for it till then.
            if loop is None or not exit_watch.notify(loop, lambda: tg.start_soon(report)):
                tg.start_soon(report)
            try:
                yield TransportStreams(
                    read=read_receive,
                    write=write,
                    describe=redact(f"pid {process.pid}: {' '.join([server.command, *server.args])}", secrets),
                    pid=process.pid,
                    stderr_tail=sink.tail,
                    exit_code=lambda: process.returncode,
                    direct=direct,
                )
            finally:
                with anyio.CancelScope(shield=True):
                    # Nobody reads past this point: the exit of a child being stopped is not reported.
                    exit_watch.silence()
                    write.close()
                    read_receive.close()
                    await _shutdown(exit_watch, reaper=wrapped)
                    sink.unfollow()  # the child is gone: what it wrote last is in the pipe
                tg.cancel_scope.cancel()


@contextmanager
def _following(sink: StderrSink, fd: int, loop: asyncio.AbstractEventLoop | None) -> Iterator[None]:
    """``sink`` follows the stderr pipe ``fd`` on ``loop`` (asyncio) for the block, and stops after it."""
    if loop is None:
        yield  # anyio's stream, drained by a task
        return
    sink.follow(fd, loop)
    try:
        yield
    finally:
        sink.unfollow()


async def _spawn(
    server: StdioServerConfig, executable: str, env: dict[str, str], wrapped: bool, stderr: int
) -> Process:
    argv = sandbox_command(server, executable, env)  # bare argv unless the server's sandbox is on
    try:
        # Shielded: asyncio answers a spawn cancelled before its pipes connect with a SIGKILL to
        # the child alone, which orphans whatever the reaper (or the server) already forked. A
        # spawn takes milliseconds; a cancelled caller stops the whole group in open_stdio.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                # Under the reaper, no descendant outlives the server, even one that left its group.
                reaper_argv(argv) if wrapped else argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=server.cwd,
                env=env,
                start_new_session=True,
            )
    except PermissionError as exc:
        raise CommandNotFound(server.name, executable, env["PATH"]) from exc
    except OSError as exc:
        raise TransportError(server.name, f"cannot start {executable!r}: {exc}") from exc
    return process


class _StdoutForwarder:
    """Forwards the child's stdout as messages until its end, or until :meth:`stop` (see :func:`_report_exit`)."""

    def __init__(self, process: Process, framer: LineFramer, sink: MemoryObjectSendStream[Item]) -> None:
        self._process, self._framer, self._sink = process, framer, sink
        self._scope = anyio.CancelScope()
        self.done = anyio.Event()

    async def run(self) -> None:
        assert self._process.stdout is not None, "spawned with pipes"
        with self._scope:
            await pump_lines(self._process.stdout, self._sink, self._framer)
        self.done.set()

    def stop(self) -> None:
        self._scope.cancel()


async def _report_exit(
    server: str,
    watch: ExitWatch,
    stdout: _StdoutForwarder,
    sink: MemoryObjectSendStream[Item],
    stderr: StderrSink,
    note: str | None = None,
) -> None:
    """Once the child exits, stop forwarding its stdout and end the read stream with
    :class:`ServerExited` (``note`` says why a sandboxed package runner likely failed).

    A sibling task of the forwarder, not its parent: one task group per child, not two.
    """
    code = await watch.wait()
    # Its last stdout lines and stderr words may still be in the pipes; a grandchild holding
    # them open must not delay the report.
    if not (stdout.done.is_set() and stderr.done.is_set()):  # else no deadline to set up (the usual case)
        with anyio.move_on_after(EXIT_REPORT_GRACE_S):
            await stdout.done.wait()
            await stderr.done.wait()
    stdout.stop()
    async with sink:
        logger.debug("server %r: process %d exited with code %d", server, watch.process.pid, code)
        if not sink.statistics().open_receive_streams:
            return  # the transport is being closed: nobody would read the report
        try:
            await sink.send(_exited(server, code, stderr.tail(), note))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("server %r: nobody is reading; exit not reported", server)


def _exited(server: str, code: int, stderr_tail: str, note: str | None) -> ServerExited:
    # The note rides at the end of the stderr tail: the connection rebuilds this error with it.
    tail = f"{stderr_tail.rstrip()}\n[mcpmux: {note}]" if note else stderr_tail
    error = ServerExited(server, None if code < 0 else code, tail)
    if note:
        error.hint = note
    return error


async def _shutdown(watch: ExitWatch, *, reaper: bool) -> None:
    """Close stdin, stop the process group, then release our pipe ends; bounded in time.

    The exit is waited for through ``watch``, shared with the exit reporter: one wait, not two (on
    asyncio and Linux the watch's own pidfd reader, silenced: the exit is not reported).
    Should the reporter be cancelled with the session (stop, Ctrl-C), the watch passes to the stop.
    """
    process = watch.process
    assert process.stdin is not None, "spawned with pipes"
    assert process.stdout is not None, "spawned with pipes"
    # The 2025-11-25 spec closes stdio sessions by closing stdin; signals only if the child lingers.
    with anyio.move_on_after(WRITER_FLUSH_S):
        await _close_quietly(process.stdin)
    await stop_process(process, reaper=reaper, watch=watch)
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:  # stderr: a pipe of the transport's own on asyncio (StderrSink.follow)
            await _close_quietly(pipe)


async def _close_quietly(pipe: AsyncResource) -> None:
    try:
        await pipe.aclose()
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        logger.debug("closing a pipe failed: %r", exc)
