"""Paths that leave the workspace root are refused, whichever tool receives them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpmux.errors import ConfigError
from mcpmux.processes.confinement import Confinement, PathOutsideRoot
from mcpmux.servers import build_server
from tests.servers._client import call_error
from tests.servers.conftest import SessionFactory


def _name_at(confinement: Confinement, path: str, *, follow: bool = True) -> str:
    """What ``path`` reaches: the real path of the final component (its parent's, plus its name)."""
    return confinement.at(path, lambda fd, name: os.path.join(os.readlink(f"/proc/self/fd/{fd}"), name), follow=follow)


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd", "~/x", "escape/secret.txt"])
def test_confinement_refuses_paths_that_leave_the_root(root: Path, path: str) -> None:
    (root / "escape").symlink_to(root.parent)
    with pytest.raises(PathOutsideRoot, match="outside the workspace root"):
        _name_at(Confinement(root), path)


def test_confinement_accepts_dotdot_that_stays_inside_and_absolute_paths_inside(root: Path) -> None:
    confinement = Confinement(root)
    (root / "inner").symlink_to("src")
    assert _name_at(confinement, "src/../notes.txt") == str(root / "notes.txt")
    assert _name_at(confinement, str(root / "src" / "app.py")) == str(root / "src" / "app.py")
    assert _name_at(confinement, "inner/app.py") == str(root / "src" / "app.py")
    assert _name_at(confinement, "") == f"{root}/."
    assert confinement.resolve("src") == root / "src"


def test_a_link_itself_can_be_addressed_without_following_it(root: Path) -> None:
    (root / "out").symlink_to(root.parent / "secret.txt")
    confinement = Confinement(root)
    assert _name_at(confinement, "out", follow=False) == str(root / "out")
    with pytest.raises(PathOutsideRoot):
        confinement.at("out", lambda fd, name: os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd))


def test_a_missing_root_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        build_server("workspace", root=tmp_path / "nope")


TRAVERSALS = [
    ("read_file", {"path": "../secret.txt"}),
    ("read_file", {"path": "leak"}),
    ("read_file", {"path": "up/secret.txt"}),
    ("write_file", {"path": "../planted.txt", "content": "x"}),
    ("write_file", {"path": "up/planted.txt", "content": "x"}),
    ("edit_file", {"path": "leak", "old_text": "top", "new_text": "low"}),
    ("list_directory", {"path": "up"}),
    ("glob", {"pattern": "*", "path": ".."}),
    ("glob", {"pattern": "../*"}),
    ("grep", {"pattern": "secret", "path": "up"}),
    ("move", {"source": "notes.txt", "destination": "../stolen.txt"}),
    ("move", {"source": "../secret.txt", "destination": "mine.txt"}),
    ("delete", {"path": str(Path("..") / "secret.txt")}),
    ("execute_shell", {"command": "pwd", "cwd": ".."}),
    ("execute_shell", {"command": "pwd", "cwd": "up"}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments"), TRAVERSALS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(TRAVERSALS)])
async def test_every_tool_refuses_traversal_including_symlink_escapes(
    root: Path, connect: SessionFactory, tool: str, arguments: dict[str, str]
) -> None:
    (root / "leak").symlink_to(root.parent / "secret.txt")
    (root / "up").symlink_to(root.parent)
    async with connect(build_server("workspace", root=root)) as s:
        message = await call_error(s, tool, **arguments)
    assert "outside the workspace root" in message or "must be relative" in message
    assert "Traceback" not in message
    assert (root.parent / "secret.txt").read_text(encoding="utf-8") == "top secret\n"
    assert not (root.parent / "planted.txt").exists()
    assert not (root.parent / "stolen.txt").exists()


@pytest.mark.anyio
async def test_grep_and_glob_do_not_follow_links_out_of_the_root(root: Path, connect: SessionFactory) -> None:
    (root / "leak").symlink_to(root.parent / "secret.txt")
    (root / "up").symlink_to(root.parent)
    async with connect(build_server("workspace", root=root)) as s:
        grep = await s.call_tool("grep", {"pattern": "secret"})
        glob = await s.call_tool("glob", {"pattern": "**/*.txt"})
    assert "top secret" not in str(grep.content)
    assert "secret.txt" not in str(glob.content)
