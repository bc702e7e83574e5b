"""An OpenAPI source from every face: ``mcpmux call`` (the CLI) and ``mcpmux serve --http`` reached by
an SDK client, both as real processes, against a real httpbin."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.gateway.serving import MCPMUX, isolated_env, mcpmux, serve

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

TOKEN = "face-token-1234"


def _config(root: Path, httpbin: str) -> Path:
    path = root / "mcpmux.json"
    server = {
        "name": "httpbin",
        "type": "openapi",
        "spec": f"{httpbin}/spec.json",
        "base_url": httpbin,
        "auth": {"type": "bearer", "token": "${HTTPBIN_TOKEN}"},
        "include_tags": ["Auth", "HTTP Methods", "Anything"],
    }
    path.write_text(json.dumps({"mcp": {"servers": [server], "security": {"pinning": "off"}}}))
    return path


@pytest.mark.slow
def test_mcpmux_call_runs_openapi_tools(tmp_path: Path, httpbin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPBIN_TOKEN", TOKEN)
    config = _config(tmp_path, httpbin)
    get = mcpmux(tmp_path, config, "call", "httpbin:get_anything", "--json", timeout_s=120)
    assert get.returncode == 0, get.stderr
    post = mcpmux(tmp_path, config, "call", "httpbin:post_anything", '{"body": {"n": 1}}', timeout_s=120)
    assert post.returncode == 0, post.stderr
    assert json.loads(post.stdout)["json"] == {"n": 1}
    bearer = mcpmux(tmp_path, config, "call", "httpbin:get_bearer", timeout_s=120)
    assert bearer.returncode == 0, bearer.stderr
    # httpbin echoes the token it received: exactly the value from ${HTTPBIN_TOKEN}, which the CLI
    # masks wherever it prints (the library test below reads it in the clear).
    assert json.loads(bearer.stdout) == {"authenticated": True, "token": "****"}
    assert TOKEN not in bearer.stdout + bearer.stderr
    failing = mcpmux(tmp_path, config, "call", "httpbin:get_basic-auth_user_passwd", "user=a", "passwd=b")
    assert failing.returncode == 1  # a non-2xx answer is a tool error
    assert "HTTP 401" in failing.stdout + failing.stderr


async def test_mcpmux_serve_offers_openapi_tools_to_an_sdk_client(
    tmp_path: Path, httpbin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPBIN_TOKEN", TOKEN)
    with serve(tmp_path, _config(tmp_path, httpbin), "--http", "127.0.0.1:0") as serving:
        with anyio.fail_after(60):
            async with Client(serving.url, mode="legacy") as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert {"httpbin__get_bearer", "httpbin__post_anything", "httpbin__get_anything"} <= set(tools)
                assert tools["httpbin__get_anything"].annotations is not None
                assert tools["httpbin__get_anything"].annotations.read_only_hint is True
                result = await client.call_tool("httpbin__get_anything", {})
                posted = await client.call_tool("httpbin__post_anything", {"body": {"via": "gateway"}})
                bearer = await client.call_tool("httpbin__get_bearer", {})
    assert not result.is_error
    assert posted.structured_content is not None and posted.structured_content["json"] == {"via": "gateway"}
    assert bearer.structured_content == {"authenticated": True, "token": TOKEN}
    assert isinstance(bearer.content[0], types.TextContent)


def test_mcpmux_add_openapi_writes_the_entry_and_the_server_works(tmp_path: Path, httpbin: str) -> None:
    env = isolated_env(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [MCPMUX, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    (tmp_path / "specs").mkdir()
    probe = {"operationId": "probe", "parameters": [{"name": "q", "in": "query", "type": "string"}]}
    document = {"swagger": "2.0", "info": {"title": "hb", "version": "1"}, "paths": {"/get": {"get": probe}}}
    (tmp_path / "specs" / "hb.json").write_text(json.dumps(document))
    added = run("add", "hb", "--openapi", "specs/hb.json", "--base-url", httpbin)
    assert added.returncode == 0, added.stderr
    text = (tmp_path / "mcpmux.yaml").read_text()
    assert "type: openapi" in text and str(tmp_path / "specs" / "hb.json") in text
    called = run("call", "hb:probe", "q=hello", "--json")
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["structuredContent"]["args"] == {"q": "hello"}
