"""A gateway over in-process upstream servers, served to an in-process SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

from mcpmux.config.models import Config, SecurityConfig, ServerConfig
from mcpmux.gateway import Downstream, Gateway
from mcpmux.host import Host
from mcpmux.policy import StateStore
from tests.manager.conftest import factory, stdio


@asynccontextmanager
async def gateway_over(
    servers: dict[str, MCPServer[Any]],
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


def rich_server(name: str, cancelled: anyio.Event | None = None) -> MCPServer[Any]:
    """Tools with progress and cancellation, a resource, a template, a prompt with completion."""
    server: MCPServer[Any] = MCPServer(name)

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times."""
        for step in range(steps):
            await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        return f"{name}: done"

    @server.tool()
    async def hang() -> str:
        """Never answer (until cancelled)."""
        try:
            await anyio.sleep_forever()
        finally:
            if cancelled is not None:
                cancelled.set()
        return "unreachable"

    @server.tool()
    async def noisy(ctx: Context) -> str:
        """Send one log message, then answer."""
        params = types.LoggingMessageNotificationParams(level="warning", data="careful", logger="core")
        await ctx.session.send_notification(types.LoggingMessageNotification(params=params))
        return "logged"

    @server.resource("memo://greeting", name="greeting")
    def greeting() -> str:
        return f"hello from {name}"

    @server.resource(f"{name}://notes/{{topic}}", name="notes")
    def notes(topic: str) -> str:
        return f"{name} notes on {topic}"

    @server.prompt()
    def review(code: str) -> str:
        """Review some code."""
        return f"{name} please review: {code}"

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Any:
        return types.Completion(values=[f"{name}-{argument.value}-1", f"{name}-{argument.value}-2"])

    return server
