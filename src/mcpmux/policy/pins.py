"""Pinned tool definitions: a changed definition is quarantined until a person approves it.

A pin is SHA-256 over the canonical JSON (sorted keys, no whitespace) of the whole definition:
name, description, inputSchema, outputSchema and annotations (title too), so key order and
whitespace never change it while any change of meaning does. Pins are per server and tool: a pin
for ``a:read`` never authorises ``b:read``.

Modes (``security.pinning``): ``tofu`` pins a tool the first time it is seen; ``strict`` exposes no
tool until approved (``mcpmux approve``); ``off`` pins nothing.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from mcpmux.manager.models import ToolInfo
from mcpmux.policy.store import StateStore

__all__ = ["Pin", "PinBook", "PinVerdict", "canonical_definition", "definition_hash"]

PinningMode = Literal["off", "tofu", "strict"]
_PINNED_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def canonical_definition(tool: ToolInfo) -> dict[str, Any]:
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


def _canonical_json(definition: dict[str, Any]) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def definition_hash(tool: ToolInfo) -> str:
    """SHA-256 (hex) of the canonical JSON of the tool's definition."""
    return hashlib.sha256(_canonical_json(canonical_definition(tool)).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Pin:
    """One pinned tool, and a pending definition waiting for approval if it changed."""

    server: str
    tool: str
    hash: str
    definition: dict[str, Any]
    approved: bool
    pinned_at: float
    pending_hash: str | None
    pending_definition: dict[str, Any] | None
    pending_reason: str | None

    def diff(self) -> str:
        """A unified diff from the pinned to the pending definition (empty if nothing is pending)."""
        if self.pending_definition is None:
            return ""
        before = json.dumps(self.definition, indent=2, sort_keys=True).splitlines()
        after = json.dumps(self.pending_definition, indent=2, sort_keys=True).splitlines()
        lines = difflib.unified_diff(before, after, "pinned", "now", lineterm="", n=1)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class PinVerdict:
    """Whether a tool may be exposed now, and why not."""

    exposed: bool
    reason: str
    pin: Pin | None


class PinBook:
    """The pins of every server, in the state database."""

    def __init__(self, store: StateStore, mode: PinningMode) -> None:
        self._store, self.mode = store, mode

    def check(self, tool: ToolInfo, *, suspicion: Callable[[], str | None] | None = None) -> PinVerdict:
        """Pin ``tool`` on first sight (tofu), compare it with its pin, and say if it may be exposed.

        ``suspicion`` (the scanner) is asked only about a definition seen for the first time or
        changed: a high-severity finding quarantines it even under ``tofu``. A definition already
        pinned (scanned then, or approved by a person) is not scanned again.
        """
        if self.mode == "off" or tool.synthetic:
            return PinVerdict(True, "pinning is off" if self.mode == "off" else "made by mcpmux", None)
        digest, definition = definition_hash(tool), canonical_definition(tool)
        pin = self.get(tool.server, tool.tool)
        if pin is None:
            suspicious = suspicion() if suspicion is not None else None
            approved = self.mode == "tofu" and suspicious is None
            reason = suspicious or ("awaiting approval (pinning: strict)" if not approved else "")
            pin = self._insert(tool, digest, definition, approved, reason or None)
        elif pin.hash != digest:
            if pin.pending_hash != digest:
                suspicious = suspicion() if suspicion is not None else None
                pin = self._set_pending(pin, digest, definition, suspicious or "definition changed")
            return PinVerdict(False, pin.pending_reason or "definition changed", pin)
        if not pin.approved:
            return PinVerdict(False, pin.pending_reason or "awaiting approval", pin)
        return PinVerdict(True, "pinned", pin)

    def approve(self, server: str, tool: str | None = None) -> list[Pin]:
        """Approve the pending definitions of ``server`` (or one tool); return what was approved."""
        pending = [p for p in self.pins(server) if (tool is None or p.tool == tool) and _needs_approval(p)]
        with self._store.write() as db:
            for pin in pending:
                new_hash = pin.pending_hash or pin.hash
                definition = pin.pending_definition or pin.definition
                db.execute(
                    "UPDATE pins SET hash=?, definition=?, approved=1, pinned_at=?, pending_hash=NULL,"
                    " pending_definition=NULL, pending_reason=NULL WHERE server=? AND tool=?",
                    (new_hash, _canonical_json(definition), time.time(), pin.server, pin.tool),
                )
        return pending

    def get(self, server: str, tool: str) -> Pin | None:
        """The pin of ``server``'s ``tool``, if any."""
        with self._store.read() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM pins WHERE server=? AND tool=?", (server, tool)).fetchone()
        return _pin(row) if row else None

    def pins(self, server: str | None = None) -> list[Pin]:
        """Every pin (of ``server`` if given), sorted by server and tool."""
        with self._store.read() as db:
            if server is None:
                rows = db.execute(f"SELECT {_COLUMNS} FROM pins ORDER BY server, tool").fetchall()
            else:
                rows = db.execute(f"SELECT {_COLUMNS} FROM pins WHERE server=? ORDER BY tool", (server,)).fetchall()
        return [_pin(r) for r in rows]

    def _insert(
        self, tool: ToolInfo, digest: str, definition: dict[str, Any], approved: bool, reason: str | None
    ) -> Pin:
        row = (tool.server, tool.tool, digest, _canonical_json(definition), int(approved), time.time(), reason)
        with self._store.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO pins (server, tool, hash, definition, approved, pinned_at, pending_reason)"
                " VALUES (?,?,?,?,?,?,?)",
                row,
            )
        pin = self.get(tool.server, tool.tool)
        assert pin is not None
        return pin

    def _set_pending(self, pin: Pin, digest: str, definition: dict[str, Any], reason: str) -> Pin:
        with self._store.write() as db:
            db.execute(
                "UPDATE pins SET pending_hash=?, pending_definition=?, pending_reason=? WHERE server=? AND tool=?",
                (digest, _canonical_json(definition), reason, pin.server, pin.tool),
            )
        updated = self.get(pin.server, pin.tool)
        assert updated is not None
        return updated


_COLUMNS = "server, tool, hash, definition, approved, pinned_at, pending_hash, pending_definition, pending_reason"


def _pin(row: tuple[Any, ...]) -> Pin:
    server, tool, digest, definition, approved, pinned_at, pending_hash, pending_definition, reason = row
    pending = json.loads(pending_definition) if pending_definition else None
    return Pin(server, tool, digest, json.loads(definition), bool(approved), pinned_at, pending_hash, pending, reason)


def _needs_approval(pin: Pin) -> bool:
    return not pin.approved or pin.pending_hash is not None
