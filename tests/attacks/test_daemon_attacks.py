"""Attacks on ``mcpmux daemon``: impostor sockets, other users, hostile first lines, slow and dying clients.

The daemon spawns whatever entry a client sends, so who may talk to it is the whole of its
security: only this user's processes (``SO_PEERCRED``), through a socket and directory that no
one else can replace or write to. Everything here runs against a real daemon process.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import psutil
import pytest

from mcpmux.attach.attach import Attach, request_line
from mcpmux.attach.client import exchange, request
from mcpmux.config.models import SecurityConfig, Settings, StdioServerConfig
from mcpmux.errors import DaemonUnavailable
from tests.daemon.conftest import REPO, Daemon, cli, daemon_fixture  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(300)]

NOBODY = 65534
WAIT_S = 120.0  # bounds for a loaded 2-core machine, not timings


def _counter_entry() -> StdioServerConfig:
    args = ("-m", "mcpmux.testing", "--module", "tests.daemon.counter:counter")
    return StdioServerConfig(name="counter", command=sys.executable, args=args, cwd=REPO)


def _raw(daemon: Daemon, payload: bytes, *, timeout_s: float = WAIT_S) -> bytes:
    """Send ``payload`` on a fresh connection; everything the daemon answers before it closes."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(daemon.socket))
        received = b""
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                received += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending: refused
        return received


def _system_python() -> str:
    """A Python another user may run (the venv's and pyenv's live under root's home)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK) and os.stat(candidate).st_mode & 0o001:
            return candidate
    pytest.skip("no Python executable by other users on this machine")


def _fake_socket(path: Path) -> socket.socket:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    return listener


def test_a_socket_owned_by_another_user_is_never_used(daemon: Daemon) -> None:
    with _fake_socket(daemon.socket):
        os.chown(daemon.socket, NOBODY, NOBODY)
        with pytest.raises(DaemonUnavailable, match=f"owned by uid {NOBODY}, not by this user"):
            anyio.run(request, "mcpmux/status")
        code, out, _ = cli("daemon", "status")
        assert code == 3 and f"owned by uid {NOBODY}" in out


def test_a_world_writable_socket_is_never_used(daemon: Daemon) -> None:
    with _fake_socket(daemon.socket):
        os.chmod(daemon.socket, 0o666)
        with pytest.raises(DaemonUnavailable, match="its mode 666 lets other users in"):
            anyio.run(request, "mcpmux/status")


def test_a_symlinked_socket_is_never_used(daemon: Daemon, tmp_path: Path) -> None:
    elsewhere = Path(f"/tmp/mxs{os.getpid()}.sock")
    try:
        with _fake_socket(elsewhere):
            daemon.socket.parent.mkdir(mode=0o700, exist_ok=True)
            daemon.socket.symlink_to(elsewhere)
            with pytest.raises(DaemonUnavailable, match="symbolic link"):
                anyio.run(request, "mcpmux/status")
    finally:
        elsewhere.unlink(missing_ok=True)


@pytest.mark.slow
def test_a_runtime_directory_open_to_others_is_refused_by_the_daemon_too(daemon: Daemon) -> None:
    (daemon.runtime / "mcpmux").mkdir(mode=0o700)
    os.chmod(daemon.runtime / "mcpmux", 0o755)
    process = daemon.spawn()
    assert process.wait(WAIT_S) != 0
    assert "its mode 755 lets other users in" in daemon.log.read_text()
    assert not daemon.socket.exists()


@pytest.mark.slow
def test_another_users_process_is_refused_by_the_daemon_whatever_the_file_modes(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    # Loosen the path so the kernel lets 'nobody' connect: only SO_PEERCRED stands in the way now.
    os.chmod(daemon.runtime, 0o711)
    os.chmod(daemon.socket.parent, 0o711)
    os.chmod(daemon.socket, 0o666)
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])\n"
        "try:\n    s.sendall(sys.argv[2].encode()); print(repr(s.recv(4096)))\n"
        "except (BrokenPipeError, ConnectionResetError):\n    print(repr(b''))\n"
    )
    line = request_line("mcpmux/status").decode()
    result = subprocess.run(
        [_system_python(), "-I", "-c", probe, str(daemon.socket), line],
        user=NOBODY, group=NOBODY, capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "b''"  # closed unanswered
    assert f"refused a connection from uid {NOBODY}" in daemon.log.read_text()
    os.chmod(daemon.socket, 0o600)
    os.chmod(daemon.socket.parent, 0o700)
    assert daemon.status() is not None


@pytest.mark.slow
@pytest.mark.parametrize(
    "payload",
    [
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"not json at all\n",
        b"[1, 2, 3]\n",
        b'{"jsonrpc": "2.0", "id": 1}\n',
        b"{" + b" " * (2 * 1024 * 1024),
        b"",
    ],
    ids=["http", "garbage", "array", "no-method", "oversized-no-newline", "empty"],
)
def test_a_hostile_first_line_is_closed_unanswered_and_the_daemon_serves_on(daemon: Daemon, payload: bytes) -> None:
    daemon.start("--linger", "600")
    assert _raw(daemon, payload) == b""
    assert daemon.status() is not None


@pytest.mark.slow
def test_an_unknown_first_request_and_an_invalid_entry_are_answered_with_an_error(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    unknown = json.loads(_raw(daemon, request_line("tools/list")))
    assert unknown["error"]["code"] == -32601
    for server in ({"name": "x", "type": "http", "url": "http://127.0.0.1:1/mcp"}, {"name": "x"}, "nonsense"):
        reply = json.loads(_raw(daemon, request_line("mcpmux/attach", {"server": server})))
        assert reply["error"]["code"] == -32602, reply
    status = daemon.status()
    assert status is not None and status["servers"] == []  # nothing was spawned


@pytest.mark.slow
def test_a_silent_client_does_not_block_others_and_is_dropped(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    with socket.socket(socket.AF_UNIX) as silent:
        silent.connect(str(daemon.socket))
        assert daemon.status() is not None  # served while the silent one holds its connection
        silent.settimeout(WAIT_S)
        assert silent.recv(1) == b""  # dropped after the attach deadline


@pytest.mark.slow
def test_a_client_killed_mid_session_leaves_the_shared_server_serving_the_next(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    attach = Attach("attack@/", _counter_entry(), Settings(), SecurityConfig())
    script = (
        "import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]);"
        "s.sendall(sys.argv[2].encode()); s.recv(4096);"
        's.sendall(b\'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        '"2025-11-25","capabilities":{},"clientInfo":{"name":"victim","version":"1"}}}\\n\');'
        "s.recv(4096); print('ready', flush=True); time.sleep(600)"
    )
    line = request_line("mcpmux/attach", attach.params()).decode()
    victim = subprocess.Popen([sys.executable, "-I", "-c", script, str(daemon.socket), line], stdout=subprocess.PIPE)
    try:
        assert victim.stdout is not None and victim.stdout.readline().strip() == b"ready"
        before = daemon.server_pids()
        victim.kill()
    finally:
        victim.wait(WAIT_S)
        if victim.stdout is not None:
            victim.stdout.close()

    async def second_client() -> dict[str, object]:
        result, stream = await exchange("mcpmux/attach", attach.params())
        await stream.aclose()
        return result

    reply = anyio.run(second_client)
    assert reply["server_pid"] == before["counter"]
    assert psutil.pid_exists(before["counter"])


# -- the thin client (mcpmux call/read of a warm server) facing a hostile daemon socket ----------------


class _Impostor:
    """A same-user process on the daemon's socket answering each line with a scripted reply (a thread)."""

    def __init__(self, path: Path, replies: list[bytes]) -> None:
        import threading

        self.path, self.replies, self.received = path, replies, []  # type: ignore[var-annotated]
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        os.chmod(path, 0o600)
        self.listener.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self._answer()
        except OSError:  # the client hung up mid-reply, or the test closed the listener: the attack is over
            return

    def _answer(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            buffer = b""
            for reply in self.replies:
                while b"\n" not in buffer:
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                line, _, buffer = buffer.partition(b"\n")
                self.received.append(json.loads(line).get("method"))
                if reply:
                    connection.sendall(reply)
            connection.recv(1)  # hold the connection until the client closes it

    def close(self) -> None:
        self.listener.close()
        if self.thread.is_alive():  # still waiting in accept(): knock once so it returns
            try:
                with socket.socket(socket.AF_UNIX) as knock:
                    knock.connect(str(self.path))
            except OSError:
                pass
        self.thread.join(WAIT_S)


def _thin(path: Path, timeout_s: float = 5.0) -> object:
    from mcpmux.attach.thin import ThinSession
    from mcpmux.config.models import Config

    config = Config(servers=(_counter_entry(),))
    return ThinSession.attached(config, config.servers[0], timeout_s=timeout_s, path=path)


ATTACHED = b'{"jsonrpc": "2.0", "id": "mcpmux", "result": {"daemon_pid": 1}}\n'
INITIALIZED = b'{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "capabilities": {}}}\n'


@pytest.mark.slow
@pytest.mark.parametrize(
    "replies",
    [
        [b"HTTP/1.1 200 OK\r\n\r\nhello\n"],  # not JSON
        [b"x" * (2 * 1024 * 1024)],  # an endless first line
        [b""],  # silence: the client's own deadline
        [b'{"jsonrpc": "2.0", "id": "mcpmux", "error": {"code": -1, "message": "no"}}\n'],
        [ATTACHED, b'{"jsonrpc": "2.0", "id": 1, "result": ' + b"[" * 100_000 + b"\n"],  # nested garbage
    ],
    ids=["http", "oversized", "silent", "refused", "garbage-initialize"],
)
def test_the_thin_client_takes_the_ordinary_path_before_anything_is_sent(tmp_path: Path, replies: list[bytes]) -> None:
    from mcpmux.attach.thin import NotThin

    path = tmp_path / "d.sock"
    impostor = _Impostor(path, replies)
    try:
        with pytest.raises(NotThin), _thin(path, timeout_s=3.0):  # type: ignore[attr-defined]
            pass
    finally:
        impostor.close()
    assert "tools/call" not in impostor.received


def test_a_garbled_answer_to_the_call_is_exit_3_never_a_second_call(tmp_path: Path) -> None:
    from mcpmux.attach.thin import ThinSession

    path = tmp_path / "d.sock"
    impostor = _Impostor(path, [ATTACHED, INITIALIZED, b"", b"{not json\n"])
    try:
        session = _thin(path)
        assert isinstance(session, ThinSession)
        with session, pytest.raises(DaemonUnavailable, match="closed before it answered tools/call"):
            session.call("tools/call", {"name": "bump", "arguments": {}})
    finally:
        impostor.close()
    assert impostor.received == ["mcpmux/attach", "initialize", "notifications/initialized", "tools/call"]


def test_the_thin_client_refuses_a_world_writable_or_symlinked_socket(tmp_path: Path) -> None:
    from mcpmux.attach.thin import NotThin

    path = tmp_path / "d.sock"
    impostor = _Impostor(path, [ATTACHED])
    try:
        os.chmod(path, 0o666)
        with pytest.raises(NotThin, match="lets other users in"), _thin(path):  # type: ignore[attr-defined]
            pass
        os.chmod(path, 0o600)
        link = tmp_path / "link.sock"
        link.symlink_to(path)
        with pytest.raises(NotThin, match="symbolic link"), _thin(link):  # type: ignore[attr-defined]
            pass
    finally:
        impostor.close()
    assert impostor.received == []


# -- mcpmux/attach-all (connect --all served in the daemon) and the connect relay ------------------


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}},
}  # fmt: skip


def _all_params(*servers: StdioServerConfig) -> dict[str, object]:
    from mcpmux.attach.attach import AttachAll
    from mcpmux.config.models import Config

    return AttachAll("attack@/", Config(servers=servers)).params()


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"config": "nonsense"},
        {"config": {"servers": [{"name": "x"}]}},  # neither command nor url
        {"config": {"servers": []}, "server_secrets": "x"},
        {"config": {"servers": [], "unknown_section": {}}},
    ],
    ids=["no-config", "not-an-object", "invalid-server", "secrets-not-a-mapping", "unknown-key"],
)
def test_a_hostile_attach_all_is_answered_with_an_error_and_nothing_is_spawned(
    daemon: Daemon, params: dict[str, object]
) -> None:
    daemon.start("--linger", "600")
    reply = json.loads(_raw(daemon, request_line("mcpmux/attach-all", params)))
    assert reply["error"]["code"] == -32602, reply
    assert "invalid attach-all request" in reply["error"]["message"]
    status = daemon.status()
    assert status is not None and status["servers"] == []


def _attached_all(daemon: Daemon, params: dict[str, object]) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(WAIT_S)
    sock.connect(str(daemon.socket))
    sock.sendall(request_line("mcpmux/attach-all", params))
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = sock.recv(1)
        assert chunk, "the daemon closed the connection instead of attaching"
        reply += chunk
    assert "result" in json.loads(reply), reply
    return sock


@pytest.mark.slow
@pytest.mark.parametrize(
    "garbage",
    [b"not json\n", b"[" * 100_000 + b"\n", b"x" * (17 * 1024 * 1024)],
    ids=["garbage", "nested", "over-the-message-limit"],
)
def test_garbage_in_an_all_session_harms_that_session_only(daemon: Daemon, garbage: bytes) -> None:
    daemon.start("--linger", "600")
    params = _all_params(_counter_entry())
    with _attached_all(daemon, params) as hostile:
        try:
            hostile.sendall(garbage)
            hostile.shutdown(socket.SHUT_WR)
            while hostile.recv(65536):  # an error answer at most, then the end
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending
    probe = cli("--json", "daemon", "status")
    assert probe[0] == 0, probe  # the daemon answers (it closed the connection while an instance started)
    with _attached_all(daemon, params) as next_client:
        next_client.sendall(json.dumps(INITIALIZE).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = next_client.recv(65536)
            assert chunk
            answer += chunk
        assert json.loads(answer.splitlines()[0])["id"] == 1


@pytest.mark.slow
def test_an_all_session_killed_mid_call_releases_its_servers_and_the_pool_serves_on(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    params = json.dumps(_all_params(_counter_entry()))
    script = """
import json, socket, sys, time
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
lines = sock.makefile("rb")
def send(message):
    sock.sendall(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\\n")
send({"id": "mcpmux", "method": "mcpmux/attach-all", "params": json.loads(sys.argv[2])})
lines.readline()
hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "victim", "version": "1"}}
send({"id": 1, "method": "initialize", "params": hello})
lines.readline()
send({"method": "notifications/initialized"})
wait = {"name": "counter__wait", "arguments": {"marker": sys.argv[3], "seconds": 600}}
send({"id": 2, "method": "tools/call", "params": wait})
print("sent", flush=True)
time.sleep(600)
"""
    marker = daemon.runtime / "marker"
    victim = subprocess.Popen(
        [sys.executable, "-I", "-c", script, str(daemon.socket), params, str(marker)], stdout=subprocess.PIPE
    )
    try:
        assert victim.stdout is not None and victim.stdout.readline().strip() == b"sent"
        daemon.wait_for(marker.exists, "the call to reach the server")
        before = daemon.server_pids()
        victim.kill()
    finally:
        victim.wait(WAIT_S)
        if victim.stdout is not None:
            victim.stdout.close()

    def released() -> bool:
        status = daemon.status() or {}
        return [s["clients"] for s in status.get("servers", [])] == [0]  # type: ignore[attr-defined]

    daemon.wait_for(released, "the killed session to release its server")
    with _attached_all(daemon, json.loads(params)) as next_client:
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "counter__bump", "arguments": {}}}
        for message in (INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
            next_client.sendall(json.dumps(message).encode() + b"\n")
        answer: dict[str, object] = {}
        with next_client.makefile("rb") as lines:
            while answer.get("id") != 2:
                answer = json.loads(lines.readline())
    assert "error" not in answer and "isError" not in json.dumps(answer).replace('"isError": false', ""), answer
    assert daemon.server_pids() == before  # the same warm process served the next session


def _config_file(daemon: Daemon) -> Path:
    entry = _counter_entry()
    path = daemon.runtime / "attack.json"
    server = {"name": "counter", "command": entry.command, "args": list(entry.args), "cwd": str(REPO)}
    path.write_text(json.dumps({"mcp": {"servers": [server]}}), encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    "replies",
    [
        [b"HTTP/1.1 200 OK\r\n\r\nhello\n"],
        [b"x" * (2 * 1024 * 1024)],
        [b""],
        [b'{"jsonrpc": "2.0", "id": "mcpmux", "error": {"code": -1, "message": "no"}}\n'],
        [b"[1]\n"],
    ],
    ids=["http", "oversized", "silent", "refused", "not-an-object"],
)
def test_connect_never_relays_to_a_socket_that_did_not_attach_it(tmp_path: Path, replies: list[bytes]) -> None:
    from mcpmux.daemon.shim import attach_socket

    path = tmp_path / "d.sock"
    impostor = _Impostor(path, replies)
    try:
        with pytest.raises(DaemonUnavailable):
            attach_socket("mcpmux/attach-all", _all_params(_counter_entry()), path, timeout_s=3.0)
    finally:
        impostor.close()


@pytest.mark.slow
def test_connect_refuses_a_world_writable_socket_and_serves_itself_or_says_why(daemon: Daemon, tmp_path: Path) -> None:
    (daemon.runtime / "mcpmux").mkdir(mode=0o700)
    with _fake_socket(daemon.socket):
        os.chmod(daemon.socket, 0o666)
        argv = [sys.executable, "-m", "mcpmux", "--config", str(_config_file(daemon)), "connect", "--all"]
        on = subprocess.run([*argv[:3], "--daemon", *argv[3:]], env=daemon.env, capture_output=True, timeout=120)
        assert on.returncode == 3
        assert "lets other users in" in on.stderr.decode()
        # auto: served here, through the same gateway code (the host gets an answer, not the impostor)
        auto = subprocess.run(
            argv, env={**daemon.env, "MCPMUX_DAEMON": "auto"}, input=json.dumps(INITIALIZE).encode() + b"\n",
            capture_output=True, timeout=120,
        )  # fmt: skip
        assert auto.returncode == 0, auto.stderr.decode()[-2000:]
        assert json.loads(auto.stdout.splitlines()[0])["id"] == 1


@pytest.mark.parametrize("argv", [[], ["x"], ["0"]], ids=["no-fd", "not-a-number", "not-a-socket"])
def test_the_relay_run_by_hand_says_what_is_wrong(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcpmux.daemon.relay", *argv], stdin=subprocess.DEVNULL, capture_output=True,
        timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode in (2, 3)
    assert done.stderr.decode().count("\n") == 1, done.stderr


@pytest.mark.slow
def test_a_hostile_tools_request_is_answered_with_an_error_and_nothing_is_spawned(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    for params in ({}, {"server": "nonsense"}, {"server": {"name": "x", "type": "http", "url": "http://127.0.0.1:1"}}):
        reply = json.loads(_raw(daemon, request_line("mcpmux/tools", params)))
        assert reply["error"]["code"] == -32602, reply
    status = daemon.status()
    assert status is not None and status["servers"] == []


@pytest.mark.slow
def test_the_thin_tools_list_takes_the_ordinary_path_on_a_garbled_answer(tmp_path: Path) -> None:
    from mcpmux.attach.thin import NotThin, list_tools
    from mcpmux.config.models import Config

    config = Config(servers=(_counter_entry(),))
    for reply in (
        b'{"jsonrpc": "2.0", "id": "mcpmux", "result": {"tools": "no"}}\n',
        b'{"jsonrpc": "2.0", "id": "mcpmux", "result": {"tools": [{"no-tool-key": 1}]}}\n',
        b"[" * 100_000 + b"\n",
        b"",
    ):
        path = tmp_path / "d.sock"
        impostor = _Impostor(path, [reply])
        try:
            with pytest.raises(NotThin):
                list_tools(config, config.servers[0], timeout_s=3.0, path=path)
        finally:
            impostor.close()
            path.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("first", ["mcpmux/attach", "mcpmux/tools"])
def test_clients_that_hang_up_before_the_answer_never_take_the_daemon_down(daemon: Daemon, first: str) -> None:
    """A client that sends its first request and goes (a killed command, Ctrl-C) leaves the daemon serving:
    the answer's write fails on a closed socket, which ends that connection only."""
    daemon.start("--linger", "600")
    attach = Attach("attack", _counter_entry(), Settings(), SecurityConfig(), client="attack")
    line = request_line(first, attach.params())
    for _ in range(5):  # the first starts the server (slow: the answer surely finds the socket closed)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(daemon.socket))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.sendall(line)  # and close at once, with a reset
    daemon.wait_for(lambda: "counter" in daemon.server_pids(), "the server the hung-up clients asked for", WAIT_S)
    assert daemon.status() is not None
    code, _, err = cli("daemon", "status")
    assert code == 0, err
    assert "Traceback" not in daemon.log.read_text()


@pytest.mark.anyio
async def test_an_unexpected_failure_of_a_request_is_answered_and_logged_and_the_daemon_serves_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in a request's handling (here: the pool raises what it never should) is an error reply
    naming it and a logged traceback; the daemon, in process here to plant the bug, serves the next."""
    from mcpmux.daemon import pool as pool_module
    from mcpmux.daemon.service import DaemonOptions, serve_daemon

    async def broken(self: object, attach: object) -> object:
        raise RuntimeError("a planted bug")

    monkeypatch.setattr(pool_module.Pool, "acquire", broken)
    runtime = Path(tempfile.mkdtemp(prefix="mxu", dir="/tmp"))
    path = runtime / "d.sock"
    attach = Attach("attack", _counter_entry(), Settings(), SecurityConfig(), client="attack")
    try:
        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_daemon, DaemonOptions(linger_s=600, socket=path), lambda _line: None)
                while not path.exists():  # noqa: ASYNC110 (another task binds it: nothing to wait on but the file)
                    await anyio.sleep(0.02)
                for first in ("mcpmux/attach", "mcpmux/tools"):
                    answer = await anyio.to_thread.run_sync(_raw_at, path, request_line(first, attach.params()))
                    error = json.loads(answer)["error"]
                    assert error["code"] == -32603 and "RuntimeError: a planted bug" in error["message"], error
                assert (await request("mcpmux/status", path))["servers"] == []
                await request("mcpmux/stop", path)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    assert any("a planted bug" in r.getMessage() or r.exc_info for r in caplog.records if r.levelname == "ERROR")


def _raw_at(path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(WAIT_S)
        sock.connect(str(path))
        sock.sendall(payload)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_hostile_known_attaches_are_refused_and_nothing_is_spawned(daemon: Daemon) -> None:
    """``mcpmux/attach-known`` with digests the daemon never kept, of the wrong shape or for another
    server, and attaches whose ``known`` part is malformed: refused, nothing kept, nothing spawned."""
    daemon.start("--linger", "600")
    for params in (
        {"key": "0" * 64, "name": "counter"},
        {"key": "../../etc/passwd", "name": "counter"},
        {"key": ["0" * 64], "name": {"x": 1}},
        {"key": "0" * 10_000, "name": "x" * 10_000},
        None,
        "nonsense",
    ):
        reply = json.loads(_raw(daemon, request_line("mcpmux/attach-known", params)))  # type: ignore[arg-type]
        assert reply["error"]["code"] == -32004, reply
    attach = Attach("attack", _counter_entry(), Settings(), SecurityConfig(), client="attack")
    meta = {"timeout_s": 30, "max_message_bytes": 1_000_000, "secrets": []}
    for known in (
        {"key": "A" * 64, "name": "counter", "meta": meta},  # not lowercase hex
        {"key": "a" * 64, "name": "other", "meta": meta},  # another server's name
        {"key": "a" * 64, "name": "counter", "meta": {**meta, "timeout_s": -1}},
        {"key": "a" * 64, "name": "counter", "meta": {**meta, "secrets": [1]}},
        {"key": "a" * 64, "name": "counter"},
        "a" * 64,
    ):
        reply = json.loads(_raw(daemon, request_line("mcpmux/attach", {**attach.params(), "known": known})))
        assert reply["error"]["code"] == -32602, (known, reply)
    status = daemon.status()
    assert status is not None and status["servers"] == []  # nothing was spawned


@pytest.mark.slow
def test_a_known_attach_serves_only_the_entry_kept_under_that_digest_and_name(daemon: Daemon) -> None:
    """A digest kept for one server never attaches another name, and is only served while its instance runs."""
    daemon.start("--linger", "600")
    attach = Attach("attack", _counter_entry(), Settings(), SecurityConfig(), client="cli", answers=("elicitation",))
    key = "b" * 64
    meta = {"timeout_s": 30, "max_message_bytes": 1_000_000, "secrets": ["s3cret"]}
    with socket.socket(socket.AF_UNIX) as keeper:  # a client that sends the whole entry, asking to keep it
        keeper.settimeout(WAIT_S)
        keeper.connect(str(daemon.socket))
        keeper.sendall(
            request_line("mcpmux/attach", {**attach.params(), "known": {"key": key, "name": "counter", "meta": meta}})
        )
        assert b'"result"' in keeper.recv(65536)
        reply = json.loads(_raw(daemon, request_line("mcpmux/attach-known", {"key": key, "name": "other"})))
        assert reply["error"]["code"] == -32004
        with socket.socket(socket.AF_UNIX) as known:
            known.settimeout(WAIT_S)
            known.connect(str(daemon.socket))
            known.sendall(request_line("mcpmux/attach-known", {"key": key, "name": "counter"}))
            answer = json.loads(known.recv(65536).partition(b"\n")[0])
            assert answer["result"]["meta"] == {**meta, "timeout_s": 30.0}, answer
