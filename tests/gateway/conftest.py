"""A gateway over in-process upstream servers, served to an in-process SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio
import mcp_types as types

from mcpmux.config.models import Config, SecurityConfig, ServerConfig
from mcpmux.gateway import Downstream, Gateway
from mcpmux.host import Host
from mcpmux.policy import StateStore
from mcpmux.testing import MockServer, ToolContext
from tests.manager.conftest import Upstream, factory, stdio


@asynccontextmanager
async def gateway_over(
    servers: Mapping[str, Upstream],
    *configs: ServerConfig,
    security: SecurityConfig | None = None,
    separator: str = "__",
) -> AsyncIterator[Gateway]:
    """A running gateway in front of ``servers`` (configured by ``configs``, or plainly by name)."""
    downstream = Downstream()
    config = Config(
        servers=configs or tuple(stdio(name) for name in servers), security=security or SecurityConfig(pinning="off")
    )
    with StateStore(":memory:") as store:
        host = Host(
            config, face="gateway", store=store, approver=downstream.relay.approve,
            connection_factory=factory(servers), catalog=False, callbacks=downstream.client_callbacks(),
        )  # fmt: skip
        async with host:
            gateway = Gateway(host, downstream=downstream, separator=separator)
            async with anyio.create_task_group() as tg:
                await tg.start(gateway.run)
                yield gateway
                tg.cancel_scope.cancel()


def rich_server(name: str, cancelled: anyio.Event | None = None) -> MockServer:
    """Tools with progress and cancellation, a resource, a template, a prompt with completion."""

    async def slow(steps: int, ctx: ToolContext) -> str:
        for step in range(steps):
            await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        return f"{name}: done"

    async def hang() -> str:
        try:
            await anyio.sleep_forever()
        finally:
            if cancelled is not None:
                cancelled.set()
        return "unreachable"

    async def noisy(ctx: ToolContext) -> str:
        params = types.LoggingMessageNotificationParams(level="warning", data="careful", logger="core")
        await ctx.request.session.send_notification(types.LoggingMessageNotification(params=params))
        return "logged"

    def complete(ref: object, argument: str, value: str) -> list[str]:
        return [f"{name}-{value}-1", f"{name}-{value}-2"]

    steps = {"type": "object", "properties": {"steps": {"type": "integer"}}, "required": ["steps"]}
    return (
        MockServer(name)
        .resource_subscriptions(False)
        .tool("slow", slow, description="Report progress ``steps`` times.", schema=steps)
        .tool("hang", hang, description="Never answer (until cancelled).")
        .tool("noisy", noisy, description="Send one log message, then answer.")
        .resource("memo://greeting", f"hello from {name}", name="greeting", mime_type="text/plain")
        .resource_template(
            f"{name}://notes/{{topic}}", lambda topic: f"{name} notes on {topic}", name="notes", mime_type="text/plain"
        )
        .prompt("review", f"{name} please review: {{code}}", description="Review some code.", arguments=["code"])
        .completion(complete)
    )
