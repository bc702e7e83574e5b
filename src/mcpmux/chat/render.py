"""How the chat looks: answers as markdown while they stream, tool calls as one line each."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from mcpmux.bridge.loop import LoopEvent, TextDelta, ToolFinished, ToolStarted, TurnUsage
from mcpmux.bridge.providers import Usage
from mcpmux.bridge.results import ModelResult
from mcpmux.chat.transcript import Transcript

__all__ = ["Renderer", "preview", "print_table"]

PREVIEW_CHARS = 200
ARGUMENT_CHARS = 300


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def print_table(console: Console, columns: list[str], rows: list[list[Any]], title: str | None = None) -> None:
    """A plain table of strings."""
    table = Table(title=title, show_edge=False, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if v is None else escape(str(v)) for v in row))
    console.print(table)


class Renderer:
    """Receives loop events and draws them; records them in the transcript."""

    def __init__(self, console: Console, transcript: Transcript) -> None:
        self.console, self.transcript = console, transcript
        self.usage = Usage()
        self._text: list[str] = []
        self._live: Live | None = None

    async def __call__(self, event: LoopEvent) -> None:
        """Draw one event."""
        if isinstance(event, TextDelta):
            self._stream(event.text)
        elif isinstance(event, ToolStarted):
            self.end_text()
            arguments = preview(json.dumps(event.arguments, ensure_ascii=False), ARGUMENT_CHARS)
            self.console.print(f"[cyan]⏵ {escape(event.canonical)}[/] [dim]{escape(arguments)}[/]")
            self.transcript.add("tool", arguments, f"{event.canonical} call")
        elif isinstance(event, ToolFinished):
            self.tool_result(event.canonical, event.result, event.duration_s)
        elif isinstance(event, TurnUsage):
            self.end_text()
            self.usage = event.total

    def tool_result(self, name: str, result: ModelResult, duration_s: float) -> None:
        """One line for a finished call: name, status, duration, result preview."""
        mark, style = ("✗", "red") if result.is_error else ("✓", "green")
        text = result.as_text()
        self.console.print(f"[{style}]{mark} {escape(name)}[/] [dim]{duration_s:.2f}s[/] {escape(preview(text))}")
        self.transcript.add("tool", text, f"{name} result")

    def _stream(self, text: str) -> None:
        self._text.append(text)
        if self._live is None:
            self._live = Live(console=self.console, auto_refresh=False, vertical_overflow="visible")
            self._live.start()
        self._live.update(Markdown("".join(self._text)), refresh=True)

    def end_text(self) -> None:
        """Close the answer being streamed (before a tool line, a prompt, or the next turn)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._text:
            self.transcript.add("assistant", "".join(self._text))
            self._text.clear()

    def print_usage(self) -> None:
        """The conversation's tokens so far."""
        u = self.usage
        self.console.print(f"[dim]tokens: {u.prompt_tokens} in, {u.completion_tokens} out[/]")
