"""Bearer tokens of the gateway (HTTP and WebSocket), stored hashed in the state database.

A token is shown once, when created (``mcpmux token create NAME``); the database keeps only
its SHA-256, so a leaked ``state.db`` does not leak credentials. The table is created on first
use (``CREATE TABLE IF NOT EXISTS``) without touching the store's schema version.

A running gateway sees ``mcpmux token create`` and ``revoke`` from another process at its next
request, without a restart and without a database query per request: every change also replaces
a small marker file beside the database (``state.db.tokens``, a new inode each time), and
:meth:`TokenStore.verify` re-reads the table only when that file is not the one it saw last.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.policy import StateStore

__all__ = ["TOKEN_PREFIX", "TokenInfo", "TokenStore", "hash_token"]

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "mcpmux_"
TOKEN_BYTES = 32
MARKER_SUFFIX = ".tokens"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS gateway_tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: its name and when it was made (never the token itself)."""

    name: str
    created_at: float


def hash_token(token: str) -> str:
    """The SHA-256 (hex) under which ``token`` is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The gateway's tokens in ``store`` (the state database)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._ready = False
        path = str(store.path)
        self._marker = None if path == ":memory:" or path.startswith("file:") else Path(path + MARKER_SUFFIX)
        self._seen: tuple[int, int, int] | None = None
        self._hashes: dict[str, str] | None = None

    def _ensure(self) -> None:
        if not self._ready:
            with self.store.write() as db:
                db.execute(_SCHEMA)
            self._ready = True

    def create(self, name: str) -> str:
        """Make a token called ``name`` and return it (the only time it is visible).

        A gateway already running accepts it from its next request on.

        Raises:
            ConfigError: the name is malformed or already taken.
        """
        if not _NAME.fullmatch(name):
            raise ConfigError([ConfigProblem("token", "name", f"{name!r} must match {_NAME.pattern}")])
        self._ensure()
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        with self.store.write() as db:
            if db.execute("SELECT 1 FROM gateway_tokens WHERE name = ?", (name,)).fetchone():
                raise ConfigError([ConfigProblem("token", "name", f"a token called {name!r} exists; revoke it first")])
            db.execute("INSERT INTO gateway_tokens VALUES (?, ?, ?)", (name, hash_token(token), time.time()))
        self._changed()
        return token

    def list(self) -> list[TokenInfo]:
        """Every token, by name."""
        self._ensure()
        with self.store.read() as db:
            rows = db.execute("SELECT name, created_at FROM gateway_tokens ORDER BY name").fetchall()
        return [TokenInfo(name, created_at) for name, created_at in rows]

    def revoke(self, name: str) -> bool:
        """Delete the token ``name``; return whether it existed (a running gateway refuses it at once)."""
        self._ensure()
        with self.store.write() as db:
            revoked = db.execute("DELETE FROM gateway_tokens WHERE name = ?", (name,)).rowcount > 0
        self._changed()
        return revoked

    def any(self) -> bool:
        """Whether at least one token exists (then the gateway requires one)."""
        return bool(self._current())

    def verify(self, token: str) -> str | None:
        """The name of ``token``, or ``None`` if it is unknown or revoked."""
        return self._current().get(hash_token(token))

    def _current(self) -> dict[str, str]:
        """``{hash: name}`` of every token, re-read only when the marker file changed."""
        self._ensure()  # opens the database first, which makes its folder
        seen = self._marker_state()
        if self._hashes is None or seen != self._seen:
            with self.store.read() as db:
                rows = db.execute("SELECT hash, name FROM gateway_tokens").fetchall()
            self._hashes, self._seen = {str(h): str(n) for h, n in rows}, seen
        return self._hashes

    def _marker_state(self) -> tuple[int, int, int] | None:
        if self._marker is None:
            return None
        try:
            stat = os.stat(self._marker)
        except FileNotFoundError:
            # Made once, so that the stat of every later request succeeds (a raised error costs more).
            self._changed()
            return None
        return stat.st_ino, stat.st_mtime_ns, stat.st_size

    def _changed(self) -> None:
        self._hashes = None
        if self._marker is None:
            return
        # A new file each time (a new inode), so a reader cannot miss a change within one clock tick.
        temporary = self._marker.with_name(f"{self._marker.name}.{secrets.token_hex(8)}")
        try:
            temporary.write_text(f"{time.time_ns()}\n")
            os.replace(temporary, self._marker)
        except OSError as exc:
            logger.warning("could not mark the token change in %s (%s): restart running gateways", self._marker, exc)
