"""Chat Completions through the official ``openai`` SDK: OpenAI, vLLM, Ollama, LM Studio, ...

Streaming is always on: text goes to the sink as it arrives, tool calls are assembled from their
deltas by index, and usage comes in the last chunk (``stream_options.include_usage``; endpoints
that ignore it report zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcpmux.bridge.providers.base import (
    Completion,
    Message,
    ModelNotConfigured,
    ProviderError,
    TextSink,
    ToolCall,
    Usage,
    unreachable,
)
from mcpmux.config.models import LLMConfig
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIProvider"]

REQUEST_TIMEOUT_S = 300.0
NO_KEY_HINT = "set OPENAI_API_KEY, or llm.api_key: ${VAR} in the config, or --base-url for a local server"
INSTALL_HINT = "pip install 'mcpmux[chat]'"


class OpenAIProvider:
    """An OpenAI-compatible endpoint (``base_url``) and model.

    Args:
        config: the ``llm:`` section (temperature, max_tokens, base_url).
        model: the model to ask.
        api_key: the key; local servers (a ``base_url``) get a placeholder when there is none.
    """

    name = "openai"
    profile = "openai"

    def __init__(self, config: LLMConfig, model: str, api_key: str | None) -> None:
        self.model, self._config, self._key = model, config, api_key
        self._client: AsyncOpenAI | None = None

    def _ensure_client(self) -> AsyncOpenAI:
        if self._client is None:
            try:
                from openai import AsyncOpenAI
            except ImportError as exc:
                raise ModelNotConfigured(self.name, "the openai package is not installed", hint=INSTALL_HINT) from exc
            key = self._key or ("unused" if self._config.base_url else None)
            if key is None:
                raise ModelNotConfigured(self.name, "no API key", hint=NO_KEY_HINT)
            self._client = AsyncOpenAI(
                api_key=key, base_url=self._config.base_url, timeout=REQUEST_TIMEOUT_S, max_retries=1
            )
        return self._client

    def check(self) -> None:
        """Fail now if the settings cannot work (no SDK, no key); sends nothing.

        Raises:
            ModelNotConfigured: what is missing, and how to provide it.
        """
        self._ensure_client()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[JSONObject],
        *,
        on_text: TextSink | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Run one streamed turn (see :meth:`Provider.complete`)."""
        import openai

        client = self._ensure_client()
        request: JSONObject = {"model": self.model, "messages": list(messages), "stream": True}
        request["stream_options"] = {"include_usage": True}
        if tools:
            request["tools"] = list(tools)
        if self._config.temperature is not None:
            request["temperature"] = self._config.temperature
        limit = max_tokens or self._config.max_tokens
        if limit is not None:
            request["max_tokens"] = limit
        try:
            stream: Any = await client.chat.completions.create(**request)
            async with stream:
                return await _collect(stream, on_text)
        except openai.APIConnectionError as exc:
            raise unreachable(self.name, str(client.base_url), exc) from exc
        except openai.APIError as exc:
            raise ProviderError(self.name, f"{type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.close()
            self._client = None


async def _collect(stream: Any, on_text: TextSink | None) -> Completion:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage, finish = Usage(), None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
                if on_text is not None:
                    await on_text(delta.content)
            for part in delta.tool_calls or ():
                _merge_tool_delta(calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""}), part)
    tool_calls = tuple(
        ToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"] or "{}") for i, c in sorted(calls.items())
    )
    return Completion("".join(text), tool_calls, usage, finish)


def _merge_tool_delta(call: dict[str, str], part: Any) -> None:
    # The id and name come once, in the first delta of a call; the arguments come in pieces.
    if part.id:
        call["id"] = part.id
    if part.function is not None:
        if part.function.name:
            call["name"] += part.function.name
        if part.function.arguments:
            call["arguments"] += part.function.arguments
