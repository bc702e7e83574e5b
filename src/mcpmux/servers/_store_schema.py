"""The content store's SQLite schema and the translation of a search query to FTS5 syntax."""

from __future__ import annotations

import re

__all__ = ["SCHEMA", "fts_query"]

# Text is stored once, in ``documents.text``. The view cuts each chunk out by its span and is the
# FTS5 table's external content (read back for snippets). An external-content FTS5 table is kept
# in sync by hand: rows are indexed explicitly, and deleting needs the indexed values again, which
# the view supplies, so the 'delete' command must run before the document goes.
SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS stores (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS documents (
        id INTEGER PRIMARY KEY,
        store_id INTEGER NOT NULL REFERENCES stores(id) ON DELETE CASCADE,
        title TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        metadata TEXT NOT NULL DEFAULT '{}',
        text TEXT NOT NULL,
        chars INTEGER NOT NULL,
        chunk_count INTEGER NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS documents_store ON documents(store_id)",
    """CREATE TABLE IF NOT EXISTS chunks (
        id INTEGER PRIMARY KEY,
        document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        start INTEGER NOT NULL,
        end INTEGER NOT NULL,
        UNIQUE (document_id, seq)
    )""",
    """CREATE VIEW IF NOT EXISTS chunk_text AS
        SELECT c.id AS id, c.document_id AS document_id, d.store_id AS store_id, c.seq AS seq,
               substr(d.text, c.start + 1, c.end - c.start) AS text, d.title AS title
        FROM chunks c JOIN documents d ON d.id = c.document_id""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS chunk_fts USING fts5(
        text, title, content = 'chunk_text', content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
)

_PHRASE_OR_WORD = re.compile(r'"([^"]+)"|(\w+)', re.UNICODE)


def fts_query(query: str) -> str | None:
    """``query`` as an FTS5 MATCH expression: each word or "quoted phrase" is optional (OR).

    Every term is quoted, so FTS5 operators and punctuation in user text are taken literally.
    Returns ``None`` when the query has no searchable word.
    """
    terms = []
    for phrase, word in _PHRASE_OR_WORD.findall(query):
        words = re.findall(r"\w+", phrase) if phrase else [word]
        if words:
            terms.append('"' + " ".join(words) + '"')
    return " OR ".join(dict.fromkeys(terms)) if terms else None
