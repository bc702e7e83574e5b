"""The field suite's session: the site the servers work on, each server's faces run once, and the table.

``field_outcome(server)`` runs the five faces of a server the first time one of its tests asks (an HTTP
server's listener is started for them and stopped after) and caches the results; each (server, face)
test then asserts its own face, so a known bug is a strict xfail on exactly the faces it breaks.
At the end of the session a table (server, transport, era, each face) is printed and written as JSON to
``.field-results/field.json`` at the repository root (and under pytest's basetemp).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.field.faces import FaceResult, run_faces
from tests.field.processes import FIELD_MARKER, postgres_cluster, start_listener, web_page
from tests.field.servers import FACES, FIELD_SERVERS, FieldServer, Site, field_venv_bin, stale_installs
from tests.peers.fixtures import INSTALL_HINT, make_git_repo, stop_process_group

_ROOT = Path(__file__).resolve().parents[2]
_RESULTS: dict[str, dict[str, FaceResult]] = {}
_RESULTS_DIR = _ROOT / ".field-results"
_BASETEMP: list[Path] = []
# Servers run at once (each with its five faces at once): 2 keeps a loaded 2-core machine responsive.
FIELD_CONCURRENCY = int(os.environ.get("MCPMUX_FIELD_CONCURRENCY", "2"))

FieldOutcome = Callable[[FieldServer], dict[str, FaceResult]]


@pytest.fixture(scope="session")
def field_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The data every field server works on; PostgreSQL and the web page run for the whole session."""
    stale = stale_installs()
    if stale:
        pytest.fail(f"field servers not installed or older than their pins: {', '.join(stale)}: {INSTALL_HINT}")
    root = tmp_path_factory.mktemp("field-site")
    data = root / "data"
    data.mkdir()
    (data / "notes.txt").write_text(f"{FIELD_MARKER}\n", encoding="utf-8")
    _make_workbook(data / "field.xlsx")
    repo = make_git_repo(root / "repo")
    with web_page() as url, postgres_cluster() as dsn:
        yield Site(data=data, repo=repo, postgres_dsn=dsn, web_url=url)


def _make_workbook(path: Path) -> None:
    # openpyxl lives in the SDK 2 field venv (excel-mcp-server's dependency), not in mcpmux's.
    script = "import openpyxl, sys; b = openpyxl.Workbook(); s = b.active; s.title = 'Field'; "
    script += f"s['A1'] = {FIELD_MARKER!r}; b.save(sys.argv[1])"
    subprocess.run([field_venv_bin(2, "python"), "-c", script, str(path)], check=True, capture_output=True, timeout=60)


def _entry(server: FieldServer, site: Site, work: Path, url: str | None) -> dict[str, Any]:
    if url is not None and server.transport == "openapi":
        return {"name": server.name, "type": "openapi", "spec": f"{url}/spec.json", "base_url": url}
    if url is not None:
        return {"name": server.name, "type": "http", "url": url}
    command, *args = server.argv(site, work, 0)
    return {"name": server.name, "type": "stdio", "command": command, "args": args, "env": server.env(site, work)}


async def _run(server: FieldServer, site: Site, work: Path) -> dict[str, FaceResult]:
    def entries(url: str | None) -> dict[str, dict[str, Any]]:
        return {face: _entry(server, site, work / face, url) for face in FACES}

    if server.transport == "stdio":
        return await run_faces(server, entries(None), site, work)
    listener_dir = work / "listener"
    listener_dir.mkdir(parents=True)

    def argv_for(port: int) -> list[str]:
        return server.argv(site, listener_dir, port)

    env = dict(os.environ) | server.env(site, listener_dir)
    with (work / "listener.log").open("w+b") as log:
        path = "" if server.transport == "openapi" else "/mcp"
        listener = await anyio.to_thread.run_sync(start_listener, argv_for, env, log, path)
        try:
            return await run_faces(server, entries(listener.url), site, work)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(stop_process_group, listener.process)


async def _run_all(servers: list[FieldServer], site: Site, root: Path) -> None:
    limiter = anyio.CapacityLimiter(FIELD_CONCURRENCY)

    async def one(server: FieldServer) -> None:
        async with limiter:
            _RESULTS[server.name] = await _run(server, site, root / server.name)

    async with anyio.create_task_group() as tg:
        for server in servers:
            tg.start_soon(one, server)


def _selected(session: pytest.Session) -> list[FieldServer]:
    names = {server.name for server in map(_case_server, session.items) if server is not None}
    return [server for server in FIELD_SERVERS if server.name in names]


def _case_server(item: pytest.Item) -> FieldServer | None:
    callspec = getattr(item, "callspec", None)
    server = None if callspec is None else callspec.params.get("server")
    return server if isinstance(server, FieldServer) else None


@pytest.fixture(scope="session")
def field_outcome(
    field_site: Site, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> FieldOutcome:
    """``field_outcome(server)``: every face's :class:`FaceResult`.

    The first call runs every server this session selected, ``FIELD_CONCURRENCY`` servers at a time
    (each with its five faces at once), so the whole tier fits its time budget.
    """
    _BASETEMP[:] = [tmp_path_factory.getbasetemp()]

    def outcome(server: FieldServer) -> dict[str, FaceResult]:
        if server.name not in _RESULTS:
            pending = [s for s in _selected(request.session) if s.name not in _RESULTS] or [server]
            anyio.run(_run_all, pending, field_site, tmp_path_factory.mktemp("field-servers"))
        return _RESULTS[server.name]

    return outcome


def _cell(server: FieldServer, face: str, result: FaceResult | None) -> str:
    if result is None:
        return "-"
    if face in server.known:
        return "XPASS" if result.ok else "xfail"
    return "ok" if result.ok else "FAIL"


def _rows() -> list[dict[str, Any]]:
    rows = []
    for server in FIELD_SERVERS:
        results = _RESULTS.get(server.name)
        if results is None:
            continue
        era = results["test"].era or "-"
        row: dict[str, Any] = {
            "server": server.name,
            "package": server.package,
            "lang": server.lang,
            "sdk": server.sdk,
            "transport": server.transport,
            "era": era,
            "faces": {face: _cell(server, face, results.get(face)) for face in FACES},
            "details": {face: results[face].to_json() for face in FACES},
            "known": {face: bug.reason for face, bug in server.known.items()},
        }
        rows.append(row)
    return rows


def _table(rows: list[dict[str, Any]]) -> list[str]:
    header = ["server", "lang", "sdk", "transport", "era", *FACES]
    body = [[r["server"], r["lang"], r["sdk"], r["transport"], r["era"], *r["faces"].values()] for r in rows]
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(len(header))]
    return ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths, strict=True)) for line in [header, *body]]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    rows = _rows()
    if not rows:
        return
    terminalreporter.section("field suite: real MCP servers through every face of mcpmux")
    for line in _table(rows):
        terminalreporter.write_line(line)
    distinct = len({r["package"].split(" (")[0] for r in rows})
    terminalreporter.write_line(
        f"{len(rows)} rows, {distinct} distinct servers; xfail = a known bug (issue 14), XPASS = fixed: remove its mark"
    )
    payload = json.dumps({"rows": rows}, indent=1)
    targets = [_RESULTS_DIR / "field.json", *(basetemp / "field.json" for basetemp in _BASETEMP)]
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(payload + "\n", encoding="utf-8")
    terminalreporter.write_line(f"results: {', '.join(str(t) for t in targets)}")
