"""The bridge from MCP tools to LLM function calling: names, schemas, results and the call path."""

from __future__ import annotations

from mcpmux.bridge.results import DEFAULT_MAX_RESULT_BYTES, MediaPart, ModelResult, normalise_result
from mcpmux.bridge.schema import normalise_schema
from mcpmux.bridge.tools import BridgeTool, ToolBridge, ToolHandler, ToolSource

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "BridgeTool",
    "MediaPart",
    "ModelResult",
    "ToolBridge",
    "ToolHandler",
    "ToolSource",
    "normalise_result",
    "normalise_schema",
]
