"""The stdio transport against real child processes (the misbehaving fixture server)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import sys
import time
from typing import Any

import anyio
import psutil
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from mcpmux.config.models import SandboxConfig, ServerSecurity, Settings, StdioServerConfig
from mcpmux.config.paths import server_log_file
from mcpmux.errors import CommandNotFound, MessageTooLarge, ServerExited
from mcpmux.transports import child_environment, open_transport, stdio
from mcpmux.transports._process import ExitWatch
from mcpmux.transports._stderr import LOG_FILE_MAX_BYTES, StderrSink
from mcpmux.transports.stdio import INHERITED_ENV_VARS
from tests.transports.conftest import MCPMUX_CODE, WAIT_S, fixture_config, session_over

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

MB = 1024 * 1024


class Received:
    """A ``message_handler`` that keeps every transport exception the session saw."""

    def __init__(self) -> None:
        self.errors: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)


def gone_or_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_a_tool_call_round_trips_over_stdio() -> None:
    with anyio.fail_after(WAIT_S):
        async with open_transport(fixture_config(), Settings()) as streams:
            assert streams.pid is not None
            async with ClientSession(streams.read, streams.write) as session:
                await session.initialize()
                names = [tool.name for tool in (await session.list_tools()).tools]
                result = await session.call_tool("echo", {"text": "hello"})
    assert "echo" in names
    assert result.content[0].text == "hello"  # type: ignore[union-attr]


def test_a_parent_variable_outside_the_allow_list_is_not_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_TEST_LEAK", "secret")
    monkeypatch.setenv("LC_TEST_LOCALE", "C")
    env = child_environment(fixture_config(env={"GIVEN": "yes"}))
    assert "MCPMUX_TEST_LEAK" not in env
    assert env["GIVEN"] == "yes"
    assert env["LC_TEST_LOCALE"] == "C"
    assert set(env) <= {*INHERITED_ENV_VARS, "GIVEN", *(k for k in env if k.startswith("LC_"))}


async def test_the_child_sees_only_the_allow_listed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_TEST_LEAK", "secret")
    config = fixture_config("--print-env", env={"GIVEN": "yes"})
    with anyio.fail_after(WAIT_S):
        async with session_over(config, Settings()) as (streams, session):
            await session.initialize()
            seen = json.loads(streams.stderr_tail().splitlines()[0])
    assert "MCPMUX_TEST_LEAK" not in seen
    assert seen["GIVEN"] == "yes"
    assert seen["HOME"] == os.environ["HOME"]


async def test_a_missing_command_is_reported_with_the_path_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nowhere/bin:/also/not")
    config = StdioServerConfig(name="ghost", command="no-such-mcp-server")
    with pytest.raises(CommandNotFound) as caught:
        async with open_transport(config, Settings()):
            pass
    assert caught.value.search_path == "/nowhere/bin:/also/not"
    assert "/nowhere/bin:/also/not" in str(caught.value)


async def test_an_exit_before_the_handshake_reports_code_and_stderr(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpmux.server.fx")
    with anyio.fail_after(WAIT_S):
        async with open_transport(fixture_config("--exit-before-handshake"), Settings()) as streams:
            items = [item async for item in streams.read]
    assert len(items) == 1
    exited = items[0]
    assert isinstance(exited, ServerExited)
    assert exited.exit_code == 3
    assert "refusing to start" in exited.stderr_tail
    assert "refusing to start" in str(exited)
    assert "refusing to start" in server_log_file("fx").read_text()
    assert any(r.name == "mcpmux.server.fx" and "refusing to start" in r.getMessage() for r in caplog.records)


class _SilentStderr:
    """A child's stderr that ends without a word."""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        raise anyio.EndOfStream


async def test_a_child_quiet_on_stderr_makes_no_logger_and_its_log_file_still_exists() -> None:
    sink = StderrSink("quiet-on-stderr")
    with anyio.fail_after(WAIT_S):
        await sink.drain(_SilentStderr())  # type: ignore[arg-type]
    assert "mcpmux.server.quiet-on-stderr" not in logging.root.manager.loggerDict
    assert sink.path.exists() and sink.tail() == ""


# On asyncio a child's stderr is read from a loop callback (StderrSink.follow), not by a task.
async def _followed(sink: StderrSink, chunks: list[bytes], *, end: bool = True) -> int:
    """A real pipe followed by ``sink``: ``chunks`` written one loop turn apart; its read end."""
    read_end, write_end = os.pipe()
    sink.follow(read_end, asyncio.get_running_loop())
    try:
        for chunk in chunks:
            os.write(write_end, chunk)
            with anyio.fail_after(WAIT_S):
                while _unread(read_end):  # noqa: ASYNC110 - the reader callback has no event to wait on
                    await anyio.sleep(0.01)
    finally:
        if end:
            os.close(write_end)
    if end:
        with anyio.fail_after(WAIT_S):
            await sink.done.wait()
    return read_end if end else write_end


def _unread(fd: int) -> bool:
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False  # closed: read to its end


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


async def test_a_followed_stderr_pipe_is_masked_kept_logged_and_closed_at_its_end() -> None:
    secret = "s3cr3t-value-0123456789"
    sink = StderrSink("followed", frozenset({secret}))
    half = len(secret) // 2
    read_end = await _followed(sink, [b"one\nkey=" + secret[:half].encode(), secret[half:].encode() + b"\nlast words"])
    assert sink.tail() == "one\nkey=****\nlast words"
    assert sink.path.read_text("utf-8") == "one\nkey=****\nlast words"
    assert _closed(read_end)
    sink.unfollow()  # idempotent once the pipe ended
    assert sink.done.is_set()


async def test_unfollowing_before_the_end_keeps_the_partial_line_and_closes_the_pipe() -> None:
    sink = StderrSink("unfollowed")
    write_end = await _followed(sink, [b"started\nhalf a li"], end=False)
    try:
        assert not sink.done.is_set()
        sink.unfollow()
        assert sink.done.is_set() and sink.tail() == "started\nhalf a li"
        with pytest.raises(BrokenPipeError):  # our read end is closed: the child would get EPIPE
            os.write(write_end, b"more")
    finally:
        os.close(write_end)


async def test_a_stderr_log_that_cannot_be_written_keeps_the_tail_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    sink = StderrSink("full-disk")
    sink.path.parent.mkdir(parents=True, exist_ok=True)
    sink.path.symlink_to("/dev/full")  # every write fails with ENOSPC
    caplog.set_level(logging.WARNING, logger="mcpmux.server.full-disk")
    await _followed(sink, [b"first line\n", b"second line\n"])
    assert sink.tail() == "first line\nsecond line\n"
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcpmux.server.full-disk"]
    assert len(warnings) == 1 and "cannot write the stderr log" in warnings[0], warnings


@pytest.fixture(params=["notice", "task"])
def exit_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The exit reported through a loop callback on the child's pidfd (asyncio, Linux), or by a
    task waiting for it from the start (other backends, no pidfd)."""
    if request.param == "task":
        monkeypatch.setattr(ExitWatch, "notify", lambda *args: False)
    return str(request.param)


# Exits with code 5 while a grandchild, in its process group, holds its stdout and stderr open.
HELD_PIPES = (
    "import subprocess, sys; subprocess.Popen(['sleep', '600']); "
    "sys.stderr.write('leaving a grandchild\\n'); sys.stderr.flush(); sys.exit(5)"
)


async def test_an_exit_is_reported_while_a_grandchild_holds_the_pipes(exit_path: str) -> None:
    config = StdioServerConfig(name="held", command=sys.executable, args=("-c", HELD_PIPES))
    with anyio.fail_after(WAIT_S):
        async with open_transport(config, Settings()) as streams:
            items = [item async for item in streams.read]
    assert len(items) == 1, items
    exited = items[0]
    assert isinstance(exited, ServerExited)
    assert exited.exit_code == 5
    assert "leaving a grandchild" in exited.stderr_tail


async def test_a_child_exiting_while_its_transport_closes_leaves_no_loop_error(
    exit_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The exit may come before, during or after the close: a reporter is never started in a task
    # group that is gone, and the event loop's exception handler never sees a failed callback.
    caplog.set_level(logging.ERROR, logger="asyncio")
    config = StdioServerConfig(name="racer", command=sys.executable, args=("-c", "import sys; sys.exit(4)"))
    for step in range(12):
        with anyio.fail_after(WAIT_S):
            async with open_transport(config, Settings()) as streams:
                await anyio.sleep(step * 0.01)  # the child's start takes tens of ms: the exit lands anywhere
        assert streams.exit_code() is not None  # reaped (4, or a signal on a machine too slow to start it)
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def _pidfds_of(pid: int) -> list[str]:
    """This process's open pidfds of ``pid`` (their fdinfo names the pid)."""
    found = []
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            with open(f"/proc/self/fdinfo/{fd}") as info:
                if f"Pid:\t{pid}\n" in info.read():
                    found.append(fd)
        except FileNotFoundError:
            continue  # closed meanwhile (the listing's own fd, among others)
    return found


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd: Linux")
async def test_a_child_outliving_its_transport_leaves_no_exit_reader_behind(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As if the child survived its stop (SIGKILL cannot end a process stuck in the kernel): the
    # transport ends first, and the exit comes later, to a reader that must be gone.
    async def abandon(process: Any, *, reaper: bool = False, watch: ExitWatch | None = None) -> None:
        return None

    monkeypatch.setattr(stdio, "stop_process", abandon)
    caplog.set_level(logging.ERROR, logger="asyncio")
    config = StdioServerConfig(name="late", command=sys.executable, args=("-c", "import time; time.sleep(1)"))
    with anyio.fail_after(WAIT_S):
        async with open_transport(config, Settings()) as streams:
            pid = streams.pid
            assert pid is not None
            assert _pidfds_of(pid)  # the exit reader's
        assert not _pidfds_of(pid)
        while not gone_or_zombie(pid):  # noqa: ASYNC110
            await anyio.sleep(0.02)
        await anyio.sleep(0.1)  # a reader left behind would run now
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


async def test_a_crash_mid_call_fails_the_request_at_once(exit_path: str) -> None:
    received = Received()
    with anyio.fail_after(WAIT_S):
        async with session_over(fixture_config(), Settings(), message_handler=received) as (streams, session):
            await session.initialize()
            start = time.monotonic()
            with pytest.raises(MCPError):
                await session.call_tool("crash", {})
            elapsed = time.monotonic() - start
            assert streams.exit_code() == 7
    assert elapsed < 2.0
    exited = [e for e in received.errors if isinstance(e, ServerExited)]
    assert exited
    assert exited[0].exit_code == 7
    assert "crashing (mock)" in exited[0].stderr_tail


async def test_a_grandchild_dies_with_the_connection_and_no_zombie_is_left() -> None:
    with anyio.fail_after(WAIT_S):
        async with session_over(fixture_config(), Settings()) as (streams, session):
            await session.initialize()
            result = await session.call_tool("spawn_grandchild", {})
            grandchild = int(result.content[0].text)  # type: ignore[union-attr]
            assert psutil.pid_exists(grandchild)
            child = streams.pid
    assert child is not None
    assert gone_or_zombie(grandchild)
    assert not psutil.pid_exists(child), "the child was not reaped"


@pytest.mark.slow
async def test_a_child_ignoring_stdin_close_is_killed_within_bounds() -> None:
    config = StdioServerConfig(name="stubborn", command="sleep", args=("600",))
    start = time.monotonic()
    with anyio.fail_after(WAIT_S):
        async with open_transport(config, Settings()) as streams:
            pid = streams.pid
    assert time.monotonic() - start < 6.0
    assert pid is not None
    assert not psutil.pid_exists(pid)


async def test_a_hanging_call_times_out_and_teardown_stays_bounded() -> None:
    start = time.monotonic()
    with anyio.fail_after(WAIT_S):
        async with session_over(fixture_config(), Settings()) as (_streams, session):
            await session.initialize()
            with pytest.raises(MCPError):
                await session.call_tool("hang", {}, read_timeout_seconds=0.5)
    assert time.monotonic() - start < 10.0


async def test_a_10_mb_stderr_flood_does_not_stall_a_call() -> None:
    with anyio.fail_after(WAIT_S):
        async with session_over(fixture_config(), Settings()) as (streams, session):
            await session.initialize()
            start = time.monotonic()
            assert (await session.call_tool("flood", {"mb": 10})).is_error is False
            assert (await session.call_tool("echo", {"text": "after"})).is_error is False
            elapsed = time.monotonic() - start
            tail = streams.stderr_tail()
    assert elapsed < 10.0
    assert 0 < len(tail) <= 64 * 1024
    log = server_log_file("fx")
    assert log.exists()
    assert log.stat().st_size <= LOG_FILE_MAX_BYTES + 64 * 1024
    rotated = log.with_name("fx.log.1")
    assert log.stat().st_size + (rotated.stat().st_size if rotated.exists() else 0) >= 10 * MB


async def test_an_oversized_stdout_line_is_dropped_and_the_session_goes_on() -> None:
    received = Received()
    settings = Settings(max_message_bytes=1 * MB)
    with anyio.fail_after(WAIT_S):
        async with session_over(fixture_config(), settings, message_handler=received) as (_streams, session):
            await session.initialize()
            await session.call_tool("giant", {"size": 8 * MB})
            result = await session.call_tool("echo", {"text": "still here"})
    assert result.content[0].text == "still here"  # type: ignore[union-attr]
    too_large = [e for e in received.errors if isinstance(e, MessageTooLarge)]
    assert len(too_large) == 1
    assert too_large[0].size >= 8 * MB - 8


async def test_garbage_on_stdout_is_ignored() -> None:
    with anyio.fail_after(WAIT_S):
        async with session_over(fixture_config("--garbage", "3"), Settings()) as (_streams, session):
            await session.initialize()
            await session.call_tool("garbage", {"lines": 5})
            result = await session.call_tool("echo", {"text": "ok"})
    assert result.content[0].text == "ok"  # type: ignore[union-attr]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
async def test_200_open_close_cycles_leak_no_file_descriptor() -> None:
    config = StdioServerConfig(name="cat", command="cat")
    for _ in range(3):
        async with open_transport(config, Settings()):
            pass
    baseline = open_fds()
    pids: list[int] = []
    # Each spawn starts the reaper (a Python interpreter) too: on a loaded 2-core machine 200
    # cycles take minutes. The test is about descriptors and processes, not speed.
    with anyio.fail_after(300):
        for _ in range(200):
            async with open_transport(config, Settings()) as streams:
                assert streams.pid is not None
                pids.append(streams.pid)
    assert open_fds() == baseline
    assert not any(psutil.pid_exists(pid) for pid in pids)


async def test_a_sandboxed_server_runs_through_the_sandbox_wrapper() -> None:
    from mcpmux.processes.sandbox import sandbox_backend

    if sandbox_backend().name not in ("bubblewrap", "landlock"):
        pytest.skip("no sandbox backend works on this machine")
    sandbox = SandboxConfig(enabled=True, filesystem=(MCPMUX_CODE,))
    config = fixture_config().model_copy(update={"security": ServerSecurity(sandbox=sandbox)})
    with anyio.fail_after(WAIT_S):
        async with session_over(config) as (streams, session):
            await session.initialize()
            result = await session.call_tool("echo", {"text": "boxed"})
            pid = streams.pid
    assert result.content[0].text == "boxed"  # type: ignore[union-attr]
    assert pid is not None
    assert not psutil.pid_exists(pid)
