"""The warm pool: one guarded instance of each server entry, shared by the clients that attach to it.

An instance is a :class:`~mcpmux.Host` over that one server (bare names: its prefix is empty) with a
:class:`~mcpmux.gateway.Gateway` in front, so every client gets the server's own surface through the
daemon's guard (policy, pins, approvals, audit naming the client). Instances are keyed by the
entry's fingerprint (:class:`~mcpmux.attach.attach.Attach`): a client whose configuration changed
the entry gets a new instance, and the old one of that ``(origin, server)`` slot stops as soon as
its last client leaves; entries that did not change keep running. ``share: per-client`` (and
``per-call``) entries get one instance per connection, stopped when it closes. A shared instance
with no client for ``idle_timeout_s`` is stopped.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import anyio
import anyio.abc

from mcpmux.attach.attach import Attach
from mcpmux.config.models import Config
from mcpmux.gateway import Downstream, Gateway
from mcpmux.host import Host
from mcpmux.policy import StateStore
from mcpmux.types.json_shapes import JSONObject

__all__ = ["REAP_INTERVAL_S", "Instance", "Pool", "Refused"]

logger = logging.getLogger(__name__)

REAP_INTERVAL_S = 0.25
_SERVABLE = frozenset({"connected", "configured"})


class Refused(Exception):
    """The daemon will not serve this attach; the message says why (the client falls back)."""


@dataclass(eq=False)
class Instance:
    """One running server entry and the clients attached to it."""

    key: str
    attach: Attach
    shared: bool
    host: Host
    gateway: Gateway
    clients: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    retired: bool = False
    stopped: anyio.Event = field(default_factory=anyio.Event)
    ready: anyio.Event = field(default_factory=anyio.Event)
    _stop: anyio.Event = field(default_factory=anyio.Event)

    @property
    def slot(self) -> tuple[str, str]:
        """The client configuration and server name this instance serves."""
        return self.attach.origin, self.attach.server.name

    @property
    def idle_timeout_s(self) -> float:
        server = self.attach.server
        own = getattr(server, "idle_timeout_s", None)
        return own if isinstance(own, float | int) else self.attach.settings.idle_timeout_s

    @property
    def pid(self) -> int | None:
        """The server's child process id while it runs."""
        return next((s.pid for s in self.host.status()), None)

    def stop(self) -> None:
        """Ask the instance to stop (its child is reaped by its host)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether it was asked to stop (it may still be running its last calls)."""
        return self._stop.is_set()

    def describe(self) -> JSONObject:
        # An instance whose host has not started yet has no status (it did: IndexError, and the daemon
        # closed a `daemon status` connection without an answer while an instance was starting).
        status = next(iter(self.host.status()), None)
        return {
            "server": self.attach.server.name,
            "origin": self.attach.origin,
            "share": "machine" if self.shared else "per-client",
            "state": "starting" if status is None else status.state.value,
            "pid": None if status is None else status.pid,
            "clients": self.clients,
            "idle_s": None if self.clients else round(time.monotonic() - self.idle_since, 1),
            "fingerprint": self.attach.fingerprint[:12],
        }


class Pool:
    """The daemon's instances, owned by the task group ``tg``; ``store`` holds pins, approvals and audit."""

    def __init__(
        self, tg: anyio.abc.TaskGroup, store: StateStore, on_change: Callable[[], None] = lambda: None
    ) -> None:
        self._tg, self._store, self._on_change = tg, store, on_change
        self._instances: dict[str, Instance] = {}
        self._serial = itertools.count(1)

    @property
    def instances(self) -> list[Instance]:
        return list(self._instances.values())

    def warm(self, attach: Attach) -> bool:
        """Whether a shared instance of ``attach`` runs and takes clients (nothing would be started)."""
        if getattr(attach.server, "share", "machine") != "machine":
            return False
        instance = self._instances.get(attach.fingerprint)
        return instance is not None and instance.ready.is_set() and not instance.stopping

    async def acquire(self, attach: Attach) -> Instance:
        """The instance for ``attach``, started if needed, with one more client.

        Raises:
            Refused: the server could not be started (the client starts it itself and shows why).
        """
        share = getattr(attach.server, "share", "machine")
        key = attach.fingerprint if share == "machine" else f"{attach.fingerprint}#{next(self._serial)}"
        instance = self._instances.get(key)
        if instance is None or instance.stopping:  # one being stopped (idle, retired) is not reused
            instance = self._create(key, attach, shared=share == "machine")
        instance.clients += 1
        try:
            await instance.ready.wait()
            _check_servable(instance)
        except Refused:
            self.release(instance)
            instance.stop()  # the next client gets a fresh attempt, not this failure
            raise
        except BaseException:
            self.release(instance)
            raise
        return instance

    def release(self, instance: Instance) -> None:
        """One client less; a per-client instance stops at once, a retired one when it has no client."""
        instance.clients -= 1
        if instance.clients <= 0:
            instance.idle_since = time.monotonic()
            if not instance.shared or instance.retired:
                self._retire(instance)

    def _create(self, key: str, attach: Attach, *, shared: bool) -> Instance:
        for other in self._instances.values():
            if other.shared and shared and other.slot == (attach.origin, attach.server.name):
                other.retired = True  # the client's configuration changed this entry
                if other.clients == 0:
                    other.stop()
        downstream = Downstream()
        callbacks = downstream.client_callbacks()
        callbacks = replace(
            callbacks,
            sampling=callbacks.sampling if "sampling" in attach.answers else None,
            elicitation=callbacks.elicitation if "elicitation" in attach.answers else None,
        )
        config = Config(
            servers=(attach.server.model_copy(update={"prefix": ""}),),
            settings=attach.settings,
            security=attach.security,
            secret_values=attach.server.secret_values,
        )
        host = Host(
            config, face="daemon", store=self._store, approver=downstream.relay.approve,
            callbacks=callbacks, project=attach.origin.partition("@")[2] or None, catalog=False,
        )  # fmt: skip
        instance = Instance(key, attach, shared, host, Gateway(host, downstream=downstream))
        self._instances[key] = instance
        self._tg.start_soon(self._run, instance)
        self._on_change()
        return instance

    async def _run(self, instance: Instance) -> None:
        name = instance.attach.server.name
        try:
            async with instance.host, anyio.create_task_group() as tg:
                await tg.start(instance.gateway.run)
                instance.ready.set()
                logger.info("started %s (pid %s)", name, instance.pid)
                await instance._stop.wait()
                tg.cancel_scope.cancel()
        except Exception:
            logger.exception("instance of %s failed", name)
        finally:
            instance.ready.set()
            instance.stopped.set()
            if self._instances.get(instance.key) is instance:  # a successor may hold the key already
                del self._instances[instance.key]
            logger.info("stopped %s", name)
            self._on_change()

    def _retire(self, instance: Instance) -> None:
        instance.stop()

    def reap_idle(self) -> None:
        """Stop the shared instances that have had no client for their ``idle_timeout_s``."""
        now = time.monotonic()
        for instance in self.instances:
            if instance.clients == 0 and now - instance.idle_since >= instance.idle_timeout_s:
                logger.info("%s idle for %.0f s; stopping it", instance.attach.server.name, now - instance.idle_since)
                instance.stop()

    def pids(self) -> set[int]:
        """The process ids of every running child (each leads its own process group)."""
        return {pid for i in self.instances if (pid := i.pid) is not None}

    def stop_all(self) -> None:
        for instance in self.instances:
            instance.stop()


def _check_servable(instance: Instance) -> None:
    if instance.stopped.is_set():
        raise Refused(f"server {instance.attach.server.name!r} stopped while starting")
    status = instance.host.status()[0]
    if status.state.value not in _SERVABLE:
        raise Refused(f"server {status.name!r} is {status.state.value}: {status.reason}")
