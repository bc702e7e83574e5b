"""Era translation, proven: downstream era x upstream era x transport x feature through ``mcpmux serve``.

Upstreams are :class:`~mcpmux.testing.MockServer` s of one era each (``tests/gateway/era_upstream.py``)
on stdio (a child of the gateway) or Streamable HTTP (a process of their own); downstream clients
are the SDK's ``Client`` with the era pinned, over stdio (``mcpmux serve`` as their child) or
Streamable HTTP (one ``mcpmux serve --http`` per upstream era and transport, shared by the cells).

Every cell either works, asserted end to end, or is refused with the error the table in
``docs/eras.md`` names: the test fails when the two disagree. ``MCPMUX_WRITE_ERA_DOC=1`` rewrites
the table from what was observed (review the diff).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.era_upstream import NOTE_URI
from tests.gateway.serving import MCPMUX, Serving, isolated_env, mcpmux, serve
from tests.peers.fixtures import stop_process_group

pytestmark = [
    pytest.mark.xdist_group(__name__),
    pytest.mark.slow,
    pytest.mark.anyio,
    pytest.mark.subprocess,
    pytest.mark.network,
]

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "eras.md"
ERAS = ("2025-11-25", "2026-07-28")
TRANSPORTS = ("stdio", "http")
FEATURES = ("list", "progress", "cancel", "sampling", "elicitation", "approval", "list_changed", "subscribe")
CLIENT_MODE = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
CELL_TIMEOUT_S = 60.0
WAIT_S = 15.0
"""How long a probe waits for something that should happen (a notification, a cancellation)."""
QUIET_S = 3.0
"""How long a probe waits for a notification the gateway cannot deliver, before calling it missing."""
WORKS = "works"


# -- the gateway per upstream era and transport ------------------------------------------------


@dataclass
class Gateway:
    """One ``mcpmux serve --http`` in front of one upstream, plus what a stdio cell needs to start its own."""

    root: Path
    config: Path
    serving: Serving
    token: str
    upstream_era: str


@contextmanager
def http_upstream(era: str) -> Iterator[str]:
    """``tests/gateway/era_upstream.py`` serving ``era`` over Streamable HTTP; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.gateway.era_upstream", era],
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()  # the child prints its URL once it listens
        assert line.startswith("serving "), f"the {era} upstream did not start: {line!r}"
        yield line.split()[1]
    finally:
        stop_process_group(process)
        if process.stdout is not None:
            process.stdout.close()


def write_config(root: Path, era: str, transport: str, url: str | None) -> Path:
    if transport == "stdio":
        module = "tests.gateway.era_upstream:" + ("legacy" if era == "2025-11-25" else "modern")
        server: dict[str, Any] = {
            "name": "up", "type": "stdio", "command": sys.executable,
            "args": ["-m", "mcpmux.testing", "--module", module], "env": {"PYTHONPATH": str(REPO)},
        }  # fmt: skip
    else:
        server = {"name": "up", "type": "http", "url": url}
    security = {"pinning": "off", "require_approval": ["up:guarded"]}
    path = root / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": [server], "security": security}}))
    return path


@pytest.fixture(scope="module", params=[(e, t) for e in ERAS for t in TRANSPORTS], ids=lambda p: f"up-{p[0]}-{p[1]}")
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    era, transport = request.param
    root = tmp_path_factory.mktemp(f"era-{era}-{transport}")
    with contextmanager_or_none(transport == "http", era) as url:
        config = write_config(root, era, transport, url)
        created = mcpmux(root, config, "token", "create", "matrix", "--can-approve", "--json")
        token = json.loads(created.stdout)["token"]
        with serve(root, config, "--http", "127.0.0.1:0") as serving:
            yield Gateway(root, config, serving, token, era)


@contextmanager
def contextmanager_or_none(wanted: bool, era: str) -> Iterator[str | None]:
    if not wanted:
        yield None
        return
    with http_upstream(era) as url:
        yield url


# -- a downstream client of one era ------------------------------------------------------------


@dataclass
class Downstream:
    """What the client's callbacks saw."""

    asked: list[str] = field(default_factory=list)
    notifications: list[types.ServerNotification] = field(default_factory=list)
    arrived: anyio.Event = field(default_factory=anyio.Event)

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="four"), model="m")

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if params.message.startswith("Allow "):  # the gateway's approval question
            self.asked.append("approval")
            return types.ElicitResult(action="accept", content={"decision": "yes"})
        self.asked.append("elicitation")
        return types.ElicitResult(action="accept", content={"name": "ada"})

    async def on_message(self, message: object) -> None:
        if isinstance(message, types.ServerNotification):
            self.notifications.append(message)
            self.arrived.set()

    async def next_notification(self, kind: type[Any], timeout_s: float) -> Any | None:
        """The next notification of ``kind`` within ``timeout_s`` (consumed), or ``None``."""
        with anyio.move_on_after(timeout_s):
            while True:
                for index, notification in enumerate(self.notifications):
                    if isinstance(notification, kind):
                        return self.notifications.pop(index)
                self.arrived = anyio.Event()
                await self.arrived.wait()
        return None


@asynccontextmanager
async def connect(gateway: Gateway, era: str, transport: str, seen: Downstream) -> AsyncIterator[Client]:
    callbacks: dict[str, Any] = {
        "sampling_callback": seen.sampling, "elicitation_callback": seen.elicitation,
        "message_handler": seen.on_message, "mode": CLIENT_MODE[era],
    }  # fmt: skip
    if transport == "stdio":
        params = StdioServerParameters(
            command=MCPMUX, args=["--config", str(gateway.config), "serve", "--stdio"],
            env=isolated_env(gateway.root), cwd=str(gateway.root),
        )  # fmt: skip
        async with Client(params, **callbacks) as client:
            yield client
        return
    headers = {"Authorization": f"Bearer {gateway.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(gateway.serving.url, http_client=http) as (read, write),
        Client(_Streams(read, write), **callbacks) as client,  # type: ignore[arg-type]
    ):
        yield client


class _Streams:
    """A transport over an already open stream pair."""

    def __init__(self, read: object, write: object) -> None:
        self.pair = (read, write)

    async def __aenter__(self) -> tuple[object, object]:
        return self.pair

    async def __aexit__(self, *exc: object) -> None:
        return None


# -- the probes: one per feature, each "works" or "refused: <code>: <message>" ------------------


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def refused(exc: MCPError | types.CallToolResult) -> str:
    if isinstance(exc, types.CallToolResult):
        return "refused: tool error: " + text(exc).splitlines()[0]
    return f"refused: {exc.error.code}: {exc.error.message.splitlines()[0]}"


@dataclass
class Cell:
    client: Client
    seen: Downstream
    era: str
    label: str
    """Unique per cell: names the tools this cell adds upstream."""


async def probe_list(cell: Cell) -> str:
    names = {t.name for t in (await cell.client.list_tools()).tools}
    assert {"up__echo", "up__slow", "up__sample"} <= names, names
    assert text(await cell.client.call_tool("up__echo", {"text": "hi"})) == "echo: hi"
    return WORKS


async def probe_progress(cell: Cell) -> str:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await cell.client.call_tool("up__slow", {"steps": 3}, progress_callback=on_progress)
    assert text(result) == "done in 3", result
    if not seen:
        return "refused: no progress notifications reached the client"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")], seen
    return WORKS


async def probe_cancel(cell: Cell) -> str:
    before = int(text(await cell.client.call_tool("up__cancelled", {})))
    hanging = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        hanging.set()

    async def call() -> None:
        await cell.client.call_tool("up__hang", {}, progress_callback=on_progress)
        raise AssertionError("hang answered")

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.move_on_after(WAIT_S):  # no progress through this cell: cancel blind after a while
            await hanging.wait()
        tg.cancel_scope.cancel()
    with anyio.move_on_after(WAIT_S):
        while True:  # the upstream is another process: its count is polled
            if int(text(await cell.client.call_tool("up__cancelled", {}))) > before:
                return WORKS
            await anyio.sleep(0.1)
    return "refused: the upstream call ran on after the client cancelled it"


async def probe_sampling(cell: Cell) -> str:
    try:
        result = await cell.client.call_tool("up__sample", {"prompt": "2+2?"})
    except MCPError as exc:
        return refused(exc)
    if result.is_error:
        return refused(result)
    assert text(result) == "sampled: four" and "sampling" in cell.seen.asked, (result, cell.seen.asked)
    return WORKS


async def probe_elicitation(cell: Cell) -> str:
    try:
        result = await cell.client.call_tool("up__elicit", {"question": "who?"})
    except MCPError as exc:
        return refused(exc)
    if result.is_error:
        return refused(result)
    assert text(result) == "elicited: accept ada" and "elicitation" in cell.seen.asked, (result, cell.seen.asked)
    return WORKS


async def probe_approval(cell: Cell) -> str:
    result = await cell.client.call_tool("up__guarded", {"text": "ok"})
    if result.is_error:
        return refused(result)
    assert text(result) == "guarded: ok" and "approval" in cell.seen.asked, (result, cell.seen.asked)
    return WORKS


async def probe_list_changed(cell: Cell) -> str:
    name = f"new_{cell.label}"
    if cell.era == "2026-07-28":
        async with cell.client.listen(tools_list_changed=True) as events:
            await cell.client.call_tool("up__add_tool", {"name": name})
            return await _until_listed(cell, f"up__{name}", lambda: _next_event(events))
    await cell.client.call_tool("up__add_tool", {"name": name})
    return await _until_listed(
        cell, f"up__{name}", lambda: cell.seen.next_notification(types.ToolListChangedNotification, QUIET_S)
    )


async def _next_event(events: Any) -> object | None:
    with anyio.move_on_after(QUIET_S):
        event: object = await events.__anext__()
        return event
    return None


async def _until_listed(cell: Cell, tool: str, wake: Callable[[], Awaitable[object | None]]) -> str:
    """``works`` when a wake-up (notification or event) arrives and the tool is then listed."""
    with anyio.move_on_after(WAIT_S):
        while await wake() is not None:
            if tool in {t.name for t in (await cell.client.list_tools()).tools}:
                return WORKS
    return "refused: no list_changed reached the client"


async def probe_subscribe(cell: Cell) -> str:
    uris = [r.uri for r in (await cell.client.list_resources()).resources]
    uri = next(u for u in uris if u == NOTE_URI or "note" in u)
    if cell.era == "2026-07-28":
        async with cell.client.listen(resource_subscriptions=[uri]) as events:
            await cell.client.call_tool("up__touch", {})
            event = await _next_event(events)
            return WORKS if event is not None else "refused: no resource update reached the client"
    try:
        await cell.client.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
        )
    except MCPError as exc:
        return refused(exc)
    await cell.client.call_tool("up__touch", {})
    updated = await cell.seen.next_notification(types.ResourceUpdatedNotification, QUIET_S)
    unsubscribe = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
    await cell.client.session.send_request(unsubscribe, types.EmptyResult)  # cells stay independent
    if updated is None:
        return "refused: no resource update reached the client"
    assert updated.params.uri == uri
    return WORKS


PROBES: dict[str, Callable[[Cell], Awaitable[str]]] = {
    "list": probe_list, "progress": probe_progress, "cancel": probe_cancel, "sampling": probe_sampling,
    "elicitation": probe_elicitation, "approval": probe_approval, "list_changed": probe_list_changed,
    "subscribe": probe_subscribe,
}  # fmt: skip


# -- the matrix ---------------------------------------------------------------------------------

Row = tuple[str, str, str, str]
"""(upstream era, upstream transport, downstream era, downstream transport)."""
OBSERVED: dict[Row, dict[str, str]] = {}


@pytest.mark.parametrize("down_transport", TRANSPORTS)
@pytest.mark.parametrize("down_era", ERAS)
async def test_every_feature_works_or_is_refused_as_documented(
    gateway: Gateway, down_era: str, down_transport: str
) -> None:
    row: Row = (gateway.upstream_era, _upstream_transport(gateway), down_era, down_transport)
    seen = Downstream()
    label = f"{down_era[:4]}_{down_transport}".replace("-", "")
    observed: dict[str, str] = {}
    with anyio.fail_after(CELL_TIMEOUT_S * len(FEATURES)):
        async with connect(gateway, down_era, down_transport, seen) as client:
            for feature in FEATURES:
                with anyio.fail_after(CELL_TIMEOUT_S):
                    observed[feature] = await PROBES[feature](Cell(client, seen, down_era, label))
    OBSERVED[row] = observed
    if os.environ.get("MCPMUX_WRITE_ERA_DOC"):
        write_doc(OBSERVED)
        return
    expected = read_doc()[row]
    assert observed == expected, f"{row}: observed {observed}, docs/eras.md says {expected}"


def _upstream_transport(gateway: Gateway) -> str:
    return "http" if '"type": "http"' in gateway.config.read_text() else "stdio"


# -- docs/eras.md: the table, read and written ---------------------------------------------------

_BEGIN, _END = "<!-- era-matrix:begin -->", "<!-- era-matrix:end -->"
_HEADER = ["upstream", "up transport", "downstream", "down transport", *FEATURES]


def read_doc() -> dict[Row, dict[str, str]]:
    """The table and its refusal legend, as the outcome per row and feature."""
    section = DOC.read_text().split(_BEGIN)[1].split(_END)[0]
    legend = dict(re.findall(r"^- \*\*(R\d+)\*\*: `([^`]*)`", section, re.MULTILINE))
    table: dict[Row, dict[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(_HEADER) or cells[0] in ("upstream", "---"):
            continue
        outcomes = [WORKS if c == WORKS else "refused: " + legend[c.split()[-1]] for c in cells[4:]]
        table[(cells[0], cells[1], cells[2], cells[3])] = dict(zip(FEATURES, outcomes, strict=True))
    return table


def write_doc(observed: dict[Row, dict[str, str]]) -> None:
    """Merge ``observed`` into the table of ``docs/eras.md`` (refusals numbered in a legend)."""
    try:
        table = read_doc()
    except (IndexError, KeyError, FileNotFoundError):
        table = {}
    table |= observed
    reasons = sorted({o.removeprefix("refused: ") for row in table.values() for o in row.values() if o != WORKS})
    keys = {reason: f"R{n}" for n, reason in enumerate(reasons, 1)}
    lines = [_BEGIN, "| " + " | ".join(_HEADER) + " |", "|" + " --- |" * len(_HEADER)]
    for row in sorted(table):
        outcomes = [o if o == WORKS else f"refused {keys[o.removeprefix('refused: ')]}" for o in table[row].values()]
        lines.append("| " + " | ".join([*row, *outcomes]) + " |")
    lines += ["", *(f"- **{keys[r]}**: `{r}`" for r in reasons), _END]
    text = DOC.read_text() if DOC.exists() else f"# Protocol eras\n\n{_BEGIN}\n{_END}\n"
    before, rest = text.split(_BEGIN)
    DOC.write_text(before + "\n".join(lines) + rest.split(_END)[1])
