"""The workspace's execution tools: ``execute_shell`` and ``execute_python``.

A command runs in its own process group with stdin closed and stdout/stderr captured (never the
server's own stdio, which may carry the MCP framing), under the reaper
(:mod:`mcpmux.processes._reaper`) on Linux. A deadline kills every descendant, and so does the end
of the command: background processes it started, even ``setsid`` or double-forked ones, do not
outlive the call. The command
gets an allow-listed environment (PATH, HOME, locale, ...), never the host's secrets. Output is
capped while it is read, so a flood costs bounded memory. A non-zero exit is a result, not an error.
When the sandbox hook is set, it wraps the argv; without it, commands run unsandboxed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import anyio
from anyio.abc import ByteReceiveStream, Process
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcpmux.processes._reaper import AVAILABLE as REAPER_AVAILABLE, KILL_SIGNAL as REAPER_KILL_SIGNAL, reaper_argv
from mcpmux.servers._sdk import tool
from mcpmux.servers.workspace_context import WorkspaceContext

__all__ = ["ENV_ALLOW_LIST", "CommandOutcome", "child_env", "register_exec_tools", "run_command"]

# The host's environment may hold API keys; a command written by a model sees only these.
ENV_ALLOW_LIST = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
EXECUTES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
KILL_GRACE_S = 2.0

TimeoutArg = Annotated[
    float | None, Field(gt=0, le=600, description="Seconds before the process is killed (default 60, max 600).")
]
CwdArg = Annotated[
    str | None,
    Field(description="Working directory relative to the workspace root (default: the session scratch dir or root)."),
]


@dataclass(slots=True)
class CommandOutcome:
    """What a finished (or killed) command left behind."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    timed_out: bool
    elapsed_s: float

    def render(self, cap: int) -> str:
        """The outcome as text for a model: status line, then each non-empty stream."""
        if self.timed_out:
            status = f"timed out after {self.elapsed_s:.1f} s; the process group was killed"
        elif self.exit_code is not None and self.exit_code < 0:
            status = f"killed by signal {-self.exit_code}"
        else:
            status = f"exit code {self.exit_code}"
        parts = [f"{status} ({self.elapsed_s:.2f} s)"]
        for name, data, total in (
            ("stdout", self.stdout, self.stdout_total),
            ("stderr", self.stderr, self.stderr_total),
        ):
            if total:
                text = data.decode("utf-8", errors="replace")
                note = f"\n[{name} cut: showing {len(data)} of {total} bytes]" if total > len(data) else ""
                parts.append(f"--- {name} ---\n{text[:cap]}{note}")
        if len(parts) == 1:
            parts.append("(no output)")
        return "\n".join(parts)


async def _drain(stream: ByteReceiveStream | None, keep: int, sink: bytearray, totals: list[int]) -> None:
    if stream is None:
        return
    async for chunk in stream:
        totals[0] += len(chunk)
        room = keep - len(sink)
        if room > 0:
            sink.extend(chunk[:room])


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return  # the group is already gone: nothing to kill


async def _stop(process: Process) -> None:
    """Kill everything the command started: the reaper first (it also finds what left the group)."""
    if REAPER_AVAILABLE and process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(REAPER_KILL_SIGNAL)
        with anyio.move_on_after(KILL_GRACE_S, shield=True):
            await process.wait()
    _kill_group(process.pid)
    with anyio.move_on_after(KILL_GRACE_S, shield=True):
        await process.wait()


def child_env() -> dict[str, str]:
    """The environment of a command: the allow-listed variables of ours, nothing else."""
    return {name: os.environ[name] for name in ENV_ALLOW_LIST if name in os.environ}


async def run_command(argv: Sequence[str], cwd: Path, timeout_s: float, keep_bytes: int) -> CommandOutcome:
    """Run ``argv`` in ``cwd`` with a deadline, capturing at most ``keep_bytes`` of each stream."""
    out, err = bytearray(), bytearray()
    out_total, err_total = [0], [0]
    started = time.monotonic()
    timed_out = False
    try:
        # Shielded (see the stdio transport's spawn): a cancelled spawn must not SIGKILL the reaper
        # alone and orphan the command it forked; the ``finally`` below stops the whole group.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                reaper_argv(list(argv)), cwd=cwd, env=child_env(), stdin=subprocess.DEVNULL, start_new_session=True
            )
    except OSError as exc:
        raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
    async with process:
        try:
            with anyio.move_on_after(timeout_s) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process.stdout, keep_bytes, out, out_total)
                    tg.start_soon(_drain, process.stderr, keep_bytes, err, err_total)
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            # Also reaps background processes the command left behind: nothing outlives a call.
            await _stop(process)
    return CommandOutcome(
        process.returncode, bytes(out), bytes(err), out_total[0], err_total[0], timed_out, time.monotonic() - started
    )


def register_exec_tools(server: MCPServer, ws: WorkspaceContext) -> None:
    """Add ``execute_shell`` and ``execute_python``."""

    async def execute(argv: list[str], cwd: str | None, timeout_s: float | None) -> str:
        where = ws.confinement.resolve(cwd) if cwd is not None else ws.default_cwd
        if not where.is_dir():
            raise ToolError(f"working directory {cwd!r} is not a directory")
        deadline = min(timeout_s or ws.limits.default_timeout_s, ws.limits.max_timeout_s)
        wrapped = ws.sandbox(argv, where) if ws.sandbox is not None else argv
        keep = ws.limits.max_output_chars // 2
        outcome = await run_command(wrapped, where, deadline, keep)
        return outcome.render(keep)

    @tool(server, EXECUTES)
    async def execute_shell(
        command: Annotated[str, Field(min_length=1, description="Shell command line, run by /bin/sh -c.")],
        cwd: CwdArg = None,
        timeout_s: TimeoutArg = None,
    ) -> str:
        """Run a shell command in the workspace and return its exit code, stdout and stderr.

        The command runs with /bin/sh in the working directory (inside the workspace root), with no
        stdin. A non-zero exit code is reported in the result, not as an error. After `timeout_s`
        the whole process group is killed; background processes do not outlive the command. Each
        output stream is cut at about 50,000 characters.
        The environment holds only PATH, HOME, USER, SHELL, TERM, locale and TMPDIR variables.
        Commands run sandboxed only when the host has enabled its sandbox.
        """
        return await execute(["/bin/sh", "-c", command], cwd, timeout_s)

    @tool(server, EXECUTES)
    async def execute_python(
        code: Annotated[str, Field(min_length=1, description="Python 3 source code, run as a script.")],
        cwd: CwdArg = None,
        timeout_s: TimeoutArg = None,
    ) -> str:
        """Run a Python 3 script in a fresh interpreter and return its exit code, stdout and stderr.

        Use print() to produce output. The script runs in the working directory (inside the
        workspace root), with no stdin; an exception gives a traceback on stderr and exit code 1,
        reported in the result. Same deadline and output caps as `execute_shell`.
        """
        return await execute([sys.executable, "-c", code], cwd, timeout_s)
