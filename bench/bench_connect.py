"""Connecting 50 stdio servers at once: one ``Manager`` against 50 raw SDK sessions, same run (issue 24).

Each server is ``slow_start_server.py`` with no delay: standard library only, it answers at once,
so the children cost little and the host's own work shows. Both sides do what the manager does
for a server: start it, ``initialize``, list its tools (the only list it offers), and at the end
close it. Rounds alternate (SDK, manager, SDK, ...) and the medians are reported:

- wall seconds from nothing to every server listed;
- host CPU seconds (this process only: ``time.process_time``), the figure the target is about
  (<= 1.3x the SDK's);
- the same per server in milliseconds.

Run: ``.venv/bin/python bench/bench_connect.py [--servers 50] [--rounds 5] [--profile FILE]``.
"""

from __future__ import annotations

import argparse
import cProfile
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from harness import report

from mcpmux.config.models import Config, Settings, StdioServerConfig
from mcpmux.manager import Manager

SERVER = str(Path(__file__).parent / "slow_start_server.py")
SETTINGS = Settings(connect_timeout_ms=120_000, timeout_ms=120_000)


async def sdk_connect(servers: int) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[SERVER, "0"])
    ready = anyio.Event()
    listed = 0

    async def one() -> None:
        nonlocal listed
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            listed += 1
            if listed == servers:
                ready.set()
            await ready.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(servers):
            tg.start_soon(one)


async def manager_connect(servers: int) -> None:
    configs = tuple(
        StdioServerConfig(name=f"s{i:02d}", command=sys.executable, args=(SERVER, "0")) for i in range(servers)
    )
    async with Manager(Config(servers=configs, settings=SETTINGS), catalog=False, connect_concurrency=servers) as mux:
        connected = [s for s in mux.status() if s.state.value == "connected"]
        assert len(connected) == servers, [(s.name, s.state.value, s.reason) for s in mux.status()]


def measure(connect: Callable[[int], Awaitable[None]], servers: int) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    anyio.run(connect, servers)
    return time.perf_counter() - started, time.process_time() - cpu


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="write a cProfile of the manager's rounds here")
    options = parser.parse_args(list(argv))
    measure(sdk_connect, 2)  # imports and first-use costs out of the rounds
    measure(manager_connect, 2)
    sdk: list[tuple[float, float]] = []
    mux: list[tuple[float, float]] = []
    profiler = cProfile.Profile(time.process_time) if options.profile else None
    for _ in range(options.rounds):
        sdk.append(measure(sdk_connect, options.servers))
        if profiler is not None:
            profiler.enable()
        mux.append(measure(manager_connect, options.servers))
        if profiler is not None:
            profiler.disable()
    if profiler is not None:
        profiler.dump_stats(options.profile)
    wall_sdk, cpu_sdk = (statistics.median(x[i] for x in sdk) for i in (0, 1))
    wall_mux, cpu_mux = (statistics.median(x[i] for x in mux) for i in (0, 1))
    n = options.servers
    rows = [
        ["raw SDK sessions", round(wall_sdk, 3), round(cpu_sdk, 3), round(cpu_sdk / n * 1e3, 2), 1.0, 1.0],
        ["mcpmux Manager", round(wall_mux, 3), round(cpu_mux, 3), round(cpu_mux / n * 1e3, 2),
         round(wall_mux / wall_sdk, 2), round(cpu_mux / cpu_sdk, 2)],
    ]  # fmt: skip
    columns = ["connect N stdio servers", "wall s", "host CPU s", "CPU ms/server", "wall ratio", "CPU ratio"]
    report("connect", columns, rows, servers=n, rounds=options.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
