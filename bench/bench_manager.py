"""The manager's costs, each against a baseline measured in the same run.

- call path: 2,000 ``echo`` calls to server-everything (stdio) through the raw SDK (``ClientSession``
  over ``stdio_client``), through ``Manager.call_tool`` and through ``Guard.call_tool`` (policy +
  one audit row per call), sequential and 50 at a time. Target: manager >= 0.95x the SDK.
- connect: 10 stdio servers through one ``Manager`` against the slowest of the same servers
  connected alone. Target: <= 1.3x. Two rows: server-everything (its start is CPU-bound, so on a
  2-core machine ten of them cannot start in the time of one, whatever the host does) and a
  standard-library server that waits 0.5 s before answering (I/O-bound: what the host controls).
- ``mcpmux tools`` with 10 lazy servers and a warm catalog: wall time and processes started.
  Target: <= 0.5 s, none started.
- memory: RSS of this process per connected server, and of each child.

Needs the reference servers (``scripts/install-peers``). Run: ``.venv/bin/python bench/run.py manager``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from harness import report

from mcpmux.config.models import Config, Settings, StdioServerConfig
from mcpmux.manager import Manager
from mcpmux.policy import Guard, StateStore
from tests.peers.fixtures import everything_js, node22

CALLS = 2000
CONCURRENCY = 50
SERVERS = 10
SETTINGS = Settings(connect_timeout_ms=60_000, max_concurrent_calls=64)


def everything(name: str) -> StdioServerConfig:
    return StdioServerConfig(name=name, command=str(node22()), args=(str(everything_js()), "stdio"))


Rate = tuple[float, float]
"""Calls per second (wall clock) and this process's CPU microseconds per call (steadier under load)."""


async def _rate(call: Callable[[], Awaitable[object]], concurrency: int) -> Rate:
    await call()  # warm up
    per_worker = CALLS // concurrency
    started, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):

            async def worker() -> None:
                for _ in range(per_worker):
                    await call()

            tg.start_soon(worker)
    calls = per_worker * concurrency
    return calls / (time.perf_counter() - started), (time.process_time() - cpu) / calls * 1e6


async def _sdk_rates() -> tuple[Rate, Rate]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(node22()), args=[str(everything_js()), "stdio"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call() -> object:
            return await session.call_tool("echo", {"message": "hi"})

        return await _rate(call, 1), await _rate(call, CONCURRENCY)


async def _mux_rates(tmp: Path) -> tuple[Rate, Rate, Rate, Rate]:
    config = Config(servers=(everything("ev"),), settings=SETTINGS)
    async with Manager(config, catalog=False) as manager:

        async def direct() -> object:
            return await manager.call_tool("ev:echo", {"message": "hi"})

        with StateStore(tmp / "state.db") as store:
            guard = Guard(manager, store=store)

            async def guarded() -> object:
                return await guard.call_tool("ev:echo", {"message": "hi"})

            return (
                await _rate(direct, 1),
                await _rate(direct, CONCURRENCY),
                await _rate(guarded, 1),
                await _rate(guarded, CONCURRENCY),
            )


async def _connect_times() -> tuple[float, float, float, float]:
    singles = []
    for index in range(3):
        started = time.perf_counter()
        async with Manager(Config(servers=(everything(f"s{index}"),), settings=SETTINGS), catalog=False):
            singles.append(time.perf_counter() - started)
    servers = tuple(everything(f"s{i}") for i in range(SERVERS))
    process = psutil.Process()
    baseline = process.memory_info().rss
    started = time.perf_counter()
    async with Manager(Config(servers=servers, settings=SETTINGS), catalog=False) as manager:
        together = time.perf_counter() - started
        assert all(s.state.value == "connected" for s in manager.status())
        per_server_mb = (process.memory_info().rss - baseline) / SERVERS / 2**20
        children = [psutil.Process(s.pid) for s in manager.status() if s.pid]
        child_mb = statistics.mean(c.memory_info().rss for c in children) / 2**20
    return max(singles), together, per_server_mb, child_mb


SLOW_START_S = 0.5


def slow_server(name: str) -> StdioServerConfig:
    script = str(Path(__file__).parent / "slow_start_server.py")
    return StdioServerConfig(name=name, command=sys.executable, args=(script, str(SLOW_START_S)))


async def _io_bound_connect_times() -> tuple[float, float]:
    singles = []
    for _ in range(2):  # the first pays one-time imports (the SDK client loads on first connect)
        started = time.perf_counter()
        async with Manager(Config(servers=(slow_server("one"),), settings=SETTINGS), catalog=False):
            singles.append(time.perf_counter() - started)
    single = singles[-1]
    servers = tuple(slow_server(f"s{i}") for i in range(SERVERS))
    started = time.perf_counter()
    async with Manager(Config(servers=servers, settings=SETTINGS), catalog=False) as manager:
        together = time.perf_counter() - started
        assert all(s.state.value == "connected" for s in manager.status())
    return single, together


def _warm_catalog_tools(tmp: Path) -> tuple[float, int]:
    marker_dir = tmp / "started"
    marker_dir.mkdir()
    wrapper = tmp / "server.sh"
    wrapper.write_text(f'#!/bin/sh\ntouch "{marker_dir}/$$"\nexec "{node22()}" "{everything_js()}" stdio\n')
    wrapper.chmod(0o755)
    entries = "".join(
        f"    - {{name: s{i}, type: stdio, command: {json.dumps(str(wrapper))}}}\n" for i in range(SERVERS)
    )
    (tmp / "mcpmux.yaml").write_text(
        "mcp:\n  settings: {lazy: true, connect_timeout_ms: 60000}\n  servers:\n" + entries
    )
    env = {**os.environ, "MCPMUX_DATA_DIR": str(tmp / "data"), "MCPMUX_STATE_DIR": str(tmp / "state")}
    mcpmux = str(Path(sys.executable).parent / "mcpmux")
    subprocess.run([mcpmux, "refresh"], cwd=tmp, env=env, check=True, capture_output=True)
    for marker in marker_dir.iterdir():
        marker.unlink()
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([mcpmux, "tools", "--json"], cwd=tmp, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times), len(list(marker_dir.iterdir()))


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        sdk_seq, sdk_conc = anyio.run(_sdk_rates)
        mux_seq, mux_conc, guard_seq, guard_conc = anyio.run(_mux_rates, tmp)
        slowest, together, per_server_mb, child_mb = anyio.run(_connect_times)
        io_single, io_together = anyio.run(_io_bound_connect_times)
        tools_s, started = _warm_catalog_tools(tmp)

    def call_rows(label: str, rate: Rate, base: Rate) -> list[list[object]]:
        return [
            [label, "calls/s", round(rate[0]), round(rate[0] / base[0], 3)],
            [label, "client CPU us/call", round(rate[1]), round(rate[1] / base[1], 3)],
        ]

    rows = [
        *call_rows("raw SDK ClientSession, sequential", sdk_seq, sdk_seq),
        *call_rows("Manager.call_tool, sequential", mux_seq, sdk_seq),
        *call_rows("Guard.call_tool (+audit), sequential", guard_seq, sdk_seq),
        *call_rows(f"raw SDK ClientSession, {CONCURRENCY} concurrent", sdk_conc, sdk_conc),
        *call_rows(f"Manager.call_tool, {CONCURRENCY} concurrent", mux_conc, sdk_conc),
        *call_rows(f"Guard.call_tool, {CONCURRENCY} concurrent", guard_conc, sdk_conc),
        ["connect 1 server (slowest of 3)", "s", round(slowest, 3), 1.0],
        [f"connect {SERVERS} servers, one Manager", "s", round(together, 3), round(together / slowest, 2)],
        [f"connect 1 I/O-bound server ({SLOW_START_S} s start)", "s", round(io_single, 3), 1.0],
        [
            f"connect {SERVERS} I/O-bound servers, one Manager",
            "s",
            round(io_together, 3),
            round(io_together / io_single, 2),
        ],
        [f"mcpmux tools, {SERVERS} lazy servers, warm catalog", "s", round(tools_s, 3), f"{started} started"],
        ["RSS of mcpmux per connected server", "MiB", round(per_server_mb, 2), ""],
        ["RSS of each server-everything child", "MiB", round(child_mb, 1), ""],
    ]
    report("manager", ["measure", "unit", "value", "ratio to baseline"], rows, calls=CALLS, concurrency=CONCURRENCY)


if __name__ == "__main__":
    main()
