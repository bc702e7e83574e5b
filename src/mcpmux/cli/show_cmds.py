"""``mcpmux show NAME`` (everything about one server) and ``mcpmux logs NAME [-f]``."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import click

from mcpmux.cli import render
from mcpmux.cli.completion import complete_servers
from mcpmux.cli.host_cmds import managed, run
from mcpmux.cli.output import command_config, emit, json_option
from mcpmux.config import Config, StdioServerConfig, config_to_dict
from mcpmux.config.display import MASK, mask_secrets, redact
from mcpmux.config.paths import server_log_file
from mcpmux.types.json_shapes import JSONObject

STDERR_TAIL_LINES = 20


@click.command("show")
@click.argument("name", shell_complete=complete_servers)
@json_option
def show_cmd(name: str) -> None:
    """Show server NAME: config (secrets masked), state history, capabilities, tools, stderr tail."""

    async def body(config: Config) -> JSONObject:
        server = config.server(name)
        async with managed(config, {name}) as host:
            status = host.status()[host.servers.index(name)]
            info = host.server_info(name)
            stderr = host.stderr_tail(name) or _log_tail(name)
            caps = info.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True) if info else None
            return {
                "config": _server_config(config, name),
                "status": mask_secrets(status.to_json(), config.secret_values),
                "usage": _usage(status.pid),
                "capabilities": caps,
                "instructions": info.instructions if info else None,
                "environment": _child_environment(server, config),
                "tools": [t.name for t in host.tools(name)],
                "withheld": [{"tool": e.tool.name, "kind": e.kind, "reason": e.reason} for e in host.withheld(name)],
                "resources": [r.uri for r in host.resources(name)],
                "prompts": [p.name for p in host.prompts(name)],
                "stderr_tail": mask_secrets(stderr.splitlines()[-STDERR_TAIL_LINES:], config.secret_values),
            }

    data = run(body)
    emit(data, lambda: render.print_show(data))


def _usage(pid: int | None) -> JSONObject | None:
    from mcpmux.processes.usage import process_usage

    usage = process_usage(pid)
    return usage.to_json() if usage is not None else None


def _server_config(config: Config, name: str) -> JSONObject:
    servers = config_to_dict(config)["mcp"]["servers"]
    return next(s for s in servers if s["name"] == name)


def _child_environment(server: Any, config: Config) -> dict[str, str] | None:
    """The environment a stdio child gets: the allow-listed parent variables (and ``settings.env_passthrough``)
    plus its ``env`` (masked)."""
    if not isinstance(server, StdioServerConfig):
        return None
    from mcpmux.transports.stdio import child_environment

    configured = set(server.env)
    env = child_environment(server, passthrough=config.settings.env_passthrough)
    return {k: MASK if k in configured or v in config.secret_values else v for k, v in sorted(env.items())}


def _log_tail(name: str) -> str:
    path = server_log_file(name)
    if not path.is_file():
        return ""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        handle.seek(max(handle.tell() - 16384, 0))
        return handle.read().decode("utf-8", "replace")


@click.command("logs")
@click.argument("name", shell_complete=complete_servers)
@click.option("-n", "--lines", default=50, show_default=True, help="How many of the last lines to print.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until interrupted.")
def logs_cmd(name: str, lines: int, follow: bool) -> None:
    """Print the stderr log of server NAME (written whenever mcpmux runs it)."""
    config = command_config()
    config.server(name)
    path = server_log_file(name)
    if not path.exists() and not follow:
        click.echo(f"no log yet for {name!r} ({path})", err=True)
        return
    # Logs written before mcpmux masked stderr (or by another configuration) may still hold secrets.
    text = redact(_log_tail(name), config.secret_values) if path.exists() else ""
    for line in text.splitlines()[-lines:]:
        click.echo(line)
    if follow:
        anyio.run(_follow, path, config.secret_values)


async def _follow(path: Any, secrets: frozenset[str]) -> None:
    position = path.stat().st_size if path.exists() else 0
    while True:
        if path.exists():
            size = path.stat().st_size
            if size < position:  # rotated or truncated: start over
                position = 0
            if size > position:
                with path.open("rb") as handle:
                    handle.seek(position)
                    chunk = handle.read()
                    position = handle.tell()
                sys.stdout.write(redact(chunk.decode("utf-8", "replace"), secrets))
                sys.stdout.flush()
        await anyio.sleep(0.25)


__all__ = ["logs_cmd", "show_cmd"]
