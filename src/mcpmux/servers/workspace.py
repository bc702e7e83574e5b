"""The ``workspace`` built-in server: files, search and command execution confined to one root."""

from __future__ import annotations

from pathlib import Path

from mcp.server.mcpserver import MCPServer

from mcpmux.processes.confinement import Confinement, scratch_dir_name
from mcpmux.servers._sdk import new_server, tools_markdown
from mcpmux.servers.workspace_context import SandboxHook, WorkspaceContext, WorkspaceLimits
from mcpmux.servers.workspace_exec import register_exec_tools
from mcpmux.servers.workspace_files import register_file_tools
from mcpmux.servers.workspace_search import register_search_tools

__all__ = ["STATUS_URI", "build_workspace_server"]

STATUS_URI = "builtin://workspace/status"

INSTRUCTIONS = """\
Tools over one directory tree, the workspace root. Every path is relative to the root; paths that
leave it ('..', absolute paths elsewhere, symlinks pointing outside) are refused. Read before you
edit: `read_file`, then `edit_file` with an exact, unique snippet. `glob` finds files by name,
`grep` finds lines by regex. `execute_shell` and `execute_python` run commands inside the root.
"""


def build_workspace_server(
    root: Path | None = None,
    *,
    session_id: str | None = None,
    sandbox: SandboxHook | None = None,
    limits: WorkspaceLimits | None = None,
) -> MCPServer:
    """Build the ``workspace`` server.

    Args:
        root: the directory the tools are confined to (default: the current directory).
        session_id: gives this session its own scratch directory, ``<root>/.mcpmux/scratch/<id>``,
            created now; commands run there by default.
        sandbox: wraps every command when the host's sandbox is on (see :data:`SandboxHook`);
            ``None`` runs commands unsandboxed.
        limits: output and time caps (defaults: :class:`WorkspaceLimits`).

    Raises:
        ConfigError: the root is not a directory, or the session id is malformed.
    """
    confinement = Confinement(root if root is not None else Path.cwd())
    scratch = None
    if session_id is not None:
        scratch = confinement.resolve(str(scratch_dir_name(session_id)), create=True)
    ws = WorkspaceContext(confinement, scratch, sandbox, limits or WorkspaceLimits())
    server = new_server("workspace", INSTRUCTIONS)
    register_file_tools(server, ws)
    register_search_tools(server, ws)
    register_exec_tools(server, ws)

    @server.resource(STATUS_URI, name="workspace status", mime_type="text/markdown")
    async def status() -> str:
        """The workspace root, scratch directory, sandbox state, limits and tools, as markdown."""
        return _status_markdown(ws) + await tools_markdown(server)

    return server


def _status_markdown(ws: WorkspaceContext) -> str:
    sandbox = "on (commands are wrapped by the host's sandbox)" if ws.sandbox else "off (commands run unsandboxed)"
    lines = [
        "# workspace",
        "",
        f"- root: `{ws.root}`",
        f"- scratch directory: `{ws.scratch}`" if ws.scratch else "- scratch directory: none (no session id)",
        f"- sandbox: {sandbox}",
        f"- output cap: {ws.limits.max_output_chars} characters per call; at most {ws.limits.max_results} results",
        f"- command timeout: {ws.limits.default_timeout_s:g} s by default, {ws.limits.max_timeout_s:g} s at most",
        "",
    ]
    return "\n".join(lines)
