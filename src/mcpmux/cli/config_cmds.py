"""``mcpmux config path|show|validate``."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import click

from mcpmux.cli.output import emit, json_option, out_console, state, table
from mcpmux.config import config_sources, config_to_dict, load_config, load_file
from mcpmux.errors import EXIT_OK, EXIT_USAGE, ConfigError, ConfigProblem
from mcpmux.types.json_shapes import JSONObject


@click.group()
def config() -> None:
    """Show, locate and validate the configuration."""


@config.command("path")
@json_option
def config_path() -> None:
    """List the configuration files mcpmux reads, in precedence order (lowest first)."""
    sources = config_sources(state().config_path)
    found = [s for s in sources if s.exists]
    rows: list[JSONObject] = [{"role": "defaults", "path": None, "exists": True, "read": not found}]
    rows += [{"role": s.role, "path": str(s.path), "exists": s.exists, "read": s.exists} for s in sources]
    for row in rows:
        if row["role"] == "project" and row["exists"]:
            row["trust"] = _trust_state(Path(str(row["path"])))

    def render() -> None:
        table(["role", "path", "status"], [(r["role"], r["path"] or "(built-in servers)", _status(r)) for r in rows])

    emit(rows, render)


def _status(row: JSONObject) -> str:
    if row["role"] == "defaults":
        return "used (no config file found)" if row["read"] else "not used"
    trust = row.get("trust")
    if trust in ("untrusted", "changed"):
        return f"{trust}: runs nothing until `mcpmux trust`"
    return "read" + (f" ({trust})" if trust else "") if row["read"] else "not found"


def _trust_state(path: Path) -> str:
    """``trusted``, ``changed`` (since it was), ``untrusted``, or ``nothing to trust`` (an empty file)."""
    from mcpmux.config.trust import TRUST_ALL_ENV, TrustStore, file_digest, starts_nothing, trust_all

    if starts_nothing(path):
        return "nothing to trust"
    if trust_all(os.environ):
        return f"trusted by {TRUST_ALL_ENV}"
    trusted = TrustStore.default().digest_of(path)
    if trusted is None:
        return "untrusted"
    return "trusted" if trusted == file_digest(path) else "changed"


@config.command("show")
@click.option("--show-secrets", is_flag=True, help="Print env and header values instead of ****.")
@json_option
def config_show(show_secrets: bool) -> None:
    """Print the merged configuration; env and header values are masked unless --show-secrets."""
    loaded = load_config(state().config_path)
    data = config_to_dict(loaded, show_secrets=show_secrets)
    data["sources"] = list(loaded.sources)
    for server in loaded.servers:
        error = server.unresolved_error()
        if error is not None:
            sys.stderr.write(f"warning: {error} (it cannot start)\n")

    def render() -> None:
        from ruamel.yaml import YAML

        buffer = io.StringIO()
        yaml = YAML(typ="safe", pure=True)
        yaml.default_flow_style = False
        yaml.dump(data, buffer)
        out_console().print(buffer.getvalue().rstrip(), markup=False, highlight=False)

    emit(data, render)


@config.command("validate")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@json_option
def config_validate(file: Path | None) -> int:
    """Check FILE (or every configuration source) and list every problem; exit 2 if any."""
    try:
        loaded = load_file(file) if file is not None else load_config(state().config_path)
    except ConfigError as exc:
        return _invalid(exc.problems)
    # Unset variables fail only their server when mcpmux runs; validating, they are problems.
    unresolved = [p for s in loaded.servers if s.enabled for p in s.unresolved]
    if unresolved:
        return _invalid(unresolved)
    names = [s.name for s in loaded.servers]
    report = {"valid": True, "sources": list(loaded.sources), "servers": names, "warnings": list(loaded.warnings)}

    def render() -> None:
        for warning in loaded.warnings:
            sys.stderr.write(f"warning: {warning}\n")
        click.echo(f"valid: {len(names)} server{'s' if len(names) != 1 else ''} ({', '.join(names) or 'none'})")

    emit(report, render)
    return EXIT_OK


def _invalid(problems: list[ConfigProblem]) -> int:
    if state().json:
        emit({"valid": False, "problems": [_problem_dict(p) for p in problems]})
    sys.stderr.write(f"invalid: {len(problems)} problem{'s' if len(problems) != 1 else ''}\n")
    for problem in problems:
        sys.stderr.write(f"  {problem}\n")
    return EXIT_USAGE


def _problem_dict(problem: Any) -> JSONObject:
    return {k: getattr(problem, k) for k in ("source", "path", "reason", "line", "column")}
