"""Asking a person before a call: the question, the answers, and answers remembered per project and scope."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import select

from mcpmux.policy.schema import approvals
from mcpmux.policy.store import StateStore
from mcpmux.store.database import upsert
from mcpmux.types.json_shapes import JSONObject

__all__ = ["ANY_TOOL", "Answer", "ApprovalRequest", "ApprovalScope", "Approvals", "Approver", "StandingApproval"]

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
    face: str = "library"
    caller: str | None = None


class Approver(Protocol):
    """Asks a person (a terminal prompt, a chat UI, an MCP elicitation) and returns the answer."""

    async def __call__(self, request: ApprovalRequest) -> Answer: ...


@dataclass(frozen=True, slots=True)
class ApprovalScope:
    """Who an "always" answer was given by, and so whom it binds.

    The faces where the person at the terminal answers (``library``, ``cli``, ``chat``) share one
    scope, ``local``; any other face (``gateway``, ``api``) keeps each caller's answers to that
    caller, so a network client's "always" never widens what anyone else may do.
    """

    face: str
    caller: str

    @classmethod
    def of(cls, face: str, caller: str | None) -> ApprovalScope:
        """The scope of an answer given on ``face`` by ``caller``."""
        return cls(LOCAL_FACE, "") if face in LOCAL_FACES else cls(face, caller or "")

    def __str__(self) -> str:
        return self.face if not self.caller else f"{self.face}:{self.caller}"


LOCAL_FACE = "local"
LOCAL_FACES = frozenset({"library", "cli", "chat"})


@dataclass(frozen=True, slots=True)
class StandingApproval:
    """One remembered "always" answer: where, by whom, for what."""

    project: str
    face: str
    caller: str
    server: str
    tool: str
    granted_at: float

    def to_json(self) -> JSONObject:
        """The row as JSON-ready data (the ``mcpmux approvals list --json`` schema)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class Approvals:
    """Answers remembered for a project ("always for this tool", "always for this server"), per scope."""

    def __init__(self, store: StateStore, project: Path | str | None = None) -> None:
        self._store = store
        self.project = str(Path(project or Path.cwd()).resolve())

    def remembered(self, server: str, tool: str, scope: ApprovalScope) -> bool:
        """Whether a standing approval given in ``scope`` covers ``server``'s ``tool`` in this project."""
        t = approvals.c
        where = (t.project == self.project, t.face == scope.face, t.caller == scope.caller, t.server == server)
        with self._store.read() as db:
            row = db.execute(select(t.tool).where(*where, t.tool.in_((tool, ANY_TOOL))).limit(1)).first()
        return row is not None

    def remember(self, server: str, tool: str | None, scope: ApprovalScope) -> None:
        """Approve ``server``'s ``tool`` (every tool of it when ``None``) from now on, for ``scope`` in this project."""
        row = {
            "project": self.project, "face": scope.face, "caller": scope.caller, "server": server,
            "tool": tool or ANY_TOOL, "granted_at": time.time(),
        }  # fmt: skip
        with self._store.write() as db:
            db.execute(upsert(db, approvals, row))

    def standing(self, *, every_project: bool = False) -> list[StandingApproval]:
        """The remembered approvals of this project (of every project if asked), oldest first."""
        t = approvals.c
        query = select(t.project, t.face, t.caller, t.server, t.tool, t.granted_at)
        if not every_project:
            query = query.where(t.project == self.project)
        with self._store.read() as db:
            rows = db.execute(query.order_by(t.granted_at, t.server, t.tool)).all()
        return [StandingApproval(*row) for row in rows]

    def forget(
        self, server: str | None = None, tool: str | None = None, *, face: str | None = None, caller: str | None = None
    ) -> int:
        """Drop standing approvals of this project, narrowed by what is given; return how many.

        ``tool`` matches the remembered tool exactly (``*`` is "every tool of the server").
        """
        t = approvals.c
        narrowing = ((t.server, server), (t.tool, tool), (t.face, face), (t.caller, caller))
        where = [t.project == self.project, *(column == value for column, value in narrowing if value is not None)]
        with self._store.write() as db:
            return db.execute(approvals.delete().where(*where)).rowcount
