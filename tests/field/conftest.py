"""The field suite's session: the site the servers work on, each server's faces run once, and the table.

``field_outcome(server)`` runs the five faces of a server the first time one of its tests asks (an HTTP
server's listener is started for them and stopped after) and caches the results; each (server, face)
test then asserts its own face, so a known bug is a strict xfail on exactly the faces it breaks.
At the end of the session :mod:`tests.field.report` prints a table (server, transport, era, each face)
and writes it as JSON to ``.field-results/field.json`` at the repository root.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.field.faces import FaceResult, run_faces
from tests.field.processes import FIELD_MARKER, postgres_cluster, start_listener, web_page
from tests.field.report import RESULTS
from tests.field.servers import FACES, FIELD_SERVERS, FieldServer, Site, field_venv_bin, stale_installs
from tests.peers.fixtures import INSTALL_HINT, make_git_repo, stop_process_group

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
            RESULTS[server.name] = await _run(server, site, root / server.name)

    async with anyio.create_task_group() as tg:
        for server in servers:
            tg.start_soon(one, server)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) a server's five face tests run in one worker, which
    runs the server's faces once for all five."""
    for item in items:
        server = _case_server(item)
        if server is not None:
            item.add_marker(pytest.mark.xdist_group(f"field-{server.name}"))


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

    In one process, the first call runs every server this session selected, ``FIELD_CONCURRENCY``
    servers at a time (each with its five faces at once), so the whole tier fits its time budget. Under
    pytest-xdist each server's tests are one group (see ``pytest_collection_modifyitems``), so the
    servers spread over the workers and a worker runs only the server it was asked about.
    """
    in_worker = hasattr(request.config, "workerinput")

    def outcome(server: FieldServer) -> dict[str, FaceResult]:
        if server.name not in RESULTS:
            selected = [server] if in_worker else _selected(request.session)
            pending = [s for s in selected if s.name not in RESULTS] or [server]
            anyio.run(_run_all, pending, field_site, tmp_path_factory.mktemp("field-servers"))
        return RESULTS[server.name]

    return outcome
