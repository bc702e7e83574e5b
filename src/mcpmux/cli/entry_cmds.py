"""Manage servers like git remotes: ``add``, ``add-json``, ``remove``, ``enable``, ``disable``, ``rename``.

Every command edits one YAML file in place (:class:`~mcpmux.config.edit.ConfigDocument`): comments,
key order and formatting stay, ``${VAR}`` references stay references, the edited file is validated
before it atomically replaces the old one. ``add`` writes to ``./mcpmux.yaml`` (``--scope project``,
created if missing) or the user file (``--scope user``); the others edit the file that defines
the server (the one with the highest precedence when several do).

``--json`` schema (one object on stdout)::

    {
      "action": "add" | "add-json" | "remove" | "enable" | "disable" | "rename",
      "server": str,                 # the server's name (the new name for rename)
      "file": str,                   # the file that was edited
      "changed": bool,               # false when the file already said so (enable/disable)
      "entry": object | null,        # add, add-json: the entry as written (references unexpanded)
      "old_name": str | null,        # rename only
      "warnings": [str]              # literal secrets, names still defined elsewhere, ...
    }
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from mcpmux.cli.completion import complete_servers
from mcpmux.cli.entries import SCOPES, TRANSPORTS, DurationMs, build_entry, defining_file, pairs, report, write_entry
from mcpmux.cli.output import json_option
from mcpmux.config.edit import ConfigDocument
from mcpmux.config.formats import normalise_document
from mcpmux.errors import ConfigError, ConfigProblem, ServerNotConfigured
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "add_cmd",
    "add_json_cmd",
    "disable_cmd",
    "enable_cmd",
    "remove_cmd",
    "rename_cmd",
]

_SCOPE_OPTION = click.option(
    "--scope",
    type=click.Choice(SCOPES),
    default="project",
    show_default=True,
    help="project: ./mcpmux.yaml; user: the user config file.",
)


@click.command("add")
@click.argument("name", required=False)
@click.argument("target", nargs=-1, type=click.UNPROCESSED, metavar="[--] COMMAND [ARGS]... | URL")
@_SCOPE_OPTION
@click.option("--transport", "-t", type=click.Choice(TRANSPORTS), help="Server type (default: stdio, or from a URL).")
@click.option("--env", "-e", "envs", multiple=True, metavar="K=V", help="Environment of a stdio server (repeat).")
@click.option("--header", "-H", "headers", multiple=True, metavar="'K: V'", help="HTTP header (repeat).")
@click.option("--timeout", type=click.IntRange(min=1), metavar="MS", help="Request timeout in milliseconds.")
@click.option(
    "--connect-timeout",
    type=DurationMs(),
    metavar="DURATION",
    help="Time to start and connect, e.g. 120s or 90000ms (a bare number is seconds); npx/uvx first runs need more.",
)
@click.option(
    "--from-registry",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Add the server an MCP registry server.json describes.",
)
@click.option(
    "--builtin",
    "builtin",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[KIND]",
    help="Add a built-in server (workspace, content_store): KIND, or the one NAME names.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="The directory a built-in server serves (default: the directory of the config file).",
)
@click.option(
    "--openapi", "openapi_spec", metavar="SPEC", help="Add a REST API from its OpenAPI document (path or URL)."
)
@click.option(
    "--base-url", metavar="URL", help="With --openapi: where its requests go (default: the document's server)."
)
@json_option
def add_cmd(
    name: str | None,
    target: tuple[str, ...],
    scope: str,
    transport: str | None,
    envs: tuple[str, ...],
    headers: tuple[str, ...],
    timeout: int | None,
    connect_timeout: int | None,
    from_registry: Path | None,
    builtin: str | None,
    root: Path | None,
    openapi_spec: str | None,
    base_url: str | None,
) -> int:
    """Add server NAME: `add NAME -- COMMAND [ARGS]...` (stdio) or `add NAME -t http URL`.

    `add workspace --builtin` adds a built-in server (`add docs --builtin content_store` under
    another name). Without arguments, in a terminal, asks step by step and tests the server.
    """
    from mcpmux.cli import entry_wizard

    if builtin is not None or root is not None:
        if builtin is None or name is None or target or transport or envs or headers or from_registry:
            raise click.UsageError("--builtin takes a NAME and only --root, --scope, --timeout: no command or URL")
        entry: JSONObject = {"name": name, "type": "builtin"}
        if builtin:
            entry["builtin"] = builtin
        if root is not None:
            entry["root"] = str(root)
        if timeout is not None:
            entry["timeout_ms"] = timeout
        write_entry("add", entry, scope)
        return 0

    if from_registry is not None:
        return entry_wizard.add_from_registry(from_registry, name, scope)
    if openapi_spec is not None:
        if name is None or target:
            raise click.UsageError("add NAME --openapi SPEC [--base-url URL] takes no command or URL")
        spec = openapi_spec if "://" in openapi_spec else str(Path(openapi_spec).resolve())
        write_entry(
            "add",
            {"name": name, "type": "openapi", "spec": spec, **({"base_url": base_url} if base_url else {})},
            scope,
        )
        return 0
    if name is None or not target:
        return entry_wizard.add_interactively(name, scope)
    entry = build_entry(name, transport, target, pairs(envs, "=", "--env"), pairs(headers, ":", "--header"))
    if timeout is not None:
        entry["timeout_ms"] = timeout
    if connect_timeout is not None:
        entry["connect_timeout_ms"] = connect_timeout
    write_entry("add", entry, scope)
    from mcpmux.cli.auth_cmds import offer_login

    offer_login(entry)
    return 0


@click.command("add-json")
@click.argument("name")
@click.argument("server_json", metavar="JSON")
@_SCOPE_OPTION
@json_option
def add_json_cmd(name: str, server_json: str, scope: str) -> None:
    """Add server NAME from a Claude-style server object: '{"command": ..., "args": [...]}'."""
    try:
        value = json.loads(server_json)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc.msg} (column {exc.colno})", param_hint="JSON") from exc
    if not isinstance(value, dict):
        raise click.BadParameter("expected a JSON object", param_hint="JSON")
    document = normalise_document({"mcpServers": {name: value}}, "<add-json>")
    if document.problems:
        raise ConfigError(document.problems)
    data = document.servers[0].data
    entry = {"name": data.pop("name", None), "type": data.pop("type", "stdio"), **data}
    if entry["name"] != name:
        raise ConfigError(ConfigProblem("<cli>", "", f"illegal server name {name!r}: use {entry.get('name')!r}"))
    write_entry("add-json", entry, scope, [str(w) for w in document.warnings])


@click.command("remove")
@click.argument("name", shell_complete=complete_servers)
@json_option
def remove_cmd(name: str) -> None:
    """Remove server NAME from the file that defines it."""
    path, others = defining_file(name)
    document = ConfigDocument(path)
    document.remove(name)
    document.save()
    report("remove", name, path, [f"{name!r} is still defined in {p}" for p in others])


def _set_enabled(name: str, enabled: bool) -> None:
    path, others = defining_file(name)
    document = ConfigDocument(path)
    before = document.text()
    document.set_enabled(name, enabled)
    changed = document.text() != before
    if changed:
        document.save()
    action = "enable" if enabled else "disable"
    report(action, name, path, [f"{name!r} is also defined in {p} (not changed)" for p in others], changed=changed)


@click.command("enable")
@click.argument("name", shell_complete=complete_servers)
@json_option
def enable_cmd(name: str) -> None:
    """Enable server NAME (drop its `enabled: false`)."""
    _set_enabled(name, True)


@click.command("disable")
@click.argument("name", shell_complete=complete_servers)
@json_option
def disable_cmd(name: str) -> None:
    """Disable server NAME (`enabled: false`); it stays configured."""
    _set_enabled(name, False)


@click.command("rename")
@click.argument("old", shell_complete=complete_servers)
@click.argument("new")
@json_option
def rename_cmd(old: str, new: str) -> None:
    """Rename server OLD to NEW in the file that defines it."""
    path, others = defining_file(old)
    try:
        taken, _ = defining_file(new)
    except ServerNotConfigured:
        taken = None
    if taken is not None:
        raise ConfigError(ConfigProblem(str(taken), "mcp.servers", f"a server named {new!r} already exists"))
    document = ConfigDocument(path)
    document.rename(old, new)
    document.save()
    report("rename", new, path, [f"{old!r} is still defined in {p}" for p in others], old_name=old)
