"""The checks behind ``mcpmux doctor``: each one returns findings, never raises for what it finds.

A finding is ``{"severity", "check", "server", "message", "hint"}`` (schema in
:mod:`mcpmux.cli.doctor`). Severities: ``error`` and ``warning`` make the doctor exit 1, ``info``
does not.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import anyio

from mcpmux.canonical_names import canonical_name
from mcpmux.config import Config, ServerConfig, StdioServerConfig, config_sources, load_file
from mcpmux.config.effective import with_effective_sandbox
from mcpmux.errors import AuthRequired, CommandNotFound, ConfigError, MCPMuxError, MCPTimeoutError, NameCollision
from mcpmux.provider_names import DEFAULT_SEPARATOR, PROFILES, NameTable, provider_name
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "check_config_files",
    "check_names",
    "check_sandbox",
    "check_server",
    "check_servers",
    "command_finding",
    "finding",
    "runtimes",
]

RUNTIMES = ("npx", "uvx", "node", "python3", "python", "docker")
COLD_START_COMMANDS = frozenset({"npx", "uvx", "bunx", "pnpx", "pipx", "docker"})
LARGE_TOOL_LIST_TOKENS = 10_000
SLOW_CONNECT_SHARE = 0.5
CHARS_PER_TOKEN = 4


def finding(severity: str, check: str, message: str, hint: str | None = None, server: str | None = None) -> JSONObject:
    """One finding as JSON-ready data."""
    return {"severity": severity, "check": check, "server": server, "message": message, "hint": hint}


def runtimes() -> dict[str, str | None]:
    """Where the usual server launchers are on PATH (``None``: not found)."""
    return {name: shutil.which(name) for name in RUNTIMES}


def _where_hint() -> str:
    found = runtimes()
    return "on PATH: " + ", ".join(f"{k} {v or 'not found'}" for k, v in found.items())


def check_config_files(explicit: str | None) -> tuple[list[JSONObject], list[JSONObject]]:
    """Every configuration source: ``(files, findings)``; each file is validated on its own."""
    files, findings = [], []
    for source in config_sources(explicit):
        row: JSONObject = {"role": source.role, "path": str(source.path), "exists": source.exists}
        row["problems"], row["warnings"] = [], []
        if source.exists:
            try:
                row["warnings"] = list(load_file(source.path).warnings)
            except ConfigError as exc:
                row["problems"] = [str(p) for p in exc.problems]
        findings += [finding("error", "config", p, "fix it; `mcpmux config validate FILE`") for p in row["problems"]]
        findings += [finding("warning", "config", w) for w in row["warnings"]]
        files.append(row)
    return files, findings


def check_sandbox(config: Config | None) -> tuple[JSONObject, list[JSONObject]]:
    """The sandbox backend sandboxed servers get here, probed for real (bubblewrap runs, else
    Landlock); an error only when the config asks for a sandbox and none works.
    """
    from mcpmux.processes.sandbox import sandbox_backend

    backend = sandbox_backend()
    available = backend.name != "none"
    detail = f"sandboxed servers run under {backend.name}" if available else "no sandbox backend works here"
    for name, why in backend.unavailable:
        detail += f"; {name} unavailable: {why}"
    wanted = config is not None and _sandbox_wanted(config)
    severity = "error" if wanted and not available else "warning" if wanted and backend.unavailable else "info"
    hint = None
    if not available:
        hint = "install bubblewrap (apt-get install bubblewrap) and allow user namespaces, or use Linux >= 5.13"
    elif backend.unavailable:
        hint = "Landlock confines files and TCP but has no pid namespace; allow user namespaces to use bubblewrap"
    report = {"backend": backend.name, "path": shutil.which("bwrap"), "available": available, "detail": detail}
    return report, [finding(severity, "sandbox", f"sandbox: {detail}", hint)]


def _sandbox_wanted(config: Config) -> bool:
    if config.security.sandbox.enabled:
        return True
    return any(s.security and s.security.sandbox and s.security.sandbox.enabled for s in config.enabled_servers)


def _command_missing(server: StdioServerConfig) -> bool:
    command = server.command
    if os.sep in command:
        return not (Path(command).is_file() and os.access(command, os.X_OK))
    return shutil.which(command) is None


def command_finding(server: ServerConfig) -> JSONObject | None:
    """An error when a stdio server's command is not on PATH (nothing is started)."""
    if isinstance(server, StdioServerConfig) and server.enabled and _command_missing(server):
        message = f"command {server.command!r} not found"
        return finding("error", "command", message, _where_hint(), server.name)
    return None


async def check_server(server: ServerConfig, config: Config) -> tuple[JSONObject, list[JSONObject]]:
    """Connect to one server, list its tools, and judge what happened."""
    row: JSONObject = {"name": server.name, "type": server.type, "enabled": server.enabled}
    row |= {"status": "ok", "connect_ms": None, "tools": None, "estimated_tokens": None}
    if not server.enabled:
        row["status"] = "skipped"
        return row, [finding("info", "server", "disabled; not checked", None, server.name)]
    if (missing := command_finding(server)) is not None:
        row["status"] = "fail"
        return row, [missing]
    findings: list[JSONObject] = []
    try:
        tools, seconds = await _list_tools(server, config)
    except MCPMuxError as exc:
        row["status"] = "fail"
        return row, [_failure(server, config, exc)]
    row["connect_ms"] = round(seconds * 1000, 1)
    row["tools"] = len(tools)
    row["estimated_tokens"] = len(json.dumps(tools, separators=(",", ":"))) // CHARS_PER_TOKEN
    row["tool_names"] = [str(t.get("name")) for t in tools]
    limit = server.effective_connect_timeout_s(config.settings)
    if seconds > limit * SLOW_CONNECT_SHARE:
        message = f"connecting took {seconds:.1f} s of a {limit:g} s connect timeout"
        findings.append(finding("warning", "timeout", message, _timeout_hint(server), server.name))
    if row["estimated_tokens"] > LARGE_TOOL_LIST_TOKENS:
        message = f"{len(tools)} tools take about {row['estimated_tokens']} tokens of every prompt"
        hint = "expose fewer tools with security.allowed_tools / denied_tools"
        findings.append(finding("warning", "size", message, hint, server.name))
    if findings:
        row["status"] = "warn"
    return row, findings


async def _list_tools(server: ServerConfig, config: Config) -> tuple[list[JSONObject], float]:
    from mcpmux.probe import probe

    report = await probe(server, config, lists=("tools",), ping=False)
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in report.tools]
    return tools, report.timings_s["connect"]


def _timeout_hint(server: ServerConfig) -> str:
    if isinstance(server, StdioServerConfig) and Path(server.command).name in COLD_START_COMMANDS:
        return (
            f"a cold {Path(server.command).name} start downloads the package first: raise connect_timeout_ms, "
            "or install the package once so it starts from the local cache"
        )
    return "raise the server's connect_timeout_ms"


def _failure(server: ServerConfig, config: Config, exc: MCPMuxError) -> JSONObject:
    message = str(exc)
    if isinstance(exc, AuthRequired):
        return finding("error", "auth", message, exc.hint, server.name)
    if isinstance(exc, CommandNotFound):
        return finding("error", "command", message, _where_hint(), server.name)
    note = _sandbox_note(server, config)
    if isinstance(exc, MCPTimeoutError):
        return finding("error", "timeout", message, note or _timeout_hint(server), server.name)
    return finding("error", "connect", message, note or exc.hint, server.name)


def _sandbox_note(server: ServerConfig, config: Config) -> str | None:
    if not isinstance(server, StdioServerConfig):
        return None
    from mcpmux.processes.sandbox import package_runner_note

    boxed = with_effective_sandbox(server, config.security)
    return package_runner_note(boxed) if isinstance(boxed, StdioServerConfig) else None


def check_names(config: Config, rows: list[JSONObject]) -> list[JSONObject]:
    """Canonical names claimed twice, provider names that collide, and names a provider rewrites."""
    namespaces = {s.name: s.namespace for s in config.servers}
    owners: dict[str, str] = {}
    findings = []
    for row in rows:
        for tool in row.get("tool_names", []):
            canonical = canonical_name(namespaces[row["name"]], tool)
            if canonical in owners and owners[canonical] != row["name"]:
                message = f"{canonical!r} is offered by {owners[canonical]!r} and {row['name']!r}"
                findings.append(finding("error", "collision", message, "give one server a `prefix`", row["name"]))
            owners.setdefault(canonical, row["name"])
    for profile in PROFILES.values():
        try:
            NameTable(owners, profile)
        except NameCollision as exc:
            findings.append(finding("error", "collision", str(exc), exc.hint))
        for canonical, server in owners.items():
            plain = canonical.replace(":", DEFAULT_SEPARATOR)
            shown = provider_name(canonical, profile)
            if shown != plain:
                message = f"{canonical!r} is not a valid {profile.name} name; it is sent as {shown!r}"
                hint = "nothing to do: calls under the mapped name are routed back by the name table"
                findings.append(finding("info", "names", message, hint, server))
    return findings


async def check_servers(config: Config) -> tuple[list[JSONObject], list[JSONObject]]:
    """Every server, concurrently: ``(rows, findings)`` in configuration order."""
    results: dict[str, tuple[JSONObject, list[JSONObject]]] = {}

    async def one(server: ServerConfig) -> None:
        results[server.name] = await check_server(server, config)

    async with anyio.create_task_group() as tg:
        for server in config.servers:
            tg.start_soon(one, server)
    rows = [results[s.name][0] for s in config.servers]
    findings = [f for s in config.servers for f in results[s.name][1]]
    return rows, findings
