"""What the source registry holds: sources, their declared variables, their synced tools."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Literal

from mcpmux.sources.sealing import MASK

__all__ = ["ExecutionMode", "Lifecycle", "Source", "SourceSpec", "SourceTool", "SourceType", "Variable"]

SourceType = Literal["mcp", "openapi"]
Lifecycle = Literal["singleton", "transient"]
ExecutionMode = Literal["mcp_call", "sync_http"]


@dataclass(frozen=True)
class Variable:
    """An environment variable a source declares (from a ``server.json`` manifest, or given)."""

    name: str
    description: str = ""
    is_required: bool = False
    is_secret: bool = False
    default: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The variable as JSON (``isRequired``/``isSecret`` spelled as the registry spells them)."""
        return {
            "name": self.name,
            "description": self.description,
            "isRequired": self.is_required,
            "isSecret": self.is_secret,
            "default": self.default,
        }


@dataclass(frozen=True)
class SourceSpec:
    """A source to register.

    Attributes:
        name: the server name (``[a-z0-9][a-z0-9_-]{0,31}``), also the namespace of its tools.
        source_type: ``mcp`` or ``openapi``.
        description: free text.
        url: ``file://`` path (a plugin directory holding ``server.json``, or a spec file) or an
            ``http(s)://`` URL (a spec, or a remote MCP server).
        manifest: an uploaded ``server.json`` document (``mcp`` only).
        config: config-style server fields (``type``, ``command``, ``args``, ...) for ``mcp``, or the
            OpenAPI fields (``base_url``, ``auth``, ``include_tags``, ...) for ``openapi``.
        environment: variable values; secret ones are sealed, never returned.
        lifecycle: ``singleton`` (kept connected) or ``transient`` (started when needed).
    """

    name: str
    source_type: SourceType
    description: str = ""
    url: str | None = None
    manifest: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    lifecycle: Lifecycle = "singleton"


@dataclass(frozen=True)
class Source:
    """A registered source, as stored (secret values are never part of it)."""

    id: str
    name: str
    description: str
    source_type: SourceType
    url: str | None
    lifecycle: Lifecycle
    entry: dict[str, Any]
    variables: tuple[Variable, ...]
    plain_values: dict[str, str]
    secret_names: tuple[str, ...]
    created_at: datetime.datetime
    updated_at: datetime.datetime
    synced_at: datetime.datetime | None = None
    origin: Literal["registry", "config"] = "registry"

    @property
    def execution_mode(self) -> ExecutionMode:
        """How its tools run: an MCP call, or a synchronous HTTP request (OpenAPI)."""
        return "sync_http" if self.source_type == "openapi" else "mcp_call"

    def environment(self) -> dict[str, str]:
        """Every variable with a value: plain values as they are, secrets masked."""
        shown = dict(self.plain_values)
        shown.update(dict.fromkeys(self.secret_names, MASK))
        return dict(sorted(shown.items()))

    def to_json(self) -> dict[str, Any]:
        """The source as the API and ``--json`` show it (secrets masked, never their values)."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "source_type": self.source_type,
            "url": self.url,
            "lifecycle_mode": self.lifecycle,
            "config": self.entry,
            "variables": [v.to_json() for v in self.variables],
            "environment": self.environment(),
            "read_only": self.origin == "config",
            "origin": self.origin,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "synced_at": self.synced_at.isoformat() if self.synced_at else None,
        }


@dataclass(frozen=True)
class SourceTool:
    """A tool a sync found on a source."""

    source_id: str
    source_name: str
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None
    execution_mode: ExecutionMode

    @property
    def tool_id(self) -> str:
        """``SOURCE:TOOL``, the id ``execute`` takes."""
        return f"{self.source_name}:{self.name}"

    def to_json(self) -> dict[str, Any]:
        """The tool as the API shows it."""
        return {
            "id": self.tool_id,
            "source_id": self.source_id,
            "source": self.source_name,
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
            "execution_mode": self.execution_mode,
        }
