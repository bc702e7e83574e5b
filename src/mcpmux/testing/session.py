"""mcpmux over served mocks: a :class:`~mcpmux.host.Host` (guarded) or a bare :class:`~mcpmux.manager.Manager`."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcpmux.config.models import ServerConfig, Settings
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.host import Host
from mcpmux.manager import Manager
from mcpmux.manager.supervisor import ConnectionFactory
from mcpmux.policy import StateStore
from mcpmux.testing.serving import Served

__all__ = ["connection_factory", "open_host", "open_manager"]


def connection_factory(served: Sequence[Served]) -> ConnectionFactory:
    """Opens mocks served in memory in memory, and every other server through its ``ServerConfig``."""
    by_name = {item.config.name: item for item in served}

    def connect(config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        item = by_name.get(config.name)
        if item is not None and item.transport == "memory":
            return item.connection_factory(config, settings, callbacks)
        return Connection(config, settings, callbacks=callbacks)

    return connect


@asynccontextmanager
async def open_manager(*served: Served, settings: Settings | None = None, **options: Any) -> AsyncIterator[Manager]:
    """A started, unguarded :class:`Manager` over ``served`` mocks; ``options`` go to it (no catalog by default)."""
    options.setdefault("catalog", False)
    configs = [item.config for item in served]
    async with Manager(configs, settings=settings, connection_factory=connection_factory(served), **options) as manager:
        yield manager


@asynccontextmanager
async def open_host(
    *served: Served, settings: Settings | None = None, state_dir: Path | None = None, **options: Any
) -> AsyncIterator[Host]:
    """A started :class:`Host` over ``served`` mocks: every verb through the guard (policy, pins, audit).

    Its state store (pins, approvals, audit) is a fresh file in ``state_dir`` (a temporary
    directory by default), so a test never reads or writes the user's. ``options`` go to the Host
    (``face``, ``approver``, ...; ``catalog=False`` by default).
    """
    options.setdefault("catalog", False)
    with tempfile.TemporaryDirectory(prefix="mcpmux-host-") as scratch:
        store = StateStore(Path(state_dir or scratch) / "state.db")
        try:
            configs = [item.config for item in served]
            host = Host(
                configs, settings=settings, store=store, connection_factory=connection_factory(served), **options
            )
            async with host:
                yield host
        finally:
            store.close()
