"""Attacks on the built-in workspace server, run the way issue 15 describes them.

- A process swaps a directory of the root for a symlink to an outside directory in a tight loop
  while the tools read, write, edit, list, search and delete through it: nothing outside is ever
  read, listed, written or deleted.
- A catastrophic regex does not freeze the process; FIFOs and huge lines cannot starve or bloat it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import psutil
import pytest
from mcp.client.session import ClientSession

from mcpmux.config.models import BuiltinServerConfig, Settings
from mcpmux.errors import ConfigError
from mcpmux.servers import build_server
from mcpmux.transports.inprocess import open_builtin, open_mcp_server
from tests.servers._client import text_of

pytestmark = pytest.mark.anyio

SECRET = "OUTSIDE-SECRET-7f3a"
ATTACK_S = 8.0

# Each state of ``d`` is held for half a millisecond: long enough that some reads land on the real
# directory (the test checks that the race was run at all), short enough to swap in mid-walk.
SWAPPER = """
import os, sys, time
root = sys.argv[1]
os.chdir(root)
while True:
    for a, b in (("real", "d"), ("d", "real"), ("link", "d"), ("d", "link")):
        try:
            os.rename(a, b)
        except OSError:
            pass
        if b == "d":
            time.sleep(0.0005)
"""


@asynccontextmanager
async def _session(root: Path) -> AsyncIterator[ClientSession]:
    server = build_server("workspace", root=root)
    async with (
        open_mcp_server(server, name="workspace", describe="attack") as streams,
        ClientSession(streams.read, streams.write, read_timeout_seconds=60) as session,
    ):
        with anyio.fail_after(30):
            await session.initialize()
        yield session


def _start_swapper(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SWAPPER, str(root)])


@pytest.fixture
def swapped(tmp_path: Path) -> tuple[Path, Path]:
    """A root whose ``d`` alternates between a real directory and a symlink to ``outside``."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real" / "sub").mkdir(parents=True)
    (root / "real" / "f.txt").write_text("inside\n", encoding="utf-8")
    outside.mkdir()
    (outside / "f.txt").write_text(f"{SECRET}\n", encoding="utf-8")
    (outside / "victim.txt").write_text(f"{SECRET}\n", encoding="utf-8")
    (outside / f"{SECRET}-name").mkdir()
    (outside / "sub").mkdir()
    (root / "link").symlink_to(outside)
    return root.resolve(), outside.resolve()


ATTACKS = [
    ("read_file", {"path": "d/f.txt"}),
    ("read_file", {"path": "d/sub/../f.txt"}),
    ("write_file", {"path": "d/planted.txt", "content": "x"}),
    ("write_file", {"path": "d/sub/planted.txt", "content": "x"}),
    ("edit_file", {"path": "d/f.txt", "old_text": SECRET, "new_text": "overwritten"}),
    ("list_directory", {"path": "d"}),
    ("grep", {"pattern": "SEC[R]ET", "path": "d"}),
    ("grep", {"pattern": "SEC[R]ET"}),
    ("glob", {"pattern": "d/*"}),
    ("glob", {"pattern": "**/*"}),
    ("delete", {"path": "d/victim.txt"}),
    ("move", {"source": "d/victim.txt", "destination": "stolen.txt"}),
]


@pytest.mark.slow
async def test_swapping_a_directory_for_a_symlink_never_reaches_outside_the_root(
    swapped: tuple[Path, Path],
) -> None:
    root, outside = swapped
    before = sorted(p.name for p in outside.rglob("*"))
    leaks: list[str] = []
    inside_reads = 0
    deadline = time.monotonic() + ATTACK_S
    # On a loaded machine the swapper may start late or every read may land on the symlink: go on
    # (bounded) until at least one read went through, so the attack surely raced something.
    last_chance = deadline + 4 * ATTACK_S

    def attacking() -> bool:
        now = time.monotonic()
        return now < deadline or (inside_reads == 0 and now < last_chance)

    async def hammer(s: ClientSession, tool: str, arguments: dict[str, str]) -> None:
        nonlocal inside_reads
        while attacking():
            with anyio.fail_after(60):
                result = await s.call_tool(tool, arguments)
            text = text_of(result)
            if SECRET in text:
                leaks.append(f"{tool} {arguments}: {text[:200]}")
            inside_reads += tool == "read_file" and not result.is_error and "inside" in text

    swapper = _start_swapper(root)
    try:
        async with _session(root) as s, anyio.create_task_group() as tg:
            for tool, arguments in ATTACKS:
                tg.start_soon(hammer, s, tool, arguments)
    finally:
        swapper.kill()
        swapper.wait()
    after = sorted(p.name for p in outside.rglob("*"))
    assert leaks == [], f"{len(leaks)} results showed outside data, e.g. {leaks[:3]}"
    assert after == before, f"files appeared or vanished outside the root: {set(after) ^ set(before)}"
    assert (outside / "f.txt").read_text(encoding="utf-8") == f"{SECRET}\n"
    assert inside_reads > 0, "the attack never let a read through: the test exercised nothing"


async def test_a_catastrophic_regex_neither_freezes_the_process_nor_hangs_the_call(tmp_path: Path) -> None:
    # ^(a+)+$ backtracks for seconds per line on Python's re, holding the GIL: the ticker stalls.
    (tmp_path / "evil.txt").write_text(("a" * 25 + "b\n") * 150_000, encoding="utf-8")
    (tmp_path / "small.txt").write_text("hello\n", encoding="utf-8")
    reads_during_grep = 0
    grep_done = anyio.Event()

    async def ticker(s: ClientSession) -> None:
        nonlocal reads_during_grep
        while not grep_done.is_set():
            result = await s.call_tool("read_file", {"path": "small.txt"})
            assert not result.is_error, text_of(result)
            reads_during_grep += not grep_done.is_set()

    async with _session(tmp_path) as s:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker, s)
                result = await s.call_tool("grep", {"pattern": "^(a+)+$", "path": "evil.txt"})
                grep_done.set()
    assert text_of(result).startswith("no lines match"), text_of(result)
    assert reads_during_grep > 0, "no other call made progress while grep ran"


@pytest.mark.parametrize(
    ("pattern", "feature"), [(r"(a)\1", "backreferences"), ("(?=a)b", "lookahead"), ("(?<!a)b", "lookbehind")]
)
async def test_regex_syntax_re2_lacks_is_refused_with_a_clear_error(tmp_path: Path, pattern: str, feature: str) -> None:
    async with _session(tmp_path) as s:
        result = await s.call_tool("grep", {"pattern": pattern})
    assert result.is_error
    assert "RE2" in text_of(result)
    assert feature in text_of(result)


async def test_fifos_cannot_take_the_worker_threads(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "plain.txt").write_text("still served\n", encoding="utf-8")
    errors: list[str] = []

    async def read_pipe(s: ClientSession) -> None:
        result = await s.call_tool("read_file", {"path": "pipe"})
        errors.append(text_of(result) if result.is_error else "read succeeded")

    async with _session(tmp_path) as s:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(read_pipe, s)
            plain = await s.call_tool("read_file", {"path": "plain.txt"})
            grep = await s.call_tool("grep", {"pattern": "still"})
            edit = await s.call_tool("edit_file", {"path": "pipe", "old_text": "a", "new_text": "b"})
    assert len(errors) == 50
    assert all("not a regular file" in message for message in errors), errors[:2]
    assert text_of(plain) == "still served\n"
    assert text_of(grep).startswith("plain.txt:1:still served"), text_of(grep)
    assert edit.is_error
    assert "not a regular file" in text_of(edit)


async def test_a_huge_line_is_read_in_bounded_memory(tmp_path: Path) -> None:
    size = 48 * 1024 * 1024
    with (tmp_path / "huge.txt").open("wb") as handle:
        for _ in range(size // (1024 * 1024)):
            handle.write(b"x" * (1024 * 1024))
    async with _session(tmp_path) as s:
        tracemalloc.start()
        try:
            with anyio.fail_after(120):
                result = await s.call_tool("read_file", {"path": "huge.txt", "max_lines": 1})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    text = text_of(result)
    assert not result.is_error, text[:200]
    assert len(text) < 200_000
    assert "longer than" in text
    assert peak < 16 * 1024 * 1024, f"reading one line of {size} bytes peaked at {peak} bytes"


@pytest.mark.parametrize("where", ["/", "home", "home-parent"])
async def test_a_too_wide_root_is_refused_by_default_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    home = tmp_path / "home" / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    root = {"/": Path("/"), "home": home, "home-parent": home.parent}[where]
    monkeypatch.chdir(root)
    for server in (
        BuiltinServerConfig(name="workspace"),
        BuiltinServerConfig(name="content_store", database=tmp_path / "c.db"),
    ):
        with pytest.raises(ConfigError, match="refuses to serve the current directory") as caught:
            async with open_builtin(server, Settings()):
                pass
        assert "allow_wide_root: true" in str(caught.value)
    with pytest.raises(ConfigError, match="home directory"):
        build_server("workspace", root=home)


async def test_a_wide_root_is_served_when_the_config_opts_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    server = BuiltinServerConfig(name="workspace", root=home, allow_wide_root=True)
    async with open_builtin(server, Settings()) as streams, ClientSession(streams.read, streams.write) as s:
        with anyio.fail_after(30):
            await s.initialize()
            result = await s.call_tool("read_file", {"path": "notes.txt"})
    assert text_of(result) == "mine\n"
    (home / "project").mkdir()
    assert build_server("workspace", root=home / "project") is not None


@pytest.mark.subprocess
async def test_with_the_sandbox_on_the_file_tools_run_out_of_process_inside_it(tmp_path: Path) -> None:
    from mcpmux.config.models import SandboxConfig, ServerSecurity
    from mcpmux.processes.sandbox import sandbox_backend

    if sandbox_backend().name == "none":
        pytest.skip(sandbox_backend().explain())
    (tmp_path / "notes.txt").write_text("inside\n", encoding="utf-8")
    security = ServerSecurity(sandbox=SandboxConfig(enabled=True))
    server = BuiltinServerConfig(name="workspace", root=tmp_path, security=security)
    async with open_builtin(server, Settings()) as streams, ClientSession(streams.read, streams.write) as s:
        with anyio.fail_after(60):
            await s.initialize()
            read = await s.call_tool("read_file", {"path": "notes.txt"})
            wrote = await s.call_tool("write_file", {"path": "new.txt", "content": "x"})
            status = await s.read_resource("builtin://workspace/status")
        assert streams.pid is not None and streams.pid != os.getpid()
        served_by = " ".join(psutil.Process(streams.pid).cmdline())
    assert text_of(read) == "inside\n"
    assert not wrote.is_error and (tmp_path / "new.txt").read_text(encoding="utf-8") == "x"
    assert "sandbox: on" in str(status.contents[0])
    assert "bwrap" in served_by or "_landlock_exec" in served_by or "_reaper" in served_by, served_by
