"""Anthropic Messages through the official ``anthropic`` SDK (the ``mcpmux[anthropic]`` extra).

The loop keeps the conversation in the Chat Completions shape; this module converts at the
boundary: system messages become ``system``, assistant tool calls become ``tool_use`` blocks,
and each run of ``tool`` messages becomes one user message of ``tool_result`` blocks.
"""

from __future__ import annotations

import json
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
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicProvider", "to_anthropic_messages"]

REQUEST_TIMEOUT_S = 300.0
# The Messages API requires max_tokens; this applies when the config sets none.
DEFAULT_MAX_TOKENS = 4096
NO_KEY_HINT = "set ANTHROPIC_API_KEY, or llm.api_key: ${VAR} in the config"
INSTALL_HINT = "pip install 'mcpmux[anthropic]'"


class AnthropicProvider:
    """Claude models over the Messages API (streaming).

    Args:
        config: the ``llm:`` section (temperature, max_tokens, base_url).
        model: the model to ask.
        api_key: the key.
    """

    name = "anthropic"
    profile = "anthropic"

    def __init__(self, config: LLMConfig, model: str, api_key: str | None) -> None:
        self.model, self._config, self._key = model, config, api_key
        self._client: AsyncAnthropic | None = None

    def _ensure_client(self) -> AsyncAnthropic:
        if self._client is None:
            try:
                from anthropic import AsyncAnthropic
            except ImportError as exc:
                raise ModelNotConfigured(
                    self.name, "the anthropic package is not installed", hint=INSTALL_HINT
                ) from exc
            if self._key is None:
                raise ModelNotConfigured(self.name, "no API key", hint=NO_KEY_HINT)
            self._client = AsyncAnthropic(
                api_key=self._key, base_url=self._config.base_url, timeout=REQUEST_TIMEOUT_S, max_retries=1
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
        import anthropic

        client = self._ensure_client()
        system, converted = to_anthropic_messages(messages)
        request: JSONObject = {"model": self.model, "messages": converted}
        request["max_tokens"] = max_tokens or self._config.max_tokens or DEFAULT_MAX_TOKENS
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [_tool(entry) for entry in tools]
        if self._config.temperature is not None:
            request["temperature"] = min(self._config.temperature, 1.0)
        try:
            stream: Any = client.messages.stream(**request)
            async with stream as events:
                async for text in events.text_stream:
                    if on_text is not None:
                        await on_text(text)
                final = await events.get_final_message()
        except anthropic.APIConnectionError as exc:
            raise unreachable(self.name, str(client.base_url), exc) from exc
        except anthropic.APIError as exc:
            raise ProviderError(self.name, f"{type(exc).__name__}: {exc}") from exc
        return _completion(final)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.close()
            self._client = None


def _tool(entry: JSONObject) -> JSONObject:
    function = entry["function"]
    return {"name": function["name"], "description": function.get("description", ""),
            "input_schema": function["parameters"]}  # fmt: skip


def _completion(final: Any) -> Completion:
    text = "".join(block.text for block in final.content if block.type == "text")
    calls = tuple(
        ToolCall(block.id, block.name, json.dumps(block.input)) for block in final.content if block.type == "tool_use"
    )
    usage = Usage(final.usage.input_tokens or 0, final.usage.output_tokens or 0)
    finish = "length" if final.stop_reason == "max_tokens" else final.stop_reason
    return Completion(text, calls, usage, finish)


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[JSONObject]]:
    """The system text and the Messages API messages of a Chat Completions conversation."""
    system = [m["content"] for m in messages if m["role"] == "system" and m.get("content")]
    converted: list[JSONObject] = []
    for message in messages:
        if message["role"] == "system":
            continue
        role, blocks = _blocks(message)
        if converted and converted[-1]["role"] == role:
            # The API wants user and assistant turns to alternate: merge neighbours of one role.
            converted[-1]["content"] += blocks
        else:
            converted.append({"role": role, "content": blocks})
    return "\n\n".join(system), converted


def _blocks(message: Message) -> tuple[str, list[JSONObject]]:
    if message["role"] == "tool":
        text = str(message.get("content") or "")
        result = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": text}
        if text.startswith("[tool error]"):
            result["is_error"] = True
        return "user", [result]
    blocks: list[JSONObject] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": str(message["content"])})
    for call in message.get("tool_calls") or ():
        arguments = _object(call["function"]["arguments"])
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": arguments})
    return message["role"], blocks


def _object(text: str) -> Any:
    # A model may write invalid JSON (the loop told it so in the tool result); tool_use needs an object.
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"invalid_json": text}
    return value if isinstance(value, dict) else {"value": value}
