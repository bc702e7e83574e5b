"""The fast ``mcpmux list`` over lazy, cached servers: the manager's rows, without the manager or the SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from mcpmux.cli import fast_list
from mcpmux.config import Config, Settings
from mcpmux.config.models import (
    StdioServerConfig,
    StreamableHttpServerConfig,
)
from mcpmux.manager import Manager, catalog as catalog_module
from mcpmux.manager.catalog import Catalog, CatalogEntry, fingerprint
from mcpmux.processes.sandbox import with_effective_sandbox
from tests.forkserver import MCPMUX

SCHEMA = {"type": "object"}


def _servers() -> tuple[Any, ...]:
    return (
        StdioServerConfig(name="alpha", command="alpha-not-installed", args=("--x",), env={"K": "v"}),
        StdioServerConfig(name="beta", command="beta-not-installed", prefix="alpha"),
        StreamableHttpServerConfig(name="web", url="https://127.0.0.1:9/mcp", headers={"A": "b"}),
        StdioServerConfig(name="off", command="off", enabled=False),
    )


def _fill(catalog: Catalog, config: Config) -> None:
    tools = {
        "alpha": ["echo", "add"],
        "beta": ["echo", "only_beta"],  # same namespace as alpha: its `echo` is alpha's
        "web": ["fetch"],
    }
    for server in config.enabled_servers:
        entry = CatalogEntry(
            tools=[types.Tool(name=n, input_schema=SCHEMA) for n in tools[server.name]],
            resources=[types.Resource(uri="file:///a", name="a")] if server.name == "web" else [],
            prompts=[types.Prompt(name="p")] if server.name == "alpha" else [],
        )
        catalog.store(server.name, fingerprint(with_effective_sandbox(server, config.security)), entry)


@pytest.fixture
def lazy_config() -> Config:
    return Config(servers=_servers(), settings=Settings(lazy=True))


def test_the_mirrored_catalog_facts_match_the_catalog() -> None:
    assert fast_list.CATALOG_FILE == catalog_module.CATALOG_FILE
    assert fast_list.SCHEMA_VERSION == catalog_module.SCHEMA_VERSION


@pytest.mark.anyio
async def test_rows_are_the_managers_rows(lazy_config: Config, tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    with Catalog(path) as catalog:
        _fill(catalog, lazy_config)
    fast = fast_list.lazy_rows(lazy_config, fast_list.catalog_rows(path))
    async with Manager(lazy_config, catalog=path) as manager:
        slow = [s.to_json() for s in manager.status()]
    assert fast is not None
    for row in fast + slow:
        for transition in row["history"]:
            transition.pop("at")
    assert fast == slow
    assert [r["tools"] for r in fast] == [3, 1, 2, 0]


def test_a_server_that_would_start_means_no_fast_rows(lazy_config: Config, tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    with Catalog(path) as catalog:
        _fill(catalog, lazy_config)
    rows = fast_list.catalog_rows(path)
    assert fast_list.lazy_rows(lazy_config, rows) is not None
    eager = lazy_config.model_copy(update={"settings": Settings(lazy=False)})
    assert fast_list.lazy_rows(eager, rows) is None
    changed = (lazy_config.servers[0].model_copy(update={"args": ("--y",)}), *lazy_config.servers[1:])
    assert fast_list.lazy_rows(lazy_config.model_copy(update={"servers": changed}), rows) is None
    assert fast_list.catalog_rows(tmp_path / "missing.db") == {}
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.subprocess
def test_list_over_lazy_servers_imports_neither_the_manager_nor_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcpmux.yaml").write_text(
        "mcp:\n  settings: {lazy: true}\n  servers:\n"
        "    - {name: alpha, command: alpha-not-installed, args: ['--x'], env: {K: v}}\n"
        "    - {name: off, command: off, enabled: false}\n",
        encoding="utf-8",
    )
    from mcpmux.config import load_config

    with Catalog() as catalog:
        _fill(catalog, load_config())
    probe = (
        "import sys\nfrom mcpmux.cli.main import run\ncode = run(['list', '--json'])\n"
        "loaded = [m for m in ('mcp', 'mcp_types', 'mcpmux.manager') if m in sys.modules]\n"
        "print(code, loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ, check=True)
    assert done.stderr.strip() == "0 []"
    rows = json.loads(done.stdout)
    assert [(r["name"], r["state"], r["tools"]) for r in rows] == [("alpha", "configured", 3), ("off", "disabled", 0)]
    table = subprocess.run([MCPMUX, "list"], capture_output=True, text=True, env=os.environ, check=True)
    assert "alpha-not-installed --x" in table.stdout and "configured" in table.stdout
