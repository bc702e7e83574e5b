"""Warn about secrets written literally into a server entry (they belong in ``${VAR}`` references)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MovedSecret", "secret_warnings", "secrets_to_references"]

_SECRET_PREFIXES = ("ghp_", "gho_", "ghs_", "github_pat_", "sk-", "sk_", "rk_", "xox", "glpat-", "AKIA", "AIza", "hf_")
_SECRET_KEY = re.compile(r"token|secret|passw|api[_-]?key|auth|credential|private", re.IGNORECASE)
_MIN_SECRET_LEN = 8
_HIGH_ENTROPY_LEN = 24
_HIGH_ENTROPY_BITS = 3.5


def secret_warnings(entry: Mapping[str, Any]) -> list[str]:
    """A warning for every env or header value that looks like a secret written literally."""
    warnings = []
    prefix = re.sub(r"[^A-Z0-9]+", "_", str(entry.get("name", "server")).upper())
    for field in ("env", "headers"):
        for key, value in (entry.get(field) or {}).items():
            if isinstance(value, str) and _looks_secret(str(key), value):
                var = str(key).upper() if field == "env" else f"{prefix}_TOKEN"
                example = f"'{key}=${{{var}}}'" if field == "env" else f"'{key}: {_scheme(value)}${{{var}}}'"
                warnings.append(
                    f"{field} {key} looks like a secret written literally; store a reference instead "
                    f"(--{field.rstrip('s')} {example}) and export {var}"
                )
    return warnings


@dataclass(frozen=True, slots=True)
class MovedSecret:
    """A literal secret replaced by a ``${VAR}`` reference: the user must export ``variable``."""

    field: str
    key: str
    variable: str


def secrets_to_references(entry: Mapping[str, Any]) -> tuple[dict[str, Any], list[MovedSecret]]:
    """``entry`` with every env or header value that looks like a secret replaced by a reference.

    An env value becomes ``${KEY}``; a header value keeps its scheme (``Bearer ${NAME_TOKEN}``).
    The values themselves are not returned, so they are never written or printed.
    """
    out = dict(entry)
    moved: list[MovedSecret] = []
    prefix = re.sub(r"[^A-Z0-9]+", "_", str(entry.get("name", "server")).upper()).strip("_")
    for field in ("env", "headers"):
        mapping = entry.get(field)
        if not isinstance(mapping, Mapping):
            continue
        replaced = dict(mapping)
        for key, value in mapping.items():
            if isinstance(value, str) and _looks_secret(str(key), value):
                var = _variable(str(key)) if field == "env" else f"{prefix}_TOKEN"
                replaced[key] = f"{_scheme(value)}${{{var}}}" if field == "headers" else f"${{{var}}}"
                moved.append(MovedSecret(field, str(key), var))
        out[field] = replaced
    return out, moved


def _variable(key: str) -> str:
    var = re.sub(r"[^A-Za-z0-9_]", "_", key)
    return var if re.match(r"[A-Za-z_]", var) else f"_{var}"


def _scheme(value: str) -> str:
    words = value.split()
    return f"{words[0]} " if len(words) > 1 else ""


def _looks_secret(key: str, value: str) -> bool:
    if "${" in value or not value.strip():
        return False
    token = value.split()[-1]
    if token.startswith(_SECRET_PREFIXES) and len(token) >= _MIN_SECRET_LEN:
        return True
    if _SECRET_KEY.search(key) and len(token) >= _MIN_SECRET_LEN:
        return True
    return len(token) >= _HIGH_ENTROPY_LEN and "/" not in token and _entropy_bits(token) >= _HIGH_ENTROPY_BITS


def _entropy_bits(text: str) -> float:
    counts = {c: text.count(c) for c in set(text)}
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())
