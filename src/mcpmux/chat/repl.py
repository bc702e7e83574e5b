"""The chat loop: read a line, run a slash command or a model turn, and let Ctrl-C stop either."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from rich.markup import escape

from mcpmux.chat import slash_handlers
from mcpmux.chat.completion import ChatCompleter
from mcpmux.chat.slash import ChatState, find
from mcpmux.errors import MCPMuxError

__all__ = ["ChatRepl"]

PROMPT = "you> "
NO_MODEL = "no model configured: slash commands only (/help). Set llm.model, --model, --base-url or OPENAI_API_KEY."


class ChatRepl:
    """Reads lines until ``/exit`` or Ctrl-D.

    Args:
        state: the session and how to show things.
        history: the file that keeps entered lines across chats.
    """

    def __init__(self, state: ChatState, history: Path) -> None:
        self.state = state
        state.converse = self.converse
        history.parent.mkdir(parents=True, exist_ok=True)
        self._prompt: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)), completer=ChatCompleter(state.session.guard)
        )

    async def run(self) -> None:
        """Chat until the user leaves."""
        console = self.state.console
        servers = ", ".join(f"{s.name} ({s.state.value})" for s in self.state.session.guard.status())
        console.print(f"[bold]mcpmux chat[/] — servers: {escape(servers or 'none')}. /help lists the commands.")
        if self.state.session.provider is None:
            console.print(f"[yellow]{escape(NO_MODEL)}[/]")
        while not self.state.done:
            try:
                line = (await self._prompt.prompt_async(PROMPT, handle_sigint=False)).strip()
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if line:
                await self.handle(line)

    async def handle(self, line: str) -> None:
        """Run one line: a slash command, or a message to the model."""
        if line.startswith("/"):
            await self._interruptible(self._slash, line)
        else:
            await self._interruptible(self.converse, line)

    async def converse(self, text: str | None) -> None:
        """Send ``text`` (or the conversation as it is) to the model and show the answer."""
        session, renderer = self.state.session, self.state.renderer
        if session.provider is None:
            self.state.console.print(f"[yellow]{escape(NO_MODEL)}[/]")
            return
        if text is not None:
            self.state.transcript.add("user", text)
        try:
            result = await session.loop().send(text)
        finally:
            renderer.end_text()
        if result.stopped == "max_turns":
            self.state.console.print(f"[yellow]stopped after {result.turns} model turns (max_turns)[/]")
        renderer.print_usage()

    async def _slash(self, line: str) -> None:
        found = find(line)
        if found is None:
            self.state.console.print(f"unknown command {escape(line.split()[0])}: /help lists them")
            return
        command, rest = found
        self.state.transcript.add("command", line)
        await command.handler(self.state, rest)

    async def _interruptible(self, func: Callable[[str], Awaitable[None]], line: str) -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(_cancel_on_sigint, scope)
                try:
                    await func(line)
                except (MCPMuxError, slash_handlers.UsageError) as exc:
                    self.state.console.print(f"[red]Error:[/] {escape(str(exc))}")
                    if isinstance(exc, MCPMuxError) and exc.hint:
                        self.state.console.print(f"[dim]hint: {escape(exc.hint)}[/]")
                finally:
                    group.cancel_scope.cancel()
        if scope.cancelled_caught:
            self.state.console.print("[yellow]interrupted[/]")


async def _cancel_on_sigint(scope: anyio.CancelScope) -> None:
    # The terminal is in cooked mode while a turn runs, so Ctrl-C arrives as SIGINT.
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return
