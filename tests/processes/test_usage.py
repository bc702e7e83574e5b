"""Resource use per server: RSS and CPU of a real stdio child and its descendants, in the library,
``mcpmux list --json``, ``mcpmux show --json`` and the gateway's /metrics."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import psutil
import pytest

from mcpmux import Host
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.manager import ServerState
from mcpmux.policy import StateStore
from mcpmux.processes.usage import process_usage, server_pid
from mcpmux.types.events import StateChanged
from tests.gateway.serving import mcpmux, serve
from tests.peers.fixtures import stdio_command

pytestmark = pytest.mark.peers
DEADLINE_S = 60
TINY = str(Path(__file__).resolve().parents[1] / "fixtures" / "tiny_server.py")


def with_a_sleeping_descendant() -> tuple[str, list[str]]:
    """server-everything started by a shell that leaves a ``sleep`` behind (a descendant to count)."""
    command, args = stdio_command("everything")
    return "sh", ["-c", f"sleep 300 & exec {shlex.join([command, *args])}"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


@pytest.mark.anyio
async def test_the_usage_of_a_child_counts_its_descendants(store: StateStore) -> None:
    command, args = with_a_sleeping_descendant()
    config = Config(servers=(StdioServerConfig(name="ev", command=command, args=args),), security=SecurityConfig())
    with anyio.fail_after(DEADLINE_S):
        async with Host(config, store=store, catalog=False) as host:
            (status,) = host.status()
            usage = process_usage(status.pid)
            assert usage is not None
            assert usage.processes >= 2  # node and the sleep (and the launcher, where there is one)
            assert usage.rss_bytes > 10 * 1024 * 1024  # node alone is tens of MB
            assert usage.cpu_seconds > 0
            assert set(usage.to_json()) == {"rss_mb", "cpu_seconds", "processes"}
    assert process_usage(status.pid) is None  # gone with the host


@pytest.mark.anyio
async def test_the_pid_shown_is_the_servers_own_not_the_reapers(store: StateStore) -> None:
    # The stdio transport runs a server under the reaper (processes/_reaper.py), which forks it: `list` and
    # `show` gave the reaper's pid, which no `ps` line of the server has (issue 42, bug 3).
    server = StdioServerConfig(name="tiny", command=sys.executable, args=["-S", "-E", TINY])
    with anyio.fail_after(DEADLINE_S):
        async with Host(Config(servers=(server,), security=SecurityConfig()), store=store, catalog=False) as host:
            (status,) = host.status()
            assert status.pid is not None
            argv = psutil.Process(status.pid).cmdline()
            assert TINY in argv and not any(part.endswith("_reaper.py") for part in argv), argv
            assert status.target.startswith(f"pid {status.pid}: ")
            assert server_pid(status.pid) == status.pid  # the server's own pid is shown as it is


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.network
def test_list_show_and_metrics_report_the_usage(tmp_path: Path) -> None:
    command, args = stdio_command("everything")
    servers = [
        {"name": "ev", "type": "stdio", "command": command, "args": args},
        {"name": "workspace", "type": "builtin", "root": str(tmp_path)},
    ]
    path = tmp_path / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": servers, "security": {"pinning": "off"}}}))

    listed = mcpmux(tmp_path, path, "list", "--json", timeout_s=60)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["ev"]["usage"]["rss_mb"] > 10 and rows["ev"]["usage"]["processes"] >= 1
    assert rows["workspace"]["usage"] is None  # in-process: no child of its own

    shown = mcpmux(tmp_path, path, "show", "ev", "--json", timeout_s=60)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["usage"]["rss_mb"] > 10
    printed = mcpmux(tmp_path, path, "show", "ev", timeout_s=60)
    assert "MB resident" in printed.stdout

    with serve(tmp_path, path, "--http", "127.0.0.1:0") as serving:
        metrics = httpx2.get(serving.base + "/metrics", timeout=10).text
    assert 'mcpmux_upstream_rss_bytes{server="ev"} ' in metrics
    assert 'mcpmux_upstream_cpu_seconds_total{server="ev"} ' in metrics
    assert 'mcpmux_upstream_rss_bytes{server="workspace"}' not in metrics


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_child_past_max_rss_mb_is_restarted_with_the_reason_in_its_history(store: StateStore) -> None:
    command, args = stdio_command("everything")
    server = StdioServerConfig(name="ev", command=command, args=args, max_rss_mb=1)  # node needs far more
    with anyio.fail_after(DEADLINE_S):
        async with Host(Config(servers=(server,)), store=store, catalog=False) as host:
            first_pid = host.status()[0].pid
            async with host.events() as events:
                async for event in events:  # until the restarted child is connected
                    connected = isinstance(event, StateChanged) and event.new is ServerState.CONNECTED
                    if connected and host.status()[0].restarts >= 1:
                        break
            status = host.status()[0]
            assert status.pid != first_pid
            reason = next(t.reason for t in status.history if "max_rss_mb" in t.reason)
            assert reason.startswith("restarting: ") and "MB resident" in reason
            assert status.to_json()["history"]  # the reason is in `mcpmux show`'s history too
    assert process_usage(first_pid) is None  # the old child was reaped


def test_max_rss_mb_is_only_positive() -> None:
    with pytest.raises(ValueError, match="max_rss_mb"):
        StdioServerConfig(name="ev", command="x", max_rss_mb=0)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_child_that_stays_past_max_rss_mb_is_restarted_with_backoff_not_in_a_loop(store: StateStore) -> None:
    command, args = stdio_command("everything")
    server = StdioServerConfig(name="ev", command=command, args=args, max_rss_mb=1)  # past it at every start
    with anyio.fail_after(DEADLINE_S * 2):
        async with Host(Config(servers=(server,)), store=store, catalog=False) as host, host.events() as events:
            async for event in events:  # until the second restart in a row waits before starting
                if isinstance(event, StateChanged) and "in a row past max_rss_mb" in host.status()[0].reason:
                    break
            reason = host.status()[0].reason
    assert reason.startswith("restarted 2 times in a row past max_rss_mb 1; next start in ")
