"""A small normalised view of a tool result, for callers that do not want the raw content blocks.

It doubles as a response envelope for callers who would rather branch than catch::

    result = await ToolResult.capture(host.call_tool("fs:read_text_file", {"path": "a.txt"}))
    if result.success:
        use(result.data)                      # structuredContent, else the text
    else:
        log(result.error.code, result.error.message, result.error.data)
    json.dumps(result.to_dict())
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from mcpmux.errors import (
    ApprovalDenied,
    InvalidArguments,
    MCPMuxError,
    MCPTimeoutError,
    NotFound,
    PolicyError,
    ServerError,
    ServerUnavailable,
    ToolError,
    TransportError,
    UsageError,
)

__all__ = [
    "APPROVAL_DENIED",
    "POLICY_REFUSED",
    "REQUEST_TIMEOUT",
    "SERVER_UNAVAILABLE",
    "ErrorInfo",
    "ToolResult",
    "raise_for_tool_error",
]

# JSON-RPC codes for failures that happen here rather than at the server (the server's own codes
# are kept as they came). -32000..-32099 is the implementation-defined range; these are mcpmux's.
POLICY_REFUSED = -32010
APPROVAL_DENIED = -32011
SERVER_UNAVAILABLE = -32012
REQUEST_TIMEOUT = types.REQUEST_TIMEOUT


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """Why a call failed, as a JSON-RPC error object: ``code`` (``None`` when the tool itself said
    ``isError: true``: no protocol error happened), ``message`` and ``data``."""

    code: int | None
    message: str
    data: Any = None

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", "data"}``."""
        return {"code": self.code, "message": self.message, "data": self.data}

    @classmethod
    def of(cls, exc: MCPMuxError) -> ErrorInfo:
        """The JSON-RPC error for ``exc``: a server's own code as it came, mcpmux's for the rest."""
        message = f"{exc}\nhint: {exc.hint}" if exc.hint else str(exc)
        if isinstance(exc, ServerError):
            return cls(exc.code, exc.error_message, exc.data)
        if isinstance(exc, ToolError):
            return cls(None, exc.text)
        if isinstance(exc, InvalidArguments):
            problems = [{"argument": p.path, "expected": p.expected, "given": p.given} for p in exc.problems]
            return cls(types.INVALID_PARAMS, message, {"problems": problems})
        if isinstance(exc, NotFound | UsageError):
            return cls(types.INVALID_PARAMS, message)
        if isinstance(exc, ApprovalDenied):
            return cls(APPROVAL_DENIED, message)
        if isinstance(exc, PolicyError):
            return cls(POLICY_REFUSED, message)
        if isinstance(exc, MCPTimeoutError):
            return cls(REQUEST_TIMEOUT, message)
        if isinstance(exc, ServerUnavailable | TransportError):
            return cls(SERVER_UNAVAILABLE, message)
        return cls(types.INTERNAL_ERROR, message)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One ``tools/call`` result, sorted by kind.

    Attributes:
        text: the text blocks joined with newlines.
        images: image blocks, in order.
        audio: audio blocks, in order.
        resources: embedded resources, in order.
        links: resource links, in order.
        structured: the ``structuredContent`` object, if the tool returned one.
        is_error: the tool reported failure (``isError: true``).
        raw: the SDK result it was made from (an empty one when the call failed before a result).
        error: why the call failed, with its JSON-RPC code (see :class:`ErrorInfo`); ``None`` on success.
    """

    text: str
    images: tuple[types.ImageContent, ...]
    audio: tuple[types.AudioContent, ...]
    resources: tuple[types.EmbeddedResource, ...]
    links: tuple[types.ResourceLink, ...]
    structured: dict[str, Any] | None
    is_error: bool
    raw: types.CallToolResult
    error: ErrorInfo | None = None

    @property
    def success(self) -> bool:
        """The call went through and the tool did not report failure."""
        return self.error is None and not self.is_error

    @property
    def data(self) -> Any:
        """The ``structuredContent`` if the tool returned one, else the text."""
        return self.structured if self.structured is not None else self.text

    def to_dict(self) -> dict[str, Any]:
        """The envelope as JSON-ready data: ``success``, ``data``, ``error`` and the content blocks."""
        return {
            "success": self.success,
            "data": self.data,
            "error": self.error.to_dict() if self.error is not None else None,
            "content": [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in self.raw.content],
        }

    @classmethod
    def failed(cls, exc: MCPMuxError) -> ToolResult:
        """The envelope of a call that raised ``exc`` (nothing came back, or the policy refused it)."""
        empty = types.CallToolResult(content=[], is_error=True)
        return cls("", (), (), (), (), None, True, empty, ErrorInfo.of(exc))

    @classmethod
    async def capture(cls, call: Awaitable[types.CallToolResult]) -> ToolResult:
        """Await ``call`` and return its envelope; an mcpmux error becomes a failed envelope, not a raise.

        Cancellation and errors that are not mcpmux's (bugs) still propagate.
        """
        try:
            result = await call
        except MCPMuxError as exc:
            return cls.failed(exc)
        return cls.of(result)

    @classmethod
    def of(cls, result: types.CallToolResult) -> ToolResult:
        """Sort the content blocks of ``result``."""
        blocks = result.content
        return cls(
            text="\n".join(b.text for b in blocks if isinstance(b, types.TextContent)),
            images=tuple(b for b in blocks if isinstance(b, types.ImageContent)),
            audio=tuple(b for b in blocks if isinstance(b, types.AudioContent)),
            resources=tuple(b for b in blocks if isinstance(b, types.EmbeddedResource)),
            links=tuple(b for b in blocks if isinstance(b, types.ResourceLink)),
            structured=result.structured_content,
            is_error=bool(result.is_error),
            raw=result,
            error=ErrorInfo(None, _text(result) or "(no text)") if result.is_error else None,
        )

    def raise_for_error(self, server: str, tool: str) -> ToolResult:
        """Return ``self``, or raise :class:`ToolError` if the tool reported failure.

        Raises:
            ToolError: ``is_error`` is set; ``text`` carries what the tool said.
        """
        if self.is_error:
            raise ToolError(server, tool, self.text or "(no text)")
        return self


def raise_for_tool_error(server: str, tool: str, result: types.CallToolResult) -> types.CallToolResult:
    """Return ``result``, or raise :class:`ToolError` if it has ``isError: true``.

    Raises:
        ToolError: the tool reported failure.
    """
    ToolResult.of(result).raise_for_error(server, tool)
    return result


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
