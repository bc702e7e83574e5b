"""Bearer tokens of the gateway (HTTP and WebSocket), stored hashed in the state database.

A token is shown once, when created (``mcpmux token create NAME``); the database keeps only
its SHA-256, so a leaked ``state.db`` does not leak credentials. The table is the state
database's ``mcpmux_gateway_tokens``; tokens made before a column existed were adopted without
approving (``can_approve``), with the API's read and execute, bound to no toolset.

A token made with ``--toolset NAME`` (repeatable) sees only those toolsets: it is accepted only at
``/mcp/NAME`` (and ``/sse/NAME``) of one of them, and over WebSocket only by a gateway serving one
of them (``mcpmux serve --toolset NAME``); anywhere else it is refused with 403.

A token made with ``--can-approve`` may answer the guard's approval questions for its own calls
(:data:`APPROVE_SCOPE` in its access token); any other network caller is refused instead of asked.

A running gateway sees ``mcpmux token create`` and ``revoke`` from another process at its next
request, without a restart and without a database query per request: every change also replaces
a small marker file beside the database (``state.db.tokens``, a new inode each time), and
:meth:`TokenStore.check` re-reads the table only when that file is not the one it saw last. A
database shared by several machines (PostgreSQL) has no such file: there every change is also
announced with ``NOTIFY``, and a gateway replica that listens (:meth:`TokenStore.follow`) re-reads
the table when told; one that does not hear the others (not a replica, or its listening connection
broke) reads the table at every check.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import select

from mcpmux.config.models import TOOLSET_NAME_PATTERN
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.policy import StateStore
from mcpmux.policy.schema import gateway_tokens
from mcpmux.store.database import insert_or_ignore, notify

__all__ = [
    "API_SCOPES",
    "APPROVE_SCOPE",
    "DEFAULT_API_SCOPES",
    "TOKEN_PREFIX",
    "TokenInfo",
    "TokenStore",
    "grants",
    "hash_token",
]

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "mcpmux_"
APPROVE_SCOPE = "mcpmux:approve"
API_SCOPES = ("read", "execute", "admin")
"""What a token may do on the REST API: read (list), execute (call tools), admin (change sources)."""
DEFAULT_API_SCOPES = ("read", "execute")


def grants(scopes: Iterable[str], needed: str) -> bool:
    """Whether a token with ``scopes`` may do what ``needed`` allows, on every face.

    The one table of what a scope allows (``/mcp`` and its toolset paths, WebSocket, ``/api``, ``/ui``):
    ``read`` lists and reads (tools, resources, prompts, sources, servers, the audit log); ``execute``
    calls tools; ``admin`` changes sources and servers and answers approvals in the console. They nest
    as they read: ``admin`` includes ``execute``, which includes ``read``. (Answering an approval from
    an MCP client is ``--can-approve``, :data:`APPROVE_SCOPE`, apart from these.)
    """
    rank = API_SCOPES.index(needed)
    return any(scope in API_SCOPES and API_SCOPES.index(scope) >= rank for scope in scopes)


TOKEN_BYTES = 32
MARKER_SUFFIX = ".tokens"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_TOOLSET = re.compile(TOOLSET_NAME_PATTERN)


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: its name and when it was made (never the token itself)."""

    name: str
    created_at: float
    can_approve: bool = False
    api_scopes: tuple[str, ...] = DEFAULT_API_SCOPES
    toolsets: tuple[str, ...] = ()
    """The toolsets it is bound to (empty: not bound, it sees everything the gateway serves)."""

    def may_use(self, toolset: str | None) -> bool:
        """Whether this token may be used where ``toolset`` is served (``None``: the whole gateway)."""
        return not self.toolsets or toolset in self.toolsets

    @property
    def scopes(self) -> list[str]:
        """The scopes of the token's access (``mcpmux:approve`` when it may approve)."""
        return [APPROVE_SCOPE] if self.can_approve else []


def _scopes(text: object) -> tuple[str, ...]:
    return tuple(part for part in str(text or "").split(",") if part)


def _joined(names: tuple[str, ...]) -> str:
    return ",".join(sorted(set(names)))


def hash_token(token: str) -> str:
    """The SHA-256 (hex) under which ``token`` is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The gateway's tokens in ``store`` (the state database)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        # Only a SQLite file has a place beside it for the marker; elsewhere every check reads the table.
        self._marker = None if store.file is None else store.file.with_name(store.file.name + MARKER_SUFFIX)
        self._seen: tuple[int, int, int] | None = None
        self._hashes: dict[str, TokenInfo] | None = None
        self._hearing: Callable[[], bool] = lambda: False

    def follow(self, hearing: Callable[[], bool]) -> None:
        """Keep the tokens read while ``hearing()``: every change made elsewhere meanwhile reaches
        :meth:`invalidate` (a replica's events); when it is false, every check reads the table."""
        self._hearing = hearing

    def invalidate(self, _detail: str = "") -> None:
        """Read the tokens again at the next check (another process changed them)."""
        self._hashes = None

    def create(
        self,
        name: str,
        *,
        can_approve: bool = False,
        scopes: tuple[str, ...] = DEFAULT_API_SCOPES,
        toolsets: tuple[str, ...] = (),
    ) -> str:
        """Make a token called ``name`` and return it (the only time it is visible).

        A gateway already running accepts it from its next request on. ``can_approve``: its caller
        may answer approval questions (for its own calls only).

        ``scopes``: what it may do on the REST API (:data:`API_SCOPES`). ``toolsets``: the only
        toolsets it sees (the caller checks they are configured; a toolset removed later is simply
        never served, so the token sees nothing there).

        Raises:
            ConfigError: the name is malformed or already taken, a scope is unknown, or a toolset name malformed.
        """
        if not _NAME.fullmatch(name):
            raise ConfigError([ConfigProblem("token", "name", f"{name!r} must match {_NAME.pattern}")])
        unknown = sorted(set(scopes) - set(API_SCOPES))
        if unknown:
            reason = f"unknown scope(s) {', '.join(unknown)} (known: {', '.join(API_SCOPES)})"
            raise ConfigError([ConfigProblem("token", "scopes", reason)])
        bad = [t for t in toolsets if not _TOOLSET.fullmatch(t)]
        if bad:
            reason = f"toolset name(s) {', '.join(map(repr, bad))} must match {TOOLSET_NAME_PATTERN}"
            raise ConfigError([ConfigProblem("token", "toolsets", reason)])
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        row = {
            "name": name, "hash": hash_token(token), "created_at": time.time(), "can_approve": can_approve,
            "scopes": _joined(scopes), "toolsets": _joined(toolsets),
        }  # fmt: skip
        with self.store.write() as db:
            # The name is the key: of two processes creating the same name, one inserts, the other is told.
            inserted = db.execute(insert_or_ignore(db, gateway_tokens).values(row).returning(gateway_tokens.c.name))
            if inserted.first() is None:
                raise ConfigError([ConfigProblem("token", "name", f"a token called {name!r} exists; revoke it first")])
            notify(db, "tokens")
        self._changed()
        return token

    def list(self) -> list[TokenInfo]:
        """Every token, by name."""
        t = gateway_tokens.c
        with self.store.read() as db:
            rows = db.execute(select(t.name, t.created_at, t.can_approve, t.scopes, t.toolsets).order_by(t.name)).all()
        return [TokenInfo(n, c, bool(approve), _scopes(sc), _scopes(ts)) for n, c, approve, sc, ts in rows]

    def revoke(self, name: str) -> bool:
        """Delete the token ``name``; return whether it existed (a running gateway refuses it at once)."""
        with self.store.write() as db:
            revoked = db.execute(gateway_tokens.delete().where(gateway_tokens.c.name == name)).rowcount > 0
            notify(db, "tokens")
        self._changed()
        return revoked

    def any(self) -> bool:
        """Whether at least one token exists (then the gateway requires one)."""
        return bool(self._current())

    def verify(self, token: str) -> str | None:
        """The name of ``token``, or ``None`` if it is unknown or revoked."""
        info = self.check(token)
        return info.name if info is not None else None

    def named(self, name: str) -> TokenInfo | None:
        """The token called ``name`` if it exists now (from the same cache as :meth:`check`)."""
        return next((info for info in self._current().values() if info.name == name), None)

    def check(self, token: str) -> TokenInfo | None:
        """What ``token`` is (name, may it approve), or ``None`` if it is unknown or revoked."""
        return self._current().get(hash_token(token))

    def _current(self) -> dict[str, TokenInfo]:
        """``{hash: token}`` of every token, re-read only when the marker file changed."""
        _ = self.store.engine  # opens the database first, which makes its folder
        seen = self._marker_state()
        cached = self._hashes is not None and seen == self._seen and (seen is not None or self._hearing())
        if not cached:
            t = gateway_tokens.c
            with self.store.read() as db:
                rows = db.execute(select(t.hash, t.name, t.created_at, t.can_approve, t.scopes, t.toolsets)).all()
            self._hashes = {
                str(h): TokenInfo(str(n), float(c), bool(a), _scopes(sc), _scopes(ts)) for h, n, c, a, sc, ts in rows
            }
            self._seen = seen
        assert self._hashes is not None
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
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)  # as private as the db
            with os.fdopen(fd, "w") as marker:
                marker.write(f"{time.time_ns()}\n")
            os.replace(temporary, self._marker)
        except OSError as exc:
            logger.warning("could not mark the token change in %s (%s): restart running gateways", self._marker, exc)
