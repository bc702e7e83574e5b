"""One broker per machine: 8 mcpmux processes share one login while access tokens expire every 2 s.

The authorization server (oidc-provider) rotates refresh tokens and revokes the whole token family
when a used refresh token comes back. Every process refreshes through the shared record under its
cross-process lock, so the family is never revoked: 0 forced re-logins, 0 failed calls.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpmux.auth.login import login
from mcpmux.auth.vault import open_vault
from mcpmux.config.models import StreamableHttpServerConfig
from tests.auth.world import OAuthWorld, oauth_world, scripted_browser

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

PROCESSES = 8
RUN_S = 10.0
WORKER = Path(__file__).resolve().parent / "broker_worker.py"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[OAuthWorld]:
    monkeypatch.setenv("MCPMUX_TOKEN_STORE", "file")
    with oauth_world(access_ttl_s=2) as running:
        yield running


async def test_eight_processes_share_one_login_through_rotations_without_a_failed_call(world: OAuthWorld) -> None:
    server = StreamableHttpServerConfig(name="notes", url=world.mcp_url)
    with anyio.fail_after(60):
        await login(server, open_vault(), browser=lambda url: scripted_browser(url, world))
    argv = [sys.executable, str(WORKER), world.mcp_url, str(RUN_S)]
    reports: list[dict[str, Any]] = []

    async def one_process() -> None:
        result = await anyio.run_process(argv, cwd=ROOT, check=False)  # killed and reaped if cancelled
        assert result.returncode == 0, result.stderr.decode()[-2000:]
        reports.append(json.loads(result.stdout.decode().strip().splitlines()[-1]))

    with anyio.fail_after(RUN_S + 120):
        async with anyio.create_task_group() as tg:
            for _ in range(PROCESSES):
                tg.start_soon(one_process)
    failures = [failure for report in reports for failure in report["failures"]]
    stats = world.as_stats()
    assert failures == []
    assert stats["reuse"] == 0  # no refresh token was ever used twice: the family was never revoked
    assert stats["authorization_code"] == 1  # the one login; 0 forced re-logins
    assert stats["refresh_token"] >= 3  # the tokens really expired and rotated meanwhile
    assert sum(report["calls"] for report in reports) >= PROCESSES * 10
    print(f"\n{PROCESSES} processes, {sum(r['calls'] for r in reports)} calls, as stats {stats}")
