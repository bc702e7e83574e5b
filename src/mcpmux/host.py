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

from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

from mcpmux.config.models import Config, ServerConfig, Settings
from mcpmux.connection.callbacks import ClientCallbacks
from mcpmux.manager import Manager
from mcpmux.manager.catalog import Catalog
from mcpmux.manager.manager import DEFAULT_CONNECT_CONCURRENCY
from mcpmux.manager.supervisor import ConnectionFactory
from mcpmux.policy.approval import Approver
from mcpmux.policy.chained import ChainedApprovals
from mcpmux.policy.guard import Guard, Suspicion
from mcpmux.policy.scanner import suspect
from mcpmux.policy.store import StateStore

__all__ = ["ConnectionFactory", "Host"]


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
        manager = Manager(
            config, settings=settings, callbacks=callbacks, catalog=catalog, start=start, wait=wait,
            connect_concurrency=connect_concurrency, connection_factory=connection_factory,
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
        """Start supervising the servers (see ``start`` and ``wait``); a failure stops what started."""
        try:
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

    def pending(self) -> list[str]:
        """The servers asked to start whose first connect attempt has not ended yet."""
        return self.manager.pending()

    async def wait_started(self) -> None:
        """Wait until every server asked to start has connected or failed once (for ``wait=False`` hosts)."""
        await self.manager.wait_started()

    def _close_store(self) -> None:
        if self._owns_store:
            self.store.close()
