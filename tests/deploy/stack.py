"""The compose stack without containers, for tests: a real PostgreSQL, replicas started by the image's own
entrypoint (real ``mcpmux serve``), and the shipped nginx.conf in front (:func:`running_stack`)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.deploy.files import ENTRYPOINT, run
from tests.field.processes import postgres_cluster
from tests.forkserver import REAL
from tests.gateway.serving import MCPMUX, isolated_env, write_config
from tests.peers.fixtures import free_port, stop_process_group
from tests.replicas.nginx import start_nginx

START_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 60.0
REPLICAS = 3


@dataclass
class Replica:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path


def replica_env(root: Path, db_url: str, config: Path) -> dict[str, str]:
    env = isolated_env(root) | {"MCPMUX_DB": db_url, "MCPMUX_CONFIG": str(config), "MCPMUX_HOST": "127.0.0.1"}
    env["PATH"] = f"{Path(MCPMUX).parent}:{Path(REAL).parent}:{env['PATH']}"  # the shim, then the venv
    return env


def wait_serving(replica: Replica) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while "mcpmux: serving http://" not in replica.log.read_text(errors="replace"):
        assert replica.process.poll() is None, f"{replica.name} exited: {replica.log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{replica.name} did not serve in {START_TIMEOUT_S} s"
        time.sleep(0.1)


@contextlib.contextmanager
def replicas(root: Path, env: dict[str, str]) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        for index in range(1, REPLICAS + 1):
            name, port = f"mcpmux-{index}", free_port()
            log = root / f"{name}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    ["sh", str(ENTRYPOINT), "--drain-timeout", "5"],
                    env=env | {
                        "MCPMUX_PORT": str(port), "MCPMUX_REPLICA_ID": name,
                        "MCPMUX_ADVERTISE": f"http://127.0.0.1:{port}",
                    },
                    stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                )  # fmt: skip
            started.append(Replica(name, port, process, log))
        for replica in started:
            wait_serving(replica)
        yield started
    finally:
        for replica in started:
            stop_process_group(replica.process)


async def call_echo(url: str, token: str, text: str) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert "everything__echo" in tools
        result = await session.call_tool("everything__echo", {"message": text})
        return "".join(getattr(block, "text", "") for block in result.content)


@dataclass
class Stack:
    """A running stack: nginx's base URL, the first token (made by ``init-token``) and the replicas."""

    base: str
    token: str
    replicas: list[Replica]


@contextlib.contextmanager
def running_stack(root: Path) -> Iterator[Stack]:
    """PostgreSQL, ``init-token``, :data:`REPLICAS` replicas and nginx, as compose.yaml runs them."""
    config = write_config(root, servers=("everything",))
    with postgres_cluster() as dsn:
        env = replica_env(root, "postgresql+psycopg://" + dsn.removeprefix("postgresql://"), config)
        token_file = root / "admin.token"
        init = run(["sh", ENTRYPOINT, "init-token", "admin", token_file], env=env)
        assert init.returncode == 0, init.stderr
        with replicas(root, env) as started, start_nginx([r.port for r in started], root) as (port, _nginx):
            yield Stack(f"http://127.0.0.1:{port}", token_file.read_text().strip(), started)
