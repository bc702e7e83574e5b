"""The provider protocol: one streamed chat completion with tools, as plain data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mcpmux.errors import MCPMuxError, UsageError
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "Completion",
    "Message",
    "ModelNotConfigured",
    "Provider",
    "ProviderError",
    "TextSink",
    "ToolCall",
    "Usage",
    "unreachable",
]

Message = JSONObject
"""One Chat Completions message (``{"role": ..., "content": ..., ...}``)."""

TextSink = Callable[[str], Awaitable[None]]
"""Receives the answer's text as it streams in."""

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


class ProviderError(MCPMuxError):
    """The model endpoint failed (unreachable, refused the request, malformed answer)."""

    def __init__(self, provider: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{provider}: {message}", hint=hint)
        self.provider = provider


class ModelNotConfigured(ProviderError, UsageError):
    """The model settings cannot work (no API key, SDK not installed): found before any server starts (exit 2)."""


def unreachable(provider: str, url: str, exc: BaseException) -> ProviderError:
    """The error for an endpoint that could not be reached: which URL, why, and what to check."""
    cause = exc.__cause__ or exc.__context__
    why = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else type(exc).__name__
    if "timeout" in type(exc).__name__.lower():
        why = f"no answer in time ({why})"
    return ProviderError(
        provider,
        f"cannot reach the model endpoint {url}: {why}",
        hint="check llm.base_url (or --base-url), that the model server is running and reachable from here, "
        "and HTTPS_PROXY/NO_PROXY",
    )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for; ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens counted by the endpoint (zero when it does not report them)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """One model turn: its text, the tool calls it asked for, and what it cost."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def as_message(self) -> Message:
        """The assistant message to append to the conversation."""
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


class Provider(Protocol):
    """A chat model that can call tools.

    Attributes:
        name: the provider kind (``openai``, ``anthropic``).
        model: the model asked.
        profile: the naming profile its tool names must follow (see :mod:`mcpmux.provider_names`).
    """

    name: str
    model: str
    profile: str

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[JSONObject],
        *,
        on_text: TextSink | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Run one turn; stream text to ``on_text`` when given.

        Args:
            messages: the conversation so far, system message first.
            tools: Chat Completions ``tools`` entries (``BridgeTool.to_openai()``).
            on_text: receives text deltas as they arrive.
            max_tokens: a cap for this turn (a server's sampling request), else the configured one.

        Raises:
            ProviderError: the endpoint failed.
        """
        ...

    async def aclose(self) -> None:
        """Release the HTTP client."""
        ...
