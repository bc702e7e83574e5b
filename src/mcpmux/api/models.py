"""The JSON bodies of the REST API (what ``/api/openapi.json`` documents); shapes of the tools-provider plan."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ExecuteRequest",
    "ExecuteResult",
    "McpConfig",
    "Problem",
    "ServerState",
    "SourceCreate",
    "SourceOut",
    "SourcePatch",
    "SyncResult",
    "ToolOut",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McpConfig(BaseModel):
    """``mcp_config``: lifecycle, variable values and, for config-style entries, the usual server fields."""

    model_config = ConfigDict(extra="allow")

    lifecycle_mode: Literal["singleton", "transient"] = "singleton"
    environment: dict[str, str] = Field(default_factory=dict)
    manifest: dict[str, Any] | None = Field(None, description="An uploaded server.json document.")


class SourceCreate(_Strict):
    """``POST /api/sources``."""

    name: str = Field(min_length=1, max_length=32)
    description: str = Field("", max_length=4000)
    source_type: Literal["mcp", "openapi"]
    url: str | None = Field(None, max_length=4000)
    mcp_config: McpConfig | None = None
    openapi_config: dict[str, Any] | None = None
    environment: dict[str, str] = Field(default_factory=dict)


class SourcePatch(_Strict):
    """``PATCH /api/sources/{id}``: only the fields given change."""

    description: str | None = Field(None, max_length=4000)
    lifecycle_mode: Literal["singleton", "transient"] | None = None
    environment: dict[str, str] | None = None


class SourceOut(BaseModel):
    """A source (secrets masked; config-file sources are ``read_only``)."""

    id: str
    name: str
    description: str
    source_type: str
    url: str | None
    lifecycle_mode: str
    config: dict[str, Any]
    variables: list[dict[str, Any]]
    environment: dict[str, str]
    read_only: bool
    origin: str
    created_at: str | None
    updated_at: str | None
    synced_at: str | None


class ToolOut(BaseModel):
    """A tool of a source."""

    id: str
    source_id: str
    source: str
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None
    execution_mode: Literal["mcp_call", "sync_http"]


class SyncResult(BaseModel):
    """``POST /api/sources/{id}/sync``."""

    tools_discovered: int
    tools: list[ToolOut]


class ExecuteRequest(_Strict):
    """``POST /api/tools/execute``."""

    tool_id: str = Field(min_length=3, max_length=300, description="SOURCE:TOOL")
    arguments: dict[str, Any] = Field(default_factory=dict)


class ExecuteResult(BaseModel):
    """The result of a tool (its content blocks as MCP sends them)."""

    success: bool
    is_error: bool
    content: list[dict[str, Any]]
    structured_content: dict[str, Any] | None = None


class ServerState(BaseModel):
    """One server (configured or registered) and its state."""

    name: str
    type: str
    state: str
    reason: str
    tools: int
    restarts: int


class Problem(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str
    title: str
    status: int
    detail: str
    code: int | None = None
    errors: list[str] | None = None
    hint: str | None = None
