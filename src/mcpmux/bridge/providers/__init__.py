"""LLM providers behind one :class:`Provider` protocol, and the client side of server requests.

The conversation is kept in the Chat Completions message shape (``role``, ``content``,
``tool_calls``, ``tool_call_id``); a provider for another API converts at its boundary.
Provider SDKs are imported only when a provider is built, so importing this package is cheap.
"""

from __future__ import annotations

from mcpmux.bridge.providers.base import (
    Completion,
    Message,
    ModelNotConfigured,
    Provider,
    ProviderError,
    TextSink,
    ToolCall,
    Usage,
)
from mcpmux.bridge.providers.select import make_provider

__all__ = [
    "Completion",
    "Message",
    "ModelNotConfigured",
    "Provider",
    "ProviderError",
    "TextSink",
    "ToolCall",
    "Usage",
    "make_provider",
]
