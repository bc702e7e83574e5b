"""The client side of server requests for an agent: sampling by the model, roots, no elicitation.

A server may ask the host's model to write something (``sampling/createMessage``). That spends
the user's tokens on a server's behalf, so a person approves each request first (the face shows
it); without an approver every request is declined.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types

from mcpmux.bridge.providers.base import Message, Provider, ProviderError
from mcpmux.connection import RootsCallback

__all__ = ["ModelSampler", "SamplingApprover", "decline_elicitation", "describe_sampling", "workspace_roots"]

logger = logging.getLogger(__name__)

SamplingApprover = Callable[[str, types.CreateMessageRequestParams], Awaitable[bool]]
"""Shows a sampling request to a person (server name, request) and returns whether to run it."""

# JSON-RPC error codes the spec suggests for refused client requests.
USER_REJECTED = -1


class ModelSampler:
    """Answers ``sampling/createMessage`` with the configured model, once approved.

    Args:
        provider: returns the model to use (``None`` when none is configured).
        approve: asks a person; ``None`` declines every request.
    """

    def __init__(self, provider: Callable[[], Provider | None], approve: SamplingApprover | None) -> None:
        self._provider, self._approve = provider, approve

    async def __call__(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        """Run the request through the model, or decline it with a JSON-RPC error."""
        provider = self._provider()
        if provider is None:
            return types.ErrorData(code=USER_REJECTED, message="no model is configured on this client")
        if self._approve is None or not await self._approve(server, params):
            return types.ErrorData(code=USER_REJECTED, message="the user declined the sampling request")
        try:
            completion = await provider.complete(sampling_messages(params), (), max_tokens=params.max_tokens)
        except ProviderError as exc:
            logger.warning("sampling for server %r failed: %s", server, exc)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=str(exc))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=completion.text),
            model=provider.model,
            stop_reason="maxTokens" if completion.finish_reason == "length" else "endTurn",
        )


def sampling_messages(params: types.CreateMessageRequestParams) -> list[Message]:
    """The request as Chat Completions messages (media become placeholders)."""
    messages: list[Message] = []
    if params.system_prompt:
        messages.append({"role": "system", "content": params.system_prompt})
    for message in params.messages:
        messages.append({"role": message.role, "content": _text(message.content)})
    return messages


def _text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    parts = [b.text if isinstance(b, types.TextContent) else f"[{getattr(b, 'type', 'content')}]" for b in blocks]
    return "\n".join(parts)


def describe_sampling(server: str, params: types.CreateMessageRequestParams) -> str:
    """The request as a person should see it before approving."""
    lines = [f"server {server!r} asks the model to write (max {params.max_tokens} tokens):"]
    if params.system_prompt:
        lines.append(f"  system: {params.system_prompt}")
    lines += [f"  {m['role']}: {m['content']}" for m in sampling_messages(params) if m["role"] != "system"]
    return "\n".join(lines)


async def decline_elicitation(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Elicitation in a non-interactive run: nobody can answer, so decline."""
    return types.ElicitResult(action="decline")


def workspace_roots(root: Path | None = None) -> RootsCallback:
    """A ``roots/list`` answer naming the workspace root (the current directory by default)."""
    directory = (root or Path.cwd()).resolve()

    async def roots(server: str) -> types.ListRootsResult | types.ErrorData:
        return types.ListRootsResult(roots=[types.Root(uri=directory.as_uri(), name=directory.name or "/")])

    return roots
