"""Faults on real servers behind the real host: kill mid-call, stall (SIGSTOP), restart; stdio and HTTP.

The host is ``mcpmux serve --stdio`` (a child process) with two upstreams: the victim,
``@modelcontextprotocol/server-everything`` (Node) over stdio or Streamable HTTP, or ``mcp-server-fetch``
/ ``mcp-server-time`` (Python) over stdio, and a bystander
(``mcp-hello-world`` over stdio). An SDK ``ClientSession`` drives the host. In every case the host
must survive, the failed call must end with an error that names the server and says what happened,
the bystander must keep answering, and the victim must answer again after it comes back (stdio: the
host restarts it; HTTP: the suite restarts it on the same port).
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import os
import signal
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests import forkserver
from tests.field.faces import mcpmux_argv, result_text, write_config
from tests.field.processes import FIELD_MARKER, Listener, start_listener
from tests.field.servers import field_venv_bin, npm_entry
from tests.peers.fixtures import everything_js, gunicorn, node22, peers_dir, stop_process_group

pytestmark = [
    pytest.mark.slow,
    pytest.mark.field,
    pytest.mark.subprocess,
    pytest.mark.network,
    pytest.mark.timeout(300),
]

Transport = Literal["stdio", "http"]
STEP_TIMEOUT_S = 90.0
STALL_TIMEOUT_MS = 6000  # the victim's call timeout where a stall must time out
KILL_TIMEOUT_MS = 60000  # elsewhere: a restart on a loaded machine may take many seconds
RECOVERY_DEADLINE_S = 120.0
_LONG = "victim__trigger-long-running-operation"


def _everything_http(port: int) -> list[str]:
    return [str(node22()), str(everything_js()), "streamableHttp"]


@contextlib.contextmanager
def _http_victim(tmp_path: Path) -> Iterator[tuple[Listener, Path]]:
    log_path = tmp_path / "victim-http.log"
    with log_path.open("w+b") as log:
        listener = start_listener(_everything_http, dict(os.environ), log)
        try:
            yield listener, log_path
        finally:
            stop_process_group(listener.process)


def _config(tmp_path: Path, victim: dict[str, Any], timeout_ms: int = KILL_TIMEOUT_MS) -> Path:
    bystander = {
        "name": "bystander",
        "type": "stdio",
        "command": str(node22()),
        "args": [npm_entry("mcp-hello-world/build/stdio.js")],
    }
    return write_config(tmp_path / "mcpmux.yaml", [victim | {"name": "victim", "timeout_ms": timeout_ms}, bystander])


def _run(scenario: Callable[..., Awaitable[None]], *args: Any) -> None:
    """``anyio.run``, re-raising the one failure inside the task groups' exception groups as itself.

    The SDK's stdio client wraps an assertion in an exception group; unwrapped, the strict xfails
    (``raises=AssertionError``) tell a known bug's assertion from any other failure.
    """
    try:
        anyio.run(scenario, *args)
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from group
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def _stdio_victim() -> dict[str, Any]:
    return {"type": "stdio", "command": str(node22()), "args": [str(everything_js()), "stdio"]}


@contextlib.asynccontextmanager
async def _host(config: Path, tmp_path: Path) -> AsyncIterator[tuple[ClientSession, psutil.Process]]:
    # The console script itself: the faults are dealt to the host's own children (its process tree).
    argv = [forkserver.REAL, *mcpmux_argv(config, "serve", "--stdio")[1:]]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=tmp_path)
    with (tmp_path / "host.stderr").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            host = next(p for p in psutil.Process().children() if str(config) in " ".join(p.cmdline()))
            yield session, host


def _stdio_victim_process(host: psutil.Process, marker: str = "server-everything") -> psutil.Process:
    """The server process itself: the deepest descendant naming ``marker`` (a launcher such as the
    host's reaper names the server's command line too, but only the server answers)."""
    matches = []
    for child in host.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if marker in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                matches.append(child)
    leaves = [p for p in matches if not any(q.ppid() == p.pid for q in matches)]
    if not leaves:
        raise AssertionError(f"the host runs no {marker} child")
    return leaves[0]


async def _call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """``(ok, text)``: an error result and a JSON-RPC error both count as not ok, with their message."""
    try:
        result = await session.call_tool(tool, arguments)
    except MCPError as exc:
        return False, f"JSON-RPC error {exc.error.code}: {exc.error.message}"
    return not result.is_error, result_text(result.content)


async def _call_until_answered(session: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """:func:`_call`, again while the host reports a timeout (a server coming back on a loaded machine)."""
    ok, text = False, f"no answer within {RECOVERY_DEADLINE_S} s"
    with anyio.move_on_after(RECOVERY_DEADLINE_S):
        while True:
            ok, text = await _call(session, tool, arguments)
            if ok or "timed out" not in text:
                return ok, text
    return ok, text


async def _assert_bystander_answers(session: ClientSession) -> None:
    ok, text = await _call(session, "bystander__echo", {"message": "still-here"})
    assert ok and "still-here" in text, text


def _assert_clear(text: str, *words: str) -> None:
    lowered = text.lower()
    assert "victim" in lowered, f"the error does not name the server: {text}"
    assert any(word in lowered for word in words), f"the error says none of {words}: {text}"


async def _kill_mid_call(session: ClientSession, kill: Any) -> str:
    """Start a long call on the victim, kill the victim once it has begun, return the call's error."""
    started = anyio.Event()
    outcome: list[tuple[bool, str]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async def long_call() -> None:
        try:
            result = await session.call_tool(_LONG, {"duration": 60, "steps": 60}, progress_callback=progress)
            outcome.append((not result.is_error, result_text(result.content)))
        except MCPError as exc:
            outcome.append((False, f"JSON-RPC error {exc.error.code}: {exc.error.message}"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_call)
        await started.wait()
        kill()
    ok, text = outcome[0]
    assert not ok, f"the call survived the kill: {text}"
    return text


@pytest.mark.parametrize(
    "transport",
    ["stdio", "http"],
)
def test_killing_a_server_mid_call_fails_that_call_clearly_and_the_host_recovers(
    transport: Transport, tmp_path: Path
) -> None:
    async def scenario(victim_entry: dict[str, Any], http: tuple[Listener, Path] | None) -> None:
        config = _config(tmp_path, victim_entry)
        with anyio.fail_after(STEP_TIMEOUT_S * 3):
            async with _host(config, tmp_path) as (session, host):
                if http is None:
                    victim = _stdio_victim_process(host)
                    text = await _kill_mid_call(session, lambda: victim.send_signal(signal.SIGKILL))
                else:
                    listener = http[0]
                    text = await _kill_mid_call(session, lambda: os.killpg(listener.process.pid, signal.SIGKILL))
                _assert_clear(text, "killed", "exit", "closed", "crash", "connect", "unreachable", "unavailable")
                assert host.is_running(), "the host died with its upstream"
                await _assert_bystander_answers(session)
                if http is not None:
                    listener.process.wait(timeout=30)
                    with http[1].open("a+b") as log:
                        restarted = await anyio.to_thread.run_sync(
                            lambda: start_listener(_everything_http, dict(os.environ), log, port=listener.port)
                        )
                    try:
                        ok, text = await _call_until_answered(session, "victim__echo", {"message": "back"})
                    finally:
                        stop_process_group(restarted.process)
                else:
                    ok, text = await _call_until_answered(session, "victim__echo", {"message": "back"})
                    assert _stdio_victim_process(host).pid != victim.pid
                assert ok and "back" in text, f"the victim did not answer after it came back: {text}"

    if transport == "stdio":
        _run(scenario, _stdio_victim(), None)
        return
    with _http_victim(tmp_path) as http:
        _run(scenario, {"type": "http", "url": http[0].url}, http)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_stalled_server_times_out_clearly_and_answers_again_once_resumed(
    transport: Transport, tmp_path: Path
) -> None:
    async def scenario(victim_entry: dict[str, Any], pgid: int | None) -> None:
        config = _config(tmp_path, victim_entry, STALL_TIMEOUT_MS)
        with anyio.fail_after(STEP_TIMEOUT_S * 3):
            async with _host(config, tmp_path) as (session, host):
                ok, text = await _call_until_answered(session, "victim__echo", {"message": "warm"})
                assert ok, text
                stop, resume = _signals(pgid, host)
                stop()
                try:
                    ok, text = await _call(session, "victim__echo", {"message": "stalled"})
                    assert not ok, f"a stopped server answered: {text}"
                    _assert_clear(text, "timed out", "timeout", "deadline")
                    assert host.is_running(), "the host died with its upstream"
                    await _assert_bystander_answers(session)
                finally:
                    resume()
                ok, text = await _call_until_answered(session, "victim__echo", {"message": "resumed"})
                assert ok and "resumed" in text, f"the victim did not answer once resumed: {text}"

    if transport == "stdio":
        _run(scenario, _stdio_victim(), None)
        return
    with _http_victim(tmp_path) as http:
        _run(scenario, {"type": "http", "url": http[0].url}, http[0].process.pid)


def _signals(pgid: int | None, host: psutil.Process, marker: str = "server-everything") -> tuple[Any, Any]:
    if pgid is not None:
        return (lambda: os.killpg(pgid, signal.SIGSTOP)), (lambda: os.killpg(pgid, signal.SIGCONT))
    victim = _stdio_victim_process(host, marker)
    return (lambda: victim.send_signal(signal.SIGSTOP)), (lambda: _resume(victim))


def _resume(process: psutil.Process) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        process.send_signal(signal.SIGCONT)


# --- Python servers (SDK 2.x) over stdio: mcp-server-fetch held mid-call by a page that never ends, and
# mcp-server-time stopped with SIGSTOP.


class _SlowPage(http.server.BaseHTTPRequestHandler):
    hit = threading.Event()
    release = threading.Event()

    def do_GET(self) -> None:
        if self.path == "/slow.html":
            type(self).hit.set()
            type(self).release.wait(STEP_TIMEOUT_S)
        body = f"<html><body><p>{FIELD_MARKER}</p></body></html>".encode()
        self.send_response(200 if self.path in ("/slow.html", "/page.html") else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@contextlib.contextmanager
def _slow_site() -> Iterator[str]:
    _SlowPage.hit.clear()
    _SlowPage.release.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowPage)
    thread = threading.Thread(target=server.serve_forever, name="field-slow-page", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        _SlowPage.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _python_victim(script: str, *args: str) -> dict[str, Any]:
    no_proxy = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    return {"type": "stdio", "command": script, "args": list(args), "env": no_proxy}


def test_killing_a_python_server_mid_call_fails_that_call_clearly_and_the_host_restarts_it(tmp_path: Path) -> None:
    async def scenario(site: str) -> None:
        fetch = _python_victim(field_venv_bin(2, "mcp-server-fetch"), "--allow-private-ips")
        config = _config(tmp_path, fetch)
        with anyio.fail_after(STEP_TIMEOUT_S * 3):
            async with _host(config, tmp_path) as (session, host):
                outcome: list[tuple[bool, str]] = []

                async def long_call() -> None:
                    outcome.append(await _call(session, "victim__fetch", {"url": f"{site}/slow.html"}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(long_call)
                    assert await anyio.to_thread.run_sync(_SlowPage.hit.wait, STEP_TIMEOUT_S), "fetch never came"
                    victim = _stdio_victim_process(host, "mcp-server-fetch")
                    victim.send_signal(signal.SIGKILL)
                ok, text = outcome[0]
                assert not ok, f"the call survived the kill: {text}"
                _assert_clear(text, "killed", "exit", "closed", "crash", "unavailable")
                assert host.is_running(), "the host died with its upstream"
                await _assert_bystander_answers(session)
                ok, text = await _call_until_answered(session, "victim__fetch", {"url": f"{site}/page.html"})
                assert ok and FIELD_MARKER in text, f"the victim did not answer after the kill: {text}"
                assert _stdio_victim_process(host, "mcp-server-fetch").pid != victim.pid

    with _slow_site() as site:
        _run(scenario, site)


def test_a_stalled_python_server_times_out_clearly_and_answers_again_once_resumed(tmp_path: Path) -> None:
    async def scenario() -> None:
        time_server = _python_victim(str(peers_dir() / ".venv" / "bin" / "mcp-server-time"), "--local-timezone", "UTC")
        config = _config(tmp_path, time_server, STALL_TIMEOUT_MS)
        arguments = {"timezone": "UTC"}
        with anyio.fail_after(STEP_TIMEOUT_S * 3):
            async with _host(config, tmp_path) as (session, host):
                ok, text = await _call_until_answered(session, "victim__get_current_time", arguments)
                assert ok, text
                stop, resume = _signals(None, host, "mcp-server-time")
                stop()
                try:
                    ok, text = await _call(session, "victim__get_current_time", arguments)
                    assert not ok, f"a stopped server answered: {text}"
                    _assert_clear(text, "timed out", "timeout", "deadline")
                    assert host.is_running(), "the host died with its upstream"
                    await _assert_bystander_answers(session)
                finally:
                    resume()
                ok, text = await _call_until_answered(session, "victim__get_current_time", arguments)
                assert ok and "UTC" in text, f"the victim did not answer once resumed: {text}"

    _run(scenario)


def _httpbin(port: int) -> list[str]:
    return [str(gunicorn()), "--no-control-socket", "-b", f"127.0.0.1:{port}", "-k", "gthread", "httpbin:app"]


def test_a_rest_service_that_dies_or_stalls_fails_calls_clearly_and_answers_once_back(tmp_path: Path) -> None:
    """An OpenAPI source (httpbin, a REST service nobody here wrote) behind the host: killed, its calls
    fail naming the source and saying it cannot connect; stalled, they time out; back on the same
    port, it answers again without a restart of anything in mcpmux, and the bystander never stops."""
    probe = ("victim__get_base64_value", {"value": base64.b64encode(FIELD_MARKER.encode()).decode()})
    log = (tmp_path / "httpbin.log").open("w+b")
    service = start_listener(_httpbin, dict(os.environ), log, path="")

    async def scenario() -> None:
        nonlocal service
        victim = {"type": "openapi", "spec": f"{service.url}/spec.json", "base_url": service.url}
        config = _config(tmp_path, victim, STALL_TIMEOUT_MS)
        with anyio.fail_after(STEP_TIMEOUT_S * 3):
            async with _host(config, tmp_path) as (session, host):
                ok, text = await _call_until_answered(session, *probe)
                assert ok and FIELD_MARKER in text, text
                stop_process_group(service.process)
                ok, text = await _call(session, *probe)
                assert not ok, f"a stopped service answered: {text}"
                _assert_clear(text, "cannot connect")
                assert host.is_running(), "the host died with its upstream"
                await _assert_bystander_answers(session)
                service = await anyio.to_thread.run_sync(
                    lambda: start_listener(_httpbin, dict(os.environ), log, "", service.port)
                )
                ok, text = await _call_until_answered(session, *probe)
                assert ok and FIELD_MARKER in text, f"the service did not answer once back: {text}"
                os.killpg(service.process.pid, signal.SIGSTOP)
                try:
                    ok, text = await _call(session, *probe)
                    assert not ok, f"a stalled service answered: {text}"
                    _assert_clear(text, "timed out", "timeout")
                    await _assert_bystander_answers(session)
                finally:
                    os.killpg(service.process.pid, signal.SIGCONT)
                ok, text = await _call_until_answered(session, *probe)
                assert ok and FIELD_MARKER in text, f"the service did not answer once resumed: {text}"

    try:
        _run(scenario)
    finally:
        stop_process_group(service.process)
        log.close()
