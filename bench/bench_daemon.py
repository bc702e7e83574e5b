"""``mcpmux daemon``: a one-shot call warm vs cold, process and memory sprawl of host sessions, per-call overhead.

1. ``mcpmux call everything:echo`` where ``everything`` is ``npx mcp-server-everything`` (the
   peers' node_modules): cold (``--no-daemon``: the command starts npx and the server) vs warm
   through a running daemon. Medians of a few runs, as a user types them (a fresh process each).
2. Five simulated host sessions (``mcpmux connect --all`` each, as five Claude Code sessions would
   run) over the reference servers (everything, filesystem, memory, time, git, and the built-ins
   workspace and content_store): processes and total RSS of everything the sessions and the
   daemon run (psutil), without and with the daemon; medians of three rounds, and the process
   tree (who each process is) of the last round with the daemon. A third row leaves the sessions'
   own processes out of the baseline: hosts that run the stdio servers themselves.
3. A call through ``mcpmux connect everything`` vs straight to the server, each from an SDK
   ``ClientSession``: sequential calls per second and the overhead per call.

Run: ``.venv/bin/python bench/bench_daemon.py [one_shot|sessions|overhead]...`` (needs
``scripts/install-peers``). Ratios come from one run.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil
from harness import report
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.peers.fixtures import make_git_repo, peers_dir, stdio_command  # noqa: E402

SESSIONS = 5
ONE_SHOT_RUNS = 7
SESSION_ROUNDS = 3
CALLS = 300
WAIT_S = 180.0


def _environment(root: Path) -> dict[str, str]:
    home = root / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(root),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".state"),
        "MCPMUX_STATE_DIR": str(home / "state"),
        "MCPMUX_DATA_DIR": str(home / "data"),
        "MCPMUX_DAEMON": "auto",
    }
    env.pop("MCPMUX_CONFIG", None)
    return env


def _config(root: Path) -> Path:
    data = root / "data"
    data.mkdir()
    repo = make_git_repo(root / "repo")
    servers: list[dict[str, object]] = [
        {"name": "everything", "command": "npx", "args": ["--no-install", "mcp-server-everything", "stdio"],
         "cwd": str(peers_dir())},
    ]  # fmt: skip
    for name, (command, args) in {
        "filesystem": stdio_command("filesystem", str(data)),
        "memory": stdio_command("memory", str(root / "memory.jsonl")),
        "time": stdio_command("time"),
        "git": stdio_command("git", str(repo)),
    }.items():
        servers.append({"name": name, "command": command, "args": args})
    servers += [
        {"name": "workspace", "type": "builtin", "root": str(data)},
        {"name": "content_store", "type": "builtin"},
    ]
    settings = {"connect_timeout_ms": 120_000, "timeout_ms": 120_000}
    path = root / "mcpmux.yaml"
    path.write_text(json.dumps({"mcp": {"servers": servers, "settings": settings}}), encoding="utf-8")
    return path


def _mcpmux(env: dict[str, str], cwd: Path, *args: str, check: bool = True) -> float:
    return _timed(env, cwd, *args, check=check)[0]


def _timed(env: dict[str, str], cwd: Path, *args: str, check: bool = True) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system of the command and every child it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mcpmux", *args], env=env, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check and done.returncode not in (0, 2):
        raise RuntimeError(f"mcpmux {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def one_shot(env: dict[str, str], cwd: Path) -> list[list[object]]:
    """Wall and CPU medians of fresh ``mcpmux call`` processes: the floor, cold, and warm through the daemon.

    Warm goes through the thin client (``mcpmux.attach.thin``): no SDK, no manager in the command, and
    from the second call on no configuration load either (the daemon knows the command's inputs).
    Cold and warm alternate run by run, so that a change of the machine's load hits both alike.
    """
    call = ("call", "everything:echo", "message=hi")
    floor = [_timed(env, cwd, "--no-daemon", "call", "nowhere:x") for _ in range(ONE_SHOT_RUNS)]
    _mcpmux(env, cwd, "daemon", "start", "--linger", "600")
    _mcpmux(env, cwd, "--daemon", *call)  # the first call starts the server in the daemon
    cold, warm = [], []
    for _ in range(ONE_SHOT_RUNS):
        cold.append(_timed(env, cwd, "--no-daemon", *call))
        warm.append(_timed(env, cwd, "--daemon", *call))
    _mcpmux(env, cwd, "daemon", "stop")

    def median(runs: list[tuple[float, float]], index: int) -> float:
        return statistics.median(r[index] for r in runs)

    cold_s, warm_s, cold_cpu, warm_cpu = median(cold, 0), median(warm, 0), median(cold, 1), median(warm, 1)
    return [
        ["floor: mcpmux call of an unknown server (imports, config)", round(median(floor, 0), 3),
         round(median(floor, 1), 3), "", ""],
        ["mcpmux call (npx server), cold, --no-daemon", round(cold_s, 3), round(cold_cpu, 3), "", ""],
        ["mcpmux call (npx server), warm daemon (thin client, known inputs)", round(warm_s, 3), round(warm_cpu, 3),
         f"{cold_s / warm_s:.1f}x faster (wall), {cold_cpu / warm_cpu:.1f}x less CPU", ">= 10x"],
    ]  # fmt: skip


def _tree(pids: list[int]) -> list[psutil.Process]:
    seen: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for process in [root, *root.children(recursive=True)]:
                seen[process.pid] = process
        except psutil.NoSuchProcess:
            continue
    return list(seen.values())


def _rss_mb(processes: list[psutil.Process]) -> float:
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def _session(env: dict[str, str], cwd: Path, *flags: str) -> subprocess.Popen[bytes]:
    """One host session: ``mcpmux connect --all``, initialized and listed (so every server runs)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mcpmux", *flags, "connect", "--all"], env=env, cwd=cwd,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdin is not None
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "session", "version": "1"}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    return process


def _wait_listed(process: subprocess.Popen[bytes]) -> int:
    assert process.stdout is not None
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("a session ended before it listed its tools")
        message = json.loads(line)
        if message.get("id") == 2:
            return len(message["result"]["tools"])
    raise TimeoutError("a session did not list its tools in time")


def _settle(pids: list[int], expected_children: int) -> list[psutil.Process]:
    """The process tree once it holds ``expected_children`` stdio servers' trees (bounded wait)."""
    deadline = time.monotonic() + WAIT_S
    processes = _tree(pids)
    while time.monotonic() < deadline and len(processes) < expected_children:
        time.sleep(0.5)
        processes = _tree(pids)
    time.sleep(2.0)  # let lazily loaded modules settle before measuring memory
    return _tree(pids)


def _describe(process: psutil.Process, roles: dict[int, str]) -> tuple[str, str]:
    """(role, short command) of one measured process, for the process tree table."""
    try:
        cmdline = process.cmdline()
        parent = process.ppid()
    except psutil.NoSuchProcess:
        return "gone", "?"
    role = roles.get(process.pid)
    if role is None:
        if any(part.endswith("_reaper.py") for part in cmdline):
            role = "reaper"  # mcpmux's: no descendant of a stdio server outlives it
        elif roles.get(parent) == "daemon" and "-c" in cmdline:
            role = "watchdog"  # the daemon's: its children die with it
        else:
            role = "server"
    words = [Path(cmdline[0]).name] if cmdline else ["?"]
    words += [Path(a).name if "/" in a else a for a in cmdline[1:4] if len(a) < 80]
    return role, " ".join(words)[:70]


def _round(env: dict[str, str], cwd: Path, flags: tuple[str, ...], with_daemon: bool) -> dict[str, object]:
    """One measurement of SESSIONS sessions: processes, RSS, tools listed, and who each process is."""
    daemon_pid: list[int] = []
    if with_daemon:
        _mcpmux(env, cwd, "daemon", "start", "--linger", "600")
        status = json.loads(subprocess.run(
            [sys.executable, "-m", "mcpmux", "--json", "daemon", "status"], env=env, cwd=cwd,
            capture_output=True, check=True,
        ).stdout)  # fmt: skip
        # On Linux the daemon is its guardian's child: the guardian is counted, as one of its processes.
        daemon_pid = [int(status["pid"])] + ([int(status["watchdog_pid"])] if status.get("guardian") else [])
    running = [_session(env, cwd, *flags) for _ in range(SESSIONS)]
    try:
        tools = [_wait_listed(p) for p in running]
        processes = _settle([p.pid for p in running] + daemon_pid, SESSIONS)
        roles = {p.pid: "session" for p in running} | dict(zip(daemon_pid, ("daemon", "guardian"), strict=False))
        tree: dict[tuple[str, str], list[float]] = {}
        for process in processes:
            try:
                rss = process.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                continue
            tree.setdefault(_describe(process, roles), []).append(rss)
        described = {p.pid: _describe(p, roles)[0] for p in processes}
        mcpmux_own = [p for p in processes if described[p.pid] in ("session", "reaper")]
        return {
            "processes": len(processes), "rss_mb": _rss_mb(processes), "tools": min(tools),
            "mcpmux_processes": len(mcpmux_own), "mcpmux_rss_mb": _rss_mb(mcpmux_own),
            "tree": [[role, command, len(rss), round(sum(rss), 1)] for (role, command), rss in sorted(tree.items())],
        }  # fmt: skip
    finally:
        for session in running:
            assert session.stdin is not None
            session.stdin.close()
        for session in running:
            try:
                session.wait(60)
            except subprocess.TimeoutExpired:
                session.kill()
                session.wait(30)
            if session.stdout is not None:
                session.stdout.close()
        if daemon_pid:
            _mcpmux(env, cwd, "daemon", "stop")


def sessions(env: dict[str, str], cwd: Path) -> tuple[list[list[object]], dict[str, object]]:
    """Medians of SESSION_ROUNDS rounds, without and with the daemon alternating."""
    rounds: dict[str, list[dict[str, object]]] = {"without daemon": [], "with daemon": []}
    for _ in range(SESSION_ROUNDS):
        rounds["without daemon"].append(_round(env, cwd, ("--no-daemon",), with_daemon=False))
        rounds["with daemon"].append(_round(env, cwd, ("--daemon",), with_daemon=True))

    def median(label: str, key: str) -> float:
        return float(statistics.median(float(r[key]) for r in rounds[label]))  # type: ignore[arg-type]

    p0, m0, t0 = (
        median("without daemon", "processes"),
        median("without daemon", "rss_mb"),
        median("without daemon", "tools"),
    )
    p1, m1, t1 = median("with daemon", "processes"), median("with daemon", "rss_mb"), median("with daemon", "tools")
    # Hosts that run the stdio servers themselves (no mcpmux, so no built-ins): the sessions and reapers left out.
    n0, s0 = median("without daemon", "mcpmux_processes"), median("without daemon", "mcpmux_rss_mb")
    rows: list[list[object]] = [
        [f"{SESSIONS} sessions x 7 servers, without daemon", p0, round(m0, 1), t0, "", ""],
        [f"{SESSIONS} sessions x 7 servers, with daemon", p1, round(m1, 1), t1,
         f"{p0 / p1:.1f}x fewer processes", f"{m0 / m1:.1f}x less memory"],
        [f"{SESSIONS} hosts running the 5 stdio servers themselves (no mcpmux)", p0 - n0, round(m0 - s0, 1), "",
         f"{(p0 - n0) / p1:.1f}x fewer with the daemon", f"{(m0 - s0) / m1:.1f}x less with the daemon"],
    ]  # fmt: skip
    last = rounds["with daemon"][-1]["tree"], rounds["without daemon"][-1]["tree"]
    extra = {
        "processes_ratio": p0 / p1, "memory_ratio": m0 / m1, "rounds": SESSION_ROUNDS,
        "per_round": rounds, "tree_with_daemon": last[0], "tree_without_daemon": last[1],
    }  # fmt: skip
    return rows, extra


async def _calls_per_s(params: StdioServerParameters, tool: str) -> float:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(WAIT_S):
            await session.initialize()
            for _ in range(20):  # warm up
                await session.call_tool(tool, {"message": "warm"})
            started = time.perf_counter()
            for _ in range(CALLS):
                await session.call_tool(tool, {"message": "hi"})
        return CALLS / (time.perf_counter() - started)


def overhead(env: dict[str, str], cwd: Path) -> list[list[object]]:
    node, args = stdio_command("everything")
    direct = StdioServerParameters(command=node, args=args, env=env)
    _mcpmux(env, cwd, "daemon", "start", "--linger", "600")
    try:
        shim = StdioServerParameters(
            command=sys.executable, args=["-m", "mcpmux", "--daemon", "connect", "everything"], env=env, cwd=str(cwd)
        )
        straight = anyio.run(_calls_per_s, direct, "echo")
        through = anyio.run(_calls_per_s, shim, "echo")
    finally:
        _mcpmux(env, cwd, "daemon", "stop")
    per_call_us = (1 / through - 1 / straight) * 1e6
    return [
        ["echo straight to server-everything (SDK ClientSession)", round(straight, 1), "", ""],
        ["echo through mcpmux connect -> daemon", round(through, 1), f"{per_call_us:.0f} us/call overhead",
         f"{through / straight:.2f}x throughput"],
    ]  # fmt: skip


def main(sections: list[str]) -> None:
    """Run ``sections`` (``one_shot``, ``sessions``, ``overhead``; all when none is named)."""
    chosen = set(sections) or {"one_shot", "sessions", "overhead"}
    root = Path(tempfile.mkdtemp(prefix="mxb", dir="/tmp"))
    try:
        env = _environment(root)
        _config(root)
        load = os.getloadavg()[0]
        if "one_shot" in chosen:
            columns = ["what", "median wall s", "median CPU s", "ratio", "target"]
            report("daemon_one_shot", columns, one_shot(env, root), load_avg=load, runs=ONE_SHOT_RUNS)
        if "sessions" in chosen:
            rows, ratios = sessions(env, root)
            report(
                "daemon_sessions", ["what", "processes", "RSS MB", "tools listed", "processes", "memory"], rows,
                targets={"processes": ">= 4x fewer", "memory": ">= 3x less"}, load_avg=load, **ratios,
            )  # fmt: skip
            for label in ("with", "without"):
                tree = ratios[f"tree_{label}_daemon"]
                assert isinstance(tree, list)
                columns = [f"{label} the daemon: role", "command", "processes", "RSS MB"]
                report(f"daemon_sessions_tree_{label}", columns, tree)
        if "overhead" in chosen:
            report("daemon_overhead", ["what", "calls/s", "overhead", "ratio"], overhead(env, root), calls=CALLS)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
