"""The workspace's glob, grep and command tools, the session scratch dir, the sandbox hook, the status."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from mcpmux.servers import build_server
from mcpmux.servers.workspace import STATUS_URI
from tests.servers._client import call_error, call_ok
from tests.servers.conftest import SessionFactory

pytestmark = pytest.mark.anyio


async def test_glob_finds_files_recursively_relative_to_the_root(root: Path, connect: SessionFactory) -> None:
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "x.py").write_text("", encoding="utf-8")
    async with connect(build_server("workspace", root=root)) as s:
        assert await call_ok(s, "glob", pattern="**/*.py") == "src/app.py"
        assert await call_ok(s, "glob", pattern="*") == "node_modules/\nnotes.txt\nsrc/"
        assert "no paths match" in await call_ok(s, "glob", pattern="*.rs")


async def test_grep_reports_matches_with_context_and_honours_include(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        assert await call_ok(s, "grep", pattern=r"gam+a") == "notes.txt:3:gamma"
        with_context = await call_ok(s, "grep", pattern="gamma", context_lines=1)
        assert with_context == "notes.txt-2-beta\nnotes.txt:3:gamma\nnotes.txt-4-delta"
        assert await call_ok(s, "grep", pattern="todo", ignore_case=True, include="*.py") == "src/app.py:4:# TODO: more"
        assert "no lines match" in await call_ok(s, "grep", pattern="todo", include="*.txt")
        assert "invalid regular expression" in await call_error(s, "grep", pattern="(unclosed")


async def test_grep_stops_at_the_match_cap_and_says_so(root: Path, connect: SessionFactory) -> None:
    (root / "many.txt").write_text("hit\n" * 50, encoding="utf-8")
    async with connect(build_server("workspace", root=root)) as s:
        out = await call_ok(s, "grep", pattern="hit", max_matches=5)
    assert out.count("many.txt:") == 5
    assert "stopped after 5 matching lines" in out


async def test_execute_shell_reports_a_non_zero_exit_in_the_result(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        out = await call_ok(s, "execute_shell", command="echo out; echo err >&2; pwd; exit 3")
        assert out.startswith("exit code 3")
        assert "--- stdout ---\nout\n" in out
        assert "--- stderr ---\nerr" in out
        assert str(root) in out
        assert str(root / "src") in await call_ok(s, "execute_shell", command="pwd", cwd="src")


async def test_execute_shell_kills_the_process_group_at_the_deadline(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        with anyio.fail_after(10):
            out = await call_ok(s, "execute_shell", command="sleep 30 & echo started; wait", timeout_s=0.5)
    assert out.startswith("timed out after")
    assert "started" in out


async def test_execute_output_is_capped_while_read(root: Path, connect: SessionFactory) -> None:
    from mcpmux.servers.workspace import build_workspace_server
    from mcpmux.servers.workspace_context import WorkspaceLimits

    server = build_workspace_server(root, limits=WorkspaceLimits(max_output_chars=2000))
    async with connect(server) as s:
        out = await call_ok(s, "execute_python", code="print('x' * 1_000_000)")
    assert out.startswith("exit code 0")
    assert "[stdout cut: showing 1000 of 1000001 bytes]" in out
    assert len(out) < 2000


async def test_execute_python_runs_code_and_reports_exceptions(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        assert "--- stdout ---\n4\n" in await call_ok(s, "execute_python", code="print(2 + 2)")
        failed = await call_ok(s, "execute_python", code="raise SystemExit('boom')")
        assert failed.startswith("exit code 1")
        assert "boom" in failed


async def test_a_session_gets_its_own_scratch_directory(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root, session_id="s-1")) as s:
        out = await call_ok(s, "execute_shell", command="pwd")
        status = await s.read_resource(STATUS_URI)
    scratch = root / ".mcpmux" / "scratch" / "s-1"
    assert scratch.is_dir()
    assert str(scratch) in out
    assert str(scratch) in str(status.contents[0])


def test_a_malformed_session_id_is_refused(root: Path) -> None:
    from mcpmux.errors import ConfigError

    with pytest.raises(ConfigError, match="session id"):
        build_server("workspace", root=root, session_id="../../etc")


async def test_the_sandbox_hook_wraps_every_command(root: Path, connect: SessionFactory) -> None:
    seen: list[tuple[list[str], Path]] = []

    def hook(argv: Sequence[str], cwd: Path) -> list[str]:
        seen.append((list(argv), cwd))
        return [sys.executable, "-c", "print('sandboxed')"]

    async with connect(build_server("workspace", root=root, sandbox=hook)) as s:
        assert "sandboxed" in await call_ok(s, "execute_shell", command="echo raw")
        status = await s.read_resource(STATUS_URI)
    assert seen == [(["/bin/sh", "-c", "echo raw"], root)]
    assert "sandbox: on" in str(status.contents[0])


async def test_status_resource_lists_root_sandbox_and_tools(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        resources = (await s.list_resources()).resources
        assert [str(r.uri) for r in resources] == [STATUS_URI]
        content = (await s.read_resource(STATUS_URI)).contents[0]
    text = getattr(content, "text", "")
    assert f"root: `{root}`" in text
    assert "sandbox: off" in text
    assert "- `execute_shell` (destructive)" in text
    assert "- `read_file` (read-only)" in text


async def test_grep_names_the_files_it_could_not_read(root: Path, connect: SessionFactory) -> None:
    (root / "dangling").symlink_to(root / "gone.txt")
    async with connect(build_server("workspace", root=root)) as s:
        out = await call_ok(s, "grep", pattern="alpha")
    assert out == "notes.txt:1:alpha\n[could not read 1 files: dangling]"


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` is gone or a zombie (killed, not yet reaped by init) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").split()[2] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


async def test_background_processes_do_not_outlive_the_command(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        out = await call_ok(s, "execute_shell", command="sleep 30 >/dev/null 2>&1 & echo $!")
    pid = int(out.split("--- stdout ---\n")[1].split()[0])
    assert await anyio.to_thread.run_sync(_gone_within, pid, 5.0)


async def test_commands_do_not_see_the_hosts_secrets(
    root: Path, connect: SessionFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    async with connect(build_server("workspace", root=root)) as s:
        out = await call_ok(s, "execute_shell", command="env")
    assert "sk-do-not-leak" not in out
    assert "PATH=" in out


@pytest.mark.parametrize("pattern", ["", ".", "**.py", "src/***"])
async def test_glob_explains_malformed_patterns(root: Path, connect: SessionFactory, pattern: str) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        message = await call_error(s, "glob", pattern=pattern)
    assert "pattern" in message
    assert "Error executing tool glob:" in message
