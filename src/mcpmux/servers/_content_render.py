"""Text renderings of content-store results, written for a model to read."""

from __future__ import annotations

import json

from mcpmux.servers.content_store import Document, SearchHit, StoreInfo

__all__ = ["render_document", "render_hits", "render_stores"]


def render_stores(stores: list[StoreInfo]) -> str:
    """One markdown bullet per store, or a hint when there is none."""
    if not stores:
        return "no stores yet (add_content or create_store makes one)"
    lines = []
    for s in stores:
        about = f": {s.description}" if s.description else ""
        lines.append(f"- `{s.name}`{about} ({s.documents} documents, {s.chunks} chunks, {s.chars} characters)")
    return "\n".join(lines)


def render_hits(query: str, hits: list[SearchHit]) -> str:
    """Numbered hits with id, title, store, chunk, score, metadata and snippet."""
    if not hits:
        return f"no documents match {query!r}"
    blocks = [f"{len(hits)} documents match {query!r}, best first:"]
    for rank, hit in enumerate(hits, 1):
        meta = f" metadata={json.dumps(hit.metadata, ensure_ascii=False)}" if hit.metadata else ""
        title = hit.title or "(untitled)"
        blocks.append(
            f'{rank}. document {hit.document_id} "{title}" in store `{hit.store}`, chunk {hit.chunk}, '
            f"score {hit.score:.3f}{meta}\n   {' '.join(hit.snippet.split())}"
        )
    return "\n".join(blocks)


def render_document(doc: Document) -> str:
    """A header (id, title, store, source, metadata, chunks shown) then the text, then what follows."""
    head = [f'document {doc.id} "{doc.title or "(untitled)"}" in store `{doc.store}`']
    if doc.source:
        head.append(f"source: {doc.source}")
    if doc.metadata:
        head.append(f"metadata: {json.dumps(doc.metadata, ensure_ascii=False)}")
    head.append(f"chunks {doc.first_chunk}-{doc.last_chunk} of {doc.chunk_count} ({doc.chars} characters in all)")
    tail = ""
    if doc.last_chunk + 1 < doc.chunk_count:
        tail = f"\n[more follows: call read_content with first_chunk={doc.last_chunk + 1}]"
    return "\n".join(head) + "\n---\n" + doc.text + tail
