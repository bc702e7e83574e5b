"""``mcpmux trust [PATH]``, ``mcpmux untrust [PATH]``, ``mcpmux trust --list``, and the question a command asks
in a terminal before it uses a project's ``mcpmux.yaml`` nobody trusted (:mod:`mcpmux.config.trust`)."""

from __future__ import annotations

import datetime
from pathlib import Path

import click

from mcpmux.cli.output import emit, json_option, table
from mcpmux.config.formats import normalise_document
from mcpmux.config.parse import read_data
from mcpmux.config.paths import project_config_file
from mcpmux.config.trust import TrustStore, describe, document_digest, set_prompt
from mcpmux.errors import EXIT_OK, NotFound
from mcpmux.types.json_shapes import JSONObject

__all__ = ["install_prompt", "trust_cmd", "untrust_cmd"]


def install_prompt() -> None:
    """Ask about an untrusted project file on this terminal (the CLI calls it when stdin and stderr are one)."""
    set_prompt(_ask)


def _ask(path: Path, runs: list[str], changed: bool) -> bool:
    said = "changed since you trusted it" if changed else "is a project config you have not trusted"
    click.echo(f"{path} {said}. Using it would:", err=True)
    for line in runs:
        click.echo(f"  - {line}", err=True)
    return click.confirm(f"Trust {path} as it is now?", default=False, err=True)


def _target(path: Path | None) -> Path:
    chosen = (path or project_config_file()).expanduser()
    if not chosen.is_file():
        raise NotFound("config file", str(chosen), [], hint="name the project's mcpmux.yaml, or run in its folder")
    return Path(chosen.resolve())


@click.command("trust")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--list", "list_them", is_flag=True, help="List the files trusted on this machine instead.")
@json_option
def trust_cmd(path: Path | None, list_them: bool) -> int:
    """Trust PATH (default ./mcpmux.yaml) as it is now: mcpmux may run what it says.

    A project's config file runs nothing until you trust it; a changed file needs trusting again.
    """
    if list_them:
        if path is not None:
            raise click.UsageError("--list takes no PATH")
        return _list()
    target = _target(path)
    document = normalise_document(read_data(target), str(target), target)
    runs = describe(document)
    digest = document_digest(document)
    TrustStore.default().trust(target, digest)
    report: JSONObject = {"trusted": str(target), "sha256": digest, "runs": runs}

    def render() -> None:
        click.echo(f"trusted {target}" + ("" if runs else " (it starts nothing)"))
        for line in runs:
            click.echo(f"  - {line}")

    emit(report, render)
    return EXIT_OK


def _list() -> int:
    records = TrustStore.default().records()
    rows: list[JSONObject] = [
        {"path": r.path, "sha256": r.digest, "trusted_at": r.trusted_at, "state": r.state()} for r in records
    ]

    def render() -> None:
        if not rows:
            click.echo("no project config is trusted on this machine")
            return
        when = {r.path: datetime.datetime.fromtimestamp(r.trusted_at).strftime("%Y-%m-%d %H:%M") for r in records}
        table(["path", "state", "trusted"], [(row["path"], row["state"], when[str(row["path"])]) for row in rows])

    emit(rows, render)
    return EXIT_OK


@click.command("untrust")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@json_option
def untrust_cmd(path: Path | None) -> int:
    """Withdraw the trust of PATH (default ./mcpmux.yaml): it runs nothing until trusted again."""
    chosen = Path((path or project_config_file()).expanduser().resolve())
    removed = TrustStore.default().untrust(chosen)
    if not removed:
        raise NotFound(
            "trusted config file", str(chosen), [], hint="`mcpmux trust --list` shows the files trusted on this machine"
        )
    emit({"untrusted": str(chosen)}, lambda: click.echo(f"untrusted {chosen}"))
    return EXIT_OK
