"""Every request the gateway serves takes the host's guarded path: one name resolution, policy on every verb.

Before the host, ``completion/complete``, ``resources/subscribe`` and ``logging/setLevel`` went to
the upstream connection directly: a server whose every tool was denied could still be reached
that way, with no audit row. A tool call resolved its name four times.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcpmux.config.models import SecurityConfig
from mcpmux.manager.registry import Registry
from tests.gateway.conftest import gateway_over, rich_server

pytestmark = pytest.mark.anyio


async def test_a_denied_server_is_unreachable_by_completion_subscription_and_log_level() -> None:
    servers = {"open": rich_server("open"), "shut": rich_server("shut")}
    security = SecurityConfig(pinning="off", denied_tools=("shut:*",))
    with anyio.fail_after(20):
        async with gateway_over(servers, security=security) as gateway, Client(gateway.server, mode="legacy") as client:
            assert [p.name for p in (await client.list_prompts()).prompts] == ["open__review"]
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            assert templates == ["open://notes/{topic}"]
            with pytest.raises(MCPError):
                await client.complete(types.PromptReference(name="shut__review"), {"name": "code", "value": "x"})
            template = types.ResourceTemplateReference(uri="shut://notes/{topic}")
            with pytest.raises(MCPError):
                await client.complete(template, {"name": "topic", "value": "x"})
            subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri="shut://notes/a"))
            with pytest.raises(MCPError):
                await client.session.send_request(subscribe, types.EmptyResult)
            level = types.SetLevelRequest(params=types.SetLevelRequestParams(level="debug"))
            await client.session.send_request(level, types.EmptyResult)
            done = await client.complete(types.PromptReference(name="open__review"), {"name": "code", "value": "x"})
            assert done.completion.values == ["open-x-1", "open-x-2"]
            rows = gateway.guard.audit.query(limit=50)
    reached = {(r.server, r.tool) for r in rows if r.outcome == "ok"}
    assert ("open", "completion/complete") in reached
    assert not [r for r in rows if r.server == "shut" and r.outcome != "refused"]


async def test_a_tool_call_through_the_gateway_resolves_its_name_once(monkeypatch: pytest.MonkeyPatch) -> None:
    lookups: list[str] = []
    resolve = Registry.resolve_tool

    def counting(self: Registry, name: str) -> Any:
        lookups.append(name)
        return resolve(self, name)

    monkeypatch.setattr(Registry, "resolve_tool", counting)
    with anyio.fail_after(20):
        async with gateway_over({"a": rich_server("a")}) as gateway, Client(gateway.server, mode="legacy") as client:
            await client.list_tools()
            lookups.clear()
            result = await client.call_tool("a__slow", {"steps": 1})
            assert not result.is_error
    # The downstream name is mapped to the listed tool once, at the edge; nothing below looks it up again.
    assert lookups == []
