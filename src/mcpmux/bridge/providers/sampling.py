"""The calling client's own model as a :class:`Provider`: MCP ``sampling/createMessage`` back to it.

An agent served as an MCP tool (``ask_NAME``, see :mod:`mcpmux.agents.ask`) with no model of its
own asks the client that called it. Two ways, chosen from the client's declared capabilities:

- **native**: a client declaring ``sampling.tools`` gets the agent's tools in the request
  (``tools``, ``toolChoice: auto``); its answer's ``tool_use`` blocks are the calls, and their
  results go back as ``tool_result`` blocks of the next user message (2025-11-25 sampling with tools).
- **text protocol**, for every other client (and for a call relayed by the gateway, whose
  upstream link declares plain sampling): the system prompt lists the tools and asks for a call
  as one JSON object and nothing else::

      {"tool": "fs__read_file", "arguments": {"path": "README.md"}}

  Any other answer is the final one. Each result comes back as a user message
  ``Result of fs__read_file (call_1):`` followed by the result text (``[tool error] ...`` when the
  call failed or was refused).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import mcp_types as types
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from mcpmux.bridge.providers.base import Completion, Message, ProviderError, TextSink, ToolCall
from mcpmux.types.json_shapes import JSONObject

__all__ = ["DEFAULT_SAMPLING_MAX_TOKENS", "TEXT_PROTOCOL", "SamplingProvider", "SamplingSession"]

DEFAULT_SAMPLING_MAX_TOKENS = 4096
TEXT_PROTOCOL = (
    "You can call tools. To call one, answer with only this JSON object and nothing else:\n"
    '{"tool": "TOOL_NAME", "arguments": {...}}\n'
    "One call per answer; its result comes back in the next message. When you have the final answer, "
    "write it as plain text (no JSON object).\nTools:"
)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class SamplingSession(Protocol):
    """What the provider needs of a server session (the SDK's ``ServerSession`` is one)."""

    @property
    def client_capabilities(self) -> types.ClientCapabilities | None:
        """The capabilities the client declared."""
        ...

    async def create_message(self, messages: list[types.SamplingMessage], **options: Any) -> Any:
        """Send ``sampling/createMessage`` and return the client's result."""
        ...


class SamplingProvider:
    """A :class:`~mcpmux.bridge.providers.Provider` that samples the client of ``session``.

    Args:
        session: the server session of the request being served (``ctx.session`` in a tool).
        max_tokens: the cap of each request unless a turn asks for another.
    """

    name = "sampling"
    profile = "openai"

    def __init__(self, session: SamplingSession, *, max_tokens: int = DEFAULT_SAMPLING_MAX_TOKENS) -> None:
        self._session, self._max_tokens = session, max_tokens
        capabilities = session.client_capabilities
        sampling = capabilities.sampling if capabilities is not None else None
        if sampling is None:
            raise ProviderError(
                "sampling",
                "no model is configured for this agent and the calling client cannot answer sampling requests",
                hint="set the agent's model (agents.NAME.model) or llm.model, or call from a client with sampling",
            )
        self.native = sampling.tools is not None
        self.model = "the calling client's model"
        self._calls = 0

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[JSONObject],
        *,
        on_text: TextSink | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One turn: ask the client's model, return its text or the tool calls it asked for."""
        system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        rest = [m for m in messages if m.get("role") != "system"]
        cap = max_tokens or self._max_tokens
        if self.native:
            completion = await self._native(system, rest, tools, cap)
        else:
            completion = await self._text(system, rest, tools, cap)
        if on_text is not None and completion.text:
            await on_text(completion.text)
        return completion

    async def aclose(self) -> None:
        """Nothing to release: the session belongs to the server."""

    async def _sample(self, messages: list[types.SamplingMessage], **options: Any) -> Any:
        # Sampling is deprecated by the 2026-07-28 spec (SEP-2577) but it is how a 2025-11-25 client
        # lends its model; the SDK warns on every use.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            try:
                return await self._session.create_message(messages, **options)
            except MCPError as exc:
                raise ProviderError(
                    "sampling",
                    f"the calling client's model did not answer: {exc.error.message}",
                    hint="call from a client that answers sampling/createMessage, or configure a model for the agent",
                ) from exc

    # -- native: tools in the request --------------------------------------------------------------

    async def _native(
        self, system: str, messages: Sequence[Message], tools: Sequence[JSONObject], cap: int
    ) -> Completion:
        sampling_tools = [
            types.Tool(
                name=t["function"]["name"], description=t["function"].get("description"),
                input_schema=t["function"].get("parameters") or {"type": "object"},
            )
            for t in tools
        ]  # fmt: skip
        result = await self._sample(
            _native_messages(messages), max_tokens=cap, system_prompt=system or None,
            tools=sampling_tools or None, tool_choice=types.ToolChoice(mode="auto") if sampling_tools else None,
        )  # fmt: skip
        blocks = result.content if isinstance(result.content, list) else [result.content]
        text = "".join(b.text for b in blocks if isinstance(b, types.TextContent))
        calls = tuple(
            ToolCall(b.id, b.name, json.dumps(b.input)) for b in blocks if isinstance(b, types.ToolUseContent)
        )
        return Completion(text, calls, finish_reason=getattr(result, "stop_reason", None))

    # -- text protocol --------------------------------------------------------------------------

    async def _text(
        self, system: str, messages: Sequence[Message], tools: Sequence[JSONObject], cap: int
    ) -> Completion:
        listed = "\n".join(_describe_tool(t) for t in tools)
        prompt = f"{system}\n\n{TEXT_PROTOCOL}\n{listed}" if tools else system
        result = await self._sample(_text_messages(messages), max_tokens=cap, system_prompt=prompt)
        content = result.content if not isinstance(result.content, list) else result.content[0]
        text = content.text if isinstance(content, types.TextContent) else ""
        call = _parse_call(text, {t["function"]["name"] for t in tools})
        if call is None:
            return Completion(text, finish_reason=getattr(result, "stop_reason", None))
        self._calls += 1
        name, arguments = call
        return Completion(
            "", (ToolCall(f"call_{self._calls}", name, json.dumps(arguments)),), finish_reason="tool_calls"
        )


def _describe_tool(tool: JSONObject) -> str:
    function = tool["function"]
    schema = json.dumps(function.get("parameters") or {}, separators=(",", ":"))
    return f"- {function['name']}: {function.get('description') or ''} Parameters (JSON Schema): {schema}"


def _parse_call(text: str, names: set[str]) -> tuple[str, JSONObject] | None:
    """The call in a text-protocol answer: a lone JSON object with ``tool`` and ``arguments``."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    candidate = fenced.group(1) if fenced else stripped
    if not (candidate.startswith("{") and candidate.endswith("}")):
        return None
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("tool"), str):
        return None
    arguments = value.get("arguments") or {}
    # An unknown name is still a call: the loop answers it with the list of tools it may use.
    return (value["tool"], arguments) if isinstance(arguments, dict) else None


def _text_messages(messages: Sequence[Message]) -> list[types.SamplingMessage]:
    names = {}
    out: list[types.SamplingMessage] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls") or []
            for call in calls:
                names[call["id"]] = call["function"]["name"]
            text = message.get("content") or "\n".join(
                json.dumps({"tool": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"] or "{}")})
                for c in calls
            )
            out.append(types.SamplingMessage(role="assistant", content=types.TextContent(text=text)))
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            header = f"Result of {names.get(call_id, 'the tool')} ({call_id}):"
            text = f"{header}\n{message.get('content') or ''}"
            out.append(types.SamplingMessage(role="user", content=types.TextContent(text=text)))
        else:
            out.append(types.SamplingMessage(role="user", content=types.TextContent(text=str(message.get("content")))))
    return out


def _native_messages(messages: Sequence[Message]) -> list[types.SamplingMessage]:
    out: list[types.SamplingMessage] = []
    results: list[types.SamplingMessageContentBlock] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            # Every result of one turn goes back in one user message, as the spec asks.
            text = types.TextContent(text=str(message.get("content") or ""))
            results.append(types.ToolResultContent(tool_use_id=str(message.get("tool_call_id")), content=[text]))
            continue
        if results:
            out.append(types.SamplingMessage(role="user", content=results))
            results = []
        if role == "assistant":
            blocks: list[types.SamplingMessageContentBlock] = []
            if message.get("content"):
                blocks.append(types.TextContent(text=str(message["content"])))
            for call in message.get("tool_calls") or []:
                arguments = json.loads(call["function"]["arguments"] or "{}")
                blocks.append(types.ToolUseContent(id=call["id"], name=call["function"]["name"], input=arguments))
            out.append(types.SamplingMessage(role="assistant", content=blocks))
        else:
            out.append(types.SamplingMessage(role="user", content=types.TextContent(text=str(message.get("content")))))
    if results:
        out.append(types.SamplingMessage(role="user", content=results))
    return out
