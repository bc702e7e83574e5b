"""The compose stack without containers: a real PostgreSQL, three replicas started by the image's own
entrypoint (real ``mcpmux serve``), the shipped nginx.conf in front, and SDK clients through it.

This is what `docker compose up` runs, minus the images: the same entrypoint, environment names,
token bootstrap and nginx directives. It needs the replica flags (--replica-id, --advertise) and,
for sessions spread over replicas by round-robin, the replicas' forwarding (issue 23).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.deploy.files import ENTRYPOINT, run
from tests.field.processes import postgres_cluster
from tests.gateway.serving import MCPMUX, isolated_env, write_config
from tests.peers.fixtures import free_port, stop_process_group
from tests.replicas.nginx import start_nginx

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.network, pytest.mark.peers]

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
    env["PATH"] = f"{Path(MCPMUX).parent}:{env['PATH']}"
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


async def test_three_replicas_from_the_entrypoint_serve_clients_through_the_shipped_nginx(tmp_path: Path) -> None:
    config = write_config(tmp_path, servers=("everything",))
    with postgres_cluster() as dsn:
        env = replica_env(tmp_path, "postgresql+psycopg://" + dsn.removeprefix("postgresql://"), config)
        token_file = tmp_path / "admin.token"
        init = run(["sh", ENTRYPOINT, "init-token", "admin", token_file], env=env)
        assert init.returncode == 0, init.stderr
        token = token_file.read_text().strip()
        with replicas(tmp_path, env) as started, start_nginx([r.port for r in started], tmp_path) as (port, _nginx):
            base = f"http://127.0.0.1:{port}"
            # /healthz: public, and plain "ok" without a token, from each replica in turn.
            async with httpx.AsyncClient(base_url=base, timeout=CALL_TIMEOUT_S) as client:
                assert [(await client.get("/healthz")).text for _ in started] == ["ok"] * REPLICAS
                assert (await client.get("/mcp")).status_code == 401
                # With the token: each replica under the name the entrypoint gave it.
                auth = {"Authorization": f"Bearer {token}"}
                seen = {(await client.get("/healthz", headers=auth)).json()["replica"]["id"] for _ in started}
                assert seen == {r.name for r in started}
            # Sessions whose requests round-robin over every replica: each call answered.
            with anyio.fail_after(CALL_TIMEOUT_S * 4):
                answers = [await call_echo(f"{base}/mcp", token, f"hello {i}") for i in range(REPLICAS)]
            assert answers == [f"Echo: hello {i}" for i in range(REPLICAS)]
            # A replica killed outright: nginx skips it, and new sessions on the others are answered.
            os.killpg(started[1].process.pid, signal.SIGKILL)
            started[1].process.wait(START_TIMEOUT_S)
            with anyio.fail_after(CALL_TIMEOUT_S * 4):
                after = [await call_echo(f"{base}/mcp", token, f"after {i}") for i in range(REPLICAS)]
            assert after == [f"Echo: after {i}" for i in range(REPLICAS)]
