"""``mcpmux approve``, ``pins``, ``audit`` and ``scan``: looking at and steering the guard."""

from __future__ import annotations

import re
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import click

from mcpmux.cli.completion import complete_servers, complete_tools
from mcpmux.cli.host_cmds import managed, run
from mcpmux.cli.output import command_state_store, emit, json_option, table
from mcpmux.config import Config
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    from mcpmux.policy import Finding

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@click.command("approve")
@click.argument("target", metavar="SERVER[:TOOL]", shell_complete=complete_tools)
@click.option("--yes", "-y", is_flag=True, help="Approve definitions the scanner flagged high without asking.")
@json_option
def approve_cmd(target: str, yes: bool) -> None:
    """Approve the current definitions of SERVER's tools (or one tool) that are held back.

    The server is connected first, so what is approved is exactly what it offers now. A definition
    the scanner flags high is shown with its findings and approved only after a yes (``--yes`` in
    scripts); without a terminal and without ``--yes`` it stays held back.
    """
    server, _, tool = target.partition(":")

    async def body(config: Config) -> list[JSONObject]:
        config.server(server)
        async with managed(config, {server}) as guard:
            held = [e for e in guard.withheld(server) if e.kind == "quarantined" and (not tool or e.tool.tool == tool)]
            flagged = guard.high_findings(server, tool or None)
            if flagged and not yes:
                await anyio.to_thread.run_sync(_confirm_flagged, target, flagged)
            diffs = {e.tool.tool: e.verdict.pin.diff() if e.verdict and e.verdict.pin else "" for e in held}
            guard.approve(server, tool or None)
            return [{"server": server, "tool": name, "diff": diff} for name, diff in diffs.items()]

    approved = run(body)

    def render() -> None:
        if not approved:
            click.echo(f"nothing to approve for {target}")
        for item in approved:
            click.echo(f"approved {item['server']}:{item['tool']}")
            if item["diff"]:
                click.echo(item["diff"])

    emit(approved, render)


def _confirm_flagged(target: str, findings: list[Finding]) -> None:
    """Show the high findings and ask; refuse without a terminal (the caller then approves nothing)."""
    from mcpmux.errors import PolicyError

    click.echo("the scanner flagged what you are approving:", err=True)
    for f in findings:
        click.echo(f"  {f.server}:{f.tool} [{f.rule}] {f.message} in {f.location}: {f.excerpt}", err=True)
    server = target.partition(":")[0]
    hint = f"read the findings (mcpmux scan {server}); approve anyway with `mcpmux approve {target} --yes`"
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise PolicyError(target, f"not approved: {target} has high scanner findings and no one was asked", hint=hint)
    if not click.confirm("Approve anyway?", default=False, err=True):
        raise PolicyError(target, f"not approved: declined ({target} has high scanner findings)", hint=hint)


@click.command("pins")
@click.argument("server", required=False, shell_complete=complete_servers)
@json_option
def pins_cmd(server: str | None) -> None:
    """List pinned tool definitions and those waiting for approval (no server is started)."""
    from pathlib import Path

    from mcpmux.cli.output import state
    from mcpmux.config import load_config
    from mcpmux.policy import PinBook, StateStore
    from mcpmux.policy.pins import server_identity

    config = load_config(state().config_path)
    project = Path.cwd().resolve()
    identities = {s.name: server_identity(s, project) for s in config.servers}
    with StateStore.configured(config) as store:
        pins = PinBook(store, config.security.pinning, identities).pins(server)
    rows = [_pin_json(p) for p in pins]

    def render() -> None:
        table(
            ["server", "tool", "state", "hash", "since", "reason"],
            [(p.server, p.tool, _pin_state(p), p.hash[:12], _when(p.pinned_at), p.pending_reason or "") for p in pins],
        )

    emit(rows, render)


def _pin_state(pin: Any) -> str:
    if pin.pending_hash:
        return "renamed" if (pin.pending_reason or "").startswith("renamed from") else "changed"
    return "approved" if pin.approved else "awaiting approval"


def _pin_json(pin: Any) -> JSONObject:
    return {
        "server": pin.server,
        "tool": pin.tool,
        "state": _pin_state(pin),
        "hash": pin.hash,
        "pending_hash": pin.pending_hash,
        "reason": pin.pending_reason,
        "pinned_at": pin.pinned_at,
        "diff": pin.diff(),
    }


@click.command("audit")
@click.option("--since", help="Only calls since this long ago (30m, 2h, 7d) or this time (ISO 8601).")
@click.option("--server", help="Only calls to this server.")
@click.option("--tool", help="Only calls of this tool (the server's own name).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1), help="At most this many rows.")
@json_option
def audit_cmd(since: str | None, server: str | None, tool: str | None, limit: int) -> None:
    """Show the audit log of calls, newest first: who called what, the decision, and how it ended."""
    from mcpmux.policy import AuditLog

    with command_state_store() as store:
        rows = AuditLog(store).query(since=_since(since), server=server, tool=tool, limit=limit)

    def render() -> None:
        table(
            ["when", "face", "tool", "decision", "outcome", "ms", "rule"],
            [
                (
                    _when(r.at),
                    r.face,
                    r.name,
                    r.decision,
                    r.outcome,
                    f"{r.duration_ms:.0f}" if r.duration_ms else "",
                    r.rule,
                )
                for r in rows
            ],
        )

    emit([r.to_json() for r in rows], render)


def _since(text: str | None) -> float | None:
    if not text:
        return None
    match = _DURATION.fullmatch(text.strip())
    if match:
        return time.time() - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        raise click.BadParameter("use a duration like 30m, 2h, 7d, or an ISO 8601 time", param_hint="--since") from exc


def _ms(duration: float | None) -> str:
    return "" if duration is None else f"{duration:.0f}"


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


@click.command("scan")
@click.argument("server", required=False, shell_complete=complete_servers)
@json_option
def scan_cmd(server: str | None) -> int:
    """Scan the tool definitions of every server (or SERVER) for hidden instructions; exit 1 on a high finding."""
    from mcpmux.policy import scan_tools

    async def body(config: Config) -> list[Any]:
        if server is not None:
            config.server(server)
        async with managed(config, {server} if server else True) as guard:
            # Withheld definitions too: the scan is how an operator learns why they were held back.
            everyone = [e.tool for e in guard.exposures() if not e.tool.synthetic]
            findings = []
            for name in [server] if server else guard.servers:
                own = [t for t in everyone if t.server == name]
                others = [t.name for t in everyone if t.server != name]
                findings += scan_tools(own, server=name, other_tools=others)
            return findings

    findings = run(body)

    def render() -> None:
        if not findings:
            click.echo("no findings")
            return
        rows = [(f.severity, f"{f.server}:{f.tool}", f.rule, f.location, f.excerpt) for f in findings]
        table(["severity", "tool", "rule", "where", "excerpt"], rows)

    emit([f.to_json() for f in findings], render)
    return 1 if any(f.severity == "high" for f in findings) else 0
