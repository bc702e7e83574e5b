"""Warn about secrets written literally into a server entry (they belong in ``${VAR}`` references)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["secret_warnings"]

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
