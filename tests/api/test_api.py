"""The REST API in process (starlette's TestClient runs its lifespan): the tools-provider flow end to
end on SQLite and PostgreSQL, an OpenAPI source against a real httpbin, and the API's own document."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mcpmux.api.serve import build_api
from mcpmux.config.models import Config, SecurityConfig
from mcpmux.policy import StateStore
from mcpmux.sources import SourceRegistry
from tests.peers.fixtures import stdio_command
from tests.sources.conftest import KEY

SECRET = "api-secret-0123456789"


@contextmanager
def api(
    database_url: str, state: Path, *, allow_process_sources: bool = True, config: Config | None = None
) -> Iterator[TestClient]:
    registry = SourceRegistry(database_url, key=KEY)
    store = StateStore(state)
    chosen = config or Config(security=SecurityConfig(pinning="off"))
    app = build_api(chosen, registry, store=store, allow_process_sources=allow_process_sources)
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            yield client
    finally:
        registry.close()
        store.close()


def _manifest() -> dict[str, Any]:
    command, args = stdio_command("time")
    return {
        "name": "io.example/time",
        "packages": [
            {
                "registryType": "pypi",
                "identifier": command,
                "runtimeHint": "env",
                "packageArguments": [{"type": "positional", "value": a} for a in args],
                "environmentVariables": [{"name": "TIME_KEY", "isRequired": True, "isSecret": True}],
            }
        ],
    }


@pytest.mark.slow
def test_the_tools_provider_flow_end_to_end(database_url: str, tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "server.json").write_text(json.dumps(_manifest()))
    body = {
        "name": "time",
        "description": "clock",
        "source_type": "mcp",
        "url": f"file://{tmp_path / 'plugin'}",
        "mcp_config": {"lifecycle_mode": "singleton", "environment": {"TIME_KEY": SECRET}},
    }
    with api(database_url, state) as client:
        missing = client.post("/api/sources", json={**body, "mcp_config": {"environment": {}}})
        assert missing.status_code == 422
        assert missing.headers["content-type"] == "application/problem+json"
        assert "TIME_KEY" in missing.json()["detail"]
        assert client.get("/api/sources").json() == []
        created = client.post("/api/sources", json=body)
        assert created.status_code == 201, created.text
        source = created.json()
        assert source["environment"] == {"TIME_KEY": "********"}
        assert SECRET not in created.text
        synced = client.post(f"/api/sources/{source['id']}/sync")
        assert synced.status_code == 200, synced.text
        assert synced.json()["tools_discovered"] >= 2
        tools = client.get("/api/tools", params={"source": "time"}).json()
        assert {t["name"] for t in tools} >= {"get_current_time", "convert_time"}
        assert {t["execution_mode"] for t in tools} == {"mcp_call"}
        assert client.get("/api/tools/time:get_current_time").json()["execution_mode"] == "mcp_call"
        executed = client.post(
            "/api/tools/execute", json={"tool_id": "time:get_current_time", "arguments": {"timezone": "UTC"}}
        )
        assert executed.status_code == 200, executed.text
        assert executed.json()["success"] is True and "UTC" in executed.json()["content"][0]["text"]
        servers = {s["name"]: s for s in client.get("/api/servers").json()}
        assert servers["time"]["state"] == "connected"
        audit = client.get("/api/audit").json()
        assert audit[0]["tool"] == "get_current_time" and audit[0]["caller"] == "local" and audit[0]["face"] == "api"
    # A new process on the same database: the registry is still there.
    with api(database_url, state) as client:
        listed = client.get("/api/sources").json()
        assert [s["name"] for s in listed] == ["time"]
        again = client.post(
            "/api/tools/execute", json={"tool_id": "time:get_current_time", "arguments": {"timezone": "UTC"}}
        )
        assert again.json()["success"] is True
        assert client.delete(f"/api/sources/{listed[0]['id']}").status_code == 204
        assert client.get("/api/sources").json() == []
        gone = client.post("/api/tools/execute", json={"tool_id": "time:get_current_time", "arguments": {}})
        assert gone.status_code == 404


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_openapi_source_registered_synced_and_executed_through_the_api(
    database_url: str, tmp_path: Path, httpbin: str
) -> None:
    body = {
        "name": "httpbin",
        "source_type": "openapi",
        "url": f"{httpbin}/spec.json",
        "openapi_config": {"base_url": httpbin, "auth": {"type": "bearer", "token": SECRET}},
    }
    with api(database_url, tmp_path / "state.db") as client:
        created = client.post("/api/sources", json=body)
        assert created.status_code == 201, created.text
        assert SECRET not in created.text
        synced = client.post("/api/sources/httpbin/sync").json()
        assert synced["tools_discovered"] == 78
        assert {t["execution_mode"] for t in synced["tools"]} == {"sync_http"}

        def run(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            answer = client.post("/api/tools/execute", json={"tool_id": f"httpbin:{tool}", "arguments": arguments})
            assert answer.status_code == 200, answer.text
            result: dict[str, Any] = answer.json()
            return result

        query = run("get_response-headers", {"freeform": {"X-Api": "yes"}})
        assert query["success"] and query["structured_content"]["X-Api"] == "yes"
        posted = run("post_anything", {"body": {"k": [1, 2]}})
        assert posted["structured_content"]["json"] == {"k": [1, 2]}
        bearer = run("get_bearer", {})
        assert bearer["structured_content"] == {"authenticated": True, "token": SECRET}
        failed = run("get_status_codes", {"codes": "404"})
        assert failed["success"] is False and failed["is_error"] is True


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_api_publishes_its_own_openapi_document(database_url: str, tmp_path: Path) -> None:
    with api(database_url, tmp_path / "state.db") as client:
        document = client.get("/api/openapi.json").json()
        assert client.get("/api/docs").status_code == 200
    assert document["openapi"].startswith("3.")
    paths = set(document["paths"])
    assert {"/api/sources", "/api/sources/{source_id}", "/api/sources/{source_id}/sync", "/api/tools",
            "/api/tools/{tool_id}", "/api/tools/execute", "/api/servers", "/api/audit"} <= paths  # fmt: skip


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_docs_load_every_file_from_the_api_itself_not_a_cdn(database_url: str, tmp_path: Path) -> None:
    """Issue 43 item 15: /api/docs loaded Swagger UI's script and styles from cdn.jsdelivr.net."""
    import re

    with api(database_url, tmp_path / "state.db") as client:
        page = client.get("/api/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        linked = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", page.text)
        urls = sorted({a or b for a, b in linked})
        assert urls, page.text
        assert all(u.startswith("/api/") for u in urls), urls  # nothing from another origin
        assert "/api/openapi.json" in urls
        for url in urls:
            asset = client.get(url)
            assert asset.status_code == 200, url
        script = client.get("/api/docs/assets/swagger-ui-bundle.js")
        assert "javascript" in script.headers["content-type"] and "SwaggerUIBundle" in script.text


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_transient_source_runs_only_for_its_sync_and_its_calls(database_url: str, tmp_path: Path) -> None:
    command, args = stdio_command("time")
    body = {
        "name": "clock",
        "source_type": "mcp",
        "mcp_config": {"lifecycle_mode": "transient", "type": "stdio", "command": command, "args": args},
    }

    def parked(client: TestClient) -> bool:
        """Whether the source's server comes to rest stopped (it stops on its own, soon after its work)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = next(s for s in client.get("/api/servers").json() if s["name"] == "clock")
            if found["state"] == "configured":
                return "lifecycle: transient" in found["reason"] or found["reason"] == "configured"
            time.sleep(0.05)
        return False

    with api(database_url, tmp_path / "state.db") as client:
        created = client.post("/api/sources", json=body)
        assert created.status_code == 201, created.text
        assert created.json()["lifecycle_mode"] == "transient"
        assert parked(client)
        synced = client.post("/api/sources/clock/sync")
        assert synced.status_code == 200 and synced.json()["tools_discovered"] >= 2, synced.text
        assert parked(client)  # started for the sync, stopped after it
        executed = client.post(
            "/api/tools/execute", json={"tool_id": "clock:get_current_time", "arguments": {"timezone": "UTC"}}
        )
        assert executed.json()["success"] is True, executed.text
        assert parked(client)  # and for the call
        history = client.get("/api/servers").json()
        assert next(s for s in history if s["name"] == "clock")["reason"].endswith("(lifecycle: transient)")
