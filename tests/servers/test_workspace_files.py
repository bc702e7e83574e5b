"""The workspace's file tools over MCP: read, write, edit, list, move, delete, and their refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpmux.servers import build_server
from tests.servers._client import call_error, call_ok
from tests.servers.conftest import SessionFactory

pytestmark = pytest.mark.anyio


async def test_read_file_returns_text_and_pages_by_line_range(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        assert await call_ok(s, "read_file", path="notes.txt") == "alpha\nbeta\ngamma\ndelta\n"
        page = await call_ok(s, "read_file", path="notes.txt", start_line=2, max_lines=2)
        assert page.startswith("beta\ngamma\n")
        assert "call again with start_line=4" in page
        assert "fewer than 9 lines" in await call_ok(s, "read_file", path="notes.txt", start_line=9)


async def test_read_file_refuses_binary_and_oversized_whole_reads(root: Path, connect: SessionFactory) -> None:
    (root / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    (root / "big.txt").write_text("x" * 100 + "\n" * 30_000, encoding="utf-8")
    from mcpmux.servers.workspace import build_workspace_server
    from mcpmux.servers.workspace_context import WorkspaceLimits

    server = build_workspace_server(root, limits=WorkspaceLimits(max_read_bytes=1000))
    async with connect(server) as s:
        assert "binary" in await call_error(s, "read_file", path="blob.bin")
        assert "pass start_line and max_lines" in await call_error(s, "read_file", path="big.txt")
        assert (await call_ok(s, "read_file", path="big.txt", max_lines=1)).startswith("x" * 100)
        assert "no such file" in await call_error(s, "read_file", path="missing.txt")


async def test_write_file_creates_parents_and_overwrites(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        assert "created deep/new/file.md" in await call_ok(s, "write_file", path="deep/new/file.md", content="# hi\n")
        assert "overwrote" in await call_ok(s, "write_file", path="deep/new/file.md", content="# bye\n")
    assert (root / "deep/new/file.md").read_text(encoding="utf-8") == "# bye\n"


async def test_edit_file_replaces_a_unique_match_only(root: Path, connect: SessionFactory) -> None:
    (root / "dup.txt").write_text("x = 1\ny = 2\nx = 1\n", encoding="utf-8")
    async with connect(build_server("workspace", root=root)) as s:
        assert "line 2" in await call_ok(s, "edit_file", path="src/app.py", old_text="return 42", new_text="return 7")
        error = await call_error(s, "edit_file", path="dup.txt", old_text="x = 1", new_text="x = 3")
        assert "occurs 2 times" in error
        assert "lines 1, 3" in error
        assert "not found" in await call_error(s, "edit_file", path="dup.txt", old_text="zzz", new_text="")
    assert "return 7" in (root / "src/app.py").read_text(encoding="utf-8")
    assert (root / "dup.txt").read_text(encoding="utf-8") == "x = 1\ny = 2\nx = 1\n"


async def test_list_directory_marks_directories_files_and_links(root: Path, connect: SessionFactory) -> None:
    (root / "link").symlink_to("notes.txt")
    (root / ".hidden").write_text("", encoding="utf-8")
    async with connect(build_server("workspace", root=root)) as s:
        listing = await call_ok(s, "list_directory")
        assert "src/" in listing
        assert "notes.txt  (23 bytes)" in listing
        assert "link -> notes.txt" in listing
        assert ".hidden" not in listing
        assert ".hidden" in await call_ok(s, "list_directory", path=".", show_hidden=True)
        assert "is a file, not a directory" in await call_error(s, "list_directory", path="notes.txt")
        assert "no such file" in await call_error(s, "list_directory", path="nowhere")


async def test_move_and_delete_act_inside_the_root(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        assert "moved notes.txt -> archive/notes.txt" in await call_ok(
            s, "move", source="notes.txt", destination="archive/notes.txt"
        )
        (root / "other.txt").write_text("o", encoding="utf-8")
        assert "it exists" in await call_error(s, "move", source="other.txt", destination="archive/notes.txt")
        assert "recursive=true" in await call_error(s, "delete", path="archive")
        assert "deleted archive" in await call_ok(s, "delete", path="archive", recursive=True)
        assert "cannot be deleted" in await call_error(s, "delete", path=".")
    assert not (root / "archive").exists()


async def test_deleting_a_symlink_removes_the_link_not_its_target(root: Path, connect: SessionFactory) -> None:
    (root / "alias").symlink_to(root / "notes.txt")
    async with connect(build_server("workspace", root=root)) as s:
        await call_ok(s, "delete", path="alias")
    assert not (root / "alias").is_symlink()
    assert (root / "notes.txt").exists()


async def test_tools_carry_read_only_and_destructive_hints(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    read_only = {"read_file", "list_directory", "glob", "grep"}
    destructive = {"write_file", "edit_file", "move", "delete", "execute_shell", "execute_python"}
    assert set(tools) == read_only | destructive
    for name in read_only:
        hints = tools[name].annotations
        assert hints is not None
        assert hints.read_only_hint is True
    for name in destructive:
        hints = tools[name].annotations
        assert hints is not None
        assert hints.read_only_hint is False
        assert hints.destructive_hint is True
    assert all(t.description and len(t.description) > 60 for t in tools.values())
    assert "description" in tools["read_file"].input_schema["properties"]["path"]


async def test_a_directory_cannot_be_moved_into_itself(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("workspace", root=root)) as s:
        assert "into itself" in await call_error(s, "move", source="src", destination="src/inner")
        assert "it is a directory" in await call_error(s, "read_file", path="src")
    assert (root / "src" / "app.py").is_file()


async def test_edit_file_refuses_files_that_are_not_utf8(root: Path, connect: SessionFactory) -> None:
    (root / "latin1.txt").write_bytes("café = 1\n".encode("latin-1"))
    async with connect(build_server("workspace", root=root)) as s:
        assert "not valid UTF-8" in await call_error(s, "edit_file", path="latin1.txt", old_text="= 1", new_text="= 2")
    assert (root / "latin1.txt").read_bytes() == "café = 1\n".encode("latin-1")
