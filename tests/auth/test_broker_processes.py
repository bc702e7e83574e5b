"""One broker per machine: 8 mcpmux processes share one login while access tokens expire every 2 s.

The authorization server (oidc-provider) rotates refresh tokens and revokes the whole token family
when a used refresh token comes back. Every process refreshes through the shared record under its
cross-process lock, so the family is never revoked: 0 forced re-logins, 0 failed calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcpmux.auth.login import login
from mcpmux.auth.vault import open_vault
from mcpmux.config.models import StreamableHttpServerConfig
from tests.auth.world import OAuthWorld, oauth_world, scripted_browser

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

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
    workers = [
        subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(PROCESSES)
    ]
    reports = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=RUN_S + 90)
            assert worker.returncode == 0, err.decode()[-2000:]
            reports.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    failures = [failure for report in reports for failure in report["failures"]]
    stats = world.as_stats()
    assert failures == []
    assert stats["reuse"] == 0  # no refresh token was ever used twice: the family was never revoked
    assert stats["authorization_code"] == 1  # the one login; 0 forced re-logins
    assert stats["refresh_token"] >= 3  # the tokens really expired and rotated meanwhile
    assert sum(report["calls"] for report in reports) >= PROCESSES * 10
    print(f"\n{PROCESSES} processes, {sum(r['calls'] for r in reports)} calls, as stats {stats}")
