"""An OpenAPI source against a real REST service that no one here wrote: PyPI ``httpbin`` (its own
Swagger 2.0 document at ``/spec.json``) under gunicorn on 127.0.0.1, used through the manager, as
every face uses it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux import Manager
from mcpmux.config.loader import load_config
from mcpmux.config.models import OpenAPIServerConfig, Settings
from mcpmux.errors import ServerUnavailable

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("httpbin")]

TOKEN = "s3cret-bearer-token"


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@asynccontextmanager
async def _manager(**fields: Any) -> AsyncIterator[Manager]:
    server = OpenAPIServerConfig(name="httpbin", **fields)
    with anyio.fail_after(60):
        async with Manager([server], settings=Settings(), catalog=False) as manager:
            yield manager


async def test_the_published_swagger_document_becomes_one_tool_per_operation(httpbin: str) -> None:
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin) as manager:
        tools = {tool.tool: tool for tool in manager.tools("httpbin")}
        status = {s.name: s for s in manager.status()}["httpbin"]
    assert status.state == "connected", status.reason
    assert len(tools) == 78  # every operation of httpbin 0.10.4's document
    assert tools["get_get"].annotations is not None and tools["get_get"].annotations["readOnlyHint"] is True
    delete = tools["delete_delete"].annotations
    assert delete is not None and delete["destructiveHint"] is True
    assert "HTTP GET /get" in tools["get_get"].description


async def test_a_get_with_query_parameters_returns_json_as_structured_content(httpbin: str) -> None:
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin) as manager:
        result = await manager.call_tool("httpbin:get_response-headers", {"freeform": {"X-Probe": "one two"}})
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    assert result.structured_content["X-Probe"] == "one two"
    assert json.loads(_text(result))["X-Probe"] == "one two"


async def test_a_post_sends_its_json_body(httpbin: str) -> None:
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin) as manager:
        result = await manager.call_tool("httpbin:post_anything", {"body": {"name": "Rex", "tags": ["a", "b"]}})
    assert not result.is_error, _text(result)
    echoed = result.structured_content
    assert echoed is not None
    assert echoed["json"] == {"name": "Rex", "tags": ["a", "b"]}
    assert echoed["method"] == "POST"
    assert echoed["headers"]["Content-Type"] == "application/json"


async def test_a_form_body_declared_by_the_document_is_sent_as_a_form(httpbin: str, tmp_path: Path) -> None:
    # httpbin's own document declares formData only where httpbin ignores it: describe /anything instead.
    spec = tmp_path / "form.yaml"
    spec.write_text(
        "swagger: '2.0'\ninfo: {title: form, version: '1'}\npaths:\n  /anything/{kind}:\n    post:\n"
        "      operationId: submit\n      consumes: [application/x-www-form-urlencoded]\n      parameters:\n"
        "        - {name: kind, in: path, required: true, type: string}\n"
        "        - {name: title, in: formData, type: string, required: true}\n"
        "        - {name: count, in: formData, type: integer}\n"
        "      responses: {'200': {description: ok}}\n"
    )
    async with _manager(spec=str(spec), base_url=httpbin) as manager:
        tool = {t.tool: t for t in manager.tools("httpbin")}["submit"]
        assert set(tool.input_schema["properties"]) == {"kind", "title", "count"}
        assert sorted(tool.input_schema["required"]) == ["kind", "title"]
        result = await manager.call_tool("httpbin:submit", {"kind": "a b/c", "title": "x&y=z", "count": 3})
    assert not result.is_error, _text(result)
    echoed = result.structured_content
    assert echoed is not None
    assert echoed["form"] == {"title": "x&y=z", "count": "3"}
    assert echoed["method"] == "POST"


async def test_a_redirect_is_the_answer_and_never_followed(httpbin: str) -> None:
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin) as manager:
        result = await manager.call_tool("httpbin:get_redirect-to", {"url": "/get", "status_code": 307})
    assert result.is_error
    assert _text(result).startswith("HTTP 307")
    assert result.structured_content is not None and result.structured_content["location"] == "/get"


async def test_bearer_auth_from_an_environment_variable_reaches_the_protected_operation(
    httpbin: str, tmp_path: Path
) -> None:
    config_file = tmp_path / "mcpmux.yaml"
    config_file.write_text(
        "mcp:\n  servers:\n    - name: httpbin\n      type: openapi\n"
        f"      spec: {httpbin}/spec.json\n      base_url: {httpbin}\n"
        "      auth: {type: bearer, token: '${HTTPBIN_TOKEN}'}\n"
    )
    config = load_config(config_file, cwd=tmp_path, environ={"HTTPBIN_TOKEN": TOKEN})
    assert TOKEN in config.secret_values
    with anyio.fail_after(60):
        async with Manager(config, catalog=False) as manager:
            tool = {t.tool: t for t in manager.tools("httpbin")}["get_bearer"]
            # The credential comes from the source, never from the caller: no Authorization argument.
            assert "Authorization" not in tool.input_schema["properties"]
            result = await manager.call_tool("httpbin:get_bearer", {})
    assert not result.is_error, _text(result)
    assert result.structured_content == {"authenticated": True, "token": TOKEN}


async def test_without_credentials_the_protected_operation_is_a_tool_error_with_the_status(httpbin: str) -> None:
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin) as manager:
        result = await manager.call_tool("httpbin:get_bearer", {})
    assert result.is_error
    assert _text(result).startswith("HTTP 401")
    assert result.structured_content is not None and result.structured_content["status"] == 401


async def test_basic_auth(httpbin: str) -> None:
    auth = {"type": "basic", "username": "ann", "password": "pa55"}
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin, auth=auth) as manager:
        ok = await manager.call_tool("httpbin:get_basic-auth_user_passwd", {"user": "ann", "passwd": "pa55"})
        wrong = await manager.call_tool("httpbin:get_basic-auth_user_passwd", {"user": "bob", "passwd": "pa55"})
    assert not ok.is_error, _text(ok)
    assert ok.structured_content == {"authenticated": True, "user": "ann"}
    assert wrong.is_error and "HTTP 401" in _text(wrong)


async def test_api_key_auth_in_a_query_parameter(httpbin: str) -> None:
    auth = {"type": "api_key", "in": "query", "name": "key", "value": "k-123"}
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin, auth=auth) as manager:
        result = await manager.call_tool("httpbin:get_get", {})
    assert result.structured_content is not None
    assert result.structured_content["args"] == {"key": "k-123"}


async def test_a_non_2xx_status_is_an_error_with_status_and_body_excerpt(httpbin: str) -> None:
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin) as manager:
        teapot = await manager.call_tool("httpbin:get_status_codes", {"codes": "418"})
        missing = await manager.call_tool("httpbin:get_status_codes", {})
    assert teapot.is_error
    assert _text(teapot).startswith("HTTP 418")
    assert "teapot" in _text(teapot).lower()
    assert missing.is_error and "missing required argument(s): codes" in _text(missing)


async def test_an_image_answer_is_image_content(httpbin: str) -> None:
    async with _manager(spec=f"{httpbin}/spec.json", base_url=httpbin) as manager:
        result = await manager.call_tool("httpbin:get_image_png", {})
    assert not result.is_error
    assert isinstance(result.content[0], types.ImageContent)
    assert result.content[0].mime_type == "image/png"


async def test_include_and_exclude_by_tag_and_operation(httpbin: str) -> None:
    async with _manager(
        spec=f"{httpbin}/spec.json",
        base_url=httpbin,
        include_tags=["Auth", "HTTP Methods"],
        exclude_operations=["*digest*"],
    ) as manager:
        names = sorted(t.tool for t in manager.tools("httpbin"))
    assert "get_bearer" in names and "post_post" in names
    assert not any("digest" in n for n in names)
    assert "get_uuid" not in names


async def test_a_document_that_cannot_be_fetched_fails_only_its_server(httpbin: str) -> None:
    server = OpenAPIServerConfig(name="broken", spec=f"{httpbin}/status/404", base_url=httpbin)
    good = OpenAPIServerConfig(name="httpbin", spec=f"{httpbin}/spec.json", base_url=httpbin)
    with anyio.fail_after(60):
        async with Manager([server, good], catalog=False) as manager:
            states = {s.name: s for s in manager.status()}
            assert states["httpbin"].state == "connected"
            assert states["broken"].state == "failed"
            assert "HTTP 404" in (states["broken"].reason or "")
            with pytest.raises(ServerUnavailable, match="invalid OpenAPI document"):
                await manager.call_tool("broken:anything", {})
