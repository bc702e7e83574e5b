"""The catalog cache: round trips, staleness by fingerprint, speed, and two writers at once."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import mcp_types as types
import pytest
from pydantic import SecretStr

from mcpmux.config.models import StdioServerConfig, StreamableHttpServerConfig
from mcpmux.manager.catalog import SCHEMA_VERSION, Catalog, CatalogEntry, fingerprint


def make_entry(tools: int = 3, *, name: str = "demo") -> CatalogEntry:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "where"}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    return CatalogEntry(
        tools=[
            types.Tool(
                name=f"tool_{i}",
                description=f"Tool number {i} of {name}. " * 5,
                input_schema=schema,
                annotations=types.ToolAnnotations(read_only_hint=True),
            )
            for i in range(tools)
        ],
        resources=[types.Resource(name="readme", uri="file:///readme.md", mime_type="text/markdown")],
        resource_templates=[types.ResourceTemplate(name="file", uri_template="file:///{path}")],
        prompts=[types.Prompt(name="greet", arguments=[types.PromptArgument(name="who", required=True)])],
        server_info=types.Implementation(name=name, version="1.2.3"),
        protocol_version="2025-11-25",
        instructions="Use carefully.",
        stored_at=1_700_000_000.5,
    )


def test_an_entry_round_trips(tmp_path: Path) -> None:
    entry = make_entry()
    with Catalog(tmp_path / "catalog.db") as catalog:
        catalog.store("demo", "fp1", entry)
        loaded = catalog.load("demo", "fp1")
    assert loaded == entry


def test_the_default_file_is_in_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_DATA_DIR", str(tmp_path / "data"))
    catalog = Catalog()
    assert catalog.path == tmp_path / "data" / "catalog.db"
    assert not catalog.path.exists()  # opened lazily
    with catalog:
        catalog.store("demo", "fp", make_entry())
    assert catalog.path.exists()
    with sqlite3.connect(catalog.path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    raw.close()


def test_a_fingerprint_mismatch_returns_nothing_and_deletes_the_stale_row() -> None:
    with Catalog(":memory:") as catalog:
        catalog.store("demo", "old", make_entry())
        assert catalog.load("demo", "new") is None
        assert catalog.servers() == []
        assert catalog.load("demo", "old") is None


def test_invalidate_forgets_one_server_or_all() -> None:
    with Catalog(":memory:") as catalog:
        for name in ("a", "b", "c"):
            catalog.store(name, "fp", make_entry(name=name))
        catalog.invalidate("b")
        assert catalog.servers() == ["a", "c"]
        catalog.invalidate()
        assert catalog.servers() == []


def test_a_catalog_of_another_schema_version_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE catalog (server TEXT)")
    raw.execute("PRAGMA user_version = 999")
    raw.commit()
    raw.close()
    with Catalog(path) as catalog:
        assert catalog.load("demo", "fp") is None
        catalog.store("demo", "fp", make_entry())
        assert catalog.load("demo", "fp") is not None


def test_fingerprint_changes_with_secrets_but_does_not_contain_them() -> None:
    base = StreamableHttpServerConfig(
        name="github", url="https://example.com/mcp", headers={"Authorization": SecretStr("Bearer one")}
    )
    rotated = base.model_copy(update={"headers": {"Authorization": SecretStr("Bearer two")}})
    assert fingerprint(base) == fingerprint(base.model_copy())
    assert fingerprint(base) != fingerprint(rotated)
    assert len(fingerprint(base)) == 64
    assert "one" not in fingerprint(base)


def test_fingerprint_changes_with_the_command_and_ignores_key_order() -> None:
    one = StdioServerConfig(name="fs", command="npx", args=("a",), env={"A": SecretStr("1"), "B": SecretStr("2")})
    same = StdioServerConfig(name="fs", command="npx", args=("a",), env={"B": SecretStr("2"), "A": SecretStr("1")})
    other = StdioServerConfig(name="fs", command="npx", args=("b",))
    assert fingerprint(one) == fingerprint(same)
    assert fingerprint(one) != fingerprint(other)


def test_loading_ten_servers_of_fifty_tools_takes_a_few_milliseconds(tmp_path: Path) -> None:
    with Catalog(tmp_path / "catalog.db") as catalog:
        for i in range(10):
            catalog.store(f"server{i}", "fp", make_entry(50, name=f"server{i}"))
    with Catalog(tmp_path / "catalog.db") as catalog:
        catalog.load("server0", "fp")  # the first load opens the file
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            entries = [catalog.load(f"server{i}", "fp") for i in range(10)]
            best = min(best, time.perf_counter() - started)
    assert all(entry is not None and len(entry.tools) == 50 for entry in entries)
    assert best < 0.05, f"loading 500 tools took {best * 1000:.1f} ms"


def test_two_writers_on_one_file_both_succeed(tmp_path: Path) -> None:
    path = tmp_path / "catalog.db"
    entry = make_entry(5)
    errors: list[BaseException] = []

    def writer(prefix: str) -> None:
        try:
            with Catalog(path) as catalog:
                for i in range(40):
                    catalog.store(f"{prefix}{i % 10}", f"fp{i}", entry)
                    catalog.load(f"{prefix}{(i + 3) % 10}", "nope")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in ("x", "y", "x")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with Catalog(path) as catalog:
        assert len(catalog.servers()) <= 20


def test_one_catalog_is_safe_to_share_between_threads() -> None:
    with Catalog(":memory:") as catalog:

        def work(n: int) -> None:
            for i in range(20):
                catalog.store(f"s{n}", f"fp{i}", make_entry(1))
                assert catalog.load(f"s{n}", f"fp{i}") is not None

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert catalog.servers() == ["s0", "s1", "s2", "s3"]


def test_an_unreadable_file_is_moved_aside_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "catalog.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with Catalog(path) as catalog:
        assert catalog.load("demo", "fp") is None
        catalog.store("demo", "fp", make_entry())
    assert (tmp_path / "catalog.db.corrupt").read_bytes().startswith(b"this is not sqlite")
    assert "unreadable" in caplog.text
