"""``mcpmux import --from HOST|PATH`` and ``mcpmux export --to HOST``: servers to and from other hosts.

Hosts: ``claude-desktop``, ``claude-code``, ``cursor``, ``vscode`` (their files:
:mod:`mcpmux.config.hosts`). Import reads the host's project file if there is one, else its user
file (or the PATH given), and adds every server to our file of ``--scope``; a name already defined
there is skipped. Export prints the host's JSON on stdout, or merges it into ``--output FILE``
(other servers and keys of that file are kept). References stay references both ways.

Import lists what each imported server runs. A source inside the current folder is the project's (a
cloned repository's ``.mcp.json``): imported into ``./mcpmux.yaml`` it is not trusted
(:mod:`mcpmux.config.trust`), so the next command asks about it, or refuses without a terminal.

``import --json`` schema::

    {"action": "import", "source": str, "file": str,
     "imported": [str], "skipped": [{"name": str, "reason": str}], "warnings": [str],
     "variables": [{"server": str, "field": str, "variable": str}],
     "runs": [str], "trusted": bool}

``export --output F --json`` schema (without ``--output`` stdout carries the host's JSON itself)::

    {"action": "export", "host": str, "file": str, "servers": [str], "skipped": [str]}
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import click

from mcpmux.cli.completion import complete_hosts
from mcpmux.cli.entries import SCOPES, scope_file
from mcpmux.cli.output import emit, json_option, state
from mcpmux.config.edit import ConfigDocument, secret_warnings
from mcpmux.config.hosts import (
    HOSTS,
    expand_references,
    export_servers,
    host_files,
    merge_into,
    read_servers,
    referenced_variables,
)
from mcpmux.config.literal_secrets import secrets_to_references
from mcpmux.config.loader import DEFAULT_SERVERS, config_sources
from mcpmux.config.parse import read_data
from mcpmux.config.trust import server_line
from mcpmux.errors import NotFound, UsageError, closest
from mcpmux.types.json_shapes import JSONObject

__all__ = ["configured_servers", "export_cmd", "import_cmd"]


def _host_source(name: str) -> Path:
    if name not in HOSTS:
        path = Path(name).expanduser()
        if not path.is_file():
            known = ", ".join(sorted(HOSTS))
            raise NotFound("file or host", name, closest(name, HOSTS), detail=f" (hosts: {known})")
        return path
    files = host_files(name)
    for scope in ("project", "user"):
        if scope in files and files[scope].is_file():
            return files[scope]
    tried = ", ".join(str(p) for p in files.values())
    raise UsageError(f"no {name} configuration found (looked in {tried})", hint="give its path: --from PATH")


@click.command("import")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="HOST|PATH",
    shell_complete=complete_hosts,
    help=f"One of {', '.join(HOSTS)}, or a file.",
)
@click.option("--scope", type=click.Choice(SCOPES), default="project", show_default=True, help="Where to add them.")
@click.option(
    "--keep-secrets",
    is_flag=True,
    help="Copy values that look like secrets as they are, instead of turning them into ${VAR} references.",
)
@json_option
def import_cmd(source: str, scope: str, keep_secrets: bool) -> None:
    """Import every server of another host's configuration into ours.

    Env and header values that look like secrets are written as ${VAR} references (never copied in
    plain text unless --keep-secrets); the variables to export are listed.
    """
    path = _host_source(source)
    servers, warnings = read_servers(path)
    target = scope_file(scope)
    document = ConfigDocument(target)
    imported: list[str] = []
    skipped: list[dict[str, str]] = []
    variables: list[dict[str, str]] = []
    for entry in servers:
        name = str(entry.get("name"))
        if name in document.names():
            skipped.append({"name": name, "reason": f"already defined in {target}"})
            continue
        if keep_secrets:
            warnings += secret_warnings(entry)
        else:
            entry, moved = secrets_to_references(entry)
            variables += [{"server": name, "field": f"{m.field}.{m.key}", "variable": m.variable} for m in moved]
        document.add(entry)
        imported.append(name)
    # A file of the project (a cloned repository's .mcp.json, .vscode/mcp.json): nobody reviewed what it
    # runs, so copying it into ./mcpmux.yaml vouches for nothing (the next command asks, or refuses).
    from_project = _inside(path, Path.cwd())
    if imported:
        document.save(vouch=not from_project)
    runs = [server_line(entry) for entry in servers if str(entry.get("name")) in imported]
    data: JSONObject = {"action": "import", "source": str(path), "file": str(target), "imported": imported}
    data |= {"skipped": skipped, "warnings": warnings, "variables": variables, "runs": runs}
    data["trusted"] = not (from_project and scope == "project")
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")

    def render() -> None:
        click.echo(f"imported {len(imported)} server(s) from {path} into {target}: {', '.join(imported) or 'none'}")
        for line in runs:
            click.echo(f"  {line}")
        if imported and not data["trusted"]:
            click.echo(f"{target.name} runs none of it until you review it and run: mcpmux trust {target}")
        for skip in skipped:
            click.echo(f"  skipped {skip['name']!r}: {skip['reason']}")
        if variables:
            click.echo(f"secrets were not copied; {target.name} refers to them, so export (values are in {path}):")
            for var in variables:
                click.echo(f"  export {var['variable']}=...    # {var['server']} {var['field']}")

    emit(data, render)


def _inside(path: Path, folder: Path) -> bool:
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(folder))


def _defining_files() -> dict[str, Path | None]:
    """Per server, the file that defines it last, unless that is the user's config file."""
    defined: dict[str, Path | None] = {}
    for source in (s for s in config_sources(state().config_path) if s.exists):
        for entry in read_servers(source.path)[0]:
            defined[str(entry.get("name"))] = None if source.role == "user" else source.path
    return defined


def configured_servers() -> list[JSONObject]:
    """Our servers as written (references unexpanded), merged by name over every source."""
    merged: dict[str, JSONObject] = {}
    sources = [s for s in config_sources(state().config_path) if s.exists]
    for source in sources:
        for entry in read_servers(source.path)[0]:
            merged.pop(str(entry.get("name")), None)
            merged[str(entry.get("name"))] = entry
    return list(merged.values()) if sources else [dict(s) for s in DEFAULT_SERVERS]


@click.command("export")
@click.option("--to", "host", required=True, type=click.Choice(sorted(HOSTS)), help="The host's format.")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Merge into this file instead of stdout."
)
@click.option(
    "--expand",
    is_flag=True,
    help="Write ${VAR} references with their current values (secrets end up in the host's file in plain text).",
)
@click.option(
    "--via-daemon",
    is_flag=True,
    help="Write stdio servers as `mcpmux connect NAME`: the host shares the daemon's warm instances.",
)
@json_option
def export_cmd(host: str, output: Path | None, expand: bool, via_daemon: bool) -> None:
    """Write every configured server in HOST's format (stdout, or merged into --output).

    ${VAR} references are written as references unless --expand; a host that does not expand
    them itself (Claude Desktop) is warned about.
    """
    servers = configured_servers()
    if via_daemon:
        from mcpmux.daemon.entries import connect_entries

        servers = connect_entries(servers, _defining_files())
    if expand:
        servers = expand_references(servers, os.environ)
    exported, skipped = export_servers(servers, host)
    for reason in skipped:
        sys.stderr.write(f"warning: skipped {reason}\n")
    unexpanded = [] if expand else sorted(referenced_variables(exported))
    if unexpanded and not HOSTS[host].expands_references:
        sys.stderr.write(
            f"warning: {host} does not expand ${{VAR}} references; they are written as is "
            f"({', '.join(unexpanded)}): use --expand to write their current values instead\n"
        )
    if output is None:
        click.echo(json.dumps(exported, indent=2, ensure_ascii=False))
        return
    existing = read_data(output) if output.is_file() else {}
    _write_json(output, merge_into(existing, exported))
    names = sorted(next(iter(exported.values())))
    data = {"action": "export", "host": host, "file": str(output), "servers": names, "skipped": skipped}
    emit(data, lambda: click.echo(f"wrote {len(names)} server(s) to {output} ({host})"))


def _write_json(path: Path, data: JSONObject) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        if path.exists():
            os.chmod(temp, path.stat().st_mode & 0o7777)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
