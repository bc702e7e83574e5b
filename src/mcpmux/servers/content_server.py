"""The ``content_store`` built-in server: MCP tools over :class:`ContentStore`."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcpmux.config.paths import data_dir
from mcpmux.processes.confinement import Confinement
from mcpmux.servers._content_render import render_document, render_hits, render_stores
from mcpmux.servers._sdk import new_server, tool, tools_markdown
from mcpmux.servers.content_store import ContentStore, MetadataValue, StoreError
from mcpmux.servers.workspace_context import open_regular

__all__ = ["DATABASE_FILE", "STATUS_URI", "build_content_server"]

STATUS_URI = "builtin://content_store/status"
DATABASE_FILE = "content_store.db"
MAX_FILE_BYTES = 20 * 1024 * 1024

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTROYS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
A searchable library of text documents, grouped in named stores and kept across restarts. Add text
or workspace files with `add_content`, find them with `search` (BM25 keyword ranking, best first),
then read a hit in full with `read_content`. Documents are split into overlapping chunks; search
returns one hit per document with its best chunk and a snippet where matches are **bold**.
"""

T = TypeVar("T")
StoreArg = Annotated[str, Field(description="Store name: letters, digits, '_', '.', '-' (max 64).")]
DocIdArg = Annotated[int, Field(ge=1, description="Document id, as returned by add_content or search.")]


class _StoreHandle:
    """Opens the store when the first session starts and closes it when the last one ends."""

    def __init__(self, database: Path | str) -> None:
        self.database = database
        self.store: ContentStore | None = None
        self._users = 0
        self._lock = threading.Lock()

    @asynccontextmanager
    async def lifespan(self, _server: MCPServer[Any]) -> AsyncIterator[None]:
        with self._lock:
            if self.store is None:
                self.store = ContentStore(self.database)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self.store is not None:
                    self.store.close()
                    self.store = None

    async def run(self, fn: Callable[[ContentStore], T]) -> T:
        store = self.store
        if store is None:
            raise ToolError("the content store is not open (the server is not running)")
        try:
            return await anyio.to_thread.run_sync(fn, store)
        except StoreError as exc:
            raise ToolError(str(exc)) from exc
        except sqlite3.Error as exc:
            raise ToolError(f"database error in {store.database}: {exc}") from exc


def build_content_server(database: Path | str | None = None, *, root: Path | None = None) -> MCPServer:
    """Build the ``content_store`` server.

    Args:
        database: the SQLite file, or ``":memory:"``; default ``data_dir()/content_store.db``.
            It is opened when a session starts and closed when the last session ends.
        root: the directory ``add_content`` may read files from (default: the current directory).

    Raises:
        ConfigError: ``root`` is not a directory.
    """
    handle = _StoreHandle(database if database is not None else data_dir() / DATABASE_FILE)
    files = Confinement(root if root is not None else Path.cwd())
    server = new_server("content_store", INSTRUCTIONS, lifespan=handle.lifespan)

    @tool(server, ADDS)
    async def create_store(
        name: StoreArg,
        description: Annotated[str, Field(description="What the store holds (optional).")] = "",
    ) -> str:
        """Create a named store of documents. Adding content to a missing store also creates it."""
        created = await handle.run(lambda s: s.create_store(name, description))
        return f"created store {name!r}" if created else f"store {name!r} already exists"

    @tool(server, READ_ONLY)
    async def list_stores() -> str:
        """List every store with its description and its number of documents, chunks and characters."""
        return render_stores(await handle.run(lambda s: s.list_stores()))

    @tool(server, ADDS)
    async def add_content(
        store: StoreArg,
        text: Annotated[str | None, Field(description="The text to add. Give either text or path.")] = None,
        path: Annotated[
            str | None, Field(description="A UTF-8 text file to add, relative to the workspace root.")
        ] = None,
        title: Annotated[str | None, Field(description="Document title; defaults to the file name.")] = None,
        metadata: Annotated[
            dict[str, MetadataValue] | None,
            Field(description='Flat key/value pairs to filter searches by, e.g. {"project": "x", "year": 2024}.'),
        ] = None,
    ) -> str:
        """Add a document to a store (the store is created if missing) and index it for search.

        Give exactly one of `text` or `path`. The text is split into overlapping chunks of about
        1,200 characters. Returns the new document id.
        """
        if (text is None) == (path is None):
            raise ToolError("give exactly one of `text` or `path`")
        source = ""
        if path is not None:
            source, text = _read_source(files, path)
            title = title if title is not None else Path(path).name
        assert text is not None
        body = text
        doc_id, chunks = await handle.run(
            lambda s: s.add(store, body, title=title or "", source=source, metadata=metadata or {})
        )
        return f"added document {doc_id} to store {store!r}: {len(body)} characters in {chunks} chunks"

    @tool(server, READ_ONLY)
    async def search(
        query: Annotated[str, Field(min_length=1, description='Keywords; put "exact phrases" in double quotes.')],
        stores: Annotated[list[str] | None, Field(description="Only search these stores (default: all).")] = None,
        metadata: Annotated[
            dict[str, MetadataValue] | None, Field(description="Only documents whose metadata has these values.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="Most documents to return.")] = 5,
    ) -> str:
        """Search documents by keywords, ranked by BM25 relevance (best first), one hit per document.

        Any word may match; documents matching more words, and rarer words, rank higher. Words are
        stemmed (search ~ searching). Each hit gives the document id, title, store, the best
        chunk's number, the score and a snippet with matches in **bold**; read more with
        `read_content`.
        """
        hits = await handle.run(lambda s: s.search(query, stores=stores, metadata=metadata, limit=limit))
        return render_hits(query, hits)

    @tool(server, READ_ONLY)
    async def read_content(
        document_id: DocIdArg,
        first_chunk: Annotated[int, Field(ge=0, description="First chunk to return (0-based).")] = 0,
        max_chunks: Annotated[int, Field(ge=1, le=100, description="How many chunks to return.")] = 10,
    ) -> str:
        """Read a document's text, a page of chunks at a time, with its title, source and metadata.

        Pages do not overlap; when more chunks follow, the result ends with the `first_chunk` to
        ask for next.
        """
        return render_document(
            await handle.run(lambda s: s.read(document_id, first_chunk=first_chunk, max_chunks=max_chunks))
        )

    @tool(server, DESTROYS)
    async def delete_content(document_id: DocIdArg) -> str:
        """Delete one document (and its chunks) from its store."""
        await handle.run(lambda s: s.delete(document_id))
        return f"deleted document {document_id}"

    @tool(server, DESTROYS)
    async def delete_store(name: StoreArg) -> str:
        """Delete a store and every document in it. This cannot be undone."""
        count = await handle.run(lambda s: s.delete_store(name))
        return f"deleted store {name!r} and its {count} documents"

    @server.resource(STATUS_URI, name="content store status", mime_type="text/markdown")
    async def status() -> str:
        """The database, the stores with their sizes, and the tools, as markdown."""
        stores = await handle.run(lambda s: s.list_stores())
        size = await handle.run(lambda s: s.database_bytes())
        head = (
            f"# content_store\n\n- database: `{handle.database}` ({size} bytes)\n"
            f"- files readable under: `{files.root}`\n\n"
        )
        return head + "## stores\n\n" + render_stores(stores) + "\n\n" + await tools_markdown(server)

    return server


def _read_source(files: Confinement, path: str) -> tuple[str, str]:
    def read(parent: int, name: str) -> bytes:
        fd = open_regular(parent, name, os.O_RDONLY, path)
        try:
            size = os.fstat(fd).st_size
            if size > MAX_FILE_BYTES:
                raise ToolError(f"{path!r} has {size} bytes, above the {MAX_FILE_BYTES}-byte limit")
            return os.read(fd, MAX_FILE_BYTES)
        finally:
            os.close(fd)

    try:
        data = files.at(path, read)
    except OSError as exc:
        raise ToolError(f"cannot read {path!r}: {exc.strerror or exc}") from exc
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path!r} looks like a binary file; only text can be added")
    return files.display(path), data.decode("utf-8", errors="replace")
