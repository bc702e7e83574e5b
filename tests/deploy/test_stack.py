"""The compose stack without containers (tests/deploy/stack.py): a real PostgreSQL, three replicas started
by the image's own entrypoint (real ``mcpmux serve``), the shipped nginx.conf in front, SDK clients through it.

This is what `docker compose up` runs, minus the images: the same entrypoint, environment names,
token bootstrap and nginx directives, with sessions spread over the replicas by round-robin (each
request forwarded to the replica that owns its session).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import httpx
import pytest

from tests.deploy.stack import CALL_TIMEOUT_S, REPLICAS, START_TIMEOUT_S, call_echo, running_stack

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.network, pytest.mark.peers]


async def test_three_replicas_from_the_entrypoint_serve_clients_through_the_shipped_nginx(tmp_path: Path) -> None:
    with running_stack(tmp_path) as stack:
        started, token = stack.replicas, stack.token
        # /healthz: public, and plain "ok" without a token, from each replica in turn.
        async with httpx.AsyncClient(base_url=stack.base, timeout=CALL_TIMEOUT_S) as client:
            assert [(await client.get("/healthz")).text for _ in started] == ["ok"] * REPLICAS
            assert (await client.get("/mcp")).status_code == 401
            # With the token: each replica under the name the entrypoint gave it.
            auth = {"Authorization": f"Bearer {token}"}
            seen = {(await client.get("/healthz", headers=auth)).json()["replica"]["id"] for _ in started}
            assert seen == {r.name for r in started}
        # Sessions whose requests round-robin over every replica: each call answered.
        with anyio.fail_after(CALL_TIMEOUT_S * 4):
            answers = [await call_echo(f"{stack.base}/mcp", token, f"hello {i}") for i in range(REPLICAS)]
        assert answers == [f"Echo: hello {i}" for i in range(REPLICAS)]
        # A replica killed outright: nginx skips it, and new sessions on the others are answered.
        os.killpg(started[1].process.pid, signal.SIGKILL)
        started[1].process.wait(START_TIMEOUT_S)
        with anyio.fail_after(CALL_TIMEOUT_S * 4):
            after = [await call_echo(f"{stack.base}/mcp", token, f"after {i}") for i in range(REPLICAS)]
        assert after == [f"Echo: after {i}" for i in range(REPLICAS)]
