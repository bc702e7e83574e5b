"""What makes a server's :class:`~mcpmux.connection.Connection`: the supervisor's, or the daemon's client's.

A light module: naming the type does not load the SDK's client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpmux.config.models import ServerConfig, Settings
from mcpmux.types.callbacks import ClientCallbacks

if TYPE_CHECKING:
    from mcpmux.connection.connection import Connection

__all__ = ["ConnectionFactory"]

ConnectionFactory = Callable[[ServerConfig, Settings, ClientCallbacks], "Connection"]
"""``(server, settings, callbacks) -> Connection``, not yet connected."""
