"""What the REST API runs on: the configuration, the source registry, one host and its guard for face ``api``.

Registered sources join the host at start; a source added, synced, changed or removed through the
API joins or leaves it at once, and the guard is rebuilt so its rules, pins and audit cover it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio.to_thread

from mcpmux.config.models import Config
from mcpmux.host import Host
from mcpmux.policy import Approver, Guard, StateStore
from mcpmux.sources.models import Source, SourceTool
from mcpmux.sources.registry import SourceRegistry
from mcpmux.sources.sync import sync_source
from mcpmux.web.tokens import TokenStore

__all__ = ["ApiRuntime", "open_runtime", "runtime_over"]

T = TypeVar("T")


@dataclass
class ApiRuntime:
    """The API's state while it serves.

    Attributes:
        config: the configuration files' servers and policy (read-only through the API).
        registry: the source registry.
        host: every configured and registered server.
        guard: policy over ``host``'s servers for face ``api``.
        tokens: bearer tokens (the gateway's), or ``None`` for none.
        allow_process_sources: network callers may register sources that start a process (stdio).
        approver: asks a person when a REST call needs approval (the console's queue of held calls);
            ``None``: such calls are refused.
    """

    config: Config
    registry: SourceRegistry
    host: Host
    guard: Guard
    store: StateStore
    tokens: TokenStore | None = None
    allow_process_sources: bool = False
    approver: Approver | None = None
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    def configured(self) -> list[str]:
        """Names of the servers from configuration files (read-only here)."""
        return [s.name for s in self.config.servers]

    async def registry_call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking registry call off the event loop."""
        return await anyio.to_thread.run_sync(fn, *args)

    async def joined(self, source: Source) -> None:
        """Make ``source`` (new or changed) one of the host's servers."""
        async with self._lock:
            server = await self.registry_call(self.registry.server_config, source)
            if any(s.name == source.name for s in self.host.status()):
                await self.host.remove_server(source.name)
            await self.host.add_server(server, start=source.lifecycle == "singleton")
            self._rebuild_guard()

    async def left(self, name: str) -> None:
        """Take ``name`` out of the host."""
        async with self._lock:
            if any(s.name == name for s in self.host.status()):
                await self.host.remove_server(name)
            self._rebuild_guard()

    async def sync(self, key: str) -> list[SourceTool]:
        """Sync a source and make its current definition live."""
        tools = await sync_source(self.registry, key, self.config.settings)
        await self.joined(await self.registry_call(self.registry.get, key))
        return tools

    def _rebuild_guard(self) -> None:
        self.guard = self.host.guard_for(face="api", store=self.store, approver=self.approver)


@asynccontextmanager
async def open_runtime(
    config: Config,
    registry: SourceRegistry,
    *,
    store: StateStore | None = None,
    tokens: TokenStore | None = None,
    allow_process_sources: bool = False,
    approver: Approver | None = None,
) -> AsyncIterator[ApiRuntime]:
    """Start a manager over ``config`` and the registered sources; stop it on exit.

    ``approver`` asks a person about REST calls that need approval (``None``: they are refused).
    """
    merged = await anyio.to_thread.run_sync(registry.with_sources, config)
    state = store or StateStore.configured(config)
    async with Host(merged, face="api", store=state, wait=False, approver=approver) as host:
        yield ApiRuntime(config, registry, host, host, state, tokens, allow_process_sources, approver)


def runtime_over(
    host: Host,
    config: Config,
    registry: SourceRegistry,
    *,
    tokens: TokenStore | None = None,
    allow_process_sources: bool = False,
    approver: Approver | None = None,
) -> ApiRuntime:
    """A runtime over a host that runs already (the gateway's, for ``mcpmux serve --http``)."""
    guard = host.guard_for(face="api", store=host.store, approver=approver)
    return ApiRuntime(config, registry, host, guard, host.store, tokens, allow_process_sources, approver)
