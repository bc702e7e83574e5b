"""Run one field server through every face of mcpmux, as a user would: the real CLI in a child process.

Faces: ``mcpmux test NAME``, ``mcpmux tools NAME --json``, ``mcpmux call NAME:TOOL ARGS --json``,
``mcpmux serve --stdio`` driven by the SDK's ``ClientSession`` (list, then call through the gateway),
``mcpmux serve --http`` driven by the SDK's Streamable HTTP client (a client without callbacks: its
calls take the gateway's direct path), ``mcpmux run`` (the agent loop) against the scripted model, and
the library (``mcpmux.Host`` in a Python child: list, call, and the audit row the call left). The
seven run concurrently (anyio), each
with its own scratch directory and a generous deadline; every child is reaped before the result returns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests import forkserver
from tests.field.servers import FACES, FieldServer, Site, probe_arguments
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM

__all__ = ["FACE_TIMEOUT_S", "FaceResult", "mcpmux_argv", "result_text", "run_faces", "write_config"]

FACE_TIMEOUT_S = 150.0
LIST_CHANGED_WAIT_S = 90.0
_DETAIL_CHARS = 600


@dataclass(frozen=True)
class FaceResult:
    """What one face did: ``ok``, a one-line ``detail`` (the failure, or what was seen), the seconds it took."""

    ok: bool
    detail: str
    seconds: float
    era: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def mcpmux_argv(config: Path, *args: str) -> list[str]:
    """``mcpmux`` (the worker's fork-server shim, tests/forkserver.py) with ``--config``, then ``args``.

    Read when called, not imported: the root conftest loads this module (through ``tests.field.report``)
    before ``pytest_configure`` starts the worker's fork server, when ``forkserver.MCPMUX`` is still REAL.
    """
    return [forkserver.MCPMUX, "--config", str(config), *args]


def write_config(path: Path, entries: list[dict[str, Any]], extra: str = "") -> Path:
    """A config file with these server entries (JSON is valid YAML: no quoting surprises)."""
    body = {"mcp": {"servers": entries, "settings": {"timeout_ms": 60000, "connect_timeout_ms": 60000}}}
    path.write_text(json.dumps(body, indent=1) + "\n" + extra, encoding="utf-8")
    return path


def result_text(content: Any) -> str:
    """All text of a tool result's content (a list of blocks, as JSON or SDK models)."""
    return json.dumps(content, default=lambda o: o.model_dump(mode="json") if hasattr(o, "model_dump") else str(o))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


async def _cli(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    # A process group of its own: a face that hangs is killed with everything it started.
    process = await anyio.open_process(
        argv, cwd=cwd, env=dict(os.environ), stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        async with process:  # on cancellation (the face's deadline) anyio kills and reaps the leader
            stdout, stderr = await _communicate(process)
            return await process.wait(), stdout, stderr
    finally:
        # Whatever the leader left in its group (a server it started) goes too.
        _kill_group(process.pid)


async def _communicate(process: anyio.abc.Process) -> tuple[str, str]:
    chunks: dict[str, bytes] = {"out": b"", "err": b""}

    async def drain(key: str, stream: anyio.abc.ByteReceiveStream | None) -> None:
        if stream is not None:
            async for chunk in stream:
                chunks[key] += chunk

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain, "out", process.stdout)
        tg.start_soon(drain, "err", process.stderr)
    return chunks["out"].decode(errors="replace"), chunks["err"].decode(errors="replace")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


async def _face_test(server: FieldServer, config: Path, work: Path, _site: Site) -> FaceResult:
    started = time.monotonic()
    code, out, err = await _cli(mcpmux_argv(config, "--json", "test", server.name), work)
    if code != 0:
        return FaceResult(False, f"exit {code}: {_short(err)}", time.monotonic() - started)
    report = json.loads(out)
    tools = report["counts"]["tools"]
    era = str(report.get("protocol_version", ""))
    ok = tools > 0
    return FaceResult(ok, f"{tools} tools, protocol {era}", time.monotonic() - started, era)


async def _face_tools(server: FieldServer, config: Path, work: Path, _site: Site) -> FaceResult:
    started = time.monotonic()
    code, out, err = await _cli(mcpmux_argv(config, "tools", server.name, "--json"), work)
    if code != 0:
        return FaceResult(False, f"exit {code}: {_short(err)}", time.monotonic() - started)
    names = [tool["name"] for tool in json.loads(out)]
    ok = server.canonical_tool in names
    detail = f"{len(names)} tools" + ("" if ok else f", {server.canonical_tool} missing; stderr: {_short(err)}")
    return FaceResult(ok, detail, time.monotonic() - started)


async def _face_call(server: FieldServer, config: Path, work: Path, site: Site) -> FaceResult:
    started = time.monotonic()
    arguments = json.dumps(probe_arguments(server, site))
    code, out, err = await _cli(mcpmux_argv(config, "call", server.canonical_tool, arguments, "--json"), work)
    if code != 0:
        return FaceResult(False, f"exit {code}: {_short(err)}", time.monotonic() - started)
    return _expect(server, out, started)


def _expect(server: FieldServer, text: str, started: float) -> FaceResult:
    ok = server.probe.expect in text
    detail = f"result has {server.probe.expect!r}" if ok else f"{server.probe.expect!r} not in {_short(text)}"
    return FaceResult(ok, detail, time.monotonic() - started)


async def _face_serve(server: FieldServer, config: Path, work: Path, site: Site) -> FaceResult:
    started = time.monotonic()
    argv = mcpmux_argv(config, "serve", "--stdio")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=work)
    changes = _ListChanges()

    with (work / "serve.stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=changes.on_message) as session,
        ):
            return await _list_and_call(session, changes, server, site, started)


async def _list_and_call(
    session: ClientSession, changes: _ListChanges, server: FieldServer, site: Site, started: float
) -> FaceResult:
    """Through a gateway: initialize, list until the server's tool is there, call it once."""
    await session.initialize()
    # `serve` answers at once and announces servers that connect later with tools/list_changed,
    # as a client that follows the protocol sees them.
    names = await changes.listed_until(session, server.provider_tool)
    if server.provider_tool not in names:
        return FaceResult(False, f"{server.provider_tool} not among {len(names)} tools", time.monotonic() - started)
    result = await session.call_tool(server.provider_tool, probe_arguments(server, site))
    text = result_text(result.content) + json.dumps(result.structured_content or {})
    if result.is_error:
        return FaceResult(False, f"isError: {_short(text)}", time.monotonic() - started)
    return _expect(server, text, started)


async def _face_serve_http(server: FieldServer, config: Path, work: Path, site: Site) -> FaceResult:
    """``mcpmux serve --http`` on a free loopback port, used by the SDK's Streamable HTTP client."""
    started = time.monotonic()
    changes = _ListChanges()
    with (work / "serve-http.stderr").open("w+b") as errlog:
        argv = mcpmux_argv(config, "serve", "--http", "127.0.0.1:0")
        process = await anyio.to_thread.run_sync(lambda: subprocess.Popen(
            argv, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog, start_new_session=True
        ))  # fmt: skip
        try:
            url = await anyio.to_thread.run_sync(_served_url, process, Path(errlog.name))
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write, message_handler=changes.on_message) as session,
            ):
                return await _list_and_call(session, changes, server, site, started)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_stop, process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the gateway drains and stops its servers), SIGKILL to the group if it lingers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    _kill_group(process.pid)
    process.wait()


def _served_url(process: subprocess.Popen[bytes], log: Path) -> str:
    """The URL ``mcpmux serve --http`` says it serves (on stderr), once it does (in a worker thread)."""
    deadline = time.monotonic() + FACE_TIMEOUT_S
    while time.monotonic() < deadline:
        said = log.read_text(errors="replace")
        for line in said.splitlines():
            if " serving http://" in line:
                return line.split(" serving ", 1)[1].split()[0]
        if process.poll() is not None:
            raise RuntimeError(f"serve --http exited {process.returncode}: {_short(said)}")
        time.sleep(0.1)
    raise TimeoutError(f"serve --http did not say where it serves in {FACE_TIMEOUT_S:.0f} s")


class _ListChanges:
    """Follows ``tools/list_changed``: lists again at each one until a tool is there (bounded)."""

    def __init__(self) -> None:
        self._changed = anyio.Event()

    async def on_message(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed.set()

    async def listed_until(self, session: ClientSession, wanted: str) -> list[str]:
        names = [tool.name for tool in (await session.list_tools()).tools]
        with anyio.move_on_after(LIST_CHANGED_WAIT_S):
            while wanted not in names:
                await self._changed.wait()
                self._changed = anyio.Event()  # a change during the next listing sets the new one
                names = [tool.name for tool in (await session.list_tools()).tools]
        return names


async def _face_run(server: FieldServer, config: Path, work: Path, site: Site) -> FaceResult:
    started = time.monotonic()
    script: list[Reply | Callable[[dict[str, Any]], Reply]] = [
        Reply(tool_calls=[Call(server.provider_tool, probe_arguments(server, site))]),
        Reply("field done."),
    ]
    with ScriptedLLM(script) as llm:
        argv = mcpmux_argv(config, "run", "--base-url", llm.base_url, "-m", "scripted", "--json", "field check")
        code, out, err = await _cli(argv, work)
    if code != 0:
        return FaceResult(False, f"exit {code}: {_short(err)}", time.monotonic() - started)
    messages = json.loads(out)["messages"]
    tool_text = " ".join(json.dumps(m.get("content")) for m in messages if m.get("role") == "tool")
    if not tool_text:
        return FaceResult(
            False, f"no tool message in the transcript; stderr: {_short(err)}", time.monotonic() - started
        )
    return _expect(server, tool_text, started)


# The library face: what a program that imports mcpmux does, in a child of its own.
_LIBRARY = """
import json, sys
import anyio
from mcpmux import Host, load_config

async def main() -> None:
    name, arguments = sys.argv[2], json.loads(sys.argv[3])
    async with Host(load_config(sys.argv[1]), face="field") as host:
        listed = [tool.name for tool in host.tools()]
        if name not in listed:
            print(json.dumps({"missing": name, "listed": len(listed)}))
            return
        result = await host.call_tool(name, arguments)
        rows = [(row.face, row.name, row.outcome) for row in host.audit.query(limit=5)]
    print(json.dumps({"result": result.model_dump(mode="json", by_alias=True), "audit": rows}))

anyio.run(main)
"""


async def _face_library(server: FieldServer, config: Path, work: Path, site: Site) -> FaceResult:
    started = time.monotonic()
    arguments = json.dumps(probe_arguments(server, site))
    argv = [sys.executable, "-c", _LIBRARY, str(config), server.canonical_tool, arguments]
    code, out, err = await _cli(argv, work)
    if code != 0:
        return FaceResult(False, f"exit {code}: {_short(err)}", time.monotonic() - started)
    report = json.loads(out)
    if "missing" in report:
        return FaceResult(False, f"{report['missing']} not among {report['listed']} tools", time.monotonic() - started)
    audited = ["field", server.canonical_tool, "tool-error" if report["result"].get("isError") else "ok"]
    if audited not in report["audit"]:
        return FaceResult(False, f"no audit row {audited} in {report['audit']}", time.monotonic() - started)
    return _expect(server, json.dumps(report["result"]), started)


_FACES = {
    "test": _face_test, "tools": _face_tools, "call": _face_call, "serve": _face_serve,
    "serve-http": _face_serve_http, "run": _face_run, "library": _face_library,
}  # fmt: skip


async def _guarded(face: str, server: FieldServer, config: Path, work: Path, site: Site) -> FaceResult:
    started = time.monotonic()
    try:
        with anyio.fail_after(FACE_TIMEOUT_S):
            return await _FACES[face](server, config, work, site)
    except Exception as exc:  # a face's failure is data for the table, not a crash of the others
        return FaceResult(False, f"{type(exc).__name__}: {_short(str(exc))}", time.monotonic() - started)


async def run_faces(
    server: FieldServer, entries: Mapping[str, dict[str, Any]], site: Site, work: Path
) -> dict[str, FaceResult]:
    """Run every face of ``server`` concurrently; ``entries`` maps a face to the server's config entry."""
    results: dict[str, FaceResult] = {}

    async def one(face: str) -> None:
        face_dir = work / face
        face_dir.mkdir(parents=True, exist_ok=True)
        config = write_config(face_dir / "mcpmux.yaml", [entries[face]])
        results[face] = await _guarded(face, server, config, face_dir, site)

    async with anyio.create_task_group() as tg:
        for face in FACES:
            tg.start_soon(one, face)
    return {face: results[face] for face in FACES}
