"""Naming rules shared by every layer: server names and canonical ``server:tool`` names."""

from __future__ import annotations

import re

__all__ = ["CANONICAL_SEPARATOR", "SERVER_NAME_PATTERN", "canonical_name", "is_valid_server_name"]

SERVER_NAME_PATTERN = r"[a-z0-9][a-z0-9_-]{0,31}"
CANONICAL_SEPARATOR = ":"

_SERVER_NAME_RE = re.compile(SERVER_NAME_PATTERN)


def is_valid_server_name(name: str) -> bool:
    """Whether ``name`` is a legal server name (``[a-z0-9][a-z0-9_-]{0,31}``)."""
    return _SERVER_NAME_RE.fullmatch(name) is not None


def canonical_name(namespace: str, item: str) -> str:
    """The canonical name of ``item`` in ``namespace``: ``server:tool``, or ``tool`` when empty."""
    return f"{namespace}{CANONICAL_SEPARATOR}{item}" if namespace else item
