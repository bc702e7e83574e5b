"""Gateway replicas as real ``mcpmux serve --http`` processes on one real PostgreSQL.

``replicas(...)`` starts N of them on free loopback ports, each with ``--replica-id rN`` and
``--advertise`` its own URL; :class:`RoundRobin` is a client-side balancer with no affinity at all
(each request to the next replica), where nginx (:mod:`tests.replicas.nginx`) is not needed.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.gateway.serving import Serving, serve
from tests.peers.fixtures import free_port, stdio_command
from tests.sources.conftest import postgres_server

__all__ = ["free_port", "postgres_server"]


@pytest.fixture
def shared_database(postgres_server: str) -> Iterator[str]:
    """A new, empty database on the session's PostgreSQL (dropped after)."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield "postgresql+psycopg://" + postgres_server.removeprefix("postgresql://").rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def replica_config(root: Path, url: str, servers: Sequence[str] = ("time",), **security: object) -> Path:
    """A config of stdio peers (by name) on the database ``url``, pinning off unless ``security`` says otherwise."""
    entries = []
    for name in servers:
        command, args = stdio_command(name)
        entries.append({"name": name, "type": "stdio", "command": command, "args": args})
    path = root / "mcpmux.json"
    mcp = {"servers": entries, "security": {"pinning": "off", **security}}
    path.write_text(json.dumps({"mcp": mcp, "storage": {"url": url}}))
    return path


def start_replica(root: Path, config: Path, name: str, port: int, *args: str) -> Iterator[Serving]:
    """``mcpmux serve`` as replica ``name`` on ``port`` (a context manager, like ``serve``)."""
    home = root / name
    home.mkdir(exist_ok=True)
    advertise = f"http://127.0.0.1:{port}"
    return serve(home, config, "--http", f"127.0.0.1:{port}", "--replica-id", name, "--advertise", advertise, *args)


@contextmanager
def replicas(root: Path, config: Path, count: int = 3, *args: str) -> Iterator[list[Serving]]:
    """``count`` replicas (``r1``...), all stopped after."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(start_replica(root, config, f"r{i}", free_port(), *args)) for i in range(1, count + 1)
        ]


class RoundRobin(httpx.BaseTransport):
    """Sends each request of an ``httpx`` client to the next of ``bases``: a balancer without any affinity."""

    def __init__(self, bases: Sequence[str]) -> None:
        self.ports = itertools.cycle([httpx.URL(b).port for b in bases])
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(port=next(self.ports))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()
