"""The content_store tools over MCP: add (text and workspace files), search, read, delete, status."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcpmux.config.paths import data_dir
from mcpmux.servers import build_server
from mcpmux.servers.content_server import STATUS_URI
from tests.servers._client import call_error, call_ok
from tests.servers.conftest import SessionFactory

pytestmark = pytest.mark.anyio


def _doc_id(added: str) -> int:
    match = re.search(r"added document (\d+)", added)
    assert match, added
    return int(match.group(1))


async def test_add_search_read_and_delete_through_the_tools(root: Path, connect: SessionFactory) -> None:
    server = build_server("content_store", root=root, database=Path(":memory:"))
    async with connect(server) as s:
        assert "created store 'manuals'" in await call_ok(s, "create_store", name="manuals", description="how-tos")
        first = _doc_id(
            await call_ok(
                s,
                "add_content",
                store="manuals",
                text="Descale the espresso machine monthly.",
                title="Espresso care",
                metadata={"product": "espresso"},
            )
        )
        second = _doc_id(await call_ok(s, "add_content", store="manuals", path="src/app.py"))
        found = await call_ok(s, "search", query="espresso descaling", metadata={"product": "espresso"})
        assert f'1. document {first} "Espresso care" in store `manuals`' in found
        assert "**Descale**" in found
        assert "no documents match" in await call_ok(s, "search", query="espresso", stores=["elsewhere"])
        read = await call_ok(s, "read_content", document_id=second)
        assert 'document 2 "app.py"' in read
        assert "source: src/app.py" in read
        assert "return 42" in read
        assert "- `manuals`: how-tos (2 documents" in await call_ok(s, "list_stores")
        assert f"deleted document {first}" in await call_ok(s, "delete_content", document_id=first)
        assert "no document with id" in await call_error(s, "read_content", document_id=first)
        assert "and its 1 documents" in await call_ok(s, "delete_store", name="manuals")


async def test_add_content_refuses_bad_input_with_clear_errors(root: Path, connect: SessionFactory) -> None:
    (root / "blob.bin").write_bytes(b"\x00" * 10)
    server = build_server("content_store", root=root, database=Path(":memory:"))
    async with connect(server) as s:
        assert "exactly one of" in await call_error(s, "add_content", store="a")
        assert "exactly one of" in await call_error(s, "add_content", store="a", text="x", path="notes.txt")
        assert "outside the workspace root" in await call_error(s, "add_content", store="a", path="../secret.txt")
        assert "binary" in await call_error(s, "add_content", store="a", path="blob.bin")
        assert "store name" in await call_error(s, "add_content", store="bad name", text="x")
        assert "no store named" in await call_error(s, "delete_store", name="ghost")


async def test_the_default_database_lives_in_the_data_dir_and_persists(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("content_store", root=root)) as s:
        await call_ok(s, "add_content", store="keep", text="Remember the milk.")
    assert (data_dir() / "content_store.db").is_file()
    async with connect(build_server("content-store", root=root)) as s:
        assert "**milk**" in await call_ok(s, "search", query="milk")
        status = await s.read_resource(STATUS_URI)
    text = getattr(status.contents[0], "text", "")
    assert "content_store.db" in text
    assert "`keep`" in text
    assert "- `search` (read-only)" in text


async def test_content_tools_carry_hints(root: Path, connect: SessionFactory) -> None:
    async with connect(build_server("content_store", root=root, database=Path(":memory:"))) as s:
        tools = {t.name: t.annotations for t in (await s.list_tools()).tools}
    assert set(tools) == {
        "create_store",
        "list_stores",
        "add_content",
        "search",
        "read_content",
        "delete_content",
        "delete_store",
    }
    assert all(getattr(tools[n], "read_only_hint", None) for n in ("list_stores", "search", "read_content"))
    assert all(getattr(tools[n], "destructive_hint", None) for n in ("delete_content", "delete_store"))
