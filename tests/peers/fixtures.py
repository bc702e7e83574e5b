"""Real reference MCP peers for tests and benchmarks: where they are, how to run them, live servers.

``scripts/install-peers`` installs them into ``tests/peers`` (npm packages and a Node 22 binary in
``node_modules``, the PyPI servers in ``.venv``), each part stamped with the hash of its pins. The
plain functions work anywhere (tests, ``bench/``, a REPL); the pytest fixtures at the bottom start
and stop servers. A missing or stale install raises :class:`PeersNotInstalledError` (a failure
saying "run scripts/install-peers"), never a skip.

Loopback only: server-everything and the conformance suite's mock servers listen on every
interface. :func:`loopback_env` preloads ``listen-loopback.cjs`` (rebinds wildcard listens to
127.0.0.1); :func:`netns_command` runs a command in a network namespace that has only ``lo``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import psutil
import pytest

__all__ = [
    "INSTALL_HINT",
    "STDIO_PEERS",
    "EverythingTransport",
    "PeerServer",
    "PeersNotInstalledError",
    "conformance_cli",
    "everything_http",
    "everything_js",
    "everything_sse",
    "filesystem_js",
    "free_port",
    "git_repo",
    "gunicorn",
    "httpbin",
    "inspector_cli",
    "loopback_env",
    "loopback_only_command",
    "make_git_repo",
    "memory_js",
    "netns_available",
    "netns_command",
    "node22",
    "peers_dir",
    "python_peer",
    "run_everything",
    "run_httpbin",
    "run_listening",
    "sqlite_command",
    "stdio_command",
    "stop_process_group",
]

INSTALL_HINT = "run scripts/install-peers"
STDIO_PEERS = ("everything", "filesystem", "memory", "time", "git")
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
KILL_REAP_TIMEOUT_S = 60.0
_POLL_INTERVAL_S = 0.02
_PORT_ATTEMPTS = 3

_PEERS_DIR = Path(__file__).resolve().parent
_MODULES = _PEERS_DIR / "node_modules"
_VENV_BIN = _PEERS_DIR / ".venv" / "bin"
_SQLITE_VENV = _PEERS_DIR / ".venv-field-sdk1"  # the field suite's SDK 1.x servers
_PRELOAD = _PEERS_DIR / "listen-loopback.cjs"
_REST_VENV = _PEERS_DIR / ".venv-rest"  # httpbin under gunicorn, for OpenAPI sources

EverythingTransport = Literal["streamableHttp", "sse"]
_ENDPOINTS: dict[str, str] = {"streamableHttp": "/mcp", "sse": "/sse"}


class PeersNotInstalledError(RuntimeError):
    """The peers are missing, or older than their pins; the message says how to install them."""


@dataclass(frozen=True)
class PeerServer:
    """A network peer running in its own process group.

    Attributes:
        url: the MCP endpoint (``http://127.0.0.1:PORT/mcp`` or ``.../sse``).
        port: the 127.0.0.1 port it listens on.
        pid: its PID, which is also its process group id.
    """

    url: str
    port: int
    pid: int


# --- where the peers are ---------------------------------------------------------------------


def peers_dir() -> Path:
    """The ``tests/peers`` directory (pins, preload, and the installs under it)."""
    return _PEERS_DIR


def _stamp_matches(stamp: Path, kind: str, *inputs: Path) -> bool:
    # Same key as scripts/install-peers: sha256 over the concatenated inputs, after a kind word.
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in inputs)).hexdigest()
    try:
        return stamp.read_text().split()[:2] == [kind, digest]
    except FileNotFoundError:
        return False


@functools.cache
def _npm_installed() -> bool:
    inputs = (_PEERS_DIR / "package.json", _PEERS_DIR / "package-lock.json")
    return _stamp_matches(_MODULES / ".install-peers.stamp", "npm", *inputs)


@functools.cache
def _pypi_installed() -> bool:
    return _stamp_matches(_PEERS_DIR / ".venv" / ".install-peers.stamp", "pip", _PEERS_DIR / "requirements.txt")


def _npm_file(relative: str) -> Path:
    path = _MODULES / relative
    if not _npm_installed() or not path.is_file():
        raise PeersNotInstalledError(f"npm peers missing or older than tests/peers/package-lock.json: {INSTALL_HINT}")
    return path


def node22() -> Path:
    """The Node 22 binary from the npm package ``node`` (the machine's own node may be older)."""
    return _npm_file("node/bin/node")


def everything_js() -> Path:
    """``@modelcontextprotocol/server-everything``'s entry point (argument: stdio|streamableHttp|sse)."""
    return _npm_file("@modelcontextprotocol/server-everything/dist/index.js")


def filesystem_js() -> Path:
    """``@modelcontextprotocol/server-filesystem``'s entry point (arguments: allowed directories)."""
    return _npm_file("@modelcontextprotocol/server-filesystem/dist/index.js")


def memory_js() -> Path:
    """``@modelcontextprotocol/server-memory``'s entry point (env ``MEMORY_FILE_PATH``, absolute)."""
    return _npm_file("@modelcontextprotocol/server-memory/dist/index.js")


def conformance_cli() -> list[str]:
    """Argv prefix of the conformance suite under Node 22; append ``client ...``, ``server ...``, ``list``."""
    return [str(node22()), str(_npm_file("@modelcontextprotocol/conformance/dist/index.js"))]


def conformance_2026_cli() -> list[str]:
    """As :func:`conformance_cli`, for the 0.2 alpha that adds the 2026-07-28 scenarios (npm alias)."""
    return [str(node22()), str(_npm_file("conformance-2026/dist/index.js"))]


def inspector_cli() -> list[str]:
    """Argv prefix of the MCP Inspector CLI under Node 22, ``--cli`` included.

    Append a target (a URL, or a command and its arguments) and e.g. ``--method tools/list``.
    It writes ``~/.mcp-inspector``: run it with ``HOME`` set to a scratch directory. Exit codes:
    0 ok, 4 server unreachable, 5 tool error.
    """
    launcher = _npm_file("@modelcontextprotocol/inspector/clients/launcher/build/index.js")
    return [str(node22()), str(launcher), "--cli"]


def python_peer(name: str) -> Path:
    """The console script ``name`` (``mcp-server-time``, ``mcp-server-git``) in ``tests/peers/.venv``."""
    path = _VENV_BIN / name
    if not _pypi_installed() or not path.is_file():
        raise PeersNotInstalledError(
            f"PyPI peer {name} missing or older than tests/peers/requirements.txt: {INSTALL_HINT}"
        )
    return path


def sqlite_command(database: Path) -> tuple[str, list[str]]:
    """The ``(command, args)`` that runs PyPI ``mcp-server-sqlite`` (SDK 1.x venv of the field suite) on ``database``.

    A server on the SDK 1.x low-level API: it advertises ``resources`` and answers
    ``resources/templates/list`` with -32601 (method not found).

    Raises:
        PeersNotInstalledError: not installed, or older than ``tests/peers/field/requirements-sdk1.txt``.
    """
    path = _SQLITE_VENV / "bin" / "mcp-server-sqlite"
    stamp = _SQLITE_VENV / ".install-peers.stamp"
    requirements = _PEERS_DIR / "field" / "requirements-sdk1.txt"
    if not _stamp_matches(stamp, "pip", requirements) or not path.is_file():
        raise PeersNotInstalledError(
            f"PyPI peer mcp-server-sqlite missing or older than {requirements}: {INSTALL_HINT}"
        )
    return str(path), ["--db-path", str(database)]


# --- how to run them ------------------------------------------------------------------------


def stdio_command(peer: str, *args: str) -> tuple[str, list[str]]:
    """The ``(command, args)`` that runs a peer over stdio; feed it to ``StdioServerParameters``.

    - ``everything``: ``node22 everything.js stdio *args``.
    - ``filesystem``: ``node22 filesystem.js *args``; args are the allowed directories (none: the
      client's roots decide, and the server sees none for ~0.3 s after connecting).
    - ``memory``: first arg is the absolute ``MEMORY_FILE_PATH`` (set through ``env``, so it cannot
      be forgotten; without it the server writes into node_modules; a relative path is taken
      relative to its ``dist`` folder).
    - ``time``: ``mcp-server-time --local-timezone UTC *args``.
    - ``git``: first arg is the repository: ``mcp-server-git -r REPO *rest``.

    Raises:
        ValueError: unknown peer, or a required first argument missing.
        PeersNotInstalledError: the peer is not installed.
    """
    if peer == "everything":
        return str(node22()), [str(everything_js()), "stdio", *args]
    if peer == "filesystem":
        return str(node22()), [str(filesystem_js()), *args]
    if peer == "memory":
        if not args or not Path(args[0]).is_absolute():
            raise ValueError("stdio_command('memory', MEMORY_FILE) needs an absolute path for the memory file")
        env = shutil.which("env") or "/usr/bin/env"
        return env, [f"MEMORY_FILE_PATH={args[0]}", str(node22()), str(memory_js()), *args[1:]]
    if peer == "time":
        return str(python_peer("mcp-server-time")), ["--local-timezone", "UTC", *args]
    if peer == "git":
        if not args:
            raise ValueError("stdio_command('git', REPO) needs the repository path")
        return str(python_peer("mcp-server-git")), ["-r", args[0], *args[1:]]
    raise ValueError(f"unknown peer {peer!r}; one of {', '.join(STDIO_PEERS)}")


@contextlib.contextmanager
def http_thread(
    handler: type[http.server.BaseHTTPRequestHandler], *, wrap: Callable[[socket.socket], socket.socket] | None = None
) -> Iterator[int]:
    """A real HTTP server on a loopback port, served by a thread: yields the port; shut down and joined after.

    ``wrap`` replaces its listening socket (``ssl.SSLContext.wrap_socket`` for HTTPS).
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if wrap is not None:
        server.socket = wrap(server.socket)
    thread = threading.Thread(target=server.serve_forever, name=f"http-{handler.__name__}", daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, never one another pytest-xdist worker is handed.

    Under xdist each worker (``PYTEST_XDIST_WORKER=gwN``) takes ports from its own block below the
    kernel's ephemeral range, in turn, skipping any that cannot be bound (a listener, or a connection
    lingering in TIME_WAIT): two workers never race for one port, and no outgoing connection is given
    one of them. Outside xdist (bench/, a REPL, a serial run) it is the kernel's pick of a free port.
    Either way another process may still take it before you do: start-ups retry on a new port.
    """
    block = _worker_port_block()
    if block is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            return port
    start, size = block
    for _ in range(size):
        candidate = start + next(_PORT_TURN) % size
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
        return candidate
    raise RuntimeError(f"no free port in this worker's block {start}-{start + size - 1}")


_PORT_TURN = itertools.count()
_PORT_BLOCK_SIZE = 500
_PORT_BLOCKS_START = 10_000


@functools.cache
def _worker_port_block() -> tuple[int, int] | None:
    """``(first port, size)`` of this xdist worker's block, or ``None`` outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32_768
    blocks = (ephemeral_low - _PORT_BLOCKS_START) // _PORT_BLOCK_SIZE
    if blocks < 1:
        return None
    return _PORT_BLOCKS_START + (int(worker[2:]) % blocks) * _PORT_BLOCK_SIZE, _PORT_BLOCK_SIZE


def loopback_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``NODE_OPTIONS`` preloading the loopback patch.

    Any Node process started with it (and its Node children, which inherit ``NODE_OPTIONS``) binds
    127.0.0.1 when it listens without a host or on 0.0.0.0 / ::.
    """
    env = dict(os.environ if base is None else base)
    require = f'--require "{_PRELOAD}"'
    env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} {require}".strip()
    return env


@functools.cache
def netns_available() -> bool:
    """Whether this machine can run a command in a fresh network namespace with only ``lo`` up.

    Needs ``unshare`` (util-linux), ``ip`` (iproute2) and the right to create namespaces (root or
    CAP_SYS_ADMIN; Docker's default seccomp profile refuses it). Probed once per process.
    """
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    try:
        probe = subprocess.run(_netns_wrap(["true"]), capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _netns_wrap(argv: Sequence[str]) -> list[str]:
    unshare = shutil.which("unshare") or "unshare"
    ip = shutil.which("ip") or "ip"
    # "$@" passes argv through untouched: no shell quoting of the wrapped command.
    return [unshare, "-n", "sh", "-c", f'{ip} link set lo up && exec "$@"', "sh", *argv]


def netns_command(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped to run in a new network namespace where only 127.0.0.1 (``lo``) exists.

    Raises:
        RuntimeError: no namespace here (see :func:`netns_available`); use
            :func:`loopback_only_command`, which falls back on the Node preload.
    """
    if not netns_available():
        raise RuntimeError("no loopback-only network namespace here (needs root, unshare and ip)")
    return _netns_wrap(argv)


def loopback_only_command(
    argv: Sequence[str], base_env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """``(argv, env)`` that keep every listener of ``argv`` off the network.

    In a loopback-only network namespace when available (:func:`netns_available`), always with the
    Node preload in ``env`` too (the only guard when there is no namespace). Inside a namespace the
    command cannot reach anything outside it, nor be reached: run client and server there together.
    """
    env = loopback_env(base_env)
    return (netns_command(argv) if netns_available() else list(argv)), env


# --- live servers ---------------------------------------------------------------------------


def _group_alive(pgid: int) -> bool:
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            # Fields after the ")" closing the command name: state, ppid, pgrp, ...
            state, _ppid, pgrp = stat.read_text().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue
        # A zombie holds no resources; it waits for a parent (maybe a lax PID 1) to reap it.
        if int(pgrp) == pgid and state != "Z":
            return True
    return False


def _wait_group_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL_S)
    return True


def stop_process_group(process: subprocess.Popen[bytes], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop a process started with ``start_new_session=True`` and everything in its group.

    SIGTERM to the group, then SIGKILL after ``timeout_s``; reaps the leader.

    Raises:
        AssertionError: a process of the group survived SIGKILL.
    """
    pgid = process.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        # After SIGKILL the leader is always reaped (a loaded machine may take a while): a Popen
        # left running is a ResourceWarning that filterwarnings=error pins on a later, unrelated test.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout_s if sig == signal.SIGTERM else max(timeout_s, KILL_REAP_TIMEOUT_S))
        if process.returncode is not None and _wait_group_gone(pgid, timeout_s):
            return
    raise AssertionError(f"process group {pgid} survived SIGKILL")


def _listens(pid: int, port: int) -> bool:
    # Owned by the child itself, not just "accepts": another process may have taken the port since
    # free_port() released it, and a connect would then succeed against the wrong server.
    try:
        process = psutil.Process(pid)
        for proc in (process, *process.children(recursive=True)):
            for conn in proc.net_connections("tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port:
                    return True
    except psutil.Error:
        return False
    return False


def _read_log(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read()[-4000:].decode(errors="replace")


def _start_listening(
    argv: Sequence[str], log: IO[bytes], timeout_s: float, port: int | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    deadline = time.monotonic() + timeout_s
    wanted = port
    for _attempt in range(_PORT_ATTEMPTS):
        port = wanted or free_port()
        env = loopback_env() | {"PORT": str(port)}
        process = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            while process.poll() is None and not _listens(process.pid, port):
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{argv[1]} did not listen on 127.0.0.1:{port} within {timeout_s} s")
                time.sleep(_POLL_INTERVAL_S)
        except BaseException:
            stop_process_group(process)
            raise
        if process.poll() is None:
            return process, port
        stop_process_group(process)
        # Lost the race for the free port to another process: take another one.
        output = _read_log(log)
        if wanted is not None or ("EADDRINUSE" not in output and "already in use" not in output):
            break
        log.seek(0)
        log.truncate()
    raise RuntimeError(f"{' '.join(argv)} exited with code {process.returncode}:\n{_read_log(log)}")


@contextlib.contextmanager
def run_everything(
    transport: EverythingTransport, *, timeout_s: float = START_TIMEOUT_S, port: int | None = None
) -> Iterator[PeerServer]:
    """Run server-everything over HTTP (``streamableHttp``) or SSE on a free 127.0.0.1 port (or ``port``).

    Waits (at most ``timeout_s``) until it listens on its port; on exit stops the process
    group and checks it is gone. Its output (it logs every HTTP request) goes to a temporary file,
    shown if it fails to start.

    Raises:
        PeersNotInstalledError: not installed.
        TimeoutError: it did not listen in time.
        RuntimeError: it exited during start-up.
    """
    argv = [str(node22()), str(everything_js()), transport]
    with tempfile.TemporaryFile() as log:
        process, bound = _start_listening(argv, log, timeout_s, port)
        try:
            yield PeerServer(url=f"http://127.0.0.1:{bound}{_ENDPOINTS[transport]}", port=bound, pid=process.pid)
        finally:
            stop_process_group(process)


@contextlib.contextmanager
def run_listening(argv: Sequence[str], *, port: int | None = None, timeout_s: float = START_TIMEOUT_S) -> Iterator[int]:
    """Run ``argv`` (which reads its port from ``PORT``) until it listens on 127.0.0.1; yield the port.

    Runs in its own process group; on exit the group is stopped and reaped.
    """
    with tempfile.TemporaryFile() as log:
        process, bound = _start_listening(argv, log, timeout_s, port)
        try:
            yield bound
        finally:
            stop_process_group(process)


def gunicorn() -> Path:
    """gunicorn in ``tests/peers/.venv-rest`` (with httpbin), checked against its pins."""
    path = _REST_VENV / "bin" / "gunicorn"
    requirements = _PEERS_DIR / "rest" / "requirements.txt"
    if not _stamp_matches(_REST_VENV / ".install-peers.stamp", "pip", requirements) or not path.is_file():
        raise PeersNotInstalledError(f"httpbin/gunicorn missing or older than {requirements}: {INSTALL_HINT}")
    return path


@contextlib.contextmanager
def run_httpbin(*, timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Run PyPI ``httpbin`` (a REST service with its own Swagger 2.0 document at ``/spec.json``)
    under gunicorn on a free 127.0.0.1 port; yield its base URL (``http://127.0.0.1:PORT``).

    The process group is stopped and reaped on exit.
    """
    for _attempt in range(_PORT_ATTEMPTS):
        port = free_port()
        argv = [
            str(gunicorn()),
            "--no-control-socket",
            "-b",
            f"127.0.0.1:{port}",
            "-k",
            "gthread",
            "--threads",
            "8",
            "httpbin:app",
        ]
        with tempfile.TemporaryFile() as log:
            try:
                process, bound = _start_listening(argv, log, timeout_s, port)
            except RuntimeError as exc:
                if "in use" in str(exc):
                    continue
                raise
            try:
                yield f"http://127.0.0.1:{bound}"
            finally:
                stop_process_group(process)
            return
    raise RuntimeError(f"httpbin found no free port in {_PORT_ATTEMPTS} attempts")


def make_git_repo(path: Path) -> Path:
    """Create a git repository at ``path`` with one commit (``README.md``), independent of any git config."""
    git = shutil.which("git")
    if git is None:
        raise RuntimeError("git not found on PATH (Debian: apt-get install git)")
    env = os.environ | {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "mcpmux tests",
        "GIT_AUTHOR_EMAIL": "tests@mcpmux.invalid",
        "GIT_COMMITTER_NAME": "mcpmux tests",
        "GIT_COMMITTER_EMAIL": "tests@mcpmux.invalid",
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / "README.md").write_text("mcpmux test repository\n")
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-q", "-m", "Initial commit"]):
        subprocess.run([git, "-C", str(path), *args], env=env, check=True, capture_output=True, timeout=30)
    return path


# --- pytest fixtures ------------------------------------------------------------------------


def _fail_unless_installed(*lookups: Callable[[], object]) -> None:
    try:
        for lookup in lookups:
            lookup()
    except PeersNotInstalledError as exc:
        pytest.fail(str(exc), pytrace=False)


def _everything_fixture(transport: EverythingTransport) -> Iterator[PeerServer]:
    _fail_unless_installed(node22, everything_js)
    with run_everything(transport) as server:
        yield server


@pytest.fixture
def everything_http() -> Iterator[PeerServer]:
    """server-everything in Streamable HTTP mode; ``.url`` is ``http://127.0.0.1:PORT/mcp``, ``.pid`` its PID."""
    yield from _everything_fixture("streamableHttp")


@pytest.fixture
def everything_sse() -> Iterator[PeerServer]:
    """server-everything in SSE mode; ``.url`` is ``http://127.0.0.1:PORT/sse``, ``.pid`` its PID."""
    yield from _everything_fixture("sse")


@pytest.fixture(scope="module")
def httpbin() -> Iterator[str]:
    """A live httpbin on 127.0.0.1 (module-scoped: it is stateless); the value is its base URL."""
    _fail_unless_installed(gunicorn)
    with run_httpbin() as url:
        yield url


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A temporary git repository with one commit, for mcp-server-git."""
    return make_git_repo(tmp_path / "repo")
