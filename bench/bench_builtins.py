"""The content store: ``add_content`` throughput and search latency on a 10,000-chunk store.

Baselines in the same run: a bare FTS5 table fed the same chunk texts in one transaction (the
floor for indexing) and with one transaction per document (what ``add`` commits), and a bare
``MATCH ... ORDER BY rank LIMIT`` query (the floor for search).
Measured at three levels: the :class:`ContentStore` core, and the ``add_content`` / ``search``
tools through an MCP ``ClientSession`` over the in-process transport.
"""

from __future__ import annotations

import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from harness import report
from mcp.client.session import ClientSession

from mcpmux.servers import build_server
from mcpmux.servers.chunking import chunk_spans
from mcpmux.servers.content_store import ContentStore
from mcpmux.transports.inprocess import open_mcp_server

TARGET_CHUNKS = 10_000
DOC_CHARS = 24_000
QUERIES = 300
SEED = 7


def _vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    words = {"".join(rng.choices(letters[: rng.randint(8, 26)], k=rng.randint(3, 10))) for _ in range(size * 2)}
    return sorted(words)[:size]


def _documents(rng: random.Random, vocab: list[str]) -> list[str]:
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf-like, as in natural text
    docs: list[str] = []
    chunks = 0
    while chunks < TARGET_CHUNKS:
        words = rng.choices(vocab, weights, k=DOC_CHARS // 7)
        sentences = [" ".join(words[i : i + 14]).capitalize() + "." for i in range(0, len(words), 14)]
        text = "\n\n".join(" ".join(sentences[i : i + 6]) for i in range(0, len(sentences), 6))
        docs.append(text)
        chunks += len(chunk_spans(text))
    return docs


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49] * 1000, cuts[94] * 1000


def _bare_fts(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2')")
    return db


def _baseline_index(folder: Path, docs: list[str]) -> tuple[float, float, sqlite3.Connection]:
    """Seconds to index the chunks in one transaction, and with one transaction per document."""
    per_doc = [[doc[s:e] for s, e in chunk_spans(doc)] for doc in docs]
    db = _bare_fts(folder / "per_doc.db")
    started = time.perf_counter()
    for texts in per_doc:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT INTO f(text) VALUES (?)", [(t,) for t in texts])
        db.execute("COMMIT")
    per_doc_s = time.perf_counter() - started
    db.close()
    db = _bare_fts(folder / "bulk.db")
    started = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    db.executemany("INSERT INTO f(text) VALUES (?)", [(t,) for texts in per_doc for t in texts])
    db.execute("COMMIT")
    return time.perf_counter() - started, per_doc_s, db


async def _via_mcp(database: Path, docs: list[str], queries: list[str]) -> tuple[float, list[float]]:
    server = build_server("content_store", database=database)
    async with (
        open_mcp_server(server, name="content_store", describe="bench") as streams,
        ClientSession(streams.read, streams.write) as session,
    ):
        await session.initialize()
        started = time.perf_counter()
        for doc in docs:
            await session.call_tool("add_content", {"store": "bench", "text": doc})
        add_s = time.perf_counter() - started
        latencies = []
        for query in queries:
            t0 = time.perf_counter()
            await session.call_tool("search", {"query": query, "limit": 5})
            latencies.append(time.perf_counter() - t0)
    return add_s, latencies


def main() -> None:
    """Build the corpus, time indexing and searching at each level, and report."""
    rng = random.Random(SEED)
    vocab = _vocabulary(rng)
    docs = _documents(rng, vocab)
    megabytes = sum(len(d.encode()) for d in docs) / 1e6
    mid = vocab[50:3000]  # neither stop-word frequent nor absent
    queries = [" ".join(rng.sample(mid, rng.randint(2, 3))) for _ in range(QUERIES)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base_s, per_doc_s, base_db = _baseline_index(folder, docs)
        base_lat = []
        for query in queries:
            match = " OR ".join(f'"{w}"' for w in query.split())
            t0 = time.perf_counter()
            base_db.execute("SELECT rowid, bm25(f) FROM f WHERE f MATCH ? ORDER BY rank LIMIT 5", (match,)).fetchall()
            base_lat.append(time.perf_counter() - t0)
        base_db.close()
        with ContentStore(folder / "core.db") as store:
            started = time.perf_counter()
            for doc in docs:
                store.add("bench", doc)
            core_s = time.perf_counter() - started
            chunks = store.list_stores()[0].chunks
            core_lat = []
            for query in queries:
                t0 = time.perf_counter()
                store.search(query, limit=5)
                core_lat.append(time.perf_counter() - t0)
        mcp_s, mcp_lat = anyio.run(_via_mcp, folder / "mcp.db", docs, queries)
    base_p, core_p, mcp_p = _percentiles(base_lat), _percentiles(core_lat), _percentiles(mcp_lat)
    rows = [
        ["index, MB/s", "bare FTS5 insert, one transaction", megabytes / base_s, 1.0],
        ["index, MB/s", "bare FTS5 insert, a transaction per document", megabytes / per_doc_s, base_s / per_doc_s],
        ["index, MB/s", "ContentStore.add", megabytes / core_s, base_s / core_s],
        ["index, MB/s", "add_content tool (in-process MCP)", megabytes / mcp_s, base_s / mcp_s],
        ["search p50, ms", "bare FTS5 MATCH", base_p[0], 1.0],
        ["search p50, ms", "ContentStore.search", core_p[0], core_p[0] / base_p[0]],
        ["search p50, ms", "search tool (in-process MCP)", mcp_p[0], mcp_p[0] / base_p[0]],
        ["search p95, ms", "bare FTS5 MATCH", base_p[1], 1.0],
        ["search p95, ms", "ContentStore.search", core_p[1], core_p[1] / base_p[1]],
        ["search p95, ms", "search tool (in-process MCP)", mcp_p[1], mcp_p[1] / base_p[1]],
    ]
    report(
        "builtins_content_store",
        ["measure", "path", "value", "ratio to bare FTS5"],
        rows,
        chunks=chunks,
        documents=len(docs),
        megabytes=megabytes,
        queries=QUERIES,
    )
    print(f"{len(docs)} documents, {chunks} chunks, {megabytes:.1f} MB, {QUERIES} queries", file=sys.stderr)


if __name__ == "__main__":
    main()
