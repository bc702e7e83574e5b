"""A fork server for the tests' ``mcpmux`` children: the same CLI in a real process, without its import.

A test's ``mcpmux`` run spends most of its CPU importing (the MCP SDK builds the pydantic models of both
protocol revisions: about 1 s of CPU for ``call``, 1.5 s for ``serve``), and the suite starts ~760 of them
on a 2-core machine. Each pytest worker starts one *zygote*: a Python process that imports what the CLI
imports once, then forks a child per request that runs ``mcpmux.cli.main`` exactly as the console script
does, in the caller's working directory, environment, umask and standard streams.

Tests run :data:`MCPMUX`, a small stdlib-only *shim* (``python -IS``, ~10 ms of CPU) that asks the
worker's zygote for a child and stands in for it: it passes its three standard file descriptors over the
Unix socket (``SCM_RIGHTS``), forwards the signals it gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
SIGUSR2) to the child, and exits as the child exited (the same code, or killed by the same signal). When
the shim is killed outright (SIGKILL, a test's timeout), the zygote kills the child's process group.

What the shim does not make equal to a real ``mcpmux`` process, so the tests about those use
:data:`REAL` (the console script itself): the process tree (the child is the zygote's, not the shim's:
``psutil.Process(pid).children()``), a terminal (a shim whose stream is a tty runs :data:`REAL`), and a
different interpreter set-up (``PYTHON*`` variables other than the worker's own, or coverage.py measuring
children: the shim runs :data:`REAL` then too). ``MCPMUX_TEST_FORK=off`` turns the shim off.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REAL = str(Path(sys.executable).with_name("mcpmux"))
"""The console script: a real ``mcpmux`` process with its own interpreter."""

MCPMUX = REAL
"""What tests run as ``mcpmux``: the worker's shim once :func:`install` started its zygote, else REAL."""

FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
READY_TIMEOUT_S = 30.0
"""How long a worker waits for its zygote's socket (bound before the imports, so it is quick)."""

_MEASURED = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")
"""Set when coverage.py measures child processes (``[run] patch = subprocess`` sets the second): a shim
meeting either runs REAL, measured from its start as before."""


_APPLIED = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")
"""``PYTHON*`` variables a forked child applies itself (the SDK's stdio client drops them from its env)."""


def _interpreter_vars(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k not in _APPLIED}


# ---------------------------------------------------------------------------------------------------
# The shim: written into the worker's directory with its constants filled in. Standard library only.

_SHIM = r'''#!{python} -IS
"""mcpmux, through the test worker's fork server (tests/forkserver.py); runs the real one if it cannot."""
import json, os, signal, socket, struct, sys

SOCKET = {socket!r}
REAL = {real!r}
INTERPRETER_VARS = {interpreter_vars!r}
MEASURED = {measured!r}
APPLIED = {applied!r}
FORWARDED = {forwarded!r}


def real():
    os.execv(REAL, [REAL, *sys.argv[1:]])


def read(conn, size):
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main():
    env = dict(os.environ)
    mine = {{k: v for k, v in env.items() if k.startswith("PYTHON") and k not in APPLIED}}
    try:
        streams_usable = all(not os.isatty(fd) for fd in (0, 1, 2))
    except OSError:  # a closed standard descriptor
        streams_usable = False
    if not streams_usable or mine != INTERPRETER_VARS or any(name in env for name in MEASURED):
        real()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(SOCKET)
    except OSError:
        real()
    child = []
    pending = []

    def forward(signum, frame):
        if child:
            try:
                os.kill(child[0], signum)
            except ProcessLookupError:
                pass
        else:
            pending.append(signum)

    sigint_ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    for name in FORWARDED:
        number = getattr(signal, name)
        if signal.getsignal(number) != signal.SIG_IGN:
            signal.signal(number, forward)
    umask = os.umask(0o22)
    os.umask(umask)
    body = json.dumps({{"argv": sys.argv, "cwd": os.getcwd(), "env": env, "umask": umask,
                       "sigint_ignored": sigint_ignored}}).encode()
    try:
        socket.send_fds(conn, [struct.pack("!I", len(body)) + body], [0, 1, 2])
        answer = read(conn, 8)
    except OSError:
        answer = None
    if answer is None:  # the fork server is gone before it started anything: nothing ran yet
        real()
    child.append(struct.unpack("!q", answer)[0])
    for signum in pending:
        forward(signum, None)
    status = read(conn, 5)
    if status is None:
        sys.stderr.write(f"mcpmux (tests/forkserver.py): the fork server died while child {{child[0]}} ran\n")
        os._exit(70)
    kind, value = status[:1], struct.unpack("!i", status[1:])[0]
    if kind == b"S":
        if value != signal.SIGKILL:
            signal.signal(value, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [value])
        os.kill(os.getpid(), value)
        os._exit(128 + value)
    os._exit(value)


main()
'''


def write_shim(directory: Path, socket_path: Path, env: dict[str, str]) -> Path:
    """The shim ``mcpmux`` in ``directory``, talking to the zygote at ``socket_path``."""
    shim = directory / "mcpmux"
    shim.write_text(
        _SHIM.format(
            python=sys.executable,
            socket=str(socket_path),
            real=REAL,
            interpreter_vars=_interpreter_vars(env),
            measured=_MEASURED,
            applied=_APPLIED,
            forwarded=FORWARDED,
        ),
        encoding="utf-8",
    )
    shim.chmod(0o755)
    return shim


# ---------------------------------------------------------------------------------------------------
# The worker's side: start the zygote, point MCPMUX at the shim, stop it at the end.


@dataclass
class ForkServer:
    """A running zygote and its shim."""

    process: subprocess.Popen[bytes]
    directory: Path
    shim: Path

    def log(self) -> str:
        """What the zygote wrote to its stderr."""
        return (self.directory / "zygote.log").read_text(errors="replace")

    def stop(self) -> None:
        """End the zygote (it kills the children still running), then its directory."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()
        for path in self.directory.iterdir():
            path.unlink()
        self.directory.rmdir()


def start() -> ForkServer | None:
    """A zygote for this process, or None when ``MCPMUX_TEST_FORK=off`` or it does not come up (warned)."""
    if os.environ.get("MCPMUX_TEST_FORK", "on").lower() in ("off", "0", "no", "false"):
        return None
    directory = Path(tempfile.mkdtemp(prefix="mcpmux-fork-"))
    socket_path = directory / "zygote.sock"
    env = dict(os.environ)
    with (directory / "zygote.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", __file__, str(socket_path)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=directory,
        )  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not socket_path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            problem = (directory / "zygote.log").read_text(errors="replace")[-2000:]
            shutil.rmtree(directory)
            warnings.warn(
                f"tests/forkserver.py: no fork server, the tests run the console script: {problem}", stacklevel=2
            )
            return None
        time.sleep(0.01)
    return ForkServer(process, directory, write_shim(directory, socket_path, env))


_running: ForkServer | None = None


def install() -> None:
    """Start this process's zygote and point :data:`MCPMUX` at its shim (before test modules import it)."""
    global MCPMUX, _running
    _running = start()
    if _running is not None:
        MCPMUX = str(_running.shim)


def uninstall() -> None:
    """Stop this process's zygote (the children still running are killed with it)."""
    global MCPMUX, _running
    if _running is not None:
        _running.stop()
        _running, MCPMUX = None, REAL


# ---------------------------------------------------------------------------------------------------
# The zygote: run as ``python -P tests/forkserver.py SOCKET`` (-P: nothing of the tests is importable).

PRELOAD = (
    "mcpmux.serve.run",
    "mcpmux.serve.config",
    "mcpmux.gateway.server",
    "mcpmux.api.app",
    "mcpmux.console",
    "mcpmux.host",
    "mcp.client.session",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "uvicorn",
    "ctypes",
)


@dataclass
class _Child:
    pid: int
    pidfd: int
    conn: socket.socket | None


@dataclass
class _Request:
    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int
    sigint_ignored: bool
    fds: list[int]
    closing: list[Any] = field(default_factory=list)


def _preload() -> None:
    import importlib

    from mcpmux.cli.main import COMMANDS

    for module in sorted({module for module, _, _ in COMMANDS.values()} | set(PRELOAD)):
        importlib.import_module(module)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    conn.settimeout(10)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the shim hung up mid-request")
        data += chunk
    conn.settimeout(None)
    return json.loads(data[4:]), list(fds)


def _serve(socket_path: str) -> _Request:
    """Answer requests until a forked child returns here with its request (the zygote never returns)."""
    zygote = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".new")
    listener.listen(128)
    os.rename(socket_path + ".new", socket_path)  # the path appears listening: a shim is never refused
    _preload()
    if threading.active_count() != 1:  # a fork copies one thread: another one's locks would stay held
        raise RuntimeError(f"a preloaded module started a thread: {threading.enumerate()}")
    # What the imports made stays out of the children's garbage collections: a collection touching every
    # object would copy each page of the zygote into each child (gc.freeze's purpose, per its docs).
    gc.collect()
    gc.freeze()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "worker")
    children: dict[int, _Child] = {}
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "worker":  # the pytest worker ended (its pipe closed)
                    if not os.read(sys.stdin.fileno(), 1):
                        return _exit(children)
                elif key.data == "accept":
                    conn, _ = listener.accept()
                    try:
                        body, fds = _receive(conn)
                    except (OSError, ValueError):
                        conn.close()
                        continue
                    pid = os.fork()
                    if pid == 0:
                        closing = [selector, listener, conn, sys.stdin]
                        for other in children.values():
                            closing.append(other.pidfd)
                            if other.conn is not None:
                                closing.append(other.conn)
                        return _Request(fds=fds, closing=closing, **body)
                    for fd in fds:
                        os.close(fd)
                    with contextlib.suppress(OSError):  # the child did it first
                        os.setpgid(pid, pid)
                    child = _Child(pid, os.pidfd_open(pid), conn)
                    children[pid] = child
                    selector.register(child.pidfd, selectors.EVENT_READ, ("exit", pid))
                    selector.register(conn, selectors.EVENT_READ, ("hangup", pid))
                    _send(child, struct.pack("!q", pid))
                else:
                    kind, pid = key.data
                    child = children[pid]
                    if kind == "hangup":
                        _hung_up(selector, child)
                    else:
                        _reap(selector, children.pop(pid))
    except SystemExit:
        if os.getpid() != zygote:
            raise  # a SIGTERM in the instant before a child reset its handler: the child exits
        return _exit(children)


def _send(child: _Child, data: bytes) -> None:
    if child.conn is None:
        return
    with contextlib.suppress(OSError):  # the shim is gone; its hang-up is handled when it is read
        child.conn.sendall(data)


def _hung_up(selector: selectors.BaseSelector, child: _Child) -> None:
    """The shim went away (killed) while its child runs: the child goes as a killed ``mcpmux`` would."""
    assert child.conn is not None
    try:
        data = child.conn.recv(1)
    except OSError:
        data = b""
    if data:
        return  # the shim sends nothing after its request; ignore stray bytes
    selector.unregister(child.conn)
    child.conn.close()
    child.conn = None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def _reap(selector: selectors.BaseSelector, child: _Child) -> None:
    _, status = os.waitpid(child.pid, 0)
    if os.WIFSIGNALED(status):
        _send(child, b"S" + struct.pack("!i", os.WTERMSIG(status)))
    else:
        _send(child, b"E" + struct.pack("!i", os.waitstatus_to_exitcode(status)))
    selector.unregister(child.pidfd)
    os.close(child.pidfd)
    if child.conn is not None:
        selector.unregister(child.conn)
        child.conn.close()


def _exit(children: dict[int, _Child]) -> Any:
    for child in children.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)
    os._exit(0)


def _child(request: _Request) -> None:
    """In the forked child: become the ``mcpmux`` process the shim stands for, then run the CLI."""
    import ctypes
    import io

    zygote = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the zygote
    if os.getppid() != zygote:
        os._exit(70)
    for item in request.closing:
        if isinstance(item, int):
            os.close(item)
        else:
            item.close()
    os.setpgid(0, 0)
    for name in (*FORWARDED, "SIGCHLD"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN if request.sigint_ignored else signal.default_int_handler)
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
        os.close(fd)
    os.umask(request.umask)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    tempfile.tempdir = None
    sys.argv = request.argv
    sys.path.insert(0, os.path.dirname(REAL))  # what the console script's interpreter has first (-P left none)
    sys.dont_write_bytecode = bool(request.env.get("PYTHONDONTWRITEBYTECODE"))
    unbuffered = bool(request.env.get("PYTHONUNBUFFERED"))
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    # The streams as the interpreter makes them at start-up (its own never close their descriptor).
    stdin = io.BufferedReader(io.FileIO(0, "rb", closefd=False))
    stdout, stderr = (io.BufferedWriter(io.FileIO(fd, "wb", closefd=False)) for fd in (1, 2))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(stdin, encoding=encoding, errors=errors)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(stdout, encoding=encoding, errors=errors, write_through=unbuffered)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        stderr, encoding=encoding, errors="backslashreplace", write_through=True
    )
    from mcpmux.cli.main import main

    main()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _child(_serve(sys.argv[1]))
