"""``mcpmux serve --http`` serves the REST API beside ``/mcp`` in one process (a real subprocess): a
source registered through ``/api`` is executed through ``/api`` and called by an SDK client on ``/mcp``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client

from tests.gateway.serving import serve

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
