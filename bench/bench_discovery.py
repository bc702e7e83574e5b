"""What a client pays for the gateway's tool list in each discovery mode, and how well ``search_tools`` finds tools.

Real tool sets (``bench/data/tool_definitions.json``, recorded by ``record_tool_definitions.py``): the
reference servers of ``tests/peers`` (50 tools), and those plus 200 recorded definitions of real servers
and published OpenAPI documents (250 tools). Each set is served by a real :class:`~mcpmux.gateway.Gateway`
in process (one SDK low-level server per upstream answering ``tools/list`` with its recorded
definitions), and an SDK client lists it in each mode: ``all``, ``search``, ``search`` with
``always_load: ["time:*"]``, and ``auto:100`` (lists the 50, searches the 250).

Tokens are counted on the JSON of the listed tools as a client receives it, with the ``o200k_base`` and
``cl100k_base`` encodings of ``bpe-openai`` (the tiktoken tables, built into the wheel: ``tiktoken`` itself
installs from PyPI but downloads its tables at run time, which this machine cannot), and as
JSON characters / 4 (the estimate ``mcpmux.bridge.tool_search`` uses) for comparison.

Search quality: 30 hand-labelled queries (``bench/data/discovery_queries.json``) sent to ``search_tools``
over the 250-tool set; top-1 and top-3 hit rates. BM25 is deterministic, so these are exact numbers.

Run: ``.venv/bin/python bench/bench_discovery.py`` (prints tables, writes ``bench/results/discovery*.json``).
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from harness import report
from mcp import Client
from mcp.server import Server

from mcpmux.config.models import Config, DiscoveryConfig, SecurityConfig, ServerConfig, Settings, StdioServerConfig
from mcpmux.connection import Connection
from mcpmux.gateway import Downstream, Gateway
from mcpmux.host import Host
from mcpmux.policy import StateStore
from mcpmux.transports.inprocess import open_mcp_server
from mcpmux.types.callbacks import ClientCallbacks

DATA = Path(__file__).parent / "data"
DEFINITIONS = DATA / "tool_definitions.json"
QUERIES = DATA / "discovery_queries.json"
MODES = {
    "all": DiscoveryConfig(mode="all"),
    "search": DiscoveryConfig(mode="search"),
    "search + always_load time:*": DiscoveryConfig(mode="search", always_load=("time:*",)),
    "auto:100": DiscoveryConfig(mode="auto:100"),
}
ENCODINGS = ("o200k_base", "cl100k_base")


@dataclass(frozen=True, slots=True)
class Counter:
    """Counts tokens of a text; ``name`` says how."""

    name: str
    count: Callable[[str], int]


def counters() -> list[Counter]:
    """The tiktoken encodings (through ``bpe-openai``) when installed, and chars/4 always."""
    found = [Counter("chars/4", lambda text: len(text) // 4)]
    with warnings.catch_warnings():
        # bpe-openai 0.1.4 loads its tables with importlib.resources.open_binary (deprecated, still works).
        warnings.filterwarnings("ignore", "open_binary is deprecated", DeprecationWarning)
        try:
            import bpe_openai
        except ImportError:
            print("bpe-openai is not installed: tokens are estimated as characters / 4 only", file=sys.stderr)
            return found
        encodings = [(name, bpe_openai.get_encoding(name)) for name in ENCODINGS]
    for name, encoding in reversed(encodings):
        found.insert(0, Counter(name, lambda text, e=encoding: len(e.encode(text))))
    return found


def tool_sets() -> dict[str, dict[str, list[types.Tool]]]:
    """``{set name: {server: [definitions]}}``: the reference servers, and those plus the 200 recorded."""
    data = json.loads(DEFINITIONS.read_text())
    reference: dict[str, list[types.Tool]] = {}
    everything: dict[str, list[types.Tool]] = {}
    for group, target in (("reference", [reference, everything]), ("recorded", [everything])):
        for entry in data[group]:
            tool = types.Tool.model_validate(entry["definition"])
            for servers in target:
                servers.setdefault(entry["server"], []).append(tool)
    return {"reference (50)": reference, "reference + 200 recorded (250)": everything}


def _upstream(name: str, tools: list[types.Tool]) -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    return Server(name, on_list_tools=list_tools)


@asynccontextmanager
async def gateway_of(servers: dict[str, list[types.Tool]], mode: DiscoveryConfig) -> AsyncIterator[Gateway]:
    """A started gateway over ``servers`` (in process) with discovery ``mode``."""
    upstreams = {name: _upstream(name, tools) for name, tools in servers.items()}

    def connect(config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        server = upstreams[config.name]
        opened = lambda: open_mcp_server(server, name=config.name, describe=f"recorded {config.name}")  # noqa: E731
        return Connection(config, settings, callbacks=callbacks, transport=opened)

    config = Config(
        servers=tuple(StdioServerConfig(name=name, command="in-process", validate=False) for name in servers),
        security=SecurityConfig(pinning="off"),
        discovery=mode,
    )
    downstream = Downstream()
    with StateStore(":memory:") as store:
        host = Host(
            config, face="gateway", store=store, connection_factory=connect, catalog=False, suspicion=None,
            callbacks=downstream.client_callbacks(),
        )  # fmt: skip
        async with host:
            gateway = Gateway(host, downstream=downstream)
            async with anyio.create_task_group() as tg:
                await tg.start(gateway.run)
                yield gateway
                tg.cancel_scope.cancel()


async def listed_json(servers: dict[str, list[types.Tool]], mode: DiscoveryConfig) -> tuple[int, str]:
    """How many tools a client of ``mode`` gets, and their JSON as it arrives."""
    async with gateway_of(servers, mode) as gateway, Client(gateway.server, mode="legacy") as client:
        tools = (await client.list_tools()).tools
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return len(tools), json.dumps(dumped, ensure_ascii=False, separators=(",", ":"))


async def token_rows(count: Sequence[Counter]) -> list[list[Any]]:
    """One row per tool set and mode: tools listed, tokens per counter, and the share of ``all``."""
    rows: list[list[Any]] = []
    for set_name, servers in tool_sets().items():
        baseline: int | None = None
        for mode, discovery in MODES.items():
            listed, text = await listed_json(servers, discovery)
            tokens = [c.count(text) for c in count]
            baseline = tokens[0] if baseline is None else baseline
            rows.append([set_name, mode, listed, *tokens, round(tokens[0] / baseline, 4)])
    return rows


async def hit_rates(limit: int = 3) -> tuple[float, float, list[list[Any]]]:
    """Top-1 and top-3 hit rates of ``search_tools`` on the labelled queries, and one row per query."""
    queries = json.loads(QUERIES.read_text())["queries"]
    servers = tool_sets()["reference + 200 recorded (250)"]
    rows: list[list[Any]] = []
    async with gateway_of(servers, MODES["search"]) as gateway, Client(gateway.server, mode="legacy") as client:
        for labelled in queries:
            found = await client.call_tool("search_tools", {"query": labelled["query"], "limit": limit})
            names = [t["name"] for t in (found.structured_content or {}).get("tools", [])]
            expected = set(labelled["expected"])
            rank = next((i + 1 for i, name in enumerate(names) if name in expected), None)
            rows.append([labelled["query"], labelled["expected"][0], names[0] if names else "-", rank or "miss"])
    top1 = sum(1 for r in rows if r[3] == 1) / len(rows)
    top3 = sum(1 for r in rows if isinstance(r[3], int) and r[3] <= limit) / len(rows)
    return top1, top3, rows


async def main() -> None:
    count = counters()
    rows = await token_rows(count)
    columns = ["tool set", "mode", "tools listed", *(f"tokens ({c.name})" for c in count), "share of all"]
    report("discovery_tokens", columns, rows, counted_with=[c.name for c in count])
    top1, top3, queries = await hit_rates()
    report("discovery_queries", ["query", "labelled", "top hit", "rank"], queries)
    report("discovery_hit_rates", ["queries", "top-1", "top-3"], [[len(queries), round(top1, 3), round(top3, 3)]])


if __name__ == "__main__":
    anyio.run(main)
