"""``mcpmux approvals list|revoke``: the remembered "always" answers, and taking them back.

An "always for this tool / server" answer is remembered per project and per scope: ``local`` (the
person at a terminal: ``call``, ``chat``, the library) or one gateway caller (``token:NAME``,
``stdio:CLIENT``). Nothing here starts a server.
"""

from __future__ import annotations

import time

import click

from mcpmux.cli.completion import complete_tools
from mcpmux.cli.output import command_state_store, emit, json_option, table
from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["approvals"]


@click.group("approvals")
def approvals() -> None:
    """List and revoke remembered "always" approvals (per project and per who gave them)."""


@approvals.command("list")
@click.option("--all-projects", is_flag=True, help="Every project's approvals, not only this directory's.")
@json_option
def approvals_list(all_projects: bool) -> None:
    """List the standing approvals of this project: what, for whom (scope), since when."""
    from mcpmux.policy import Approvals

    with command_state_store() as store:
        rows = Approvals(store).standing(every_project=all_projects)

    def render() -> None:
        if not rows:
            click.echo("no standing approvals" + ("" if all_projects else " in this project"))
            return
        listed = [(_target(r.server, r.tool), _scope(r.face, r.caller), _when(r.granted_at), r.project) for r in rows]
        table(["approved", "for", "since", "project"], listed)

    emit([r.to_json() for r in rows], render)


@approvals.command("revoke")
@click.argument("target", metavar="SERVER[:TOOL]", required=False, shell_complete=complete_tools)
@click.option("--face", help="Only approvals given on this face (local, gateway, ...).")
@click.option("--caller", help="Only approvals given by this caller (token:NAME, stdio:CLIENT).")
@click.option("--all", "everything", is_flag=True, help="Every standing approval of this project.")
@json_option
def approvals_revoke(target: str | None, face: str | None, caller: str | None, everything: bool) -> None:
    """Revoke standing approvals of SERVER (or one TOOL of it) in this project; the next call asks again."""
    from mcpmux.policy import Approvals

    if (target is None) == (not everything):
        raise click.UsageError("name SERVER[:TOOL] to revoke, or --all")
    server, _, tool = (target or "").partition(":")
    with command_state_store() as store:
        revoked = Approvals(store).forget(server or None, tool or None, face=face, caller=caller)
    if not revoked:
        problem = f"no standing approval matches {target or 'this project'}"
        raise ConfigError(ConfigProblem("<cli>", "approvals", f"{problem}: see `mcpmux approvals list`"))
    emit({"revoked": revoked}, lambda: click.echo(f"revoked {revoked} approval{'s' if revoked != 1 else ''}"))


def _target(server: str, tool: str) -> str:
    return f"{server} (every tool)" if tool == "*" else f"{server}:{tool}"


def _scope(face: str, caller: str) -> str:
    if face == "unscoped":
        return "unscoped (from before scopes; honoured for no one)"
    return face if not caller else f"{face} {caller}"


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
