"""Replay a recorded session (``mcpmux record``): a mock that answers what the real server answered.

A recording is JSON lines (:mod:`mcpmux.testing.recording` writes them): one ``session`` line
(server, protocol version, server info) and one ``exchange`` line per request the server
answered (``method``, ``params``, and ``result`` or ``error``). The replayed mock lists the last
recorded tools, resources, templates and prompts, and answers ``tools/call``,
``resources/read`` and ``prompts/get`` from the recorded exchanges:

- ``match="strict"``: the same name (or URI) and exactly the same arguments;
- ``match="lenient"``: the same name (or URI); among those, the exchange sharing the most
  argument values wins (the latest on a tie).

A request with no recorded answer is a JSON-RPC error (-32602) listing what was recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcpmux.errors import UsageError
from mcpmux.testing.spec import MockSpec, MockTool

__all__ = ["ANSWERED_METHODS", "Exchange", "Match", "ReplayBook", "read_recording", "replay_into"]

Match = Literal["strict", "lenient"]
ANSWERED_METHODS = ("tools/call", "resources/read", "prompts/get")
_KEY_FIELD = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded request and the server's answer (``result`` or ``error``)."""

    method: str
    params: dict[str, Any]
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return str(self.params.get(_KEY_FIELD.get(self.method, ""), ""))

    @property
    def arguments(self) -> dict[str, Any]:
        arguments = self.params.get("arguments")
        return dict(arguments) if isinstance(arguments, Mapping) else {}


@dataclass
class ReplayBook:
    """The recorded answers of one session, looked up by method, name and arguments."""

    match: Match
    exchanges: list[Exchange] = field(default_factory=list)

    def answer(self, method: str, key: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The recorded result for this request.

        Raises:
            MCPError: the recorded error, or -32602 when nothing recorded matches.
        """
        candidates = [e for e in self.exchanges if e.method == method and e.key == key]
        exact = [e for e in candidates if e.arguments == dict(arguments)]
        chosen = exact[-1] if exact else None
        if chosen is None and self.match == "lenient" and candidates:
            chosen = max(reversed(candidates), key=lambda e: _shared(e.arguments, arguments))
        if chosen is None:
            recorded = [f"{e.key} {json.dumps(e.arguments, sort_keys=True)}" for e in candidates] or ["nothing"]
            message = f"no recorded answer for {method} {key} {json.dumps(dict(arguments), sort_keys=True)}"
            raise MCPError(types.INVALID_PARAMS, f"{message} ({self.match} match); recorded: {'; '.join(recorded)}")
        if chosen.error is not None:
            error = chosen.error
            raise MCPError(
                int(error.get("code", types.INTERNAL_ERROR)), str(error.get("message", "")), error.get("data")
            )
        return chosen.result or {}


def _shared(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> int:
    return sum(1 for k, v in wanted.items() if k in recorded and recorded[k] == v)


def read_recording(path: Path) -> tuple[dict[str, Any], list[Exchange]]:
    """The session line and the exchanges of a recording.

    Raises:
        UsageError: the file is missing, not JSON lines, or has no session line.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read the recording {path}: {exc.strerror or exc}") from exc
    session: dict[str, Any] | None = None
    exchanges: list[Exchange] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not a JSON line ({exc.msg})") from exc
        if item.get("type") == "session":
            session = item
        elif item.get("type") == "exchange":
            exchanges.append(Exchange(item["method"], item.get("params") or {}, item.get("result"), item.get("error")))
    if session is None:
        raise UsageError(
            f"{path} is not a recording: no session line", hint="record one with: mcpmux record NAME -o FILE"
        )
    return session, exchanges


def replay_into(mock: MockSpec, path: Path, exchanges: list[Exchange], *, match: Match = "strict") -> None:
    """Make ``mock`` serve the recording at ``path`` (its ``exchanges``, see the module docstring)."""
    mock.replaying = path
    mock.book = ReplayBook(match, [e for e in exchanges if e.method in ANSWERED_METHODS])
    last = {e.method: e.result for e in exchanges if e.result is not None}
    for raw in (last.get("tools/list") or {}).get("tools", []):
        tool = types.Tool.model_validate(raw)
        mock.tools[tool.name] = MockTool(name=tool.name, raw=raw)
    for raw in (last.get("resources/list") or {}).get("resources", []):
        mock.listed_resources.append(types.Resource.model_validate(raw))
    for raw in (last.get("resources/templates/list") or {}).get("resourceTemplates", []):
        mock.templates.append(types.ResourceTemplate.model_validate(raw))
    for raw in (last.get("prompts/list") or {}).get("prompts", []):
        mock.listed_prompts.append(types.Prompt.model_validate(raw))
