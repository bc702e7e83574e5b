"""Pinned tool definitions: a changed definition is quarantined until a person approves it.

A pin is SHA-256 over the canonical JSON (sorted keys, no whitespace) of the whole definition:
name, description, inputSchema, outputSchema and annotations (title too), so key order and
whitespace never change it while any change of meaning does. Pins are per server and tool: a pin
for ``a:read`` never authorises ``b:read``.

A server is known by its identity (:func:`server_identity`: what runs or where it is, and the
project), not by its name alone: another project's ``fs`` (another command, another directory) is
another server with its own pins, never quarantined for differing from this one. Pins from before
identities (schema version 1) are kept as legacy rows: the first time a server of that name is
checked, each legacy pin is copied to its identity with its state (approved, or waiting).

Hash pins alone miss renames: a server that drops ``read`` and lists ``read_v2`` with the same
definition would get a fresh pin under ``tofu``. Given the server's current listing, a tool seen
for the first time on a server that was pinned already is quarantined: as ``renamed from X`` when
a pinned tool that vanished had the same or a near-identical definition (its diff is against X's),
else as a new tool added after the server's first listing. A definition that changed only in
invisible or look-alike characters says so, and its diff shows the code points
(:mod:`mcpmux.policy.lookalikes`).

Modes (``security.pinning``): ``tofu`` pins a tool the first time it is seen; ``strict`` exposes no
tool until approved (``mcpmux approve``); ``off`` pins nothing.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import ColumnElement, and_, literal, or_, select

from mcpmux.config.models import ServerConfig
from mcpmux.policy.lookalikes import invisible_change, rename_source, reveal
from mcpmux.policy.schema import pins
from mcpmux.policy.store import LEGACY_IDENTITY, StateStore
from mcpmux.store.database import insert_or_ignore, notify
from mcpmux.types.json_shapes import JSONObject
from mcpmux.types.models import ToolInfo

__all__ = [
    "Pin", "PinBook", "PinLookup", "PinVerdict", "canonical_definition", "definition_hash", "server_identity",
]  # fmt: skip

PinningMode = Literal["off", "tofu", "strict"]
NEWCOMER = "new tool on an already pinned server"
"""The start of the reason a tool added to a pinned server is held back with."""
_PINNED_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def canonical_definition(tool: ToolInfo) -> JSONObject:
    """The definition a pin covers, in the wire's field names."""
    full = {
        "name": tool.tool,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    }
    return {k: full[k] for k in _PINNED_FIELDS if full[k] is not None}


def _canonical_json(definition: JSONObject) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def server_identity(server: ServerConfig, project: Path | str) -> str:
    """Who a server is, for its pins: a digest of its type, what runs or where it is, and the project.

    The fields that say which program or endpoint answers (``command``, ``args``, ``cwd``, ``url``,
    a built-in's kind and root), never its name, environment or headers (secrets stay out).
    """
    fields: dict[str, object] = {"type": server.type, "project": str(project)}
    for name in ("command", "args", "cwd", "url", "root", "database", "spec", "base_url"):
        value = getattr(server, name, None)
        if value is not None:
            fields[name] = value if isinstance(value, str | tuple) else str(value)
    if server.type == "builtin":
        fields["kind"] = getattr(server, "kind", server.name)
    text = json.dumps(fields, sort_keys=True, default=list)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def definition_hash(tool: ToolInfo) -> str:
    """SHA-256 (hex) of the canonical JSON of the tool's definition."""
    return _canonical(tool)[2]


# The index hands out the same ToolInfo until its server re-lists: serialise and hash each object once
# (a listing hashes every tool, then pins the new ones with the same JSON). Keyed by the object's id,
# the object kept so that a reused id is never taken for it.
_CANONICAL: dict[int, tuple[ToolInfo, str, str]] = {}
CANONICAL_CACHE_LIMIT = 16384


def _canonical(tool: ToolInfo) -> tuple[ToolInfo, str, str]:
    """``(tool, canonical JSON, its digest)``, computed once per ToolInfo object."""
    cached = _CANONICAL.get(id(tool))
    if cached is None or cached[0] is not tool:
        if len(_CANONICAL) >= CANONICAL_CACHE_LIMIT:  # re-listed servers leave old objects behind
            _CANONICAL.clear()
        text = _canonical_json(canonical_definition(tool))
        cached = _CANONICAL[id(tool)] = (tool, text, _digest(text))
    return cached


def _digest(canonical: str) -> str:
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Pin:
    """One pinned tool, and a pending definition waiting for approval if it changed.

    The definitions are kept as stored (canonical JSON) and parsed when first read: a listing
    compares hashes only.
    """

    server: str
    tool: str
    hash: str
    definition_json: str
    approved: bool
    pinned_at: float
    pending_hash: str | None
    pending_definition_json: str | None
    pending_reason: str | None

    @cached_property
    def definition(self) -> JSONObject:
        """The pinned definition."""
        parsed: JSONObject = json.loads(self.definition_json)
        return parsed

    @cached_property
    def pending_definition(self) -> JSONObject | None:
        """The definition waiting for approval, if any."""
        if not self.pending_definition_json:
            return None
        parsed: JSONObject = json.loads(self.pending_definition_json)
        return parsed

    @property
    def key(self) -> tuple[str, str]:
        """``(server, tool)``."""
        return self.server, self.tool

    def diff(self) -> str:
        """A unified diff from the pinned to the pending definition (empty if nothing is pending).

        Invisible characters show as ``<U+200B ZERO WIDTH SPACE>``; a rename's diff is against the
        definition of the tool it replaced, and starts with the reason (``# renamed from X``); a
        tool added to a pinned server shows its whole definition as added.
        """
        newcomer = not self.approved and NEWCOMER in (self.pending_reason or "")
        if self.pending_definition is None and not newcomer:
            return ""
        if self.pending_definition is None:  # nothing was pinned under this name: all of it is new
            before, after, labels, context = [], _shown(self.definition), ("nothing pinned", "now"), 0
        else:
            before, after, labels, context = (
                _shown(self.definition),
                _shown(self.pending_definition),
                ("pinned", "now"),
                1,
            )
        lines = difflib.unified_diff(before, after, *labels, lineterm="", n=context)
        head = [f"# {self.pending_reason}"] if self.pending_reason and _explained(self.pending_reason) else []
        return "\n".join([*head, *lines])


@dataclass(frozen=True, slots=True)
class PinVerdict:
    """Whether a tool may be exposed now, and why not."""

    exposed: bool
    reason: str
    pin: Pin | None


class PinBook:
    """The pins of every server, in the state database.

    Args:
        store: the state database.
        mode: ``security.pinning``.
        identities: each configured server's :func:`server_identity`; a server not in it is keyed
            by its name alone (the legacy identity).
    """

    def __init__(self, store: StateStore, mode: PinningMode, identities: Mapping[str, str] | None = None) -> None:
        self._store, self.mode = store, mode
        self._identities = dict(identities or {})
        # Legacy rows come only from upgrading a version 1 file when it is opened: once none are
        # found, none appear later, and a first sight costs no lookup of them.
        self._legacy_rows: bool | None = None
        self._trusted: set[str] = set()

    def trust(self, server: str, identity: str) -> None:
        """Expose ``server``'s tools without pins: code of this program (``Host.add_tools``), not a peer's."""
        self._identities[server] = identity
        self._trusted.add(server)

    def identity(self, server: str) -> str:
        """The identity ``server``'s pins are kept under."""
        return self._identities.get(server, LEGACY_IDENTITY)

    def lookup(self) -> PinLookup:
        """A lookup of pins for one listing: each server's pins read in one query, when first asked."""
        return PinLookup(self)

    def check(
        self,
        tool: ToolInfo,
        *,
        suspicion: Callable[[], str | None] | None = None,
        listing: Callable[[], Sequence[ToolInfo]] | None = None,
        scan: Callable[[ToolInfo], str | None] | None = None,
        digest: str | None = None,
        lookup: PinLookup | None = None,
    ) -> PinVerdict:
        """Pin ``tool`` on first sight (tofu), compare it with its pin, and say if it may be exposed.

        ``suspicion`` (the scanner) is asked only about a definition seen for the first time or
        changed: a high-severity finding quarantines it even under ``tofu``. A definition already
        pinned (scanned then, or approved by a person) is not scanned again.

        ``listing`` gives the server's current tools; with it the first sight of a server pins its
        whole listing (each tool scanned by ``scan``), and a tool first seen on a server pinned
        already is quarantined, as a rename of a vanished tool when one resembles it. Without it
        every first sight is trusted as before.

        ``digest`` is the tool's :func:`definition_hash` if the caller has it already; ``lookup``
        (:meth:`lookup`) reads the pins of a whole listing one query per server instead of one per tool.
        """
        if self.mode == "off" or tool.synthetic or tool.server in self._trusted:
            why = "made by mcpmux" if tool.synthetic else "this program's own"
            why = "pinning is off" if self.mode == "off" else why
            return PinVerdict(True, why, None)
        pin = lookup.get(tool.server, tool.tool) if lookup is not None else self.get(tool.server, tool.tool)
        if digest is not None and pin is not None and pin.hash == digest and pin.approved:
            return PinVerdict(True, "pinned", pin)
        verdict = self._check(tool, pin, suspicion, listing, scan, lookup)
        if lookup is not None and verdict.pin is not pin:
            lookup.forget(tool.server)  # a pin was written (this one, or a whole first listing): read them again
        return verdict

    def _check(
        self,
        tool: ToolInfo,
        pin: Pin | None,
        suspicion: Callable[[], str | None] | None,
        listing: Callable[[], Sequence[ToolInfo]] | None,
        scan: Callable[[ToolInfo], str | None] | None,
        lookup: PinLookup | None,
    ) -> PinVerdict:
        definition = canonical_definition(tool)
        _, text, digest = _canonical(tool)
        pin = pin or self._adopt_legacy(tool.server, tool.tool)
        if pin is None:
            suspicious = suspicion() if suspicion is not None else None
            return self._first_seen(tool, (definition, text, digest), suspicious, listing, scan, lookup)
        if pin.hash == digest:
            return _verdict(pin)
        if pin.pending_hash == digest:  # held already, for this very definition
            return PinVerdict(False, pin.pending_reason or "definition changed", pin)
        return self._hold(pin, definition, digest, suspicion() if suspicion is not None else None)

    def _first_seen(
        self,
        tool: ToolInfo,
        canonical: tuple[JSONObject, str, str],
        suspicious: str | None,
        listing: Callable[[], Sequence[ToolInfo]] | None,
        scan: Callable[[ToolInfo], str | None] | None,
        lookup: PinLookup | None,
    ) -> PinVerdict:
        """A tool without a pin: pinned now (approved under tofu unless suspicious, late or renamed)."""
        definition, text, digest = canonical
        known = None if listing is None else (lookup if lookup is not None else self).pins(tool.server)
        late = self._newcomer(definition, known, listing) if known and listing is not None else None
        if late is not None and late[1] is not None:
            pin = self._insert_rename(tool, digest, definition, late[1], _joined(late[0], suspicious) or late[0])
            return PinVerdict(False, pin.pending_reason or late[0], pin)
        pin = self._insert(tool, digest, text, *self._first_approval(suspicious, late))
        if known == [] and listing is not None:
            self._pin_first_listing(tool, listing(), scan)
        if pin.hash != digest:  # another process pinned another definition first: it stands, this one waits
            return self._hold(pin, definition, digest, suspicious)
        return _verdict(pin)

    def _first_approval(self, suspicious: str | None, late: tuple[str, Pin | None] | None) -> tuple[bool, str | None]:
        """Whether a first definition is approved as it is pinned, and why not."""
        approved = self.mode == "tofu" and suspicious is None and late is None
        strict = "awaiting approval (pinning: strict)" if self.mode == "strict" else None
        return approved, _joined(suspicious, strict or (late[0] if late is not None else None)) or None

    def _hold(self, pin: Pin, definition: JSONObject, digest: str, suspicious: str | None) -> PinVerdict:
        """``definition`` differs from the pinned one: it waits for approval, saying what changed."""
        why = _joined(invisible_change(pin.definition, definition), suspicious) or "definition changed"
        pin = self._set_pending(pin, digest, definition, why)
        return PinVerdict(False, pin.pending_reason or "definition changed", pin)

    def _newcomer(
        self, definition: JSONObject, known: list[Pin], listing: Callable[[], Sequence[ToolInfo]]
    ) -> tuple[str, Pin | None]:
        """Why a tool first seen on a server with pins (``known``) is held back, and the pin it renames."""
        listed = {t.tool for t in listing() if not t.synthetic}
        vanished = {p.tool: p.definition for p in known if p.tool not in listed and not _needs_approval(p)}
        match = rename_source(definition, vanished)
        if match is None:
            return f"{NEWCOMER}: approve it to expose it", None
        source = next(p for p in known if p.tool == match[0])
        alike = "definition otherwise identical" if match[1] == 1.0 else f"definition {match[1]:.0%} alike"
        return f"renamed from {match[0]} ({alike})", source

    def _pin_first_listing(
        self, seen: ToolInfo, listing: Sequence[ToolInfo], scan: Callable[[ToolInfo], str | None] | None
    ) -> None:
        """Pin every tool of a server's first listing now (each scanned), so a tool that is not in
        it is a newcomer later, in this process or another.

        One transaction for the whole listing (a pin another process made first stands).
        """
        strict = "awaiting approval (pinning: strict)" if self.mode == "strict" else None
        pinned_at = time.time()
        rows: list[dict[str, Any]] = []
        for tool in listing:
            if tool.synthetic or tool.tool == seen.tool or self._adopt_legacy(tool.server, tool.tool) is not None:
                continue
            _, text, digest = _canonical(tool)
            suspicious = scan(tool) if scan is not None else None
            approved = self.mode == "tofu" and suspicious is None
            rows.append(self._row(tool, digest, text, approved, _joined(suspicious, strict), pinned_at))
        if rows:
            with self._store.write() as db:
                db.execute(insert_or_ignore(db, pins), rows)

    def approve(self, server: str, tool: str | None = None) -> list[Pin]:
        """Approve the pending definitions of ``server`` (or one tool); return what was approved."""
        pending = [p for p in self.pins(server) if (tool is None or p.tool == tool) and _needs_approval(p)]
        with self._store.write() as db:
            for pin in pending:
                db.execute(
                    pins.update()
                    .where(*self._key(pin.server, pin.tool))
                    .values(
                        hash=pin.pending_hash or pin.hash,
                        definition=_canonical_json(pin.pending_definition or pin.definition),
                        approved=True,
                        pinned_at=time.time(),
                        pending_hash=None,
                        pending_definition=None,
                        pending_reason=None,
                    )
                )
            if pending:
                notify(db, "pins", server)  # replicas of a gateway list the approved tools again
        return pending

    def get(self, server: str, tool: str) -> Pin | None:
        """The pin of ``server``'s ``tool``, if any."""
        return self._get(self.identity(server), server, tool)

    def _key(self, server: str, tool: str) -> tuple[ColumnElement[bool], ...]:
        return pins.c.identity == self.identity(server), pins.c.server == server, pins.c.tool == tool

    def _get(self, identity: str, server: str, tool: str) -> Pin | None:
        with self._store.read() as db:
            where = (pins.c.identity == identity, pins.c.server == server, pins.c.tool == tool)
            row = db.execute(select(*_COLUMNS).where(*where)).first()
        return _pin(row) if row else None

    def _adopt_legacy(self, server: str, tool: str) -> Pin | None:
        identity = self.identity(server)
        if identity == LEGACY_IDENTITY or not self._has_legacy_rows():
            return None
        if self._get(LEGACY_IDENTITY, server, tool) is None:
            return None
        legacy = (pins.c.identity == LEGACY_IDENTITY, pins.c.server == server, pins.c.tool == tool)
        with self._store.write() as db:
            copy = select(literal(identity), *_COLUMNS).where(*legacy)
            db.execute(insert_or_ignore(db, pins).from_select(["identity", *(c.name for c in _COLUMNS)], copy))
        return self._get(identity, server, tool)

    def _has_legacy_rows(self) -> bool:
        if self._legacy_rows is None:
            with self._store.read() as db:
                found = db.execute(select(pins.c.tool).where(pins.c.identity == LEGACY_IDENTITY).limit(1)).first()
            self._legacy_rows = found is not None
        return self._legacy_rows

    def pins(self, server: str | None = None) -> list[Pin]:
        """The pins of the configured servers' identities (of ``server`` if given), sorted by server and tool."""
        names = [server] if server is not None else sorted(self._identities) or None
        if names is None:
            where = pins.c.identity == LEGACY_IDENTITY
        else:
            where = or_(*(and_(pins.c.identity == self.identity(n), pins.c.server == n) for n in names))
        with self._store.read() as db:
            rows = db.execute(select(*_COLUMNS).where(where).order_by(pins.c.server, pins.c.tool)).all()
        return [_pin(r) for r in rows]

    def _row(
        self, tool: ToolInfo, digest: str, definition_json: str, approved: bool, reason: str | None, pinned_at: float
    ) -> dict[str, Any]:
        return {
            "identity": self.identity(tool.server), "server": tool.server, "tool": tool.tool, "hash": digest,
            "definition": definition_json, "approved": approved, "pinned_at": pinned_at, "pending_reason": reason,
        }  # fmt: skip

    def _insert(self, tool: ToolInfo, digest: str, definition_json: str, approved: bool, reason: str | None) -> Pin:
        pinned_at = time.time()
        row = self._row(tool, digest, definition_json, approved, reason, pinned_at)
        with self._store.write() as db:
            # RETURNING, not the row count: drivers disagree on counting an ignored insert (psycopg says -1).
            inserted = db.execute(insert_or_ignore(db, pins).values(row).returning(pins.c.tool)).first() is not None
        if inserted:
            return Pin(tool.server, tool.tool, digest, definition_json, approved, pinned_at, None, None, reason)
        pin = self.get(tool.server, tool.tool)  # another process pinned it first: its pin stands
        assert pin is not None
        return pin

    def _insert_rename(self, tool: ToolInfo, digest: str, definition: JSONObject, source: Pin, reason: str) -> Pin:
        """Pin ``tool`` as a rename of ``source``: pinned as ``source`` was, the new definition pending."""
        row = {
            "identity": self.identity(tool.server), "server": tool.server, "tool": tool.tool, "hash": source.hash,
            "definition": _canonical_json(source.definition), "approved": False, "pinned_at": time.time(),
            "pending_hash": digest, "pending_definition": _canonical_json(definition), "pending_reason": reason,
        }  # fmt: skip
        with self._store.write() as db:
            db.execute(insert_or_ignore(db, pins).values(row))
        pin = self.get(tool.server, tool.tool)
        assert pin is not None
        return pin

    def _set_pending(self, pin: Pin, digest: str, definition: JSONObject, reason: str) -> Pin:
        changes = {"pending_hash": digest, "pending_definition": _canonical_json(definition), "pending_reason": reason}
        with self._store.write() as db:
            db.execute(pins.update().where(*self._key(pin.server, pin.tool)).values(changes))
        updated = self.get(pin.server, pin.tool)
        assert updated is not None
        return updated


class PinLookup:
    """The pins of the servers of one listing, each server's read in one query when first asked.

    Made by :meth:`PinBook.lookup` for one pass over a listing and dropped after it: it sees
    the database as it was when a server was first asked about (a pin written meanwhile by this
    book drops that server, to be read again).
    """

    __slots__ = ("_book", "_by_server")

    def __init__(self, book: PinBook) -> None:
        self._book = book
        self._by_server: dict[str, dict[str, Pin]] = {}

    def _of(self, server: str) -> dict[str, Pin]:
        known = self._by_server.get(server)
        if known is None:
            known = self._by_server[server] = {pin.tool: pin for pin in self._book.pins(server)}
        return known

    def get(self, server: str, tool: str) -> Pin | None:
        """The pin of ``server``'s ``tool``, if any (as :meth:`PinBook.get`)."""
        return self._of(server).get(tool)

    def pins(self, server: str) -> list[Pin]:
        """The pins of ``server``, sorted by tool (as :meth:`PinBook.pins`)."""
        return list(self._of(server).values())

    def forget(self, server: str) -> None:
        """Read ``server``'s pins again when next asked."""
        self._by_server.pop(server, None)


_COLUMNS = (
    pins.c.server, pins.c.tool, pins.c.hash, pins.c.definition, pins.c.approved, pins.c.pinned_at,
    pins.c.pending_hash, pins.c.pending_definition, pins.c.pending_reason,
)  # fmt: skip


def _pin(row: Sequence[Any]) -> Pin:
    server, tool, digest, definition, approved, pinned_at, pending_hash, pending_definition, reason = row
    return Pin(server, tool, digest, definition, bool(approved), pinned_at, pending_hash, pending_definition, reason)


def _verdict(pin: Pin) -> PinVerdict:
    """The verdict of a pin whose definition is the one seen: approved, or still awaiting approval."""
    if not pin.approved:
        return PinVerdict(False, pin.pending_reason or "awaiting approval", pin)
    return PinVerdict(True, "pinned", pin)


def _joined(*reasons: str | None) -> str | None:
    """The reasons given, most telling first, in one line."""
    return "; ".join(r for r in reasons if r) or None


def _shown(definition: JSONObject) -> list[str]:
    return reveal(json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)).splitlines()


def _explained(reason: str) -> bool:
    return reason.startswith(("renamed from", "changed only")) or NEWCOMER in reason


def _needs_approval(pin: Pin) -> bool:
    return not pin.approved or pin.pending_hash is not None
