"""The asking side of ``mcpmux add``: step by step in a terminal, and ``--from-registry``.

Questions go to the terminal; without one, ``add`` says which flags to give instead (exit 2). After
an interactive add the server is checked exactly as ``mcpmux test NAME`` checks it (the same
command runs), and a server that fails may be taken out again.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from mcpmux.canonical_names import is_valid_server_name
from mcpmux.cli.entries import TRANSPORTS, build_entry, scope_file, write_entry
from mcpmux.config.edit import ConfigDocument
from mcpmux.config.formats import normalise_document
from mcpmux.config.parse import read_data
from mcpmux.errors import EXIT_OK, ConfigError, MCPMuxError, exit_code_for
from mcpmux.types.json_shapes import JSONObject

__all__ = ["add_from_registry", "add_interactively", "registry_variables"]

NO_TERMINAL = (
    "no terminal to ask in: give the server on the command line, e.g.\n"
    "  mcpmux add NAME [--env K=V]... -- COMMAND [ARGS]...\n"
    "  mcpmux add NAME --transport http|sse|websocket|tcp [--header 'K: V']... URL\n"
    '  mcpmux add-json NAME \'{"command": ..., "args": [...]}\''
)
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _ask_pairs(label: str, separator: str) -> dict[str, str]:
    out: dict[str, str] = {}
    while True:
        answer = click.prompt(f"{label} (empty to finish)", default="", show_default=False).strip()
        if not answer:
            return out
        key, sep, value = answer.partition(separator)
        if not sep or not key.strip():
            click.echo(f"  expected KEY{separator}VALUE", err=True)
            continue
        out[key.strip()] = value.strip() if separator == ":" else value


def _ask_name() -> str:
    while True:
        name = click.prompt("Server name").strip()
        if is_valid_server_name(name):
            return name
        click.echo("  names are lower-case letters, digits, '_' and '-', at most 32 characters", err=True)


def add_interactively(name: str | None, scope: str) -> int:
    """Ask for the server step by step, write it, then run ``mcpmux test`` on it.

    Raises:
        click.UsageError: no terminal (exit 2, with the flags to give instead).
    """
    if not _interactive():
        raise click.UsageError(NO_TERMINAL)
    name = name or _ask_name()
    ConfigDocument(scope_file(scope)).check_new_name(name)
    kind = click.prompt("Type", type=click.Choice(TRANSPORTS), default="stdio")
    if kind == "stdio":
        target = tuple(shlex.split(click.prompt("Command and arguments")))
        env, headers = _ask_pairs("Environment variable KEY=VALUE", "="), {}
    else:
        target = (click.prompt("URL").strip(),)
        env, headers = {}, _ask_pairs("Header 'Name: value'", ":")
    path = write_entry("add", build_entry(name, kind, target, env, headers), scope)
    return _check(name, path)


def _check(name: str, path: Path) -> int:
    """Run ``mcpmux test NAME``; on failure offer to take the server out again."""
    from mcpmux.cli.output import print_error
    from mcpmux.cli.probe_cmds import test_cmd

    click.echo(f"testing {name!r}...", err=True)
    try:
        click.get_current_context().invoke(test_cmd, name=name)
    except MCPMuxError as exc:
        print_error(exc)
        if click.confirm(f"Keep {name!r} in {path} anyway?", default=True, err=True):
            return exit_code_for(exc)
        document = ConfigDocument(path)
        document.remove(name)
        document.save()
        click.echo(f"removed {name!r} again", err=True)
        return exit_code_for(exc)
    return EXIT_OK


def registry_variables(manifest: Any) -> list[JSONObject]:
    """The variables a ``server.json`` declares (package environment variables, remote headers)."""
    if not isinstance(manifest, dict):
        return []
    found: list[JSONObject] = []
    for package in manifest.get("packages") or []:
        if isinstance(package, dict):
            found += [v for v in package.get("environmentVariables") or [] if isinstance(v, dict)]
    for remote in manifest.get("remotes") or []:
        if isinstance(remote, dict):
            found += [h for h in remote.get("headers") or [] if isinstance(h, dict)]
    return [v for v in found if isinstance(v.get("name"), str)]


def add_from_registry(path: Path, name: str | None, scope: str) -> int:
    """Add the server ``path`` (a registry ``server.json``) describes.

    Secrets stay ``${VAR}`` references; in a terminal the required non-secret variables are
    asked for and written as values.

    Raises:
        ConfigError: the manifest cannot be used.
    """
    manifest = read_data(path)
    document = normalise_document(manifest, str(path), path)
    if document.problems or not document.servers:
        raise ConfigError(document.problems or "the manifest describes no server")
    entry = dict(document.servers[0].data)
    if name is not None:
        entry["name"] = name
    notes = [str(w) for w in document.warnings]
    for variable in registry_variables(manifest):
        notes += _settle(entry, variable)
    write_entry("add", entry, scope, notes)
    return EXIT_OK


def _settle(entry: JSONObject, variable: JSONObject) -> list[str]:
    """Ask for one declared variable; return what the user still has to do about it."""
    var = re.sub(r"[^A-Za-z0-9_]", "_", variable["name"]).upper()
    if not _uses(entry, var) or not variable.get("isRequired"):
        return []
    about = f" ({variable['description']})" if variable.get("description") else ""
    if variable.get("isSecret") or not _interactive():
        return [f"export {var} before using the server{about}: it is stored as ${{{var}}}"]
    value = click.prompt(f"{var}{about}", default=variable.get("default") or None)
    for field in ("env", "headers"):
        if isinstance(entry.get(field), dict):
            entry[field] = {k: v.replace(f"${{{var}}}", value) for k, v in entry[field].items()}
    return []


def _uses(entry: JSONObject, var: str) -> bool:
    return any(var in _REFERENCE.findall(str(v)) for f in ("env", "headers") for v in (entry.get(f) or {}).values())
