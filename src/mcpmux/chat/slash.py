"""The one table of slash commands: each is an async function whose docstring is its help.

Handlers register with :func:`slash` (see :mod:`mcpmux.chat.slash_handlers`); ``/help`` and completion
read this table, so they cannot drift from the code.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.console import Console

from mcpmux.agents.agent import AgentSession
from mcpmux.chat.render import Renderer
from mcpmux.chat.transcript import Transcript
from mcpmux.config.models import LLMConfig

__all__ = ["TABLE", "ChatState", "Slash", "find", "slash"]


@dataclass
class ChatState:
    """What a slash command works on.

    Attributes:
        session: the guard, the model and the conversation.
        console: where output goes.
        renderer: draws answers and tool calls.
        transcript: what was said, for ``/save``.
        llm: the model settings in use (``/model`` changes them).
        converse: sends text (or, with ``None``, the conversation as it is) to the model; the
            REPL sets it.
        done: set by ``/exit``.
        browser: shows an OAuth authorization URL to the person (``/login``); ``None``: the
            desktop's browser.
    """

    session: AgentSession
    console: Console
    renderer: Renderer
    transcript: Transcript
    llm: LLMConfig
    converse: Callable[[str | None], Awaitable[None]] | None = None
    done: bool = False
    browser: Callable[[str], Awaitable[None]] | None = None


Handler = Callable[[ChatState, str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Slash:
    """One command: ``name`` (one or two words), its argument syntax, and the handler."""

    name: str
    arguments: str
    handler: Handler

    @property
    def usage(self) -> str:
        """``/name arguments``."""
        return f"/{self.name} {self.arguments}".rstrip()

    @property
    def summary(self) -> str:
        """The first line of the handler's docstring."""
        return (inspect.getdoc(self.handler) or "").splitlines()[0]


TABLE: dict[str, Slash] = {}


def slash(name: str, arguments: str = "") -> Callable[[Handler], Handler]:
    """Register the decorated handler as ``/name``."""

    def register(handler: Handler) -> Handler:
        TABLE[name] = Slash(name, arguments, handler)
        return handler

    return register


def find(line: str) -> tuple[Slash, str] | None:
    """The command a ``/...`` line names (two-word names first) and the rest of the line."""
    words = line.lstrip("/").split(maxsplit=2)
    if len(words) >= 2 and f"{words[0]} {words[1]}" in TABLE:
        return TABLE[f"{words[0]} {words[1]}"], words[2] if len(words) > 2 else ""
    if words and words[0] in TABLE:
        return TABLE[words[0]], line.lstrip("/")[len(words[0]) :].strip()
    return None
