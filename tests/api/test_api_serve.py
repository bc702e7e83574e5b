"""``mcpmux serve --http`` serves the REST API beside ``/mcp`` in one process (a real subprocess): a
source registered through ``/api`` is executed through ``/api`` and called by an SDK client on ``/mcp``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.gateway.serving import mcpmux, serve

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


def _config(root: Path) -> Path:
    path = root / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": [], "security": {"pinning": "off"}}}))
    return path


@pytest.mark.slow
async def test_one_process_serves_mcp_and_the_api(tmp_path: Path, httpbin: str) -> None:
    with serve(tmp_path, _config(tmp_path), "--http", "127.0.0.1:0") as serving:
        async with httpx.AsyncClient(base_url=serving.base, timeout=60) as api:
            body = {
                "name": "httpbin",
                "source_type": "openapi",
                "url": f"{httpbin}/spec.json",
                "openapi_config": {"base_url": httpbin, "include_tags": ["HTTP Methods"]},
            }
            created = await api.post("/api/sources", json=body)
            assert created.status_code == 201, created.text
            executed = await api.post("/api/tools/execute", json={"tool_id": "httpbin:get_get", "arguments": {}})
            assert executed.status_code == 200 and executed.json()["success"], executed.text
            document = (await api.get("/api/openapi.json")).json()
            assert "/api/tools/execute" in document["paths"]
        with anyio.fail_after(60):
            async with Client(serving.url, mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert "httpbin__get_get" in names
                result = await client.call_tool("httpbin__post_post", {"body": {"via": "mcp"}})
        assert isinstance(result.content[0], types.TextContent)
        assert result.structured_content is not None and result.structured_content["json"] == {"via": "mcp"}


def test_no_api_turns_it_off(tmp_path: Path) -> None:
    with serve(tmp_path, _config(tmp_path), "--http", "127.0.0.1:0", "--no-api") as serving:
        assert httpx.get(serving.base + "/api/sources", timeout=30).status_code == 404


TINY = [sys.executable, "-S", "-E", str(Path(__file__).parents[1] / "fixtures" / "tiny_server.py")]
PROCESS_SOURCE = {
    "name": "tiny",
    "source_type": "mcp",
    "mcp_config": {"type": "stdio", "command": TINY[0], "args": TINY[1:]},
}


@pytest.mark.slow
@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "allowed"])
def test_process_sources_over_the_api_of_serve_need_the_flag_as_in_mcpmux_api(tmp_path: Path, allowed: bool) -> None:
    flags = ("--allow-process-sources",) if allowed else ()
    with serve(tmp_path, _config(tmp_path), "--http", "127.0.0.1:0", *flags) as serving:
        created = httpx.post(serving.base + "/api/sources", json=PROCESS_SOURCE, timeout=60)
        if not allowed:
            assert created.status_code == 403 and "--allow-process-sources" in created.json()["detail"]
            assert httpx.get(serving.base + "/api/sources", timeout=30).json() == []
            return
        assert created.status_code == 201, created.text
        call = {"tool_id": "tiny:echo", "arguments": {"text": "started by the API"}}
        executed = httpx.post(serving.base + "/api/tools/execute", json=call, timeout=60)
        assert executed.status_code == 200 and executed.json()["content"][0]["text"] == "started by the API"


def test_allow_process_sources_without_the_api_is_a_usage_error(tmp_path: Path) -> None:
    for args in (("--tcp", "127.0.0.1:0"), ("--http", "127.0.0.1:0", "--no-api")):
        done = mcpmux(tmp_path, _config(tmp_path), "serve", *args, "--allow-process-sources")
        assert done.returncode == 2 and "--allow-process-sources needs --http and the REST API" in done.stderr
