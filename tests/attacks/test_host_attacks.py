"""Attacks on the host's one path (issue 16), through a real ``mcpmux serve --http`` over real servers.

Before the host, the gateway answered ``completion/complete``, ``resources/subscribe`` and
``logging/setLevel`` by reaching into the upstream's connection: a client could reach a server
whose every tool the configuration denies, and no audit row said so. Here a client that speaks
raw JSON-RPC (no SDK to keep it polite) guesses every name and URI of the denied server
(server-everything, from npm) and tries every verb; a second server (mcp-server-time) stays
allowed. Nothing may reach the denied server, and the audit log may only say ``refused`` for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.gateway.serving import Serving, mcpmux, serve, write_config

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.slow, pytest.mark.subprocess, pytest.mark.network]

WAIT_S = 60
DOC = "demo://resource/static/document/architecture.md"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class RawClient:
    """One MCP session over Streamable HTTP, JSON-RPC written by hand."""

    def __init__(self, serving: Serving) -> None:
        self.url, self.headers, self.next_id = serving.url, dict(HEADERS), 1

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.next_id += 1
        reply = httpx2.post(self.url, content=json.dumps(message), headers=self.headers, timeout=WAIT_S)
        assert reply.status_code == 200, (method, reply.status_code, reply.text)
        if "mcp-session-id" in reply.headers:
            self.headers["mcp-session-id"] = reply.headers["mcp-session-id"]
        return _answer(reply)

    def notify(self, method: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method})
        assert httpx2.post(self.url, content=body, headers=self.headers, timeout=WAIT_S).status_code == 202


def _answer(reply: httpx2.Response) -> dict[str, Any]:
    if reply.headers.get("content-type", "").startswith("application/json"):
        answer: dict[str, Any] = reply.json()
        return answer
    data = [line.removeprefix("data:").strip() for line in reply.text.splitlines() if line.startswith("data:")]
    answers = [json.loads(d) for d in data if d]
    return next(a for a in answers if "id" in a and ("result" in a or "error" in a))


@pytest.fixture(scope="module")
def denied_everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serving, Path, Path]]:
    root = tmp_path_factory.mktemp("host-attacks")
    config = write_config(root, ("time", "everything"), denied_tools=["everything:*"])
    with serve(root, config, "--http", "127.0.0.1:0") as serving:
        yield serving, root, config


ATTEMPTS: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {"name": "everything__echo", "arguments": {"message": "x"}}),
    ("prompts/get", {"name": "everything__simple-prompt"}),
    ("resources/read", {"uri": DOC}),
    ("resources/subscribe", {"uri": DOC}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "everything__completable-prompt"},
         "argument": {"name": "department", "value": "E"}},
    ),
    (
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
         "argument": {"name": "resourceId", "value": "1"}},
    ),
]  # fmt: skip


def test_a_denied_server_answers_no_verb_and_every_attempt_is_refused_or_unknown(
    denied_everything: tuple[Serving, Path, Path],
) -> None:
    serving, root, config = denied_everything
    client = RawClient(serving)
    init = client.send(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "prober", "version": "1"}},
    )
    assert "result" in init, init
    client.notify("notifications/initialized")
    listed = client.send("tools/list")["result"]["tools"]
    assert listed and not [t for t in listed if t["name"].startswith("everything")]
    assert not client.send("resources/list")["result"]["resources"]
    assert not client.send("prompts/list")["result"]["prompts"]
    for method, params in ATTEMPTS:
        answer = client.send(method, params)
        refused = "error" in answer or answer.get("result", {}).get("isError") is True
        assert refused, (method, params, answer)
    assert "result" in client.send("logging/setLevel", {"level": "debug"})
    allowed = client.send("tools/call", {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
    assert not allowed["result"].get("isError"), allowed

    done = mcpmux(root, config, "audit", "--json", "--limit", "200")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    reached = [r for r in rows if r["server"] == "everything" and r["outcome"] != "refused"]
    assert reached == [], reached
    assert any(r["server"] == "time" and r["outcome"] == "ok" for r in rows)
