"""What the manager hands out: entries of its index and the state of each server."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any

import mcp_types as types

from mcpmux.types.json_shapes import JSONObject, JSONSchema

__all__ = ["PromptInfo", "ResourceInfo", "ServerState", "ServerStatus", "ToolInfo", "Transition"]


class ServerState(StrEnum):
    """The life of one server (DESIGN section 3)."""

    CONFIGURED = "configured"
    STARTING = "starting"
    CONNECTED = "connected"
    DEGRADED = "degraded"
    NEEDS_AUTH = "needs-auth"
    FAILED = "failed"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Transition:
    """One state change, with when and why."""

    at: float
    state: ServerState
    reason: str


@dataclass(frozen=True)
class ToolInfo:
    """One tool in the manager's index: the server's own definition under its canonical name.

    The definition is kept as the SDK's :class:`mcp_types.Tool`, as received; the other
    attributes read from it (nothing is copied when a server lists).

    Attributes:
        name: the canonical name, ``server:tool`` (or the server's ``prefix`` instead of its name).
        server: the configured server that owns it.
        definition: the server's definition as received (``definition.name`` is the server's own name).
        synthetic: made by mcpmux (``server:read_resource``, ``server:get_prompt``), not listed by the server.
    """

    name: str
    server: str
    definition: types.Tool
    synthetic: bool = False

    @classmethod
    def make(
        cls,
        *,
        name: str,
        server: str,
        tool: str,
        description: str = "",
        input_schema: JSONSchema | None = None,
        output_schema: JSONSchema | None = None,
        annotations: JSONObject | None = None,
        title: str | None = None,
        synthetic: bool = False,
    ) -> ToolInfo:
        """A tool built from its parts (mcpmux's synthetic tools, tests)."""
        definition = types.Tool(
            name=tool,
            title=title,
            description=description or None,
            input_schema=input_schema if input_schema is not None else {"type": "object"},
            output_schema=output_schema,
            annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
        )
        return cls(name, server, definition, synthetic)

    @property
    def tool(self) -> str:
        """The name the server itself uses."""
        return self.definition.name

    @property
    def description(self) -> str:
        """The server's description (may be empty)."""
        return self.definition.description or ""

    @property
    def title(self) -> str | None:
        """A human-readable title, if given."""
        return self.definition.title

    @property
    def input_schema(self) -> JSONSchema:
        """The JSON schema of the arguments (the definition's own object: do not modify it)."""
        return self.definition.input_schema or {"type": "object"}

    @property
    def output_schema(self) -> JSONSchema | None:
        """The JSON schema of ``structuredContent``, if declared."""
        return self.definition.output_schema or None

    @cached_property
    def annotations(self) -> JSONObject | None:
        """The tool's annotations (``readOnlyHint``, ``destructiveHint``, ...) as JSON."""
        found = self.definition.annotations
        return found.model_dump(mode="json", by_alias=True, exclude_none=True) if found is not None else None


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One resource or resource template in the index (``uri`` holds the template for templates)."""

    server: str
    uri: str
    name: str
    description: str
    mime_type: str | None
    template: bool


@dataclass(frozen=True, slots=True)
class PromptInfo:
    """One prompt in the index; ``name`` is canonical (``server:prompt``)."""

    name: str
    server: str
    prompt: str
    description: str
    arguments: tuple[tuple[str, bool], ...]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A server as ``mcpmux list`` and ``Manager.status()`` report it.

    Attributes:
        name: the configured name.
        type: the transport type.
        state: the current state.
        reason: why it is in that state (the last error for failed servers).
        target: pid and command, URL, or in-process description.
        pid: the child's process id while a stdio server runs.
        tools: how many tools are indexed (live or from the catalog).
        restarts: reconnects after the first connection.
        last_error: the last failure, if any.
        protocol_version: the negotiated protocol version while connected.
        server_info: ``name version`` the server gave while connected.
        history: every recorded transition, oldest first.
    """

    name: str
    type: str
    state: ServerState
    reason: str
    target: str
    pid: int | None
    tools: int
    restarts: int
    last_error: str | None
    protocol_version: str | None
    server_info: str | None
    history: tuple[Transition, ...]

    def to_json(self) -> dict[str, Any]:
        """The status as JSON-ready data (the ``--json`` schema of ``mcpmux list``)."""
        return {
            "name": self.name,
            "type": self.type,
            "state": self.state.value,
            "reason": self.reason,
            "target": self.target,
            "pid": self.pid,
            "tools": self.tools,
            "restarts": self.restarts,
            "last_error": self.last_error,
            "protocol_version": self.protocol_version,
            "server_info": self.server_info,
            "history": [{"at": t.at, "state": t.state.value, "reason": t.reason} for t in self.history],
        }
