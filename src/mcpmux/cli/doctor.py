"""``mcpmux doctor``: check the configuration, every server and the environment, with fix-it hints.

Exit 0 when every finding is ``info``, 1 otherwise. Progress goes to stderr; ``--json`` puts one
object on stdout::

    {
      "ok": bool,
      "environment": {"python": str, "mcpmux": str, "platform": str,
                      "runtimes": {"npx"|"uvx"|"node"|"python3"|"python"|"docker": str | null}},
      "sandbox": {"backend": "bubblewrap" | "landlock" | "none", "path": str | null,   # path: of bwrap
                  "available": bool, "detail": str},
      "config_files": [{"role": str, "path": str, "exists": bool, "problems": [str], "warnings": [str]}],
      "servers": [{"name": str, "type": str, "enabled": bool,
                   "status": "ok" | "warn" | "fail" | "skipped",
                   "connect_ms": float | null,          # null with --no-connect
                   "tools": int | null, "estimated_tokens": int | null}],
      "findings": [{"severity": "error" | "warning" | "info",
                    "check": "config" | "command" | "timeout" | "auth" | "connect" | "size"
                             | "collision" | "names" | "sandbox" | "server",
                    "server": str | null, "message": str, "hint": str | null}]
    }

``estimated_tokens`` is the size of the server's tool list as JSON divided by 4.
"""

from __future__ import annotations

import json
import platform
import sys

import click

from mcpmux._version import __version__
from mcpmux.cli import doctor_checks as checks
from mcpmux.cli.output import emit, err_console, json_option, state, table
from mcpmux.cli.running import run as run_to_end
from mcpmux.config import Config, load_config
from mcpmux.errors import EXIT_FAILED, EXIT_OK, ConfigError, UntrustedConfigError
from mcpmux.types.json_shapes import JSONObject

__all__ = ["doctor_cmd", "run_doctor"]

_MARKS = {"error": "✗", "warning": "!", "info": "·"}


def run_doctor(config_path: str | None, *, connect: bool = True) -> JSONObject:
    """Run every check and return the report (the ``--json`` schema above)."""
    files, findings = checks.check_config_files(config_path)
    config: Config | None = None
    if not any(f["severity"] == "error" for f in findings):
        try:
            config = load_config(config_path)
        except UntrustedConfigError as exc:  # what it would run, and how to trust it
            findings.append(checks.finding("error", "config", str(exc), exc.hint))
        except ConfigError as exc:
            findings += [checks.finding("error", "config", str(p)) for p in exc.problems]
    sandbox, sandbox_findings = checks.check_sandbox(config)
    rows: list[JSONObject] = []
    if config is not None:
        rows, server_findings = _servers(config, connect)
        findings += server_findings + checks.check_names(config, rows)
    for row in rows:
        row.pop("tool_names", None)
    return {
        "ok": all(f["severity"] == "info" for f in findings + sandbox_findings),
        "environment": {
            "python": platform.python_version(),
            "mcpmux": __version__,
            "platform": sys.platform,
            "runtimes": checks.runtimes(),
        },
        "sandbox": sandbox,
        "config_files": files,
        "servers": rows,
        "findings": findings + sandbox_findings,
    }


def _servers(config: Config, connect: bool) -> tuple[list[JSONObject], list[JSONObject]]:
    if connect:
        return run_to_end(checks.check_servers, config)
    from mcpmux.cli.fast_list import catalog_rows

    cached = catalog_rows()
    rows, findings = [], []
    for server in config.servers:
        if (missing := checks.command_finding(server)) is not None:
            findings.append(missing)
        tools = cached[server.name][1] if server.name in cached else None
        row: JSONObject = {"name": server.name, "type": server.type, "enabled": server.enabled}
        row |= {"status": "ok" if tools is not None else "skipped", "connect_ms": None}
        row |= {"tools": None if tools is None else len(tools), "tool_names": [t.get("name") for t in tools or []]}
        row["estimated_tokens"] = None if tools is None else len(json.dumps(tools)) // checks.CHARS_PER_TOKEN
        rows.append(row)
    return rows, findings


@click.command("doctor")
@click.option("--no-connect", is_flag=True, help="Start no server: judge tools from the catalog cache only.")
@json_option
def doctor_cmd(no_connect: bool) -> int:
    """Check the configuration, every server and the environment; exit 1 if anything needs fixing."""
    progress = err_console().status("checking servers...") if sys.stderr.isatty() else None
    if progress is not None:
        progress.start()
    try:
        report = run_doctor(state().config_path, connect=not no_connect)
    finally:
        if progress is not None:
            progress.stop()
    emit(report, lambda: _render(report))
    return EXIT_OK if report["ok"] else EXIT_FAILED


def _render(report: JSONObject) -> None:
    runtimes = ", ".join(f"{k}: {v or 'not found'}" for k, v in report["environment"]["runtimes"].items())
    click.echo(f"mcpmux {report['environment']['mcpmux']}, Python {report['environment']['python']}; {runtimes}")
    for row in report["config_files"]:
        status = "read" if row["exists"] else "not found"
        click.echo(f"config {row['role']}: {row['path']} ({status})")
    if report["servers"]:
        table(
            ["server", "type", "status", "connect ms", "tools", "~tokens"],
            [
                (r["name"], r["type"], r["status"], r["connect_ms"], r["tools"], r["estimated_tokens"])
                for r in report["servers"]
            ],
        )
    for item in report["findings"]:
        where = f"{item['server']}: " if item["server"] else ""
        click.echo(f"{_MARKS[item['severity']]} {item['severity']}: {where}{item['message']}")
        if item["hint"]:
            click.echo(f"    hint: {item['hint']}")
    click.echo("all is well" if report["ok"] else "some checks failed")
