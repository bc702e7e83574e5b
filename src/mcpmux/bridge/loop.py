"""The tool-calling loop: ask the model, run the tools it asks for, feed results back, repeat.

::

    loop = AgentLoop(guard, provider, system_prompt=describe_servers(guard), on_event=show)
    result = await loop.send("What changed in the repository today?")

Every call goes through the tool source (the :class:`~mcpmux.policy.Guard`), so policy, approval
and audit apply. Several calls in one answer run concurrently. A failing call (``isError``, denied,
declined, timed out, unknown, bad JSON) becomes the tool's result for the model, never an
exception of the loop. Cancelling ``send`` cancels the calls in flight (the SDK then sends
``notifications/cancelled`` to their servers) and leaves the conversation valid.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio

from mcpmux.bridge.providers import Completion, Message, Provider, ToolCall, Usage
from mcpmux.bridge.results import ModelResult
from mcpmux.bridge.tool_search import SEARCH_TOOL_NAME, ToolSelection
from mcpmux.bridge.tools import BridgeTool, ToolBridge, ToolSource
from mcpmux.errors import MCPMuxError
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "DEFAULT_MAX_TURNS",
    "AgentLoop",
    "EventSink",
    "LoopEvent",
    "LoopResult",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "TurnUsage",
]

DEFAULT_MAX_TURNS = 20
CANCELLED_RESULT = "[cancelled by the user before the tool answered]"


class BadToolCall(Exception):
    """The model named no known tool, or wrote arguments that are not a JSON object."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's answer."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """The model asked for a call; it is about to run."""

    call_id: str
    name: str
    canonical: str
    arguments: JSONObject


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A call ended; ``result.is_error`` says whether it failed."""

    call_id: str
    name: str
    canonical: str
    result: ModelResult
    duration_s: float


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """Tokens of one model turn, and of the whole conversation so far."""

    turn: Usage
    total: Usage


LoopEvent = TextDelta | ToolStarted | ToolFinished | TurnUsage
EventSink = Callable[[LoopEvent], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How one ``send`` ended: the final text, model turns used, tokens, and why it stopped."""

    text: str
    turns: int
    usage: Usage
    stopped: Literal["answered", "max_turns"]
    tool_calls: int = 0
    errors: tuple[str, ...] = ()


class AgentLoop:
    """A conversation with a model that can call the tools of a :class:`ToolSource`.

    Args:
        source: where tools come from and calls go (the Guard).
        provider: the model.
        system_prompt: the first message (see :func:`mcpmux.agents.agent.describe_servers`).
        max_turns: most model turns per ``send``.
        selection: which tools each request carries (search past a threshold).
        on_event: receives text deltas, call starts and ends, usage.
    """

    def __init__(
        self,
        source: ToolSource,
        provider: Provider,
        *,
        system_prompt: str = "",
        max_turns: int = DEFAULT_MAX_TURNS,
        selection: ToolSelection | None = None,
        on_event: EventSink | None = None,
    ) -> None:
        self.provider, self.max_turns = provider, max_turns
        self.bridge = ToolBridge(source)
        self.selection = selection or ToolSelection()
        self.system_prompt = system_prompt
        self.messages: list[Message] = []
        self.usage = Usage()
        self._on_event = on_event

    def clear(self) -> None:
        """Forget the conversation (the system prompt stays)."""
        self.messages.clear()
        self.selection.selected.clear()

    def add_user_message(self, content: str) -> None:
        """Put text into the conversation without asking the model (an MCP prompt, say)."""
        self.messages.append({"role": "user", "content": content})

    async def send(self, prompt: str | None) -> LoopResult:
        """Add ``prompt`` (if any) as the user's message and run turns until the model answers.

        Raises:
            ProviderError: the model endpoint failed.
        """
        if prompt is not None:
            self.add_user_message(prompt)
        calls, errors, spent = 0, list[str](), Usage()
        for turn in range(1, self.max_turns + 1):
            completion = await self._ask()
            spent = spent + completion.usage
            self.messages.append(completion.as_message())
            if not completion.tool_calls:
                return LoopResult(completion.text, turn, spent, "answered", calls, tuple(errors))
            calls += len(completion.tool_calls)
            errors += await self._run_calls(completion.tool_calls)
        return LoopResult("", self.max_turns, spent, "max_turns", calls, tuple(errors))

    async def _ask(self) -> Completion:
        tools = self.bridge.tools(self.provider.profile)
        self.selection.update(tools)
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        completion = await self.provider.complete(
            [*system, *self.messages], self.selection.definitions(), on_text=self._text
        )
        self.usage = self.usage + completion.usage
        await self._emit(TurnUsage(completion.usage, self.usage))
        return completion

    async def _text(self, text: str) -> None:
        await self._emit(TextDelta(text))

    async def _run_calls(self, calls: Sequence[ToolCall]) -> list[str]:
        tools = {t.name: t for t in self.bridge.tools(self.provider.profile)}
        results: list[ModelResult | None] = [None] * len(calls)

        async def run(index: int, call: ToolCall) -> None:
            results[index] = await self._run_call(call, tools.get(call.name))

        try:
            async with anyio.create_task_group() as group:
                for index, call in enumerate(calls):
                    group.start_soon(run, index, call)
        finally:
            # Every tool call needs an answer, or the next request is rejected; cancelled ones say so.
            for call, result in zip(calls, results, strict=True):
                text = CANCELLED_RESULT if result is None else _tool_text(result)
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return [f"{c.name}: {r.as_text()[:200]}" for c, r in zip(calls, results, strict=True) if r and r.is_error]

    async def _run_call(self, call: ToolCall, tool: BridgeTool | None) -> ModelResult:
        canonical = tool.canonical if tool is not None else call.name
        started = time.monotonic()
        arguments: JSONObject = {}
        try:
            arguments = _arguments(call)
            await self._emit(ToolStarted(call.id, call.name, canonical, arguments))
            result = await self._dispatch(call, tool, arguments)
        except (MCPMuxError, BadToolCall) as exc:
            result = ModelResult.error(f"{type(exc).__name__}: {exc}")
        await self._emit(ToolFinished(call.id, call.name, canonical, result, time.monotonic() - started))
        return result

    async def _dispatch(self, call: ToolCall, tool: BridgeTool | None, arguments: JSONObject) -> ModelResult:
        if call.name == SEARCH_TOOL_NAME and self.selection.searching:
            return self.selection.search(arguments)
        if tool is None:
            known = ", ".join(sorted(t.name for t in self.selection.visible())[:20])
            raise BadToolCall(f"no tool is called {call.name!r}; available: {known or 'none'}")
        return await tool.handler(arguments)

    async def _emit(self, event: LoopEvent) -> None:
        if self._on_event is not None:
            await self._on_event(event)


def _arguments(call: ToolCall) -> JSONObject:
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        raise BadToolCall(f"the arguments are not valid JSON ({exc.msg}); send a JSON object") from exc
    if not isinstance(value, dict):
        raise BadToolCall("the arguments must be a JSON object")
    return value


def _tool_text(result: ModelResult) -> str:
    text = result.as_text()
    return f"[tool error] {text}" if result.is_error else text
