"""One-server commands: ``test``, ``tools``, ``call``, ``resources``, ``read``, ``prompts``, ``prompt``.

Each connects to the one server it names, does its work and disconnects; nothing else is started.
The commands only parse and print: the work is the library's :class:`~mcpmux.connection.Connection`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import click

from mcpmux.cli import render
from mcpmux.cli.output import emit, err_console, json_option, state
from mcpmux.config import load_config
from mcpmux.errors import EXIT_FAILED, EXIT_OK, MCPMuxError

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

    config = load_config(state().config_path)
    state().secrets = config.secret_values
    server = config.server(name)
    progress = err_console().status(f"connecting to {name} ({server.type})...") if sys.stderr.isatty() else None
    if progress is not None:
        progress.start()
    try:
        connection = Connection(server, config.settings)
        await connection.connect()
    finally:
        if progress is not None:
            progress.stop()
    try:
        yield connection
    finally:
        await connection.close()


def _split(target: str, what: str) -> tuple[str, str]:
    server, sep, item = target.partition(":")
    if not sep or not server or not item:
        raise click.BadParameter(f"expected SERVER:{what.upper()}, got {target!r}", param_hint=what)
    return server, item


def _json_arguments(text: str | None, args_file: Path | None) -> dict[str, Any]:
    if text is not None and args_file is not None:
        raise click.BadParameter("give JSON_ARGS or --args-file, not both")
    if args_file is not None:
        text = args_file.read_text(encoding="utf-8")
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc.msg} (column {exc.colno})", param_hint="JSON_ARGS") from exc
    if not isinstance(value, dict):
        raise click.BadParameter("arguments must be a JSON object", param_hint="JSON_ARGS")
    return value


@click.command("test")
@click.argument("name")
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


@click.command("tools")
@click.argument("name")
@json_option
def tools_cmd(name: str) -> None:
    """List the tools of server NAME."""

    async def body() -> list[Any]:
        async with _connected(name) as conn:
            return await conn.list_tools()

    tools = _run(body)
    emit([render.dump(t) for t in tools], lambda: render.print_tools(name, tools))


@click.command("call")
@click.argument("target", metavar="SERVER:TOOL")
@click.argument("arguments", metavar="[JSON_ARGS]", required=False)
@click.option(
    "--args-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Read JSON_ARGS from F."
)
@click.option("--timeout", type=click.FloatRange(min=0.001), help="Seconds to wait (default: the server's timeout).")
@json_option
def call_cmd(target: str, arguments: str | None, args_file: Path | None, timeout: float | None) -> int:
    """Call a tool and print its result; exit 1 if the tool reports an error."""
    server, tool = _split(target, "tool")
    args = _json_arguments(arguments, args_file)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        render.print_progress(progress, total, message)

    async def body() -> Any:
        async with _connected(server) as conn:
            return await conn.call_tool(tool, args, timeout=timeout, on_progress=on_progress)

    result = _run(body)
    emit(render.dump(result), lambda: render.print_tool_result(result))
    if result.is_error:
        sys.stderr.write(f"Error: tool {tool!r} on server {server!r} reported an error\n")
        return EXIT_FAILED
    return EXIT_OK


@click.command("resources")
@click.argument("name")
@json_option
def resources_cmd(name: str) -> None:
    """List the resources and resource templates of server NAME."""

    async def body() -> tuple[list[Any], list[Any]]:
        async with _connected(name) as conn:
            return await conn.list_resources(), await conn.list_resource_templates()

    resources, templates = _run(body)
    data = {"resources": [render.dump(r) for r in resources], "templates": [render.dump(t) for t in templates]}
    emit(data, lambda: render.print_resources(name, resources, templates))


@click.command("read")
@click.argument("name")
@click.argument("uri")
@json_option
def read_cmd(name: str, uri: str) -> None:
    """Read resource URI from server NAME and print its contents."""

    async def body() -> Any:
        async with _connected(name) as conn:
            return await conn.read_resource(uri)

    result = _run(body)
    emit(render.dump(result), lambda: render.print_resource_contents(result))


@click.command("prompts")
@click.argument("name")
@json_option
def prompts_cmd(name: str) -> None:
    """List the prompts of server NAME with their arguments."""

    async def body() -> list[Any]:
        async with _connected(name) as conn:
            return await conn.list_prompts()

    prompts = _run(body)
    emit([render.dump(p) for p in prompts], lambda: render.print_prompts(name, prompts))


@click.command("prompt")
@click.argument("target", metavar="SERVER:PROMPT")
@click.argument("arguments", metavar="[JSON_ARGS]", required=False)
@json_option
def prompt_cmd(target: str, arguments: str | None) -> None:
    """Render a prompt with JSON_ARGS (an object of strings) and print its messages."""
    server, prompt = _split(target, "prompt")
    args = {k: v if isinstance(v, str) else json.dumps(v) for k, v in _json_arguments(arguments, None).items()}

    async def body() -> Any:
        async with _connected(server) as conn:
            return await conn.get_prompt(prompt, args)

    result = _run(body)
    emit(render.dump(result), lambda: render.print_prompt(result))
