"""The content store's core, without MCP: stores, chunking, BM25 search, pagination, persistence."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from mcpmux.servers.chunking import chunk_spans
from mcpmux.servers.content_store import IN_MEMORY, ContentStore, StoreError
from tests.servers.corpus import DOCUMENTS, QUERIES, RELEVANT


def test_chunks_cover_the_text_overlap_and_end_on_boundaries() -> None:
    text = " ".join(f"word{i}." for i in range(2000))
    spans = chunk_spans(text, 300, 60)
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)
    for (s1, e1), (s2, e2) in itertools.pairwise(spans):
        assert e1 - s1 <= 300
        assert s1 < s2 < e1 <= e2
        assert text[e1 - 1] in " ."
        assert text[s2 - 1] == " "
    assert chunk_spans("") == []
    with pytest.raises(ValueError, match="overlap"):
        chunk_spans(text, 100, 60)


def test_documents_are_added_read_back_in_pages_and_deleted() -> None:
    text = "".join(f"Paragraph {i} talks about topic {i % 7}.\n\n" for i in range(300))
    with ContentStore(IN_MEMORY, chunk_chars=500, overlap_chars=100) as store:
        doc_id, chunks = store.add("notes", text, title="Topics", metadata={"kind": "test"})
        assert chunks > 10
        pages = [store.read(doc_id, first_chunk=i, max_chunks=3) for i in range(0, chunks, 3)]
        assert "".join(p.text for p in pages) == text
        assert pages[0].title == "Topics"
        assert pages[0].metadata == {"kind": "test"}
        assert pages[0].chunk_count == chunks
        [info] = store.list_stores()
        assert (info.name, info.documents, info.chunks, info.chars) == ("notes", 1, chunks, len(text))
        store.delete(doc_id)
        assert store.search("paragraph") == []
        with pytest.raises(StoreError, match="no document with id"):
            store.read(doc_id)


def test_search_ranks_highlights_and_filters_by_store_and_metadata() -> None:
    with ContentStore(IN_MEMORY) as store:
        a, _ = store.add("kb", "Kubernetes pods restart when the liveness probe fails.", metadata={"team": "ops"})
        b, _ = store.add("kb", "A pod is the smallest unit; pods share a network namespace.", metadata={"team": "dev"})
        c, _ = store.add("other", "Liveness probes of pods are HTTP, TCP or exec checks.", metadata={"team": "ops"})
        hits = store.search("liveness probe")
        assert [h.document_id for h in hits][:2] in ([a, c], [c, a])
        assert "**liveness**" in hits[0].snippet.lower()
        assert [h.document_id for h in store.search("pods", stores=["kb"])] in ([a, b], [b, a])
        assert [h.document_id for h in store.search("pods", metadata={"team": "dev"})] == [b]
        assert [h.document_id for h in store.search("pods", stores=["kb"], metadata={"team": "ops"})] == [a]
        assert store.search('"network namespace" AND NOT -')[0].document_id == b
        assert store.search("?!") == []
        assert len(store.search("pods", limit=1)) == 1


def test_bad_names_missing_stores_and_bad_metadata_are_store_errors() -> None:
    with ContentStore(IN_MEMORY) as store:
        with pytest.raises(StoreError, match="store name"):
            store.create_store("../x")
        with pytest.raises(StoreError, match="no store named"):
            store.add("absent", "x", create_store=False)
        with pytest.raises(StoreError, match="metadata value"):
            store.add("s", "x", metadata={"k": [1]})  # type: ignore[dict-item]
        with pytest.raises(StoreError, match="text is empty"):
            store.add("s", "  \n")
        with pytest.raises(StoreError, match="metadata key"):
            store.search("x", metadata={"a'b": 1})
        assert store.create_store("s", "first") is True
        assert store.create_store("s") is False
        assert store.list_stores()[0].description == "first"
        assert store.delete_store("s") == 0
        assert store.list_stores() == []


def test_content_survives_a_restart(tmp_path: Path) -> None:
    database = tmp_path / "sub" / "store.db"
    with ContentStore(database) as store:
        store.add("persist", "The lighthouse keeper logs every passing ship.", title="Log")
    with ContentStore(database) as store:
        [hit] = store.search("lighthouse")
        assert hit.title == "Log"
        assert hit.store == "persist"


def test_concurrent_writers_on_one_file_all_succeed(tmp_path: Path) -> None:
    database = tmp_path / "shared.db"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with ContentStore(database) as store:
                for i in range(25):
                    store.add("shared", f"writer {n} document {i} " * 50)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with ContentStore(database) as store:
        assert store.list_stores()[0].documents == 100
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_search_quality_precision_at_3_on_a_labelled_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    with ContentStore(IN_MEMORY) as store:
        ids = {store.add("corpus", text, title=key)[0]: key for key, text in DOCUMENTS.items()}
        precisions = {}
        for topic, query in QUERIES.items():
            top = [ids[h.document_id] for h in store.search(query, limit=3)]
            precisions[topic] = sum(key in RELEVANT[topic] for key in top) / 3
    mean = sum(precisions.values()) / len(precisions)
    with capsys.disabled():
        detail = ", ".join(f"{t} {p:.2f}" for t, p in precisions.items())
        print(f"\ncontent_store precision@3 = {mean:.3f} over {len(QUERIES)} queries ({detail})")
    assert mean >= 0.8
