"""What one console page costs the gateway: how long it holds the event loop that serves ``/mcp``.

Everything the gateway serves shares one event loop; a page whose handler works synchronously (a
database read that first waits for the audit appender to write its queue, a walk of every process
for memory figures) holds every ``/mcp`` call for that long, whatever the CPU cost. In one process:
a host over mcp-server-time (a real stdio child) with a SQLite state file, calls streaming through
the guard (so audit rows are always queued), the console app driven in process (httpx over ASGI),
and a ticker measuring the loop's lag while each page is fetched: median and worst lag per page.
Two modes alternate in one run: the pages' database reads, process walks and audit rendering in a
worker thread (as shipped) and, for comparison, on the event loop (as before).
Run: ``.venv/bin/python bench/bench_console_stall.py [--fetches N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import report

from mcpmux import Host
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.console import build_console, pages
from mcpmux.policy import StateStore
from mcpmux.web.security import HttpSecurity
from mcpmux.web.tokens import TokenStore
from tests.peers.fixtures import stdio_command

CONTROL = "(no page: the calls alone, 20 ms)"
PAGES = (CONTROL, "/ui/audit", "/ui/audit/export.json")
TICK_S = 0.001


async def _lag_during(client: httpx.AsyncClient, path: str) -> float:
    """The loop's worst lag (ms) while ``path`` is fetched."""
    worst, done, ticking = [0.0], anyio.Event(), anyio.Event()

    async def ticker() -> None:
        while not done.is_set():
            before = time.perf_counter()
            await anyio.sleep(TICK_S)
            worst[0] = max(worst[0], time.perf_counter() - before - TICK_S)
            ticking.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await ticking.wait()
        worst[0] = 0.0
        if path == CONTROL:
            await anyio.sleep(0.02)
        else:
            response = await client.get(path)
            assert response.status_code == 200, (path, response.status_code)
        await anyio.sleep(TICK_S * 3)  # the tick that was held ends and is counted
        done.set()
    return worst[0] * 1000


async def _inline(work: Any) -> Any:
    return work()


THREADED = pages._off_the_loop
MODES = {"worker thread": THREADED, "event loop (before)": _inline}


async def _run(fetches: int) -> dict[tuple[str, str], list[float]]:
    command, args = stdio_command("time")
    server = StdioServerConfig(name="time", command=command, args=tuple(args))
    config = Config(servers=(server,), security=SecurityConfig(pinning="off"))
    with tempfile.TemporaryDirectory(prefix="mcpmux-bench-stall-") as tmp:
        store = StateStore(Path(tmp) / "state.db")
        lags: dict[tuple[str, str], list[float]] = {(m, path): [] for path in PAGES for m in MODES}
        async with Host(config, store=store, catalog=False) as host:
            app = build_console(host, HttpSecurity(tokens=TokenStore(store)), key="bench-key")
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                login = await client.post("/ui/login", data={"secret": "bench-key"},
                                          headers={"Origin": "http://127.0.0.1"})  # fmt: skip
                assert login.status_code == 303, login.text
                stop = anyio.Event()

                async def calls() -> None:  # keeps audit rows queued, as a busy gateway does
                    while not stop.is_set():
                        await host.call_tool("time:get_current_time", {"timezone": "UTC"})

                async with anyio.create_task_group() as tg:
                    for _ in range(4):
                        tg.start_soon(calls)
                    for _ in range(fetches):
                        for mode, run in MODES.items():
                            pages._off_the_loop = run
                            for path in PAGES:
                                lags[(mode, path)].append(await _lag_during(client, path))
                    pages._off_the_loop = THREADED
                    stop.set()
        store.close()
    return lags


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fetches", type=int, default=30)
    args = parser.parse_args(argv if argv is not None else [])
    lags = anyio.run(_run, args.fetches)
    rows = [
        [path, mode, f"{statistics.median(v):.2f}", f"{max(v):.2f}"]
        for (mode, path), v in sorted(lags.items(), key=lambda item: (PAGES.index(item[0][1]), item[0][0]))
    ]
    report("console_stall", ["page", "its slow work on", "median loop held (ms)", "worst (ms)"], rows,
           fetches=args.fetches, lags={f"{m} {p}": v for (m, p), v in lags.items()})  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
