"""Real things the field servers need, each a context manager that leaves nothing running behind it.

- :func:`listening`: an HTTP MCP server on a free 127.0.0.1 port (its own process group).
- :func:`postgres_cluster`: a throwaway PostgreSQL cluster (Debian's ``initdb``/``postgres``) on loopback.
- :func:`web_page`: a loopback HTTP server with one page, for mcp-server-fetch.
"""

from __future__ import annotations

import contextlib
import glob
import http.server
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import psutil

from tests.peers.fixtures import free_port, http_thread, loopback_env, stop_process_group

__all__ = ["FIELD_MARKER", "Listener", "listening", "postgres_cluster", "web_page"]

FIELD_MARKER = "field-marker-31"
LISTEN_TIMEOUT_S = 60.0
_POLL_S = 0.05
_PORT_ATTEMPTS = 3


class Listener:
    """A running HTTP server: ``url``, ``port``, ``process`` (the leader of its process group)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, url: str) -> None:
        self.process, self.port, self.url = process, port, url


def _listens(pid: int, port: int) -> bool:
    try:
        root = psutil.Process(pid)
        for proc in (root, *root.children(recursive=True)):
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in proc.net_connections("tcp")):
                return True
    except psutil.Error:
        return False
    return False


def _tail(log: IO[bytes]) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-2000:].decode(errors="replace")


def start_listener(
    argv_for: Callable[[int], list[str]], env: dict[str, str], log: IO[bytes], path: str = "/mcp", port: int = 0
) -> Listener:
    """Start ``argv_for(port)`` (``PORT`` set too) and wait until it listens on 127.0.0.1:port.

    With ``port`` 0 a free port is taken (and another one if a different process won the race for it).

    Raises:
        TimeoutError: it did not listen within ``LISTEN_TIMEOUT_S``.
        RuntimeError: it exited first (its output is in the message).
    """
    for _attempt in range(_PORT_ATTEMPTS):
        chosen = port or free_port()
        process = subprocess.Popen(
            argv_for(chosen),
            env=loopback_env(env) | {"PORT": str(chosen)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while process.poll() is None and not _listens(process.pid, chosen):
            if time.monotonic() > deadline:
                stop_process_group(process)
                raise TimeoutError(f"{argv_for(chosen)[:2]} did not listen on 127.0.0.1:{chosen}: {_tail(log)}")
            time.sleep(_POLL_S)
        if process.poll() is None:
            return Listener(process, chosen, f"http://127.0.0.1:{chosen}{path}")
        stop_process_group(process)
        if port or "in use" not in _tail(log).lower():
            break
    raise RuntimeError(f"{argv_for(0)[:2]} exited with code {process.returncode}: {_tail(log)}")


@contextlib.contextmanager
def listening(argv_for: Callable[[int], list[str]], env: dict[str, str], log_path: Path) -> Iterator[Listener]:
    """:func:`start_listener`, stopped (the whole process group) on exit."""
    with log_path.open("w+b") as log:
        listener = start_listener(argv_for, env, log)
        try:
            yield listener
        finally:
            stop_process_group(listener.process)


def _pg_bin(tool: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"))
    return found[-1] if found else shutil.which(tool)


def _pg_user() -> str | None:
    # initdb and postgres refuse to run as root: use Debian's postgres account then.
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres").pw_name
    except KeyError:
        return "nobody"


@contextlib.contextmanager
def postgres_cluster() -> Iterator[str]:
    """A new PostgreSQL cluster in a temporary directory, on 127.0.0.1 only; yields its DSN, stops it after.

    The directory is outside pytest's (mode 0700, root's) so that the ``postgres`` account can use it.

    Raises:
        RuntimeError: PostgreSQL is not installed (scripts/install-peers installs Debian's), or it
            did not start (its log is in the message).
    """
    initdb, postgres = _pg_bin("initdb"), _pg_bin("postgres")
    if initdb is None or postgres is None:
        raise RuntimeError("PostgreSQL not installed (initdb/postgres not found): run scripts/install-peers")
    with tempfile.TemporaryDirectory(prefix="mcpmux-field-pg-") as tmp:
        yield from _cluster(Path(tmp), initdb, postgres)


def _cluster(root: Path, initdb: str, postgres: str) -> Iterator[str]:
    user = _pg_user()
    if user is not None:
        account = pwd.getpwnam(user)
        os.chown(root, account.pw_uid, account.pw_gid)
    data, sockets = root / "data", root
    subprocess.run(
        [initdb, "-D", str(data), "-U", "field", "--auth=trust", "-E", "UTF8", "--no-sync"],
        user=user,
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    with (root / "postgres.log").open("w+b") as log:
        process = subprocess.Popen(
            [postgres, "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(sockets), "-F"],
            user=user,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + LISTEN_TIMEOUT_S
            while process.poll() is None and not _listens(process.pid, port):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"PostgreSQL did not listen on 127.0.0.1:{port}: {_tail(log)}")
                time.sleep(_POLL_S)
            if process.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited with code {process.returncode}: {_tail(log)}")
            dsn = f"postgresql://field@127.0.0.1:{port}/postgres"
            _wait_until_accepting(dsn, deadline, log)
            yield dsn
        finally:
            stop_process_group(process)


def _wait_until_accepting(dsn: str, deadline: float, log: IO[bytes]) -> None:
    """Listening is not accepting: PostgreSQL answers "the database system is starting up" until its
    startup ends (seconds on a loaded machine)."""
    import psycopg

    while True:
        try:
            psycopg.connect(dsn, connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"PostgreSQL did not accept connections at {dsn}: {_tail(log)}") from None
            time.sleep(_POLL_S)


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/page.html":
            self.send_error(404)
            return
        body = f"<html><head><title>field</title></head><body><p>{FIELD_MARKER}</p></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@contextlib.contextmanager
def web_page() -> Iterator[str]:
    """A loopback HTTP server (a thread) whose ``/page.html`` contains ``FIELD_MARKER``; yields that URL."""
    with http_thread(_Page) as port:
        yield f"http://127.0.0.1:{port}/page.html"
