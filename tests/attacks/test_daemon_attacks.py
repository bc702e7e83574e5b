"""Attacks on ``mcpmux daemon``: impostor sockets, other users, hostile first lines, slow and dying clients.

The daemon spawns whatever entry a client sends, so who may talk to it is the whole of its
security: only this user's processes (``SO_PEERCRED``), through a socket and directory that no
one else can replace or write to. Everything here runs against a real daemon process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest

from mcpmux.config.models import SecurityConfig, Settings, StdioServerConfig
from mcpmux.daemon.attach import Attach, request_line
from mcpmux.daemon.client import exchange, request
from mcpmux.errors import DaemonUnavailable
from tests.daemon.conftest import REPO, Daemon, cli, daemon_fixture  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(300)]

NOBODY = 65534
WAIT_S = 30.0


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


def test_a_runtime_directory_open_to_others_is_refused_by_the_daemon_too(daemon: Daemon) -> None:
    (daemon.runtime / "mcpmux").mkdir(mode=0o700)
    os.chmod(daemon.runtime / "mcpmux", 0o755)
    process = daemon.spawn()
    assert process.wait(WAIT_S) != 0
    assert "its mode 755 lets other users in" in daemon.log.read_text()
    assert not daemon.socket.exists()


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


def test_an_unknown_first_request_and_an_invalid_entry_are_answered_with_an_error(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    unknown = json.loads(_raw(daemon, request_line("tools/list")))
    assert unknown["error"]["code"] == -32601
    for server in ({"name": "x", "type": "http", "url": "http://127.0.0.1:1/mcp"}, {"name": "x"}, "nonsense"):
        reply = json.loads(_raw(daemon, request_line("mcpmux/attach", {"server": server})))
        assert reply["error"]["code"] == -32602, reply
    status = daemon.status()
    assert status is not None and status["servers"] == []  # nothing was spawned


def test_a_silent_client_does_not_block_others_and_is_dropped(daemon: Daemon) -> None:
    daemon.start("--linger", "600")
    with socket.socket(socket.AF_UNIX) as silent:
        silent.connect(str(daemon.socket))
        assert daemon.status() is not None  # served while the silent one holds its connection
        silent.settimeout(WAIT_S)
        assert silent.recv(1) == b""  # dropped after the attach deadline


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
