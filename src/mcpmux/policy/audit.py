"""The audit log: one row for every call from any face, with secrets redacted.

A row says when, from which face and caller, what was called (with an argument digest and the
redacted arguments), what the policy decided and by which rule, how long it took, how it ended and
how large the result was.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from mcpmux.config.display import MASK, json_forms, may_need_redaction, redact
from mcpmux.policy.schema import audit
from mcpmux.policy.store import StateStore
from mcpmux.types.json_shapes import JSONObject

__all__ = ["AuditLog", "AuditRow", "argument_digest", "digest_and_redact", "redact_arguments"]

# Argument names whose values are secrets whatever they contain.
_SECRET_KEY = re.compile(r"(pass(word|phrase)?|secret|token|api[_-]?key|auth(orization)?|credential|cookie)", re.I)


def argument_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the arguments: equal calls have equal digests."""
    return _digest(_canonical_json(arguments))


# Built once: json.dumps with options builds an encoder per call (a third of the row's serialisation).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def _digest(canonical: str) -> str:
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def digest_and_redact(
    arguments: Mapping[str, Any], secrets: Sequence[str], secret_forms: Sequence[str] | None = None
) -> tuple[str, str]:
    """The arguments' digest and their redacted JSON, from one serialisation when nothing needs redacting.

    The canonical JSON is digested; it is also what is stored unless it may hold a secret: a
    secret-named key, a known secret value or a prefixed token sends the arguments through
    :func:`redact_arguments` first. ``secret_forms`` are ``json_forms(secrets)``, computed once.
    """
    canonical = _canonical_json(arguments)
    forms = json_forms(secrets) if secret_forms is None else secret_forms
    if _SECRET_KEY.search(canonical) is None and not may_need_redaction(canonical, forms):
        return _digest(canonical), canonical
    return _digest(canonical), _canonical_json(redact_arguments(arguments, secrets))


def redact_arguments(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with secret-named keys masked and every known secret value replaced by ``****``."""
    secrets = tuple(secrets)
    if isinstance(value, Mapping):
        return {k: MASK if _SECRET_KEY.search(str(k)) else redact_arguments(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_arguments(v, secrets) for v in value]
    if isinstance(value, str):
        return redact(value, secrets)
    return value


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One audited call."""

    id: int
    at: float
    face: str
    caller: str | None
    server: str
    tool: str
    name: str
    args_digest: str
    args: Any
    decision: str
    rule: str
    duration_ms: float | None
    outcome: str
    error: str | None
    result_bytes: int | None

    def to_json(self) -> JSONObject:
        """The row as JSON-ready data (the ``mcpmux audit --json`` schema)."""
        return {field: getattr(self, field) for field in self.__dataclass_fields__}


class AuditLog:
    """Appends and queries audit rows in the state database."""

    def __init__(self, store: StateStore, secrets: Iterable[str] = ()) -> None:
        self._store, self._secrets = store, tuple(secrets)
        self._secret_forms = json_forms(self._secrets)

    def record(
        self,
        *,
        face: str,
        caller: str | None,
        server: str,
        tool: str,
        name: str,
        arguments: Mapping[str, Any],
        decision: str,
        rule: str,
        duration_ms: float | None,
        outcome: str,
        error: str | None = None,
        result_bytes: int | None = None,
    ) -> None:
        """Append one row; arguments are digested, then stored redacted."""
        digest, args = digest_and_redact(arguments, self._secrets, self._secret_forms)
        row = {
            "at": time.time(), "face": face, "caller": caller, "server": server, "tool": tool, "name": name,
            "args_digest": digest, "args": args, "decision": decision, "rule": rule, "duration_ms": duration_ms,
            "outcome": outcome, "error": redact(error, self._secrets) if error else None, "result_bytes": result_bytes,
        }  # fmt: skip
        self._store.append(audit, row)

    def query(
        self,
        *,
        since: float | None = None,
        server: str | None = None,
        tool: str | None = None,
        limit: int = 200,
        until: float | None = None,
        caller: str | None = None,
        outcome: str | None = None,
        offset: int = 0,
    ) -> list[AuditRow]:
        """The newest rows first, filtered by time (epoch seconds), server, tool, caller and outcome."""
        t = audit.c
        where = [t.at >= since] if since is not None else []
        where += [t.at < until] if until is not None else []
        exact = ((t.server, server), (t.tool, tool), (t.caller, caller), (t.outcome, outcome))
        where += [column == value for column, value in exact if value is not None]
        query = select(*_COLUMNS).where(*where).order_by(t.id.desc()).limit(limit).offset(max(0, offset))
        with self._store.read() as db:
            rows = db.execute(query).all()
        return [_row(r) for r in rows]


_COLUMNS = tuple(audit.c[name] for name in (
    "id", "at", "face", "caller", "server", "tool", "name", "args_digest", "args", "decision", "rule",
    "duration_ms", "outcome", "error", "result_bytes",
))  # fmt: skip


def _row(row: Sequence[Any]) -> AuditRow:
    id_, at, face, caller, server, tool, name, digest, args, decision, rule, duration, outcome, error, size = row
    return AuditRow(
        id_, at, face, caller, server, tool, name, digest, json.loads(args), decision, rule, duration, outcome,
        error, size,
    )  # fmt: skip
