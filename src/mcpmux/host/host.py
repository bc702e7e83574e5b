"""The host: the one object a program (and every face of mcpmux) starts to use MCP servers safely.

::

    async with Host(load_config()) as host:              # starts every enabled server
        host.tools()                                     # what may be listed: not denied, not quarantined
        await host.call_tool("time:get_current_time", {"timezone": "UTC"})   # rules, pins, approval, audit
        await host.read_resource("docs", "file:///README.md")

A :class:`Host` is the :class:`~mcpmux.policy.Guard` that owns its parts: it builds the
:class:`~mcpmux.manager.Manager` (supervision, routing, the catalog) and opens the state store
(pins, approvals, audit), and closes both, in that order, when it stops. Every verb that reaches
a server (tool calls, reads, prompts, completions, subscriptions, log levels, restarts) goes
through the guard's policy and leaves an audit row. The CLI, the chat, the agent loop and the
gateway are all built on it; a second face in the same process takes :meth:`Guard.with_face`.

The unguarded :class:`~mcpmux.manager.Manager` stays available as ``host.manager`` for experts who
want no policy at all (tests of a server, tools of their own): nothing on that path is checked or
audited.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from mcpmux.config.models import Config, ServerConfig, Settings, StdioServerConfig
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.manager import Manager
from mcpmux.manager.catalog import Catalog
from mcpmux.manager.manager import DEFAULT_CONNECT_CONCURRENCY
from mcpmux.manager.supervisor import ConnectionFactory
from mcpmux.policy.approval import Approver
from mcpmux.policy.chained import ChainedApprovals
from mcpmux.policy.guard import Guard, Suspicion
from mcpmux.policy.scanner import suspect
from mcpmux.policy.store import StateStore
from mcpmux.types.callbacks import ClientCallbacks

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from mcpmux.connection.connection import Connection

__all__ = ["FUNCTIONS_SERVER", "ConnectionFactory", "Host"]

FUNCTIONS_SERVER = "python"
"""The server name :meth:`Host.add_tools` uses unless told another."""


class Host(Guard):
    """Every configured server behind one guarded surface; owns its manager and state store.

    Args:
        config: the loaded configuration (:func:`mcpmux.load_config`), or a sequence of server configs.
        settings: the settings when ``config`` is a sequence.
        face: who calls through this host (``library``, ``cli``, ``chat``, ``gateway``, ``api``), for the audit log.
        approver: asks a person when a call needs approval; without one such calls are refused with a hint.
        store: the state database (pins, approvals, audit); ``None`` opens the default file, and the
            host closes what it opened (a store passed in stays open).
        project: the project whose remembered approvals apply (the current directory by default).
        suspicion: the poisoning scanner's verdict on new definitions (``None`` turns it off).
        callbacks: answers to server requests (sampling, elicitation, roots) and observers. When
            ``callbacks.elicitation`` is a :class:`~mcpmux.policy.ChainedApprovals`, it is bound to
            this host, so an upstream mcpmux's approval questions are answered here, once.
        catalog, start, wait, connect_concurrency, connection_factory: as for :class:`Manager`.
    """

    def __init__(
        self,
        config: Config | Sequence[ServerConfig],
        *,
        settings: Settings | None = None,
        face: str = "library",
        approver: Approver | None = None,
        store: StateStore | None = None,
        project: Path | str | None = None,
        suspicion: Suspicion | None = suspect,
        callbacks: ClientCallbacks | None = None,
        catalog: Catalog | Path | bool = True,
        start: bool | Iterable[str] = True,
        wait: bool = True,
        connect_concurrency: int = DEFAULT_CONNECT_CONCURRENCY,
        connection_factory: ConnectionFactory | None = None,
    ) -> None:
        self._local: dict[str, MCPServer[Any]] = {}
        self._factory = connection_factory
        manager = Manager(
            config, settings=settings, callbacks=callbacks, catalog=catalog, start=start, wait=wait,
            connect_concurrency=connect_concurrency, connection_factory=self._connect,
        )  # fmt: skip
        self._owns_store = store is None
        super().__init__(manager, face=face, approver=approver, store=store, project=project, suspicion=suspicion)
        if callbacks is not None and isinstance(callbacks.elicitation, ChainedApprovals):
            callbacks.elicitation.bind(self)
        self._started = False

    async def __aenter__(self) -> Host:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start supervising the servers (see ``start`` and ``wait``); a failure stops what started.

        A server disabled at run time before (console, REST API, chat) stays disabled: it is not started.
        """
        try:
            remembered = await anyio.to_thread.run_sync(self.switches.all_disabled)
            for server in self.manager.config.servers:
                reason = remembered.get((self.pins.identity(server.name), server.name))
                if reason is not None:
                    self.manager.start_disabled(server.name, f"{reason} (remembered: enable it to start it)")
            await self.manager.start()
        except BaseException:
            self._close_store()
            raise
        self._started = True

    async def stop(self) -> None:
        """Stop every server (children reaped), then close the state store if the host opened it."""
        try:
            await self.manager.stop()
        finally:
            self._started = False
            self._close_store()

    async def add_tools(self, functions: Sequence[Callable[..., Any]], *, server: str = FUNCTIONS_SERVER) -> None:
        """Serve Python functions as the tools of an in-process server called ``server``.

        ::

            await host.add_tools([add, search_orders])   # now "python:add", "python:search_orders"

        Schemas come from type hints (pydantic models too; a model as the only parameter is flattened to
        its fields) and the docstring (its ``Args:`` give the parameters' descriptions); sync and async
        functions both work; results become content or ``structuredContent``; an exception becomes a
        tool error (see :mod:`mcpmux.servers.functions`).
        The tools are the host's like any other: listed and called through every face, under the
        rules, approval and audit (they are code of this program, so they are not pinned). Before
        :meth:`start` they start with the host; after it, at once.

        Raises:
            UsageError: a nameless function, two functions of one name, a bad server name.
            ConfigError: a server called ``server`` exists already.
        """
        from mcpmux.servers.functions import function_server

        built = function_server(functions, name=server)
        # A config the rest of mcpmux can show and rule on; only this host's factory can open it.
        entry = StdioServerConfig(
            name=server, command=sys.executable, lazy=False,
            args=("-c", f"raise SystemExit('{server}: Python functions served in-process by host.add_tools')"),
        )  # fmt: skip
        if any(s.name == server for s in self.manager.config.servers):
            raise ConfigError(ConfigProblem("<host.add_tools>", server, f"a server named {server!r} already exists"))
        self._local[server] = built
        self.pins.trust(server, f"functions:{server}")
        if self._started:
            try:
                await self.manager.add_server(entry)
            except BaseException:
                del self._local[server]
                raise
        else:  # supervised with the others when the host starts
            servers = (*self.manager.config.servers, entry)
            self.manager.config = self.manager.config.model_copy(update={"servers": servers})
        self._exposures.clear()

    async def add_server(self, server: ServerConfig, *, start: bool = True) -> None:
        """Supervise one more server (a source registered at run time); ``start``: connect it now.

        Raises:
            ConfigError: a server of that name runs already.
        """
        await self.manager.add_server(server, start=start)
        self._exposures.clear()

    async def remove_server(self, name: str) -> None:
        """Stop supervising ``name`` (a source removed at run time) and forget its tools."""
        await self.manager.remove_server(name)
        self._exposures.clear()

    def guard_for(self, *, face: str, store: StateStore | None = None, approver: Approver | None = None) -> Guard:
        """A guard of its own over this host's servers for another face in this process (the REST API's).

        It has its own face name, store and approver (``None``: calls that need approval are refused).
        """
        return Guard(self.manager, face=face, store=store or self.store, approver=approver)

    def _connect(self, server: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        from mcpmux.connection.connection import Connection

        local = self._local.get(server.name)
        if local is None:
            return (
                self._factory(server, settings, callbacks)
                if self._factory
                else Connection(server, settings, callbacks=callbacks)
            )
        from mcpmux.transports.inprocess import open_mcp_server

        def transport() -> Any:
            return open_mcp_server(local, name=server.name, describe=f"in-process functions {server.name!r}")

        return Connection(server, settings, callbacks=callbacks, transport=transport)

    def pending(self) -> list[str]:
        """The servers asked to start whose first connect attempt has not ended yet."""
        return self.manager.pending()

    async def wait_started(self) -> None:
        """Wait until every server asked to start has connected or failed once (for ``wait=False`` hosts)."""
        await self.manager.wait_started()

    def _close_store(self) -> None:
        if self._owns_store:
            self.store.close()
