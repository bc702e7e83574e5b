"""Server entries in configuration files: build one from command-line parts, write it, say what was done.

Shared by the ``add``/``remove``/``enable``... commands and the interactive ``add`` wizard.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from mcpmux.cli.output import emit, state
from mcpmux.config.edit import ConfigDocument, secret_warnings
from mcpmux.config.formats import normalise_document
from mcpmux.config.loader import config_sources
from mcpmux.config.parse import read_data
from mcpmux.config.paths import project_config_file, user_config_file
from mcpmux.errors import ServerNotConfigured
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "SCOPES",
    "TRANSPORTS",
    "DurationMs",
    "build_entry",
    "defining_file",
    "pairs",
    "report",
    "scope_file",
    "write_entry",
]

SCOPES = ("project", "user")
TRANSPORTS = ("stdio", "sse", "http", "websocket", "tcp")


def scope_file(scope: str) -> Path:
    """The file a scope writes to."""
    return user_config_file() if scope == "user" else project_config_file()


def defining_file(name: str) -> tuple[Path, list[Path]]:
    """The file that defines server ``name`` (highest precedence first) and any others that do too.

    Raises:
        ServerNotConfigured: no configuration file defines it.
    """
    found, known = [], []
    for source in reversed(config_sources(state().config_path)):
        if not source.exists:
            continue
        names = [str(raw.data.get("name")) for raw in normalise_document(read_data(source.path), "", None).servers]
        known += names
        if name in names:
            found.append(source.path)
    if not found:
        raise ServerNotConfigured(name, sorted(set(known)))
    return found[0], found[1:]


_DONE = {
    "add": "added",
    "add-json": "added",
    "remove": "removed",
    "enable": "enabled",
    "disable": "disabled",
    "rename": "renamed",
}


def report(action: str, server: str, file: Path, warnings: list[str], *, changed: bool = True, **extra: Any) -> None:
    """Print the outcome (JSON schema in the module docstring); warnings also go to stderr."""
    data = {"action": action, "server": server, "file": str(file), "changed": changed, "entry": None}
    data |= {"old_name": None, **extra, "warnings": warnings}
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")
    done = _DONE[action]
    line = f"{done} {server!r} in {file}" if changed else f"{server!r} is already {done} in {file}"
    if action == "rename":
        line = f"renamed {data['old_name']!r} to {server!r} in {file}"
    emit(data, lambda: click.echo(line))


def write_entry(action: str, entry: JSONObject, scope: str, warnings: list[str] | None = None) -> Path:
    """Add ``entry`` to the file of ``scope``, validate, write, and report."""
    path = scope_file(scope)
    document = ConfigDocument(path)
    document.add(entry)
    document.save()
    plain = json.loads(json.dumps(entry))
    report(action, str(entry["name"]), path, [*(warnings or []), *secret_warnings(entry)], entry=plain)
    return path


def pairs(values: tuple[str, ...], separator: str, option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition(separator)
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY{separator.strip() or '='}VALUE, got {value!r}", param_hint=option)
        out[key.strip()] = rest.strip() if separator == ":" else rest
    return out


def build_entry(
    name: str, transport: str | None, target: tuple[str, ...], env: dict[str, str], headers: dict[str, str]
) -> JSONObject:
    """A server entry from ``add``'s flags (the type guessed from a URL when not given)."""
    kind = transport or _guess_type(target)
    entry: JSONObject = {"name": name, "type": kind}
    if kind == "stdio":
        entry["command"], args = target[0], list(target[1:])
        if args:
            entry["args"] = args
        if env:
            entry["env"] = env
        if headers:
            raise click.UsageError("--header is for network servers; a stdio server takes --env")
        return entry
    if len(target) != 1:
        raise click.UsageError(f"a {kind} server takes exactly one URL")
    entry["url"] = target[0]
    if headers:
        entry["headers"] = headers
    if env:
        raise click.UsageError("--env is for stdio servers; a network server takes --header")
    return entry


def _guess_type(target: tuple[str, ...]) -> str:
    if len(target) != 1 or "://" not in target[0]:
        return "stdio"
    scheme = target[0].split("://", 1)[0].lower()
    if scheme in ("ws", "wss"):
        return "websocket"
    if scheme == "tcp":
        return "tcp"
    return "sse" if target[0].rstrip("/").endswith("/sse") else "http"


class DurationMs(click.ParamType[int]):
    """A duration given as seconds (``120``, ``120s``, ``1.5s``), minutes (``2m``) or ``ms``; in milliseconds."""

    name = "duration"
    _UNITS = (("ms", 1.0), ("s", 1000.0), ("m", 60_000.0))

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        text = str(value).strip().lower()
        factor = 1000.0
        for suffix, unit in self._UNITS:
            if text.endswith(suffix):
                text, factor = text.removesuffix(suffix).strip(), unit
                break
        try:
            milliseconds = round(float(text) * factor)
        except ValueError:
            self.fail(f"{value!r} is not a duration (examples: 120, 120s, 2m, 90000ms)", param, ctx)
        if milliseconds < 1:
            self.fail(f"{value!r} is not a positive duration", param, ctx)
        return milliseconds
