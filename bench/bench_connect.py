"""Connecting 50 stdio servers at once: one ``Manager`` against 50 raw SDK sessions, same run (issue 24).

Each server is ``slow_start_server.py`` with no delay: standard library only, it answers at once,
so the children cost little and the host's own work shows. Both sides do what the manager does
for a server: start it, ``initialize``, list its tools (the only list it offers), and at the end
close it. Rounds alternate (SDK, manager, SDK, ...) and the medians are reported:

- wall seconds from nothing to every server listed;
- host CPU seconds (this process only: ``time.process_time``), the figure the target is about
  (<= 1.3x the SDK's);
- the same per server in milliseconds;
- the cycle collector's full collections over all rounds, the ratio of mean CPU (full collections
  where they landed in this run) and the ratio of median CPU with their own CPU taken out. A full
  collection costs 60-80 ms here, nearly a round's CPU, and lands on whichever round crosses its
  threshold, so the plain median and the mean swing from run to run with where they landed;
- the collections per round (of any generation), which decide a side's share of the full
  collections in a long-lived host (one in 133 with the default thresholds), and the
  ratio of **amortized CPU**: CPU without full collections plus that share of one full
  collection's CPU (measured after the rounds). It is the steadiest of the CPU figures.

and, with ``--count`` (valgrind's callgrind), the instructions of this process per server
(noise-free, unlike time on a loaded machine): a child connects 2 servers each way untimed, then
callgrind counts it connecting, listing and closing ``--servers`` of them.

With ``--without-reaper``, a third row: the manager with its children started bare, not under
the reaper (a second Python start per child, which raw SDK sessions never pay): the share of the
wall time that is the reaper's. A second table (``reaper_start``, Linux) gives what one reaper
start costs: CPU per start of the reaper running ``true``, against a bare ``python -I -S``.

Run: ``.venv/bin/python bench/bench_connect.py [--servers 50] [--rounds 5] [--profile FILE] [--count]
[--without-reaper]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from harness import report

from mcpmux.config.models import Config, Settings, StdioServerConfig
from mcpmux.manager import Manager
from mcpmux.processes._reaper import AVAILABLE as REAPER_AVAILABLE, reaper_argv
from mcpmux.transports import stdio

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


async def manager_connect_without_reaper(servers: int) -> None:
    """As :func:`manager_connect` with each child started bare, not under the reaper.

    Not a mode of mcpmux (nothing turns the reaper off): it shows what the reaper, a second Python
    start per child, costs the wall time, which the SDK's sessions never pay.
    """
    real = getattr(stdio, "per_process_reaper")  # noqa: B009 - a name the transport imported, patched where it looks
    setattr(stdio, "per_process_reaper", lambda: False)  # noqa: B010
    try:
        await manager_connect(servers)
    finally:
        setattr(stdio, "per_process_reaper", real)  # noqa: B010


def children_cpu_ms(argv: list[str], starts: int) -> float:
    """CPU (user + system, every descendant reaped) per run of ``argv``, in milliseconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(starts):
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / starts * 1e3


def reaper_start(rounds: int, starts: int = 20) -> None:
    """The ``reaper_start`` table: a reaper running ``true`` against a bare interpreter, interleaved."""
    true = shutil.which("true") or "/bin/true"
    kinds = {
        "python -I -S -c pass (bare interpreter)": [sys.executable, "-I", "-S", "-c", "pass"],
        "reaper running true": reaper_argv([true]),
        "true alone": [true],
    }
    runs: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(rounds):
        for name, argv in kinds.items():
            runs[name].append(children_cpu_ms(argv, starts))
    medians = {name: statistics.median(ms) for name, ms in runs.items()}
    bare = medians["python -I -S -c pass (bare interpreter)"]
    rows = [[name, round(ms, 2), round(ms - bare, 2)] for name, ms in medians.items()]
    columns = ["one start", "CPU ms (median)", "over the bare interpreter"]
    report("reaper_start", columns, rows, rounds=rounds, starts=starts)


class Collections:
    """What the cycle collector does while installed: collections of any generation, and the full
    (generation 2) ones with their CPU.

    Every collection starts when generation 0 passes its threshold (net new tracked objects);
    CPython 3.11-3.13 collects a generation when its count (collections of the one below since
    its last) exceeds its threshold. So with the default thresholds (700, 10, 10) one collection
    in 12 is of generation 1 and one in 133 is a full one, as long as enough objects were promoted
    since the last (always the case here). A full collection walks every tracked object of the
    process (~170k here, most of them imported modules): 60-80 ms, against ~100 ms for a whole
    50-server connect. In a short run it lands on whichever round the count reaches (with two
    kinds of rounds alternating, about every second pair: on the same side run after run); in a
    long-lived host a side's share of them follows its count of collections.
    """

    def __init__(self) -> None:
        self.collections, self.full, self.full_cpu_s, self._started = 0, 0, 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.collections += 1
            if info["generation"] == 2:
                self._started = time.process_time()
        elif info["generation"] == 2:
            self.full += 1
            self.full_cpu_s += time.process_time() - self._started


class Round(NamedTuple):
    wall_s: float
    cpu_s: float
    full_collections: int
    full_cpu_s: float
    collections: int


def measure(connect: Callable[[int], Awaitable[None]], servers: int) -> Round:
    """Wall seconds, host CPU seconds, full collections, their CPU seconds and all collections of one round."""
    seen = Collections()
    gc.callbacks.append(seen)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        anyio.run(connect, servers)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        return Round(wall, cpu, seen.full, seen.full_cpu_s, seen.collections)
    finally:
        gc.callbacks.remove(seen)


KINDS: dict[str, Callable[[int], Awaitable[None]]] = {"sdk": sdk_connect, "manager": manager_connect}


def child(kind: str, servers: int) -> None:
    """Under callgrind: warm up, say ``ready``, connect when told, say ``done`` (see :func:`counted`).

    Every kind is warmed up, whichever is counted, as :func:`main` does before its rounds: each child
    then starts from the same imports and heap, so the cycle collector's full collections (their
    cost grows with the heap) weigh the same on both sides.
    """
    for warm in KINDS.values():
        anyio.run(warm, 2)
    print("ready", flush=True)
    sys.stdin.readline()
    anyio.run(KINDS[kind], servers)
    print("done", flush=True)
    sys.stdin.readline()


def counted(kind: str, servers: int, scratch: Path) -> float:
    """Instructions (every thread of this process, no child) of connecting ``servers`` the ``kind`` way."""
    out = scratch / f"connect-{kind}.cg"
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
               sys.executable, __file__, "--child", kind, "--servers", str(servers)]  # fmt: skip
    pipes: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen(command, text=True, **pipes)
    assert proc.stdin is not None
    try:
        for word, flag in (("ready", "on"), ("done", "off")):
            _expect(proc, word)
            subprocess.run(
                ["callgrind_control", "-i", flag, str(proc.pid)], capture_output=True, check=True, timeout=120
            )
            proc.stdin.write("go\n")
            proc.stdin.flush()
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    total = 0
    for line in out.read_text().splitlines():
        if line.startswith("totals:"):
            total += int(line.split()[1])
    return total


def _expect(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == word:
            return
    raise RuntimeError(f"the child ended before saying {word!r} (exit code {proc.wait()})")


def full_collection_cpu_s(times: int = 5) -> float:
    """Median CPU seconds of one full collection of this process's heap, as it is after the rounds."""
    samples = []
    for _ in range(times):
        started = time.process_time()
        gc.collect()
        samples.append(time.process_time() - started)
    return statistics.median(samples)


def full_share_per_collection(full_cpu_s: float) -> float:
    """CPU seconds of full collections a long-lived host pays per collection of any generation
    (one full collection every ``(threshold2 + 1) * (threshold1 + 1) + 1`` collections: see :class:`Collections`)."""
    _, threshold1, threshold2 = gc.get_threshold()
    return full_cpu_s / ((threshold2 + 1) * (threshold1 + 1) + 1)


def _row(name: str, rounds: list[Round], sdk: list[Round], servers: int, per_collection: float) -> list[Any]:
    """Medians of the rounds and their ratios to the SDK's; then the full collections over all rounds,
    the ratio of mean CPU (full collections where they landed in this run), the ratio of median CPU
    with their CPU taken out, the mean collections per round, and the ratio of amortized CPU: CPU
    without full collections plus a long-lived host's share of them (``per_collection`` CPU seconds
    for each collection the round caused)."""

    def median(of: list[Round], field: str) -> float:
        return float(statistics.median(getattr(r, field) for r in of))

    def mean_cpu(of: list[Round]) -> float:
        return statistics.fmean(r.cpu_s for r in of)

    def cpu_without_full(of: list[Round]) -> float:
        return statistics.median(r.cpu_s - r.full_cpu_s for r in of)

    def collections(of: list[Round]) -> float:
        return statistics.fmean(r.collections for r in of)

    def amortized(of: list[Round]) -> float:
        return cpu_without_full(of) + per_collection * collections(of)

    wall, cpu = median(rounds, "wall_s"), median(rounds, "cpu_s")
    return [
        name, round(wall, 3), round(cpu, 3), round(cpu / servers * 1e3, 2),
        round(wall / median(sdk, "wall_s"), 2), round(cpu / median(sdk, "cpu_s"), 2),
        sum(r.full_collections for r in rounds), round(mean_cpu(rounds) / mean_cpu(sdk), 2),
        round(cpu_without_full(rounds) / cpu_without_full(sdk), 2),
        round(collections(rounds), 1), round(amortized(rounds) / amortized(sdk), 2),
    ]  # fmt: skip


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="write a cProfile of the manager's rounds here")
    parser.add_argument("--count", action="store_true", help="also count instructions per server (callgrind)")
    parser.add_argument(
        "--without-reaper", action="store_true", help="add a row: the manager with its children not under the reaper"
    )
    parser.add_argument("--child", choices=sorted(KINDS), help=argparse.SUPPRESS)
    options = parser.parse_args(list(argv))
    if options.child:
        child(options.child, options.servers)
        return
    measure(sdk_connect, 2)  # imports and first-use costs out of the rounds
    measure(manager_connect, 2)
    sdk: list[Round] = []
    mux: list[Round] = []
    bare: list[Round] = []
    profiler = cProfile.Profile(time.process_time) if options.profile else None
    for _ in range(options.rounds):
        sdk.append(measure(sdk_connect, options.servers))
        if profiler is not None:
            profiler.enable()
        mux.append(measure(manager_connect, options.servers))
        if profiler is not None:
            profiler.disable()
        if options.without_reaper:
            bare.append(measure(manager_connect_without_reaper, options.servers))
    if profiler is not None:
        profiler.dump_stats(options.profile)
    n = options.servers
    full_cpu_s = full_collection_cpu_s()
    share = full_share_per_collection(full_cpu_s)
    rows = [_row("raw SDK sessions", sdk, sdk, n, share), _row("mcpmux Manager", mux, sdk, n, share)]
    if bare:
        rows.append(_row("mcpmux Manager, children not under the reaper", bare, sdk, n, share))
    columns = ["connect N stdio servers", "wall s", "host CPU s", "CPU ms/server", "wall ratio", "CPU ratio",
               "full collections", "CPU ratio, mean", "CPU ratio, no full collection", "collections/round",
               "CPU ratio, amortized"]  # fmt: skip
    if options.count and shutil.which("valgrind") and shutil.which("callgrind_control"):
        with tempfile.TemporaryDirectory(prefix="bench-connect-") as scratch:
            counts = [counted(kind, n, Path(scratch)) for kind in ("sdk", "manager")]
        columns += ["M instructions/server", "instructions ratio"]
        rows[0] += [round(counts[0] / n / 1e6, 2), 1.0]
        rows[1] += [round(counts[1] / n / 1e6, 2), round(counts[1] / counts[0], 2)]
        for row in rows[2:]:
            row += ["-", "-"]  # not counted: the reaper runs in the children, not in this process
    report("connect", columns, rows, servers=n, rounds=options.rounds, full_collection_ms=round(full_cpu_s * 1e3, 1))
    if REAPER_AVAILABLE:
        reaper_start(options.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
