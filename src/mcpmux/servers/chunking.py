"""Split a document into overlapping chunks, cut at paragraph, line, sentence or word boundaries."""

from __future__ import annotations

__all__ = ["DEFAULT_CHUNK_CHARS", "DEFAULT_OVERLAP_CHARS", "chunk_spans"]

DEFAULT_CHUNK_CHARS = 1200
DEFAULT_OVERLAP_CHARS = 200

# Preferred cut points, best first; a cut is searched for in the last third of a chunk.
_BOUNDARIES = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


def _cut(text: str, start: int, limit: int) -> int:
    end = start + limit
    if end >= len(text):
        return len(text)
    floor = start + (limit * 2) // 3
    for mark in _BOUNDARIES:
        found = text.rfind(mark, floor, end)
        if found != -1:
            return found + len(mark)
    return end


def _overlap_start(text: str, end: int, overlap: int, floor: int) -> int:
    start = max(floor, end - overlap)
    if start <= floor:
        return floor
    space = text.find(" ", start, end)
    return space + 1 if space != -1 and space + 1 < end else start


def chunk_spans(
    text: str, chunk_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS
) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the chunks of ``text``.

    Each chunk is at most ``chunk_chars`` long and starts about ``overlap_chars`` before the end
    of the previous one (at a word start), so a phrase cut by one boundary is whole in a chunk.
    An empty text has no chunks.

    Raises:
        ValueError: ``overlap_chars`` is not smaller than half of ``chunk_chars``.
    """
    if chunk_chars < 1 or not 0 <= overlap_chars < chunk_chars // 2 + 1:
        raise ValueError(f"overlap ({overlap_chars}) must be below half the chunk size ({chunk_chars})")
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = _cut(text, start, chunk_chars)
        spans.append((start, end))
        if end >= len(text):
            break
        # The floor (start + 1) guarantees progress even when no word boundary is near the cut.
        start = _overlap_start(text, end, overlap_chars, start + 1)
    return spans
