"""The content store's core: named stores of documents, chunked and searched with BM25 (SQLite FTS5).

One SQLite file (or ``:memory:``) holds everything. A document's text is stored once, in
``documents``; ``chunks`` records the character span of each chunk, and the FTS5 table
``chunk_fts`` indexes the chunk texts (with the title, weighted higher) for BM25 ranking and
highlighted snippets. WAL journaling and a busy timeout let several processes write the same file;
every write is one ``BEGIN IMMEDIATE`` transaction. The class is synchronous and thread-safe (one
connection behind a lock); async callers offload it to a worker thread.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from mcpmux.servers._store_schema import SCHEMA, fts_query
from mcpmux.servers.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, chunk_spans
from mcpmux.servers.content_models import (
    Document,
    MetadataValue,
    SearchHit,
    StoreError,
    StoreInfo,
    check_metadata,
    check_name,
)
from mcpmux.store.sqlite import enable_wal, private_file

__all__ = ["IN_MEMORY", "ContentStore", "Document", "MetadataValue", "SearchHit", "StoreError", "StoreInfo"]

IN_MEMORY = ":memory:"
BUSY_TIMEOUT_MS = 10_000


class ContentStore:
    """Named stores of chunked documents with BM25 search.

    Args:
        database: the SQLite file (created with its parent directory), or ``":memory:"``.
        chunk_chars: the longest chunk, in characters.
        overlap_chars: how much consecutive chunks overlap.
    """

    def __init__(
        self,
        database: Path | str,
        *,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        overlap_chars: int = DEFAULT_OVERLAP_CHARS,
    ) -> None:
        self.database = str(database)
        if self.database != IN_MEMORY:
            Path(self.database).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            private_file(Path(self.database))
        self.chunk_chars, self.overlap_chars = chunk_chars, overlap_chars
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.database, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False, isolation_level=None
        )
        try:
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            enable_wal(self._db)
            self._db.execute("PRAGMA foreign_keys = ON")
            # In WAL mode NORMAL is still safe against corruption; it only skips an fsync per commit.
            self._db.execute("PRAGMA synchronous = NORMAL")
            with self._write() as db:
                for statement in SCHEMA:
                    db.execute(statement)
        except BaseException:
            self._db.close()
            raise

    def database_bytes(self) -> int:
        """The size of the database (pages in use times page size), in bytes."""
        with self._read() as db:
            pages: int = db.execute("PRAGMA page_count").fetchone()[0]
            size: int = db.execute("PRAGMA page_size").fetchone()[0]
        return pages * size

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> ContentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    # -- stores ------------------------------------------------------------------------------

    def create_store(self, name: str, description: str = "") -> bool:
        """Create store ``name``; ``False`` if it already existed (its description is then updated)."""
        check_name(name)
        with self._write() as db:
            existed = db.execute("SELECT 1 FROM stores WHERE name = ?", (name,)).fetchone() is not None
            db.execute(
                "INSERT INTO stores(name, description, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET description = excluded.description WHERE excluded.description != ''",
                (name, description, time.time()),
            )
        return not existed

    def list_stores(self) -> list[StoreInfo]:
        """Every store with its document, chunk and character counts, by name."""
        with self._read() as db:
            rows = db.execute(
                "SELECT s.name, s.description, COUNT(d.id), COALESCE(SUM(d.chunk_count), 0), "
                "COALESCE(SUM(d.chars), 0) FROM stores s LEFT JOIN documents d ON d.store_id = s.id "
                "GROUP BY s.id ORDER BY s.name"
            ).fetchall()
        return [StoreInfo(*row) for row in rows]

    def delete_store(self, name: str) -> int:
        """Delete store ``name`` and its documents; returns how many documents went with it."""
        with self._write() as db:
            store_id = _store_id(db, name)
            count: int = db.execute("SELECT COUNT(*) FROM documents WHERE store_id = ?", (store_id,)).fetchone()[0]
            db.execute(
                "INSERT INTO chunk_fts(chunk_fts, rowid, text, title) SELECT 'delete', id, text, title "
                "FROM chunk_text WHERE store_id = ?",
                (store_id,),
            )
            db.execute("DELETE FROM stores WHERE id = ?", (store_id,))
        return count

    # -- documents ---------------------------------------------------------------------------

    def add(
        self,
        store: str,
        text: str,
        *,
        title: str = "",
        source: str = "",
        metadata: Mapping[str, MetadataValue] | None = None,
        create_store: bool = True,
    ) -> tuple[int, int]:
        """Add a document to ``store`` (created if missing and ``create_store``).

        Returns:
            ``(document id, number of chunks)``.

        Raises:
            StoreError: a bad store name or metadata, an empty text, or a missing store when
                ``create_store`` is false.
        """
        check_name(store)
        if not text.strip():
            raise StoreError("the text is empty; there is nothing to add")
        meta = json.dumps(check_metadata(metadata or {}), ensure_ascii=False, sort_keys=True)
        text = text.encode("utf-8", errors="replace").decode("utf-8")
        spans = chunk_spans(text, self.chunk_chars, self.overlap_chars)
        with self._write() as db:
            if create_store:
                db.execute(
                    "INSERT INTO stores(name, description, created_at) VALUES (?, '', ?) ON CONFLICT(name) DO NOTHING",
                    (store, time.time()),
                )
            store_id = _store_id(db, store)
            cursor = db.execute(
                "INSERT INTO documents(store_id, title, source, metadata, text, chars, chunk_count, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (store_id, title, source, meta, text, len(text), len(spans), time.time()),
            )
            doc_id = cursor.lastrowid
            db.executemany(
                "INSERT INTO chunks(document_id, seq, start, end) VALUES (?, ?, ?, ?)",
                [(doc_id, seq, start, end) for seq, (start, end) in enumerate(spans)],
            )
            db.execute(
                "INSERT INTO chunk_fts(rowid, text, title) SELECT id, text, title FROM chunk_text "
                "WHERE document_id = ?",
                (doc_id,),
            )
        assert doc_id is not None
        return doc_id, len(spans)

    def read(self, document_id: int, *, first_chunk: int = 0, max_chunks: int | None = None) -> Document:
        """Document ``document_id``, its text from chunk ``first_chunk`` for ``max_chunks`` chunks.

        Pages do not overlap: reading chunks 0-9, then 10-19, ... gives back the exact text.

        Raises:
            StoreError: no such document, or ``first_chunk`` past its last chunk.
        """
        with self._read() as db:
            row = db.execute(
                "SELECT d.id, s.name, d.title, d.source, d.metadata, d.chars, d.chunk_count FROM documents d "
                "JOIN stores s ON s.id = d.store_id WHERE d.id = ?",
                (document_id,),
            ).fetchone()
            if row is None:
                raise StoreError(f"no document with id {document_id}")
            count = row[6]
            last = count - 1 if max_chunks is None else min(count - 1, first_chunk + max_chunks - 1)
            if count and first_chunk >= count:
                raise StoreError(f"document {document_id} has {count} chunks (0-{count - 1}); got {first_chunk}")
            bounds = db.execute(
                "SELECT MIN(start), MAX(CASE WHEN seq = ? THEN start END), MAX(end) FROM chunks "
                "WHERE document_id = ? AND seq BETWEEN ? AND ?",
                (last + 1, document_id, first_chunk, last + 1),
            ).fetchone()
            start, next_start, end = (bounds[0] or 0), bounds[1], (bounds[2] or 0)
            stop = next_start if next_start is not None else end
            text = db.execute(
                "SELECT substr(text, ?, ?) FROM documents WHERE id = ?", (start + 1, stop - start, document_id)
            ).fetchone()[0]
        return Document(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5], count, first_chunk, last, text)

    def delete(self, document_id: int) -> None:
        """Delete document ``document_id``."""
        with self._write() as db:
            if db.execute("SELECT 1 FROM documents WHERE id = ?", (document_id,)).fetchone() is None:
                raise StoreError(f"no document with id {document_id}")
            db.execute(
                "INSERT INTO chunk_fts(chunk_fts, rowid, text, title) SELECT 'delete', id, text, title "
                "FROM chunk_text WHERE document_id = ?",
                (document_id,),
            )
            db.execute("DELETE FROM documents WHERE id = ?", (document_id,))

    # -- search ------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        stores: list[str] | None = None,
        metadata: Mapping[str, MetadataValue] | None = None,
        limit: int = 5,
    ) -> list[SearchHit]:
        """Documents matching ``query``, best first (BM25), one hit per document.

        Args:
            query: words (any may match; more and rarer matches rank higher) and "quoted phrases".
            stores: only these stores (all when ``None``).
            metadata: only documents whose metadata has exactly these values.
            limit: the most documents to return.
        """
        match = fts_query(query)
        if match is None:
            return []
        where: list[str] = ["chunk_fts MATCH ?"]
        params: list[MetadataValue] = [match]
        if stores:
            where.append(f"s.name IN ({', '.join('?' * len(stores))})")
            params.extend(stores)
        for key, value in check_metadata(metadata or {}).items():
            where.append("json_extract(d.metadata, ?) IS ?")
            params.extend([f'$."{key}"', value])
        sql = (
            "SELECT c.id, c.document_id, c.seq, bm25(chunk_fts, 1.0, 2.0) AS score FROM chunk_fts "
            "JOIN chunks c ON c.id = chunk_fts.rowid JOIN documents d ON d.id = c.document_id "
            f"JOIN stores s ON s.id = d.store_id WHERE {' AND '.join(where)} ORDER BY score LIMIT ?"
        )
        with self._read() as db:
            try:
                rows = db.execute(sql, [*params, max(limit * 20, 100)]).fetchall()
            except sqlite3.OperationalError as exc:
                raise StoreError(f"cannot search for {query!r}: {exc}") from exc
            best: dict[int, tuple[int, int, float]] = {}
            for chunk_id, doc_id, seq, score in rows:
                if doc_id not in best and len(best) < limit:
                    best[doc_id] = (chunk_id, seq, score)
            return [self._hit(db, match, doc_id, *found) for doc_id, found in best.items()]

    @staticmethod
    def _hit(db: sqlite3.Connection, match: str, doc_id: int, chunk_id: int, seq: int, score: float) -> SearchHit:
        snippet = db.execute(
            "SELECT snippet(chunk_fts, 0, '**', '**', ' … ', 24) FROM chunk_fts WHERE chunk_fts MATCH ? AND rowid = ?",
            (match, chunk_id),
        ).fetchone()
        store, title, meta = db.execute(
            "SELECT s.name, d.title, d.metadata FROM documents d JOIN stores s ON s.id = d.store_id WHERE d.id = ?",
            (doc_id,),
        ).fetchone()
        return SearchHit(doc_id, store, title, seq, -score, snippet[0] if snippet else "", json.loads(meta))


def _store_id(db: sqlite3.Connection, name: str) -> int:
    row = db.execute("SELECT id FROM stores WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise StoreError(f"no store named {name!r}; create it with create_store or list them with list_stores")
    store_id: int = row[0]
    return store_id
