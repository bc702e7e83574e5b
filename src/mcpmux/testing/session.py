"""A :class:`~mcpmux.manager.Manager` over served mocks (memory ones included)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcpmux.config.models import ServerConfig, Settings
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.manager import Manager
from mcpmux.testing.serving import Served

__all__ = ["open_manager"]


@asynccontextmanager
async def open_manager(*served: Served, settings: Settings | None = None, **options: Any) -> AsyncIterator[Manager]:
    """A started :class:`Manager` over ``served`` mocks; ``options`` go to the Manager (``catalog=False`` by default).

    Mocks served in memory are opened in memory; every other one through its ``ServerConfig``.
    """
    by_name = {item.config.name: item for item in served}

    def connect(config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        item = by_name.get(config.name)
        if item is not None and item.transport == "memory":
            return item.connection_factory(config, settings, callbacks)
        return Connection(config, settings, callbacks=callbacks)

    options.setdefault("catalog", False)
    manager = Manager([item.config for item in served], settings=settings, connection_factory=connect, **options)
    async with manager:
        yield manager
