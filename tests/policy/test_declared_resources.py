"""Declared resources per server, against server-everything's real resources and templates.

``resources: [{uri: glob, description}]`` limits what is listed and read (templates match by their
pattern), adds the descriptions to the ``read_resource`` tool and the chat's system prompt; an
undeclared read is refused before it is sent and audited. No list: everything, as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpmux import Host
from mcpmux.agents.agent import describe_servers
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.errors import ResourceNotDeclared
from mcpmux.policy import StateStore
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers]

DEADLINE_S = 60
DOC = "demo://resource/static/document/architecture.md"
OTHER_DOC = "demo://resource/static/document/features.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
DECLARED = [
    {"uri": DOC, "description": "How the demo server is built"},
    {"uri": "demo://resource/dynamic/text/*", "description": "Numbered text snippets"},
]


def everything(resources: list[dict[str, Any]] | None) -> Config:
    command, args = stdio_command("everything")
    entry: dict[str, Any] = {"name": "ev", "command": command, "args": args}
    if resources is not None:
        entry["resources"] = resources
    return Config(servers=(StdioServerConfig.model_validate(entry),), security=SecurityConfig(pinning="off"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


async def test_only_declared_resources_are_listed_described_and_read(store: StateStore) -> None:
    with anyio.fail_after(DEADLINE_S):
        async with Host(everything(DECLARED), store=store, catalog=False) as host:
            listed = {(r.uri, r.template) for r in host.resources("ev")}
            assert listed == {(DOC, False), (TEXT_TEMPLATE, True)}

            assert (await host.read_resource("ev", DOC)).contents
            assert (await host.read_resource("ev", "demo://resource/dynamic/text/3")).contents
            for hidden in (OTHER_DOC, "demo://resource/dynamic/blob/3"):
                with pytest.raises(ResourceNotDeclared, match="is not exposed") as caught:
                    await host.read_resource("ev", hidden)
                assert caught.value.hint and "resources:" in caught.value.hint
            rows = host.audit.query(limit=2)
            assert [(r.tool, r.decision, r.outcome) for r in rows] == [("read_resource", "denied", "refused")] * 2

            (reader,) = [t for t in host.tools("ev") if t.tool == "read_resource"]
            assert f"- {DOC}: How the demo server is built" in reader.description
            assert "Numbered text snippets" in reader.description
            assert OTHER_DOC not in reader.description

            prompt = describe_servers(host)
            assert f"resources: {DOC}: How the demo server is built" in prompt
            assert "Numbered text snippets" in prompt


async def test_without_a_list_every_resource_is_exposed(store: StateStore) -> None:
    with anyio.fail_after(DEADLINE_S):
        async with Host(everything(None), store=store, catalog=False) as host:
            uris = {r.uri for r in host.resources("ev")}
            assert {DOC, OTHER_DOC, TEXT_TEMPLATE} <= uris
            assert (await host.read_resource("ev", OTHER_DOC)).contents
            assert "resources:" not in describe_servers(host)
