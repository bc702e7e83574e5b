"""Attacks on the built-in workspace server, run the way issue 15 describes them.

- A process swaps a directory of the root for a symlink to an outside directory in a tight loop
  while the tools read, write, edit, list, search and delete through it: nothing outside is ever
  read, listed, written or deleted.
- A catastrophic regex does not freeze the process; FIFOs and huge lines cannot starve or bloat it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession

from mcpmux.servers import build_server
from mcpmux.transports.inprocess import open_mcp_server
from tests.servers._client import text_of

pytestmark = pytest.mark.anyio

SECRET = "OUTSIDE-SECRET-7f3a"
ATTACK_S = 8.0

SWAPPER = """
import os, sys
root = sys.argv[1]
os.chdir(root)
while True:
    for a, b in (("real", "d"), ("d", "real"), ("link", "d"), ("d", "link")):
        try:
            os.rename(a, b)
        except OSError:
            pass
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


async def test_swapping_a_directory_for_a_symlink_never_reaches_outside_the_root(
    swapped: tuple[Path, Path],
) -> None:
    root, outside = swapped
    before = sorted(p.name for p in outside.rglob("*"))
    leaks: list[str] = []
    inside_reads = 0
    deadline = time.monotonic() + ATTACK_S

    async def hammer(s: ClientSession, tool: str, arguments: dict[str, str]) -> None:
        nonlocal inside_reads
        while time.monotonic() < deadline:
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
