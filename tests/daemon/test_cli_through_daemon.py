"""The CLI prints the same, and exits the same, with and without the daemon (real reference servers)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from tests.daemon.conftest import Daemon, cli
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.timeout(600)]


def _config(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("first line\nsecond line\n", encoding="utf-8")
    servers = []
    for name, (command, args) in {
        "everything": stdio_command("everything"),
        "filesystem": stdio_command("filesystem", str(data)),
        "memory": stdio_command("memory", str(tmp_path / "memory.jsonl")),
        "time": stdio_command("time"),
    }.items():
        servers.append({"name": name, "command": command, "args": args})
    path = tmp_path / "mcpmux.yaml"
    path.write_text(json.dumps({"mcp": {"servers": servers}}), encoding="utf-8")
    return data


def _diff(args: tuple[str, ...], direct: tuple[int, str], through: tuple[int, str]) -> str:
    lines = difflib.unified_diff(direct[1].splitlines(), through[1].splitlines(), "direct", "daemon", lineterm="", n=1)
    return f"{args}: exit {direct[0]} vs {through[0]}\n" + "\n".join(list(lines)[:40])


def _same_json(args: tuple[str, ...], direct: tuple[int, str], through: tuple[int, str]) -> bool:
    """``--json`` output equal as data: an SDK 2.x server (the daemon's gateway) re-serializes
    ``tools/list`` through its per-version sieve, which orders schema keys differently from a Node server."""
    return "--json" in args and direct[0] == through[0] and json.loads(direct[1]) == json.loads(through[1])


def _both(*args: str) -> tuple[tuple[int, str], tuple[int, str]]:
    code, out, _ = cli("--no-daemon", *args)
    code_d, out_d, _ = cli("--daemon", *args)
    return (code, out), (code_d, out_d)


def test_every_command_prints_and_exits_the_same_through_the_daemon(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = _config(tmp_path)
    daemon.start("--linger", "600")
    code, out, _ = cli("--no-daemon", "--json", "resources", "everything")
    assert code == 0, out
    uri = next(r["uri"] for r in json.loads(out) if r["uri"].startswith("demo://resource/static/document/"))
    code, out, _ = cli("--no-daemon", "--json", "prompts", "everything")
    assert code == 0, out
    prompt = next(p["name"] for p in json.loads(out) if p["name"].endswith("simple-prompt"))
    commands = [
        ("tools",),
        ("--json", "tools"),
        ("tools", "everything:echo"),
        ("call", "everything:echo", "message=hello through the daemon"),
        ("--json", "call", "everything:get-sum", "a=1", "b=2"),
        ("call", "everything:get-structured-content", "location=New York"),
        ("read", "everything", uri),
        ("--json", "read", "everything", uri),
        ("prompt", prompt),
        ("resources", "everything"),
        ("prompts",),
        ("call", "filesystem:list_directory", f"path={data}"),
        ("call", "filesystem:read_text_file", f"path={data / 'notes.txt'}"),
        ("call", "filesystem:read_text_file", f"path={tmp_path / 'outside.txt'}"),
        ("--json", "call", "memory:read_graph"),
        ("call", "memory:search_nodes", "query=nothing"),
        ("call", "time:convert_time", "source_timezone=UTC", "time=12:00", "target_timezone=Europe/Paris"),
        ("call", "time:get_current_time"),  # missing argument: refused before the call (exit 2)
        ("call", "time:no_such_tool"),
    ]
    mismatches = []
    for args in commands:
        direct, through = _both(*args)
        if direct != through and not _same_json(args, direct, through):
            mismatches.append((args, direct, through))
    assert not mismatches, "\n\n".join(_diff(*m) for m in mismatches)
    servers = daemon.server_pids()
    assert set(servers) == {"everything", "filesystem", "memory", "time"}, servers
