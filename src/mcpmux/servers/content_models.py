"""The content store's result types, its error, and the validation of names and metadata."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "METADATA_KEY_PATTERN",
    "STORE_NAME_PATTERN",
    "Document",
    "MetadataValue",
    "SearchHit",
    "StoreError",
    "StoreInfo",
    "check_metadata",
    "check_name",
]

STORE_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
METADATA_KEY_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}"
MetadataValue = str | int | float | bool | None


class StoreError(ValueError):
    """A request the store cannot satisfy: unknown store or document, bad name, bad filter."""


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """One store and its size."""

    name: str
    description: str
    documents: int
    chunks: int
    chars: int


@dataclass(frozen=True, slots=True)
class Document:
    """A document (or a page of it): ``text`` spans chunks ``first_chunk`` to ``last_chunk``."""

    id: int
    store: str
    title: str
    source: str
    metadata: JSONObject
    chars: int
    chunk_count: int
    first_chunk: int
    last_chunk: int
    text: str


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One document found by a search, with its best chunk and a highlighted snippet."""

    document_id: int
    store: str
    title: str
    chunk: int
    score: float
    snippet: str
    metadata: JSONObject


def check_name(name: str) -> None:
    """Raise :class:`StoreError` unless ``name`` is a legal store name."""
    if not re.fullmatch(STORE_NAME_PATTERN, name):
        raise StoreError(f"store name {name!r} must match {STORE_NAME_PATTERN}")


def check_metadata(metadata: Mapping[str, Any]) -> dict[str, MetadataValue]:
    """``metadata`` as a plain dict, or :class:`StoreError` for a bad key or a non-scalar value."""
    for key, value in metadata.items():
        if not re.fullmatch(METADATA_KEY_PATTERN, key):
            raise StoreError(f"metadata key {key!r} must match {METADATA_KEY_PATTERN}")
        if not isinstance(value, str | int | float | bool) and value is not None:
            raise StoreError(f"metadata value of {key!r} must be a string, number, boolean or null")
    return dict(metadata)
