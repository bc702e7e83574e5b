"""Record real tool definitions once, for ``bench_discovery.py``: ``bench/data/tool_definitions.json``.

Two groups, each definition kept exactly as its server listed it (name, description, inputSchema,
annotations), with where it came from:

- ``reference``: the reference servers of ``tests/peers`` (server-everything, server-filesystem,
  server-memory, mcp-server-time, mcp-server-git), listed live over stdio;
- ``recorded``: 200 more, first every tool of the field suite's stdio servers (``tests/field/servers.py``:
  npm and PyPI packages, SDK 1.x and 2.x), then tools that mcpmux's OpenAPI source
  (``mcpmux.servers.openapi``) makes of the published documents in ``/work/shared/openapi``, in a fixed
  order, until 200.

Run (after ``scripts/install-peers``): ``.venv/bin/python bench/record_tool_definitions.py [--openapi DIR]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcpmux.config.models import OpenAPIServerConfig, ServerConfig, Settings, StdioServerConfig  # noqa: E402
from mcpmux.manager import Manager  # noqa: E402
from tests.field.servers import FIELD_SERVERS, Site  # noqa: E402
from tests.peers.fixtures import make_git_repo, stdio_command  # noqa: E402

OUT = Path(__file__).parent / "data" / "tool_definitions.json"
RECORDED = 200
REFERENCE = ("everything", "filesystem", "memory", "time", "git")
# Field servers already among the reference ones, or that need more than a scratch directory.
SKIPPED_FIELD = {"everything", "filesystem", "memory", "time", "git", "postgres", "proxy-ts"}
OPENAPI_ORDER = {
    "petstore": "petstore-v3.yaml", "forge": "1forge-swagger2.json", "twilio": "twilio_accounts_v1.json",
    "slack": "slack-swagger2.json", "github": "github-v3-swagger2.json",
}  # fmt: skip


def reference_servers(scratch: Path) -> list[tuple[ServerConfig, str]]:
    repo = make_git_repo(scratch / "repo")
    args = {"filesystem": (str(scratch),), "memory": (str(scratch / "memory.jsonl"),), "git": (str(repo),)}
    packages = {
        "everything": "npm @modelcontextprotocol/server-everything",
        "filesystem": "npm @modelcontextprotocol/server-filesystem",
        "memory": "npm @modelcontextprotocol/server-memory",
        "time": "PyPI mcp-server-time",
        "git": "PyPI mcp-server-git",
    }
    servers = []
    for name in REFERENCE:
        command, argv = stdio_command(name, *args.get(name, ()))
        servers.append((StdioServerConfig(name=name, command=command, args=tuple(argv)), packages[name]))
    return servers


def field_servers(scratch: Path) -> list[tuple[ServerConfig, str]]:
    site = Site(data=scratch, repo=scratch / "repo", postgres_dsn="", web_url="http://127.0.0.1:9/")
    servers = []
    for field in FIELD_SERVERS:
        if field.transport != "stdio" or field.name in SKIPPED_FIELD:
            continue
        work = scratch / field.name
        work.mkdir(exist_ok=True)
        argv = field.argv(site, work, 0)
        env = {k: v for k, v in field.env(site, work).items()}
        config = StdioServerConfig.model_validate(
            {"name": field.name, "command": argv[0], "args": argv[1:], "env": env, "connect_timeout_ms": 60_000}
        )
        servers.append((config, f"{field.package} ({field.sdk}, field suite)"))
    return servers


def openapi_servers(folder: Path) -> list[tuple[ServerConfig, str]]:
    servers = []
    for name, file in OPENAPI_ORDER.items():
        path = folder / file
        if path.is_file():
            config = OpenAPIServerConfig(name=name, spec=str(path), base_url="http://127.0.0.1:9")
            servers.append((config, f"OpenAPI {file} (/work/shared/openapi, converted by mcpmux.servers.openapi)"))
    return servers


async def listed(servers: list[tuple[ServerConfig, str]]) -> list[dict[str, Any]]:
    """Every tool of every server that connects, as listed, with its source."""
    sources = dict((config.name, source) for config, source in servers)
    settings = Settings(connect_timeout_ms=120_000)
    out: list[dict[str, Any]] = []
    async with Manager([config for config, _ in servers], settings=settings, catalog=False) as manager:
        for status in manager.status():
            if status.state.value != "connected":
                print(f"skipped {status.name}: {status.state.value} {status.reason}", file=sys.stderr)
        for tool in manager.tools():
            if tool.synthetic:
                continue
            definition = tool.definition.model_dump(mode="json", by_alias=True, exclude_none=True)
            out.append({"server": tool.server, "source": sources[tool.server], "definition": definition})
    return out


async def record(openapi: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mcpmux-record-") as scratch_dir:
        scratch = Path(scratch_dir)
        (scratch / "notes.txt").write_text("notes\n")
        reference = await listed(reference_servers(scratch))
        field = await listed(field_servers(scratch))
        documents = await listed(openapi_servers(openapi))
    recorded = (field + documents)[:RECORDED]
    return {
        "about": (
            "Real MCP tool definitions as their servers listed them (recorded by bench/record_tool_definitions.py). "
            "'reference': the reference servers of tests/peers; 'recorded': the field suite's stdio servers, then "
            "tools converted from published OpenAPI documents, first 200."
        ),
        "reference": reference,
        "recorded": recorded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--openapi", type=Path, default=Path("/work/shared/openapi"))
    args = parser.parse_args()
    data = anyio.run(record, args.openapi)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(data['reference'])} reference and {len(data['recorded'])} recorded definitions -> {OUT}")


if __name__ == "__main__":
    main()
