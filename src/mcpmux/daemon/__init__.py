"""``mcpmux daemon``: one warm pool of servers per user, shared by every command, chat and host.

The daemon is the gateway on a local Unix socket: each client attaches to one server entry (as its
own configuration resolved it) and then speaks MCP with that server's guarded instance. See
docs/daemon.md. Names load on first use (``mcpmux._lazy``): a command that only asks the daemon
never imports the gateway.

::

    from mcpmux.daemon import connection_factory
    async with Host(config, connection_factory=connection_factory(config)) as host: ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.attach.attach import Attach as Attach, daemon_mode as daemon_mode
    from mcpmux.attach.client import (
        DaemonClient as DaemonClient,
        connection_factory as connection_factory,
        request as request,
        start_daemon as start_daemon,
    )
    from mcpmux.attach.paths import runtime_dir as runtime_dir, socket_path as socket_path
    from mcpmux.daemon.service import DaemonOptions as DaemonOptions, serve_daemon as serve_daemon

__getattr__, __dir__ = lazy_exports(__name__, __file__)
