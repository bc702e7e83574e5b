"""The CLI's one output module: tables or JSON on stdout, errors and progress on stderr.

Colour follows rich's rules: none when stdout is not a terminal or ``NO_COLOR`` is set.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mcpmux.errors import ConfigError, MCPMuxError, ServerError, exit_code_for

if TYPE_CHECKING:
    from rich.console import Console

    from mcpmux.config import Config
    from mcpmux.policy import StateStore

__all__ = [
    "clip",
    "command_config",
    "command_state_store",
    "emit",
    "err_console",
    "json_option",
    "out_console",
    "print_error",
    "print_error_json",
    "redact_logs",
    "state",
    "table",
    "to_terminal",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """Options every subcommand sees (``ctx.obj``)."""

    config_path: str | None = None
    json: bool = False
    verbosity: int = 0
    secrets: frozenset[str] = frozenset()
    daemon: str | None = None  # ``--daemon`` (on) / ``--no-daemon`` (off); else settings.daemon


def state() -> CliState:
    """The options of the running command (a fresh :class:`CliState` when a command runs on its own)."""
    root = click.get_current_context().find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def json_option(func: F) -> F:
    """``--json`` on a subcommand, equivalent to the global ``mcpmux --json``."""

    def set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            state().json = True

    return click.option(
        "--json", "as_json", is_flag=True, expose_value=False, callback=set_json, help="Output JSON on stdout."
    )(func)


# Piped to a file or another program, a table is as wide as its longest cells: never squeezed, wrapped
# or cut (rich would otherwise assume 80 columns).
PIPE_WIDTH = 1_000_000


def to_terminal() -> bool:
    """Whether stdout is a terminal (text may be shortened to fit) rather than a pipe or file (never)."""
    return sys.stdout.isatty()


def clip(text: str | None, width: int) -> str:
    """For a table cell: on a terminal the first line, shortened to ``width`` with an ellipsis;
    piped, the whole text on one line."""
    text = (text or "").strip()
    if not to_terminal():
        return " ".join(text.split())
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


@cache
def out_console() -> Console:
    from rich.console import Console

    return Console(soft_wrap=True, width=None if to_terminal() else PIPE_WIDTH)


@cache
def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def emit(data: Any, render: Callable[[], None] | None = None) -> None:
    """Print ``data`` as JSON when ``--json`` is on, else call ``render`` (or print it plainly)."""
    if state().json or render is None:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        render()


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None) -> None:
    """Print a table for people."""
    from rich.table import Table

    grid = Table(title=title, show_edge=False, header_style="bold", pad_edge=False)
    for column in columns:
        grid.add_column(column)
    for row in rows:
        grid.add_row(*("" if v is None else str(v) for v in row))
    out_console().print(grid)


CONFIG_META_KEY = "mcpmux.config"


def command_config() -> Config:
    """The configuration of the running command, loaded once (so its warnings are logged once)."""
    meta = click.get_current_context().find_root().meta
    if CONFIG_META_KEY not in meta:
        from mcpmux.config import load_config
        from mcpmux.sources.merge import with_registered

        meta[CONFIG_META_KEY] = with_registered(load_config(state().config_path))
    config: Config = meta[CONFIG_META_KEY]
    return config


def command_state_store() -> StateStore:
    """The state database of the running command: ``MCPMUX_DB``, else ``storage.url`` of its
    configuration (read only when needed), else the data dir's ``state.db``."""
    from mcpmux.config.paths import configured_url
    from mcpmux.policy import StateStore

    if configured_url() is not None:
        return StateStore()
    from mcpmux.config import load_config

    return StateStore.configured(load_config(state().config_path))


class _RedactingFilter(logging.Filter):
    """Masks known secret values in every log record that reaches a handler."""

    def __init__(self, secrets: frozenset[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        from mcpmux.config.display import redact

        message = record.getMessage()
        masked = redact(message, self.secrets)
        if masked != message:
            record.msg, record.args = masked, None
        return True


class _Masking:
    """A text stream that writes through to ``stream`` with every secret of :data:`_shown` as ``****``.

    Only text is masked: ``buffer`` (bytes) is the stream's own, so a protocol that a command speaks
    on its stdout (``serve --stdio``, the daemon's relay) goes out byte for byte.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        written, secrets = len(text), _shown.secrets
        if secrets and text:
            from mcpmux.config.display import mask_values  # not redact: a printed mcpmux_ token stays

            text = mask_values(text, secrets)
        self._stream.write(text)
        return written  # what the caller gave, as a stream's write says

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@dataclass
class _Shown:
    secrets: frozenset[str] = frozenset()


_shown = _Shown()
"""The secrets masked in what the running command prints (set by :func:`redact_logs`)."""


@contextmanager
def masked_output() -> Iterator[None]:
    """Mask, in everything a command prints on stdout and stderr, the values that came from
    ``${VAR}`` (its configuration's ``secret_values``, made known by :func:`redact_logs`): urls,
    args, headers, env, and what a server echoes of them. (``config show --show-secrets`` prints
    them: it makes none known.)"""
    saved = sys.stdout, sys.stderr, _shown.secrets
    sys.stdout, sys.stderr = _Masking(sys.stdout), _Masking(sys.stderr)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr, _shown.secrets = saved


def redact_logs(secrets: frozenset[str]) -> None:
    """Mask ``secrets`` in everything logged, and everything printed, from now on."""
    _shown.secrets |= secrets
    if not secrets:
        return
    for handler in logging.getLogger().handlers:
        for old in [f for f in handler.filters if isinstance(f, _RedactingFilter)]:
            handler.removeFilter(old)
        handler.addFilter(_RedactingFilter(secrets))


def print_error(exc: MCPMuxError, secrets: Iterable[str] = (), *, as_json: bool = False) -> None:
    """One ``Error: ...`` line (plus a problem list for config errors) and a hint, on stderr.

    With ``as_json`` the error is also printed on stdout as ``{"error": {...}}`` (see :func:`error_json`).
    """
    from mcpmux.config.display import redact

    secrets = tuple(secrets)
    text = redact(str(exc), secrets)
    hint = redact(exc.hint, secrets) if exc.hint else None
    if isinstance(exc, ConfigError) and len(exc.problems) > 1:
        head, _, rest = text.partition("\n")
        sys.stderr.write(f"Error: {head}\n{rest}\n")
    else:
        sys.stderr.write(f"Error: {text}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    if as_json:
        extra: dict[str, Any] = {}
        if isinstance(exc, ConfigError):
            extra["problems"] = [str(p) for p in exc.problems]
        if isinstance(exc, ServerError):  # the server's JSON-RPC error as it came, as the library's envelope has it
            extra |= {"server": exc.server, "method": exc.method, "code": exc.code, "data": exc.data}
        print_error_json(type(exc).__name__, text, hint, exit_code_for(exc), **extra)


def print_error_json(kind: str, message: str, hint: str | None, exit_code: int, **extra: Any) -> None:
    """The error of a ``--json`` command on stdout: ``{"error": {"type", "message", "hint", "exit_code", ...}}``
    (a server's JSON-RPC error adds ``server``, ``method``, ``code`` and ``data``)."""
    error = {"type": kind, "message": message, "hint": hint, "exit_code": exit_code, **extra}
    sys.stdout.write(json.dumps({"error": error}, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
