"""The REST API as one ASGI app: its runtime started in the lifespan, behind the gateway's HTTP rules.

The same ``Origin``/``Host`` checks, body cap and bearer tokens as ``/mcp``
(:class:`~mcpmux.web.security.SecurityMiddleware`); a bind off loopback requires a token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace

from fastapi import FastAPI
from starlette.types import ASGIApp

from mcpmux.api.app import create_app
from mcpmux.api.runtime import ApiRuntime, open_runtime, runtime_over
from mcpmux.config.models import Config
from mcpmux.host import Host
from mcpmux.policy import Approver, StateStore
from mcpmux.sources.registry import SourceRegistry
from mcpmux.web.mounts import CONSOLE_PREFIX, ByPrefix
from mcpmux.web.security import Gatekeeper, HttpSecurity, SecurityMiddleware
from mcpmux.web.tokens import TokenStore

__all__ = ["ConsoleFactory", "build_api", "mounted_api"]

ConsoleFactory = Callable[[Callable[[], ApiRuntime], HttpSecurity], ASGIApp]
"""Makes the console over the API's runtime (current at each request) and the HTTP rules."""


def build_api(
    config: Config,
    registry: SourceRegistry,
    *,
    store: StateStore | None = None,
    security: HttpSecurity | None = None,
    allow_process_sources: bool = False,
    console: ConsoleFactory | None = None,
    approver: Approver | None = None,
) -> ASGIApp:
    """The API app, serving ``config``'s servers and ``registry``'s sources while it runs.

    Args:
        config: the configuration (its servers are listed read-only).
        registry: the source registry.
        store: the state database (pins, approvals, audit, tokens); default the data dir's.
        security: the HTTP rules; default loopback-only with the store's tokens.
        allow_process_sources: let network callers register sources that start a process.
        console: makes the web console, served at ``/ui`` over the API's runtime (``None``: no console).
        approver: asks a person about REST calls that need approval (the console's queue); ``None``: refused.
    """
    state = store or StateStore.configured(config)
    tokens = TokenStore(state)
    rules = security or HttpSecurity(tokens=tokens)
    holder: list[ApiRuntime] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(
            config,
            registry,
            store=state,
            tokens=tokens,
            allow_process_sources=allow_process_sources,
            approver=approver,
        ) as runtime:
            holder.append(runtime)
            try:
                yield
            finally:
                holder.clear()

    def runtime_of() -> ApiRuntime:
        return holder[0]

    app: ASGIApp = create_app(runtime_of, Gatekeeper(rules), lifespan=lifespan)
    if console is not None:
        rules = replace(rules, own_auth_prefixes=(*rules.own_auth_prefixes, CONSOLE_PREFIX))
        app = ByPrefix(CONSOLE_PREFIX, console(runtime_of, rules), app)
    return SecurityMiddleware(app, rules)


def mounted_api(
    host: Host,
    security: HttpSecurity,
    config: Config,
    registry: SourceRegistry,
    *,
    allow_process_sources: bool = False,
    approver: Approver | None = None,
) -> ASGIApp:
    """The API over a running host, to serve beside ``/mcp`` (behind the gateway's own middleware).

    ``approver`` asks a person about REST calls that need approval (the console's queue); ``None``: refused.
    """
    runtime = runtime_over(
        host, config, registry, tokens=security.tokens, allow_process_sources=allow_process_sources, approver=approver
    )
    return create_app(lambda: runtime, Gatekeeper(security))
