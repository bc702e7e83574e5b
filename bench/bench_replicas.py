"""Gateway replicas behind nginx on one PostgreSQL: a soak with kills, and scaling (issue 23).

Real parts only: a PostgreSQL cluster, 1-3 ``mcpmux serve --http`` replicas (``--replica-id``,
``--advertise``), Debian's nginx with the shipped ``deploy/nginx.conf`` (round-robin, no affinity)
and a counter server (``bench/counter_server.py``) in every replica that records each execution.

**Soak.** ``--clients`` clients (half 2026-07-28 stateless requests, half 2025-11-25 sessions) call
``count`` with unique ids through nginx until ``--calls`` calls were made, while a replica is
SIGKILLed every ``--kill-every`` seconds and started again. Each call is *answered*, *failed* (a
clear error: HTTP status, JSON-RPC error, an error result, a refused connection) or *hung* (no
answer within the client's timeout); the counter's log tells executions, so an id logged twice was
*executed twice*, and an id logged once whose client saw a failure is an *answer lost*. A session
client whose replica died gets 404 and opens a new session: the time to its next answer is its
recovery.

**Scaling.** Calls/s through nginx with 1, 2 and 3 replicas (same clients), each replica's CPU per
call, and a replica's RSS per 1,000 open sessions. On one 2-core machine the replicas share the
cores with nginx, PostgreSQL and the clients; the table gives what N machines would do from the
per-replica CPU per call.

    .venv/bin/python bench/bench_replicas.py [--calls 20000] [--clients 50] [--kill-every 30]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from harness import report

from tests.field.processes import postgres_cluster
from tests.gateway.serving import Serving, mcpmux, serve
from tests.peers.fixtures import free_port
from tests.replicas.nginx import start_nginx

COUNTER = str(Path(__file__).with_name("counter_server.py"))
CALL_TIMEOUT_S = 30.0
ACCEPT = "application/json, text/event-stream"
META = {
    "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
}


@dataclass
class Tally:
    answered: int = 0
    failed: int = 0
    hung: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    failed_ids: set[str] = field(default_factory=set)
    recoveries: list[float] = field(default_factory=list)
    new_sessions: int = 0


@dataclass
class Replica:
    name: str
    port: int
    stack: ExitStack
    serving: Serving | None = None


class Cluster:
    """Replicas ``r1``.. on fixed ports, each restartable under its own id and port."""

    def __init__(self, root: Path, config: Path, count: int) -> None:
        self.root, self.config = root, config
        self.replicas = [Replica(f"r{i}", free_port(), ExitStack()) for i in range(1, count + 1)]

    def start(self, replica: Replica) -> None:
        home = self.root / replica.name
        home.mkdir(exist_ok=True)
        advertise = f"http://127.0.0.1:{replica.port}"
        args = ("--http", f"127.0.0.1:{replica.port}", "--replica-id", replica.name, "--advertise", advertise)
        replica.stack = ExitStack()
        replica.serving = replica.stack.enter_context(serve(home, self.config, *args))

    def kill(self, replica: Replica) -> None:
        assert replica.serving is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(replica.serving.process.pid, signal.SIGKILL)
        replica.serving.process.wait(timeout=30)
        replica.stack.close()
        replica.serving = None

    def __enter__(self) -> Cluster:
        for replica in self.replicas:
            self.start(replica)
        return self

    def __exit__(self, *exc: object) -> None:
        for replica in self.replicas:
            replica.stack.close()


def _config(root: Path, url: str, log: Path) -> Path:
    server = {"name": "counter", "type": "stdio", "command": sys.executable, "args": [COUNTER],
              "env": {"COUNTER_LOG": str(log)}}  # fmt: skip
    path = root / "mcpmux.json"
    mcp = {"servers": [server], "security": {"pinning": "off"}}
    path.write_text(json.dumps({"mcp": mcp, "storage": {"url": url}}))
    return path


@contextlib.contextmanager
def _database() -> Iterator[str]:
    with postgres_cluster() as dsn:
        name = f"bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        yield "postgresql+psycopg://" + dsn.removeprefix("postgresql://").rsplit("/", 1)[0] + f"/{name}"


def _headers(token: str, **more: str) -> dict[str, str]:
    return {"Accept": ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {token}", **more}


def _answer(response: httpx.Response) -> dict[str, object]:
    """The JSON-RPC message of a response (JSON, or the last ``data:`` of an SSE stream)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(lines[-1]) if lines else {}
    message: dict[str, object] = response.json()
    return message


class Client:
    """One client: stateless (a POST per call) or a session (initialize, then calls with its id)."""

    def __init__(self, number: int, url: str, token: str, tally: Tally, stateless: bool) -> None:
        self.number, self.url, self.token, self.tally, self.stateless = number, url, token, tally, stateless
        self.session: str | None = None
        self.failing_since: float | None = None

    async def run(self, http: httpx.AsyncClient, ids: Iterator[int], stop: anyio.Event) -> None:
        while not stop.is_set():
            try:
                n = next(ids)
            except StopIteration:
                return
            await self.call(http, f"c{self.number}-{n}")

    async def call(self, http: httpx.AsyncClient, call_id: str) -> None:
        params = {"name": "counter__count", "arguments": {"id": call_id}}
        try:
            if self.stateless:
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**params, "_meta": META}}
                headers = _headers(self.token, **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                                  "Mcp-Name": "counter__count"})  # fmt: skip
            else:
                if self.session is None:
                    await self.open(http)
                body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
                headers = _headers(self.token, **{"Mcp-Session-Id": self.session or "",
                                                  "MCP-Protocol-Version": "2025-11-25"})  # fmt: skip
            response = await http.post(self.url, json=body, headers=headers, timeout=CALL_TIMEOUT_S)
            if response.status_code == 404 and not self.stateless:
                self.session = None  # the owner is gone: a new session next time (the spec's recovery)
                self.fail(call_id, "404 session gone")
                return
            if response.status_code != 200:
                self.fail(call_id, f"HTTP {response.status_code}")
                return
            message = _answer(response)
            result = message.get("result")
            if isinstance(result, dict) and not result.get("isError"):
                self.succeed()
            else:
                error = message.get("error") or (result or {}).get("content")
                self.fail(call_id, f"error: {str(error)[:60]}")
        except httpx.TimeoutException:
            self.tally.hung += 1
            self.tally.failed_ids.add(call_id)
            self.session = None
        except (httpx.HTTPError, ValueError) as exc:
            self.fail(call_id, type(exc).__name__)
            self.session = None

    async def open(self, http: httpx.AsyncClient) -> None:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
        opened = await http.post(self.url, json=init, headers=_headers(self.token), timeout=CALL_TIMEOUT_S)
        opened.raise_for_status()
        self.session = opened.headers["mcp-session-id"]
        self.tally.new_sessions += 1
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = _headers(self.token, **{"Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"})
        await http.post(self.url, json=note, headers=headers, timeout=CALL_TIMEOUT_S)

    def succeed(self) -> None:
        self.tally.answered += 1
        if self.failing_since is not None:
            self.tally.recoveries.append(time.monotonic() - self.failing_since)
            self.failing_since = None

    def fail(self, call_id: str, kind: str) -> None:
        self.tally.failed += 1
        self.tally.errors[kind] += 1
        self.tally.failed_ids.add(call_id)
        if self.failing_since is None:
            self.failing_since = time.monotonic()


async def _drive(url: str, token: str, clients: int, calls: int, seconds: float, tally: Tally) -> float:
    """``clients`` clients until ``calls`` calls or ``seconds``; the wall time taken."""
    ids = iter(range(calls))
    stop = anyio.Event()
    started = time.monotonic()
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as http, anyio.create_task_group() as outer:

        async def deadline() -> None:
            await anyio.sleep(seconds)
            stop.set()

        outer.start_soon(deadline)
        async with anyio.create_task_group() as tg:
            for number in range(clients):
                tg.start_soon(Client(number, url, token, tally, number % 2 == 0).run, http, ids, stop)
        outer.cancel_scope.cancel()
    return time.monotonic() - started


def _executions(log: Path) -> Counter[str]:
    return Counter(log.read_text().split()) if log.exists() else Counter()


def soak(root: Path, url: str, calls: int, clients: int, kill_every: float, max_s: float) -> dict[str, object]:
    log = root / "counter.log"
    config = _config(root, url, log)
    token = mcpmux(root, config, "token", "create", "soak").stdout.strip()
    tally, kills = Tally(), []
    with Cluster(root, config, 3) as cluster, start_nginx([r.port for r in cluster.replicas], root) as (port, _nginx):
        balancer = f"http://127.0.0.1:{port}/mcp"
        done = anyio.Event()

        async def killer() -> None:
            for replica in itertools.cycle(cluster.replicas):
                with anyio.move_on_after(kill_every):
                    await done.wait()
                if done.is_set():
                    return
                killed_at = time.monotonic()
                await anyio.to_thread.run_sync(cluster.kill, replica)
                await anyio.to_thread.run_sync(cluster.start, replica)
                kills.append({"replica": replica.name, "back_after_s": round(time.monotonic() - killed_at, 2)})

        async def main() -> float:
            async with anyio.create_task_group() as tg:
                tg.start_soon(killer)
                wall = await _drive(balancer, token, clients, calls, max_s, tally)
                done.set()
            return wall

        wall = anyio.run(main)
    executed = _executions(log)
    twice = sum(1 for n in executed.values() if n > 1)
    lost = sum(1 for i in tally.failed_ids if executed.get(i, 0) >= 1)
    made = tally.answered + tally.failed + tally.hung
    row = {
        "calls": made, "answered": tally.answered, "failed (clear error)": tally.failed, "hung": tally.hung,
        "executed twice": twice, "answer lost": lost, "kills": len(kills), "new sessions": tally.new_sessions,
        "recovery median s": round(statistics.median(tally.recoveries), 3) if tally.recoveries else 0.0,
        "recovery max s": round(max(tally.recoveries), 3) if tally.recoveries else 0.0,
        "calls/s": round(made / wall, 1),
    }  # fmt: skip
    return {"row": row, "errors": dict(tally.errors.most_common(8)), "kills": kills}


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def scaling(root: Path, url: str, clients: int, seconds: float) -> list[list[object]]:
    log = root / "scale.log"
    config = _config(root, url, log)
    token = mcpmux(root, config, "token", "create", f"scale{uuid.uuid4().hex[:4]}").stdout.strip()
    rows: list[list[object]] = []
    for count in (1, 2, 3):
        scratch = root / f"scale{count}"
        scratch.mkdir()
        with (
            Cluster(scratch, config, count) as cluster,
            start_nginx([r.port for r in cluster.replicas], scratch) as (
                port,
                _nginx,
            ),
        ):
            processes = [psutil.Process(r.serving.process.pid) for r in cluster.replicas if r.serving]
            before = [_cpu(p) for p in processes]
            tally = Tally()
            wall = anyio.run(_drive, f"http://127.0.0.1:{port}/mcp", token, clients, 10**9, seconds, tally)
            used = [_cpu(p) - b for p, b in zip(processes, before, strict=True)]
            per_call_ms = 1000 * sum(used) / max(tally.answered, 1)
            rows.append([count, round(tally.answered / wall, 1), round(per_call_ms, 3), tally.failed + tally.hung,
                         round(1000 / per_call_ms * count, 0) if per_call_ms else 0])  # fmt: skip
    return rows


def rss_per_sessions(root: Path, url: str, sessions: int) -> dict[str, float]:
    config = _config(root, url, root / "rss.log")
    token = mcpmux(root, config, "token", "create", "rss").stdout.strip()
    scratch = root / "rss"
    scratch.mkdir()
    with Cluster(scratch, config, 1) as cluster:
        replica = cluster.replicas[0]
        assert replica.serving is not None
        process = psutil.Process(replica.serving.process.pid)
        before = process.memory_info().rss

        async def open_all() -> None:
            async with httpx.AsyncClient(trust_env=False) as http:
                tally = Tally()
                for number in range(sessions):
                    await Client(number, replica.serving.url, token, tally, False).open(http)  # type: ignore[union-attr]

        anyio.run(open_all)
        after = process.memory_info().rss
    return {"sessions": sessions, "rss_before_mb": before / 2**20, "rss_after_mb": after / 2**20,
            "mb_per_1000_sessions": (after - before) / 2**20 * 1000 / sessions}  # fmt: skip


def revocation(root: Path, url: str, rounds: int) -> list[list[object]]:
    """Seconds from ``mcpmux token revoke`` returning to the token's refusal by each of 3 replicas."""
    config = _config(root, url, root / "revoke.log")
    rows: list[list[object]] = []
    with Cluster(root, config, 3) as cluster:
        bases = [f"http://127.0.0.1:{r.port}" for r in cluster.replicas]
        # A token that stays, so that tokens are still required on loopback once the others are revoked.
        mcpmux(root, config, "token", "create", "keeper")
        for number in range(rounds):
            token = mcpmux(root, config, "token", "create", f"gone{number}").stdout.strip()
            with httpx.Client(trust_env=False, timeout=10) as http:
                assert all(http.get(f"{b}/api/replicas", headers=_headers(token)).status_code == 200 for b in bases)
                assert mcpmux(root, config, "token", "revoke", f"gone{number}").returncode == 0
                revoked_at, refused = time.monotonic(), dict.fromkeys(bases, 0.0)
                while not all(refused.values()) and time.monotonic() - revoked_at < 30:
                    for base in bases:
                        if (
                            not refused[base]
                            and http.get(f"{base}/api/replicas", headers=_headers(token)).status_code == 401
                        ):
                            refused[base] = time.monotonic() - revoked_at
            rows.append([number + 1, *(round(v, 4) for v in refused.values())])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--kill-every", type=float, default=30.0)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--scale-seconds", type=float, default=20.0)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--revocations", type=int, default=5)
    parser.add_argument("--skip", choices=["soak", "scaling", "rss", "revocation"], action="append", default=[])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpmux-bench-replicas-") as tmp, _database() as url:
        root = Path(tmp)
        extra: dict[str, object] = {}
        if "soak" not in args.skip:
            (root / "soak").mkdir()
            result = soak(root / "soak", url, args.calls, args.clients, args.kill_every, args.max_seconds)
            row = dict(result["row"])  # type: ignore[call-overload]
            report("replicas_soak", list(row), [list(row.values())], errors=result["errors"], kills=result["kills"])
        if "scaling" not in args.skip:
            (root / "scaling").mkdir()
            rows = scaling(root / "scaling", url, args.clients, args.scale_seconds)
            columns = ["replicas", "calls/s", "replica CPU ms per call", "failed+hung", "model calls/s on N cores"]
            extra["scaling"] = rows
            report("replicas_scaling", columns, rows, clients=args.clients, seconds=args.scale_seconds)
        if "rss" not in args.skip:
            (root / "rss").mkdir()
            rss = rss_per_sessions(root / "rss", url, args.sessions)
            report("replicas_rss", list(rss), [list(rss.values())])
        if "revocation" not in args.skip:
            (root / "revocation").mkdir()
            rows = revocation(root / "revocation", url, args.revocations)
            report("replicas_revocation", ["round", "r1 s", "r2 s", "r3 s"], rows)


if __name__ == "__main__":
    main()
