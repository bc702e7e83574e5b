"""Questions the chat asks inline: approve a call, let a server sample the model, fill in a form."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from mcpmux.bridge.providers.client_requests import describe_sampling
from mcpmux.policy import Answer, ApprovalRequest
from mcpmux.types.json_shapes import JSONObject

__all__ = ["Asker", "ChatQuestions", "prompt_asker"]

Asker = Callable[[str], Awaitable[str]]
"""Shows a question and returns the line typed (``""`` on Ctrl-C or end of input)."""

_ANSWERS = {"y": Answer.YES, "yes": Answer.YES, "t": Answer.ALWAYS_TOOL, "s": Answer.ALWAYS_SERVER}
ARGUMENT_PREVIEW_CHARS = 600


def prompt_asker() -> Asker:
    """An asker on prompt_toolkit (one line, no history)."""
    from prompt_toolkit import PromptSession

    session: PromptSession[str] = PromptSession()

    async def ask(question: str) -> str:
        try:
            return await session.prompt_async(question, handle_sigint=False)
        except (KeyboardInterrupt, EOFError):
            return ""

    return ask


class ChatQuestions:
    """Approval, sampling and elicitation answered by the person at the chat, one question at a time.

    Args:
        console: where the question is shown.
        ask: reads the answer.
        before: called before asking (ends a streaming answer so the prompt is not drawn over).
    """

    def __init__(self, console: Console, ask: Asker, before: Callable[[], None] = lambda: None) -> None:
        self.console, self._ask, self._before = console, ask, before
        self._lock = anyio.Lock()

    async def approve(self, request: ApprovalRequest) -> Answer:
        """The guard's approver: show the call, ask yes / no / always."""
        arguments = json.dumps(dict(request.arguments), ensure_ascii=False)[:ARGUMENT_PREVIEW_CHARS]
        async with self._lock:
            self._before()
            self.console.print(
                f"[yellow]approval needed[/] for [bold]{escape(request.name)}[/] ({escape(request.reason)})"
            )
            self.console.print(f"  arguments: {escape(arguments)}")
            line = await self._ask("Allow? [y]es, [N]o, always for this [t]ool, always for this [s]erver: ")
        return _ANSWERS.get(line.strip().lower(), Answer.NO)

    async def sample(self, server: str, params: types.CreateMessageRequestParams) -> bool:
        """Show a server's sampling request and ask whether the model may answer it."""
        async with self._lock:
            self._before()
            self.console.print(Panel(escape(describe_sampling(server, params)), title="sampling request"))
            return (await self._ask("Let the model answer? [y/N]: ")).strip().lower() in ("y", "yes")

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Show a server's question as a form, one prompt per field; empty optional fields are left out."""
        async with self._lock:
            self._before()
            self.console.print(Panel(escape(params.message), title=f"{server} asks"))
            if isinstance(params, types.ElicitRequestURLParams):
                self.console.print(f"open: {escape(params.url)}")
                line = await self._ask("Done? [y]es, [n]o (decline), [c]ancel: ")
                return types.ElicitResult(action=_action(line))
            line = await self._ask("Answer? [y]es, [n]o (decline), [c]ancel: ")
            if _action(line) != "accept":
                return types.ElicitResult(action=_action(line))
            return types.ElicitResult(action="accept", content=await self._form(params.requested_schema))

    async def _form(self, schema: JSONObject) -> JSONObject:
        required = set(schema.get("required", []))
        content: JSONObject = {}
        for name, field in (schema.get("properties") or {}).items():
            while True:
                label = field.get("title") or name
                hint = _hint(field)
                line = await self._ask(f"{label}{'*' if name in required else ''}{hint}: ")
                if not line.strip() and name not in required:
                    break
                try:
                    content[name] = _convert(line.strip(), field)
                    break
                except ValueError as exc:
                    self.console.print(f"[red]{escape(str(exc))}[/]")
        return content


def _action(line: str) -> Any:
    answer = line.strip().lower()
    return "accept" if answer in ("y", "yes") else "cancel" if answer in ("c", "cancel") else "decline"


def _hint(field: JSONObject) -> str:
    options = field.get("enum") or [o.get("const") for o in field.get("oneOf", []) if "const" in o]
    if options:
        return f" ({'/'.join(map(str, options))})"
    kind = field.get("type", "string")
    description = field.get("description")
    return f" [{kind}]" + (f" {description}" if description else "")


def _convert(text: str, field: JSONObject) -> Any:
    """``text`` as the field's type (raises ValueError with a reason)."""
    kind = field.get("type", "string")
    if kind == "boolean":
        if text.lower() in ("y", "yes", "true", "1"):
            return True
        if text.lower() in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    if kind in ("number", "integer"):
        value = float(text) if kind == "number" else int(text)
        return value
    options = field.get("enum") or [o.get("const") for o in field.get("oneOf", []) if "const" in o]
    if options and text not in options:
        raise ValueError(f"choose one of: {', '.join(map(str, options))}")
    return text
