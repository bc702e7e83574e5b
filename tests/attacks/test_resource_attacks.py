"""A declared ``resources:`` list, and a toolset's resource and prompt patterns, hold on every path.

server-everything (a real child process) is configured with ``resources:`` covering one document.
Each face then asks for another one through the synthetic ``ev:read_resource`` tool, which is how
the Amplifier seed hands resources to a model: the library, the CLI (its own host, and through the
daemon), the agent loop driven by a scripted model, and the REST API. Each read is refused before
the server is asked and audited as denied; the document's text never comes back. (The gateway does
not serve synthetic tools; its ``resources/read`` is checked in tests/web/test_security.py.)
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from mcpmux import Host
from mcpmux.api.serve import build_api
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.errors import ResourceNotDeclared, ToolDenied
from mcpmux.policy import StateStore
from mcpmux.policy.toolsets import Toolset
from mcpmux.sources import SourceRegistry
from tests.daemon.conftest import Daemon, cli, daemon_fixture  # noqa: F401 (the fixture)
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM
from tests.forkserver import MCPMUX
from tests.gateway.serving import isolated_env
from tests.peers.fixtures import stdio_command
from tests.sources.conftest import KEY

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.timeout(300)]

WAIT_S = 120
DOC = "demo://resource/static/document/architecture.md"
HIDDEN = "demo://resource/static/document/features.md"
HIDDEN_TEXT = "Everything Server - Features"  # the first line of the hidden document


def entry(*, declared: bool = True) -> dict[str, Any]:
    command, args = stdio_command("everything")
    found: dict[str, Any] = {"name": "ev", "command": command, "args": args}
    if declared:
        found["resources"] = [{"uri": DOC, "description": "How the demo server is built"}]
    return found


def config(*, declared: bool = True) -> Config:
    server = StdioServerConfig.model_validate(entry(declared=declared))
    return Config(servers=(server,), security=SecurityConfig(pinning="off"))


def write_config(root: Path, **extra: Any) -> Path:
    path = root / "mcpmux.yaml"
    tree = {"mcp": {"servers": [entry()], "security": {"pinning": "off"}}, **extra}
    path.write_text(json.dumps(tree), encoding="utf-8")
    return path


def text_of(result: Any) -> str:
    """Everything a tool result carries, as text (a read comes back as embedded resources)."""
    return json.dumps([block.model_dump(mode="json") for block in result.content])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


async def test_the_read_resource_tool_reads_only_declared_resources_in_the_library(store: StateStore) -> None:
    with anyio.fail_after(WAIT_S):
        async with Host(config(), store=store, catalog=False) as host:
            assert "Architecture" in text_of(await host.call_tool("ev:read_resource", {"uri": DOC}))
            for uri in (HIDDEN, "demo://resource/dynamic/blob/3", f" {DOC}", DOC.upper()):
                with pytest.raises(ResourceNotDeclared, match="is not exposed"):
                    await host.call_tool("ev:read_resource", {"uri": uri})
            with pytest.raises(ResourceNotDeclared):  # a URI that is not a string is read as its text
                await host.call_tool("ev:read_resource", {"uri": ["demo://resource/static/document/*"]})
            rows = host.audit.query(limit=6)
            assert [(r.tool, r.decision, r.outcome) for r in rows[:5]] == [("read_resource", "denied", "refused")] * 5
            assert (rows[5].decision, rows[5].outcome) == ("allowed", "ok")


async def test_a_toolsets_resource_and_prompt_patterns_rule_the_synthetic_tools_too(store: StateStore) -> None:
    # Every tool of ev is in the toolset, so ev:read_resource and ev:get_prompt are too; which
    # resources and prompts may be read through them is still the toolset's resources and prompts.
    toolset = Toolset("docs", tools=("ev:*",), resources=(f"ev:{DOC}",), prompts=())
    with anyio.fail_after(WAIT_S):
        async with Host(config(declared=False), store=store, catalog=False) as host:
            assert (await host.call_tool("ev:read_resource", {"uri": HIDDEN})).content  # no toolset: readable
            view = host.with_toolset(toolset)
            assert "Architecture" in text_of(await view.call_tool("ev:read_resource", {"uri": DOC}))
            with pytest.raises(ToolDenied, match=r"toolsets\.docs"):
                await view.call_tool("ev:read_resource", {"uri": HIDDEN})
            prompt = next(p for p in host.prompts("ev") if p.prompt == "simple-prompt")
            assert (await host.call_tool("ev:get_prompt", {"name": prompt.prompt})).content
            for name in (prompt.prompt, "no-such-prompt"):
                with pytest.raises(ToolDenied, match=r"toolsets\.docs"):
                    await view.call_tool("ev:get_prompt", {"name": name})


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_cli_refuses_the_read_with_and_without_the_daemon(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path)
    daemon.start("--linger", "600")
    for where in ("--no-daemon", "--daemon"):
        code, out, err = cli(where, "call", "ev:read_resource", f"uri={DOC}")
        assert code == 0 and "Architecture" in out, (where, out, err)
        code, out, err = cli(where, "call", "ev:read_resource", f"uri={HIDDEN}")
        assert code == 1 and "is not exposed" in err and HIDDEN_TEXT not in out + err, (where, out, err)
    code, out, _ = cli("--no-daemon", "--json", "audit", "--limit", "20")
    rows = [r for r in json.loads(out) if r["tool"] == "read_resource"]
    # The CLI's own guard rules each call once (the daemon audits the reads it serves under its face).
    mine = sorted((r["args"]["uri"], r["decision"], r["outcome"]) for r in rows if r["face"] == "cli")
    assert mine == [(DOC, "allowed", "ok")] * 2 + [(HIDDEN, "denied", "refused")] * 2, rows
    assert not [r for r in rows if r["args"]["uri"] == HIDDEN and r["decision"] != "denied"], rows


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_model_cannot_read_an_undeclared_resource_through_the_agent_loop(tmp_path: Path) -> None:
    script: list[Any] = [Reply(tool_calls=[Call("ev__read_resource", {"uri": HIDDEN})]), Reply("done")]
    with ScriptedLLM(script) as llm:
        path = write_config(tmp_path, llm={"base_url": llm.base_url, "model": "m"})
        run = subprocess.run(
            [MCPMUX, "--config", str(path), "run", "--tool-threshold", "0", "read the features document"],
            capture_output=True, text=True, timeout=WAIT_S, env=isolated_env(tmp_path), stdin=subprocess.DEVNULL,
            check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert len(llm.requests) == 2, llm.requests
        answer = llm.requests[1]["messages"][-1]
    assert answer["role"] == "tool" and "is not exposed" in answer["content"], answer
    assert HIDDEN_TEXT not in json.dumps(llm.requests) + run.stdout + run.stderr


def test_the_rest_api_refuses_the_read_with_a_problem(tmp_path: Path) -> None:
    registry = SourceRegistry(f"sqlite:///{tmp_path / 'sources.db'}", key=KEY)
    store = StateStore(tmp_path / "state.db")
    try:
        with TestClient(build_api(config(), registry, store=store), base_url="http://127.0.0.1") as client:
            deadline = time.monotonic() + WAIT_S  # a bound for a loaded machine, not a timing
            while client.get("/api/servers").json()[0]["state"] != "connected":
                assert time.monotonic() < deadline, client.get("/api/servers").json()
                time.sleep(0.1)
            execute = "/api/tools/execute"
            allowed = client.post(execute, json={"tool_id": "ev:read_resource", "arguments": {"uri": DOC}})
            assert allowed.status_code == 200 and "Architecture" in allowed.text, allowed.text
            refused = client.post(execute, json={"tool_id": "ev:read_resource", "arguments": {"uri": HIDDEN}})
            assert refused.status_code == 403, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert "is not exposed" in refused.json()["detail"] and HIDDEN_TEXT not in refused.text
    finally:
        registry.close()
        store.close()
