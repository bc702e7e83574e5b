"""The API's tests run on both databases (the storage suite's fixtures)."""

from __future__ import annotations

from tests.sources.conftest import database_url, postgres_server

__all__ = ["database_url", "postgres_server"]
