"""mcpmux's built-in MCP servers, ``workspace`` and ``content_store``, on the SDK's ``MCPServer``.

They import only the SDK and mcpmux's ground layer (config, errors, names), so any host can run
them: in-process over memory streams (:func:`mcpmux.transports.inprocess.open_builtin`) or on
stdio (:func:`run_stdio`, ``python -m mcpmux.servers KIND``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.processes.confinement import too_wide_root
from mcpmux.servers.content_server import build_content_server
from mcpmux.servers.content_store import ContentStore
from mcpmux.servers.workspace import build_workspace_server
from mcpmux.servers.workspace_context import SandboxHook

__all__ = [
    "BUILTIN_KINDS",
    "ContentStore",
    "SandboxHook",
    "build_server",
    "normalize_kind",
    "refuse_wide_root",
    "run_stdio",
]

BUILTIN_KINDS = ("workspace", "content_store")


def normalize_kind(kind: str) -> str:
    """``kind`` as a canonical built-in name (``content-store`` -> ``content_store``).

    Raises:
        ConfigError: no built-in server has that name.
    """
    canonical = kind.strip().replace("-", "_")
    if canonical not in BUILTIN_KINDS:
        raise ConfigError(
            ConfigProblem("<builtin>", "builtin", f"no built-in server {kind!r} (known: {', '.join(BUILTIN_KINDS)})")
        )
    return canonical


def build_server(
    kind: str,
    *,
    root: Path | None = None,
    database: Path | None = None,
    session_id: str | None = None,
    sandbox: SandboxHook | None = None,
    allow_wide_root: bool = False,
) -> MCPServer[Any]:
    """Build the built-in server ``kind`` (``workspace`` or ``content_store``/``content-store``).

    Args:
        kind: which server.
        root: the directory the server's file access is confined to (default: the current directory).
        database: the content store's SQLite file or ``":memory:"`` (default: ``data_dir()/content_store.db``).
        session_id: gives a workspace session its own scratch directory.
        sandbox: wraps the workspace's commands when the host's sandbox is on (no effect on content_store).
        allow_wide_root: serve a root that :func:`~mcpmux.processes.confinement.too_wide_root` refuses
            (``/``, the home directory itself, ...).

    Raises:
        ConfigError: unknown kind, a root that is not a directory or is too wide, or a malformed session id.
    """
    canonical = normalize_kind(kind)
    chosen = root if root is not None else Path.cwd()
    if not allow_wide_root:
        refuse_wide_root(canonical, chosen, given=root is not None)
    if canonical == "workspace":
        return build_workspace_server(chosen, session_id=session_id, sandbox=sandbox)
    return build_content_server(database, root=chosen)


def refuse_wide_root(kind: str, root: Path, *, given: bool) -> None:
    """Refuse to serve ``root`` when it is too wide (its real path is ``/``, the home directory, ...).

    Raises:
        ConfigError: it is too wide; the message says why and how to choose or opt in.
    """
    why = too_wide_root(Path(os.path.realpath(root.expanduser())))
    if why is None:
        return
    source = f"the configured root {str(root)!r}" if given else f"the current directory {str(root)!r} (no root set)"
    raise ConfigError(
        ConfigProblem(
            "<builtin>",
            "root",
            f"built-in {kind!r} refuses to serve {source}: {why}; its read tools need no approval. "
            "Run mcpmux from a project directory, set `root:` to one, or set `allow_wide_root: true` "
            "on the server to serve it anyway",
        )
    )


def run_stdio(
    kind: str,
    *,
    root: Path | None = None,
    database: Path | None = None,
    allow_wide_root: bool = False,
    inside_sandbox: bool = False,
) -> None:
    """Serve the built-in server ``kind`` on stdin/stdout until stdin closes.

    Stdout carries only MCP messages; logging goes wherever the caller configured it (never stdout).
    ``inside_sandbox``: the host runs this process in its sandbox (the status says so).

    Raises:
        ConfigError: as :func:`build_server`.
    """
    # Inside the host's sandbox, commands are already confined: they run as they are.
    sandbox: SandboxHook | None = (lambda argv, cwd: list(argv)) if inside_sandbox else None
    server = build_server(kind, root=root, database=database, allow_wide_root=allow_wide_root, sandbox=sandbox)
    anyio.run(server.run_stdio_async)
