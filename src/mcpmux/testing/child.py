"""A mock served on this process's stdio: what ``python -m mcpmux.testing`` and :meth:`MockServer.run_stdio` run.

The child plays the mock's :class:`~mcpmux.testing.failures.Startup` once, before it serves (a
banner of garbage lines on stdout, a slow start, an exit before the handshake), then answers on
stdin/stdout until stdin closes. A crash writes ``crashing (mock)`` to stderr and exits mid-call.
Each ``tools/call`` is appended to ``calls`` (one JSON line) when given, so the parent's mock
sees the child's calls.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import anyio
from mcp.server.stdio import stdio_server

from mcpmux.testing.failures import Crash
from mcpmux.testing.runtime import MockRuntime
from mcpmux.testing.spec import Call, MockSpec

__all__ = ["GARBAGE_LINE", "run_stdio"]

GARBAGE_LINE = b"this line is not JSON-RPC (mock garbage_output)\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run_stdio(mock: MockSpec, calls: Path | None = None) -> None:
    """Serve ``mock`` on this process's stdin/stdout until stdin closes, then exit.

    Raises:
        SystemExit: always: 0 when stdin closed, the startup's code when it exits before serving.
    """
    # stdio_server() reads and writes through its own wrappers; keep the raw fd for garbage lines.
    raw_stdout = os.dup(1)
    startup = mock.startup
    if startup.garbage_lines:
        _write_all(raw_stdout, b"".join(b"this is not json %d (mock)\n" % i for i in range(startup.garbage_lines)))
    if startup.delay > 0:
        time.sleep(startup.delay)
    if startup.exit_code is not None:
        _write_all(2, startup.stderr.encode() + b"\n")
        sys.exit(startup.exit_code)

    async def crash(failure: Crash) -> None:
        _write_all(2, b"crashing (mock)\n")
        os._exit(failure.exit_code)

    def garbage() -> None:
        _write_all(raw_stdout, GARBAGE_LINE)

    def logged(call: Call) -> None:
        if calls is not None:
            with calls.open("a") as log:
                log.write(json.dumps(asdict(call)) + "\n")

    runtime = MockRuntime(mock, on_crash=crash, on_garbage=garbage, on_call=logged, apply_startup=False)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await runtime.run(read, write, runtime.create_initialization_options())

    anyio.run(serve)
    sys.exit(0)
