"""Asking a person before a call: the question, the answers, and answers remembered per project."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from mcpmux.policy.store import StateStore

__all__ = ["Answer", "ApprovalRequest", "Approvals", "Approver"]

ANY_TOOL = "*"


class Answer(StrEnum):
    """What a person may answer."""

    YES = "yes"
    NO = "no"
    ALWAYS_TOOL = "always-tool"
    ALWAYS_SERVER = "always-server"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call waiting for a yes: what would run, with which arguments, and why it asks."""

    name: str
    server: str
    tool: str
    arguments: Mapping[str, Any]
    reason: str
    description: str = ""
    annotations: Mapping[str, Any] = field(default_factory=dict)


class Approver(Protocol):
    """Asks a person (a terminal prompt, a chat UI, an MCP elicitation) and returns the answer."""

    async def __call__(self, request: ApprovalRequest) -> Answer: ...


class Approvals:
    """Answers remembered for a project ("always for this tool", "always for this server")."""

    def __init__(self, store: StateStore, project: Path | str | None = None) -> None:
        self._store = store
        self.project = str(Path(project or Path.cwd()).resolve())

    def remembered(self, server: str, tool: str) -> bool:
        """Whether a standing approval covers ``server``'s ``tool`` in this project."""
        with self._store.read() as db:
            row = db.execute(
                "SELECT 1 FROM approvals WHERE project=? AND server=? AND tool IN (?, ?)",
                (self.project, server, tool, ANY_TOOL),
            ).fetchone()
        return row is not None

    def remember(self, server: str, tool: str | None) -> None:
        """Approve ``server``'s ``tool`` (every tool of it when ``None``) from now on, in this project."""
        with self._store.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO approvals (project, server, tool, granted_at) VALUES (?,?,?,?)",
                (self.project, server, tool or ANY_TOOL, time.time()),
            )

    def forget(self, server: str | None = None) -> int:
        """Drop standing approvals of this project (of ``server`` only if given); return how many."""
        with self._store.write() as db:
            if server is None:
                cursor = db.execute("DELETE FROM approvals WHERE project=?", (self.project,))
            else:
                cursor = db.execute("DELETE FROM approvals WHERE project=? AND server=?", (self.project, server))
        return cursor.rowcount
