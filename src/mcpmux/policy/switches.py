"""Servers disabled at run time, remembered: across restarts, and by every replica sharing the database.

A server disabled from the console, the REST API or the chat keeps a row in
``mcpmux_server_switches`` (keyed like pins by what the server is, :func:`~mcpmux.policy.pins.server_identity`,
so a different server given the same name is not affected); a host starts it disabled
(:meth:`mcpmux.host.Host.start`); enabling it deletes the row and the configuration decides again.
Each change is announced (``NOTIFY servers``) for the replicas of a gateway to follow.
"""

from __future__ import annotations

import time

from sqlalchemy import delete, select

from mcpmux.policy.schema import server_switches
from mcpmux.policy.store import StateStore
from mcpmux.store.database import notify, upsert

__all__ = ["ServerSwitches"]


class ServerSwitches:
    """The servers disabled at run time, in ``store``."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def disabled(self, identity: str, server: str) -> str | None:
        """Why ``server`` (of ``identity``) is disabled, or ``None`` when it is not."""
        s = server_switches.c
        with self.store.read() as db:
            found = db.execute(select(s.reason).where(s.identity == identity, s.server == server)).scalar()
        return None if found is None else str(found)

    def all_disabled(self) -> dict[tuple[str, str], str]:
        """``{(identity, server): reason}`` of every server disabled at run time."""
        s = server_switches.c
        with self.store.read() as db:
            return {(str(i), str(n)): str(r) for i, n, r in db.execute(select(s.identity, s.server, s.reason))}

    def disable(self, identity: str, server: str, reason: str, by: str | None) -> None:
        row = {"identity": identity, "server": server, "reason": reason, "changed_at": time.time(), "changed_by": by}
        with self.store.write() as db:
            db.execute(upsert(db, server_switches, row))
            notify(db, "servers", server)

    def enable(self, identity: str, server: str) -> None:
        s = server_switches.c
        with self.store.write() as db:
            db.execute(delete(server_switches).where(s.identity == identity, s.server == server))
            notify(db, "servers", server)
