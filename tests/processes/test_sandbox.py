"""Sandboxed stdio servers: the argv we build, and what a sandboxed child really cannot do.

The real tests run child processes under each backend that works here (bubblewrap, Landlock +
seccomp) and probe from inside: a TCP connect to a listener of ours, a UDP datagram, reads and
writes in and out of the configured paths, the environment, and death with a SIGKILLed host.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from mcpmux.config.effective import fingerprint
from mcpmux.config.models import (
    SandboxConfig,
    SecurityConfig,
    ServerSecurity,
    Settings,
    StdioServerConfig,
    TcpServerConfig,
)
from mcpmux.connection import Connection
from mcpmux.errors import TransportError
from mcpmux.processes import sandbox as sandbox_module
from mcpmux.processes.sandbox import (
    BACKEND_ENV_VAR,
    SandboxBackend,
    bwrap_argv,
    effective_sandbox,
    install_prefixes,
    landlock_argv,
    sandbox_backend,
    sandbox_command,
    with_effective_sandbox,
)
from mcpmux.transports.stdio import child_environment
from tests.peers.fixtures import stdio_command
from tests.transports.conftest import FIXTURE, MCPMUX_CODE, WAIT_S

ON = SandboxConfig(enabled=True)
SERVER_ON = SandboxConfig(enabled=True, filesystem=(MCPMUX_CODE,))
BACKENDS = ("bubblewrap", "landlock")


def stdio(sandbox: SandboxConfig | None = None, **fields: object) -> StdioServerConfig:
    security = ServerSecurity(sandbox=sandbox) if sandbox is not None else None
    return StdioServerConfig(name="fx", command=sys.executable, args=(str(FIXTURE),), security=security, **fields)


# --- configuration ----------------------------------------------------------------------------


def test_no_sandbox_unless_enabled_somewhere() -> None:
    assert effective_sandbox(stdio(), SecurityConfig()) is None


def test_the_global_sandbox_applies_to_every_stdio_server_but_not_to_network_ones() -> None:
    security = SecurityConfig(sandbox=SandboxConfig(enabled=True, filesystem=("/data",)))
    assert effective_sandbox(stdio(), security) == security.sandbox
    assert effective_sandbox(TcpServerConfig(name="t", url="tcp://127.0.0.1:1"), security) is None


def test_a_server_overrides_only_the_keys_it_sets() -> None:
    security = SecurityConfig(sandbox=SandboxConfig(enabled=True, filesystem=("/data",)))
    merged = effective_sandbox(stdio(SandboxConfig(network=True)), security)
    assert merged == SandboxConfig(enabled=True, network=True, filesystem=("/data",))
    assert effective_sandbox(stdio(SandboxConfig(enabled=False)), security) is None


def test_a_servers_own_sandbox_block_turns_the_sandbox_on() -> None:
    merged = effective_sandbox(stdio(SandboxConfig(writable=("/out",))), SecurityConfig())
    assert merged == SandboxConfig(enabled=True, writable=("/out",))


def test_with_effective_sandbox_gives_the_transport_the_merged_sandbox() -> None:
    security = SecurityConfig(sandbox=SandboxConfig(enabled=True, writable=("/out",)))
    server = with_effective_sandbox(stdio(), security)
    assert server.security is not None
    assert server.security.sandbox == security.sandbox


@pytest.mark.parametrize(
    ("own", "global_sandbox"),
    [(None, SandboxConfig()), (None, ON), (ServerSecurity(denied_tools=("x",)), SandboxConfig()),
     (ServerSecurity(sandbox=SandboxConfig(network=True)), SandboxConfig(filesystem=("/data",)))],
)  # fmt: skip
def test_with_effective_sandbox_builds_the_same_server_and_fingerprint_as_a_fresh_merge(
    own: ServerSecurity | None, global_sandbox: SandboxConfig
) -> None:
    server = StdioServerConfig(name="fx", command="python", security=own)
    security = SecurityConfig(sandbox=global_sandbox)
    sandbox = effective_sandbox(server, security) or SandboxConfig(enabled=False)
    fresh = server.model_copy(update={"security": (own or ServerSecurity()).model_copy(update={"sandbox": sandbox})})
    boxed = with_effective_sandbox(server, security)
    assert boxed == fresh
    assert boxed.security is not None and fresh.security is not None
    assert boxed.security.model_fields_set == fresh.security.model_fields_set
    assert fingerprint(boxed) == fingerprint(fresh)


# --- the argv -----------------------------------------------------------------------------------


def test_bwrap_argv_isolates_network_pids_and_dies_with_its_parent(tmp_path: Path) -> None:
    sandbox = SandboxConfig(enabled=True, filesystem=("data",), writable=(str(tmp_path / "out"),))
    argv = bwrap_argv("/usr/bin/cat", ["-n"], sandbox, str(tmp_path), {"PATH": "/usr/bin"})
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert argv[-3:] == ["--", "/usr/bin/cat", "-n"]
    pairs = list(itertools.pairwise(argv))
    assert ("--ro-bind-try", str(tmp_path / "data")) in pairs
    assert ("--bind-try", str(tmp_path / "out")) in pairs
    assert ("--chdir", str(tmp_path)) in pairs
    assert ("--tmpfs", "/tmp") in pairs
    assert ("--ro-bind-try", "/usr") in pairs


def test_bwrap_argv_keeps_the_network_when_allowed() -> None:
    argv = bwrap_argv("/usr/bin/true", [], SandboxConfig(enabled=True, network=True), None, {})
    assert "--unshare-net" not in argv


def test_the_landlock_launcher_gets_the_same_paths(tmp_path: Path) -> None:
    sandbox = SandboxConfig(enabled=True, filesystem=(str(tmp_path),), writable=(str(tmp_path / "w"),))
    argv = landlock_argv("/usr/bin/true", ["x"], sandbox, None, {})
    pairs = list(itertools.pairwise(argv))
    assert ("--ro", str(tmp_path)) in pairs
    assert ("--rw", str(tmp_path / "w")) in pairs
    assert "--no-network" in argv
    assert argv[-3:] == ["--", "/usr/bin/true", "x"]


def test_the_install_prefix_of_a_venv_script_and_of_a_node_package(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script = venv / "bin" / "server"
    script.write_text(f"#!{sys.executable}\n")
    script.chmod(0o755)
    package = tmp_path / "app" / "node_modules" / "@scope" / "server" / "dist" / "index.js"
    package.parent.mkdir(parents=True)
    package.write_text("")
    prefixes = install_prefixes(str(script), ["--flag", str(package), str(tmp_path)], {"PATH": "/usr/bin"})
    assert str(venv) in prefixes
    assert str(tmp_path / "app" / "node_modules") in prefixes
    assert str(tmp_path) not in prefixes  # a directory argument is data, not the program
    assert install_prefixes("/usr/bin/env", [], {}) == []


def test_a_program_in_the_home_folder_exposes_itself_not_the_home(tmp_path: Path) -> None:
    script = Path.home() / "server.py"
    script.write_text("print()\n")
    assert install_prefixes(sys.executable, [str(script)], {})[-1] == str(script)


def test_a_required_sandbox_without_backend_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    none = SandboxBackend("none", (), (("bubblewrap", "not installed"), ("landlock", "no Landlock")))
    monkeypatch.setattr(sandbox_module, "sandbox_backend", lambda: none)
    with pytest.raises(TransportError, match="bubblewrap: not installed; landlock: no Landlock") as raised:
        sandbox_command(stdio(ON), sys.executable, {})
    assert raised.value.hint is not None
    assert "required: false" in raised.value.hint


def test_an_optional_sandbox_without_backend_runs_bare_and_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sandbox_module, "sandbox_backend", lambda: SandboxBackend("none", (), (("x", "why"),)))
    with caplog.at_level(logging.WARNING, "mcpmux.transports"):
        argv = sandbox_command(stdio(SandboxConfig(enabled=True, required=False)), sys.executable, {})
    assert argv == [sys.executable, str(FIXTURE)]
    assert "WITHOUT a sandbox" in caplog.text
    assert "x: why" in caplog.text


def test_an_unsandboxed_server_runs_its_bare_command() -> None:
    assert sandbox_command(stdio(), "/bin/x", {}) == ["/bin/x", str(FIXTURE)]


def test_the_detected_backend_says_what_it_enforces_and_why_not_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BACKEND_ENV_VAR, raising=False)
    detected = sandbox_backend()
    assert sandbox_backend() is detected  # probed once
    if detected.name == "none":
        assert {name for name, _why in detected.unavailable} == {"bubblewrap", "landlock"}
    else:
        assert detected.enforces
    monkeypatch.setenv(BACKEND_ENV_VAR, "nonsense")
    assert sandbox_backend().name == "none"
    assert "unknown MCPMUX_SANDBOX_BACKEND" in sandbox_backend().explain()


# --- real children ---------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each backend that works on this machine (forced through ``MCPMUX_SANDBOX_BACKEND``)."""
    name: str = request.param
    monkeypatch.setenv(BACKEND_ENV_VAR, name)
    detected = sandbox_backend()
    if detected.name != name:
        pytest.skip(f"{name} unusable here: {detected.explain()}")
    return name


def run_sandboxed(code: str, sandbox: SandboxConfig, env: dict[str, str] | None = None) -> str:
    """Run ``python -c code`` in the sandbox of the current backend; its stdout."""
    server = StdioServerConfig(name="probe", command=sys.executable, args=("-c", code),
                               security=ServerSecurity(sandbox=sandbox))  # fmt: skip
    child_env = child_environment(server, env)
    argv = sandbox_command(server, sys.executable, child_env)
    done = subprocess.run(argv, env=child_env, capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


PROBE = """
import socket, sys
try:
    {action}
    print("ALLOWED")
except OSError as exc:
    print("DENIED", exc.errno)
"""


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


@pytest.mark.subprocess
@pytest.mark.network
def test_a_sandboxed_server_cannot_connect_to_a_loopback_listener(backend: str, tcp_listener: socket.socket) -> None:
    port = tcp_listener.getsockname()[1]
    action = f"socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    assert run_sandboxed(PROBE.format(action=action), ON).startswith("DENIED")
    assert run_sandboxed(PROBE.format(action=action), SandboxConfig(enabled=True, network=True)) == "ALLOWED"


@pytest.mark.subprocess
@pytest.mark.network
def test_a_sandboxed_server_cannot_send_udp_either(backend: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(0.5)
        port = receiver.getsockname()[1]
        action = f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))"
        outcome = run_sandboxed(PROBE.format(action=action), ON)
        # bwrap's namespace has its own loopback: the datagram leaves, to nowhere; seccomp refuses the socket.
        assert outcome == ("ALLOWED" if backend == "bubblewrap" else "DENIED 13")
        with pytest.raises(TimeoutError):
            receiver.recvfrom(16)


@pytest.mark.subprocess
def test_a_sandboxed_server_reads_only_its_paths(backend: str, tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (inside / "ok.txt").write_text("visible")
    (outside / "secret.txt").write_text("secret")
    sandbox = SandboxConfig(enabled=True, filesystem=(str(inside),))
    assert run_sandboxed(f"print(open({str(inside / 'ok.txt')!r}).read())", sandbox) == "visible"
    action = f"open({str(outside / 'secret.txt')!r}).read()"
    assert run_sandboxed(PROBE.format(action=action), sandbox).startswith("DENIED")
    home = f"open({str(Path.home() / '.bashrc')!r}).read()"
    (Path.home() / ".bashrc").write_text("secret")
    assert run_sandboxed(PROBE.format(action=home), sandbox).startswith("DENIED")


@pytest.mark.subprocess
def test_a_sandboxed_server_writes_only_in_writable_paths(backend: str, tmp_path: Path) -> None:
    readable, writable = tmp_path / "ro", tmp_path / "rw"
    readable.mkdir()
    writable.mkdir()
    sandbox = SandboxConfig(enabled=True, filesystem=(str(readable),), writable=(str(writable),))
    write = "open({!r}, 'w').write('x')"
    assert run_sandboxed(PROBE.format(action=write.format(str(writable / "f"))), sandbox) == "ALLOWED"
    assert (writable / "f").read_text() == "x"
    assert run_sandboxed(PROBE.format(action=write.format(str(readable / "f"))), sandbox).startswith("DENIED")
    # Under bwrap the write lands in the sandbox's private /tmp (tmp_path is below /tmp): never on the host.
    run_sandboxed(PROBE.format(action=write.format(str(tmp_path / "f"))), sandbox)
    assert not (readable / "f").exists()
    assert not (tmp_path / "f").exists()
    # The home is private and empty under both backends: a write there never reaches the real one.
    elsewhere = Path.home() / "f"
    run_sandboxed(PROBE.format(action=write.format(str(elsewhere))), sandbox)
    assert not elsewhere.exists()


@pytest.mark.subprocess
def test_a_parent_variable_outside_the_allow_list_never_reaches_a_sandboxed_child(backend: str) -> None:
    parent = dict(os.environ, MCPMUX_TEST_LEAK="secret")
    seen = json.loads(run_sandboxed("import json, os; print(json.dumps(dict(os.environ)))", ON, parent))
    assert "MCPMUX_TEST_LEAK" not in seen
    assert seen["PATH"] == parent["PATH"]


@pytest.mark.subprocess
@pytest.mark.anyio
async def test_a_real_mcp_server_works_inside_the_sandbox(backend: str) -> None:
    server = stdio(SERVER_ON, protocol="2025-11-25")
    async with Connection(server, Settings()) as connection:
        names = [tool.name for tool in await connection.list_tools()]
        result = await connection.call_tool("echo", {"text": "from the sandbox"})
    assert "echo" in names
    assert "from the sandbox" in str(result)


HOST = """
import sys, anyio
from mcp import ClientSession
from mcpmux.config.models import SandboxConfig, ServerSecurity, Settings, StdioServerConfig
from mcpmux.transports import open_transport

async def main() -> None:
    sandbox = SandboxConfig(enabled=True, filesystem=(sys.argv[2],))
    server = StdioServerConfig(name="fx", command=sys.executable, args=(sys.argv[1],),
                               security=ServerSecurity(sandbox=sandbox))
    async with open_transport(server, Settings()) as streams, ClientSession(streams.read, streams.write) as session:
        await session.initialize()
        await session.call_tool("spawn_grandchild", {})
        print("ready", flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


def wait_ready(process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], WAIT_S)
    line = process.stdout.readline() if readable else b""
    assert line.strip() == b"ready", f"host not ready: {line!r}"


def alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            continue
    return left


@pytest.mark.subprocess
def test_a_sandboxed_server_and_its_children_die_with_a_sigkilled_host(backend: str) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(FIXTURE), MCPMUX_CODE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
        env=dict(os.environ),
    )
    family: list[int] = []
    try:
        wait_ready(host)
        family = [child.pid for child in psutil.Process(host.pid).children(recursive=True)]
        names = [psutil.Process(pid).name() for pid in family]
        assert "sleep" in names, names
        os.kill(host.pid, signal.SIGKILL)
        host.wait(WAIT_S)
        deadline = time.monotonic() + 5
        while alive(family) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(family) == []
    finally:
        for pid in alive([host.pid, *family]):
            os.kill(pid, signal.SIGKILL)
        host.wait(WAIT_S)
        if host.stdout is not None:
            host.stdout.close()


@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.anyio
@pytest.mark.parametrize(("peer", "tool", "arguments"), [
    ("time", "get_current_time", {"timezone": "UTC"}),
    ("everything", "echo", {"message": "hi"}),
])  # fmt: skip
async def test_the_reference_servers_run_inside_the_sandbox(
    backend: str, peer: str, tool: str, arguments: dict[str, str]
) -> None:
    command, args = stdio_command(peer)
    server = StdioServerConfig(name="peer", command=command, args=tuple(args), security=ServerSecurity(sandbox=ON),
                               protocol="2025-11-25")  # fmt: skip
    async with Connection(server, Settings()) as connection:
        assert tool in [listed.name for listed in await connection.list_tools()]
        result = await connection.call_tool(tool, arguments)
    assert not result.is_error


def test_bwrap_mounts_parents_before_children_and_gives_a_private_home(tmp_path: Path) -> None:
    sandbox = SandboxConfig(enabled=True, filesystem=(str(tmp_path / "w" / "ro"),), writable=(str(tmp_path / "w"),))
    argv = bwrap_argv("/usr/bin/true", [], sandbox, None, {"HOME": "/home/someone"})
    pairs = list(itertools.pairwise(argv))
    # The read-only child is inside a writable grant: the writable grant covers it, once.
    assert ("--ro-bind-try", str(tmp_path / "w" / "ro")) not in pairs
    assert ("--bind-try", str(tmp_path / "w")) in pairs
    assert ("--tmpfs", "/home/someone") in pairs
    granted = bwrap_argv("/usr/bin/true", [], SandboxConfig(enabled=True, filesystem=("/home",)), None,
                         {"HOME": "/home/someone"})  # fmt: skip
    assert ("--tmpfs", "/home/someone") not in list(itertools.pairwise(granted))


@pytest.mark.subprocess
@pytest.mark.anyio
@pytest.mark.parametrize("network", [False, True])
async def test_a_sandboxed_package_runner_that_fails_says_the_sandbox_hides_its_cache(
    tmp_path: Path, backend: str, network: bool
) -> None:
    npx = tmp_path / "bin" / "npx"
    npx.parent.mkdir()
    npx.write_text("#!/bin/sh\necho 'npm error code ENOTCACHED' >&2\nexit 1\n", encoding="utf-8")
    npx.chmod(0o755)
    sandbox = SandboxConfig(enabled=True, network=network)
    server = StdioServerConfig(
        name="pkg", command=str(npx), args=("-y", "@acme/server"), security=ServerSecurity(sandbox=sandbox)
    )
    with pytest.raises(TransportError) as caught:
        async with Connection(server, Settings()) as connection:
            await connection.list_tools()
    message = str(caught.value)
    assert "ENOTCACHED" in message, message
    assert "npx runs inside the sandbox, which hides its package cache" in message, message
    assert ("and the network" in message) is not network, message
    assert "security.sandbox.filesystem" in message


def test_an_unsandboxed_or_plain_command_gets_no_package_runner_note() -> None:
    from mcpmux.processes.sandbox import package_runner_note

    assert package_runner_note(StdioServerConfig(name="p", command="npx", args=("-y", "x"))) is None
    assert package_runner_note(stdio(ON)) is None
    boxed = ServerSecurity(sandbox=ON)
    assert package_runner_note(StdioServerConfig(name="p", command="uv", args=("tool", "run", "x"), security=boxed))
    assert package_runner_note(StdioServerConfig(name="p", command="/usr/bin/uvx", args=("x",), security=boxed))
