"""``mcpmux test NAME``: connect to one server directly, ping it, list everything, report timings.

It bypasses the manager on purpose: a test reports what one connection does, with no supervision,
retries or catalog in between.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import click

from mcpmux.cli import render
from mcpmux.cli.completion import complete_servers
from mcpmux.cli.output import command_config, emit, err_console, json_option, redact_logs, state
from mcpmux.config.effective import with_effective_sandbox
from mcpmux.errors import MCPMuxError

if TYPE_CHECKING:
    from mcpmux.connection import Connection

_T = TypeVar("_T")


def _run(body: Callable[[], Awaitable[_T]]) -> _T:
    """Run ``body`` on an event loop, masking configured secrets in any error it raises."""
    try:
        return anyio.run(body)
    except MCPMuxError as exc:
        exc.args = tuple(_redact(str(a)) for a in exc.args)
        raise


def _redact(text: str) -> str:
    from mcpmux.config.display import redact

    return redact(text, getattr(state(), "secrets", ()))


@asynccontextmanager
async def _connected(name: str) -> AsyncIterator[Connection]:
    from mcpmux.connection import Connection
    from mcpmux.manager.hints import explain_timeout

    config = command_config()
    state().secrets = config.secret_values
    redact_logs(config.secret_values)
    # Tested as the manager would run it: the global security.sandbox applies to this server too.
    server = with_effective_sandbox(config.server(name), config.security)
    progress = err_console().status(f"connecting to {name} ({server.type})...") if sys.stderr.isatty() else None
    if progress is not None:
        progress.start()
    try:
        connection = Connection(server, config.settings)
        await connection.connect()
    except MCPMuxError as exc:
        explain_timeout(server, exc)
        raise
    finally:
        if progress is not None:
            progress.stop()
    try:
        yield connection
    finally:
        await connection.close()


@click.command("test")
@click.argument("name", shell_complete=complete_servers)
@json_option
def test_cmd(name: str) -> None:
    """Connect to server NAME, ping it, list everything it offers and report timings."""

    async def body() -> dict[str, Any]:
        started = time.perf_counter()
        async with _connected(name) as conn:
            connected = time.perf_counter()
            await conn.ping()
            pinged = time.perf_counter()
            listing = {
                "tools": len(await conn.list_tools()),
                "resources": len(await conn.list_resources()),
                "resource_templates": len(await conn.list_resource_templates()),
                "prompts": len(await conn.list_prompts()),
            }
            listed = time.perf_counter()
            return render.test_report(conn, listing, started, connected, pinged, listed)

    report = _run(body)
    emit(report, lambda: render.print_test_report(report))
