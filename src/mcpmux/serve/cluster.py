"""Gateway replicas on one PostgreSQL: who is up, what changed, and which replica owns a session.

``mcpmux serve --db postgresql+psycopg://... --replica-id NAME --advertise http://ADDR:PORT`` runs
one replica of a gateway that several processes (on one machine or many) serve together behind
any load balancer, without sticky sessions:

- **Registry.** Each replica keeps a row in ``mcpmux_replicas`` (its id, the URL the others reach
  it at, its load) fresh with a heartbeat every :data:`HEARTBEAT_S`; a row older than
  :data:`STALE_S` is a replica that is gone. A replica's id is held by a PostgreSQL advisory lock on
  its listening connection for as long as it lives, so two live processes cannot share an id, and a
  killed one's id is free the moment its connection drops.
- **Events.** What another replica must see at once (a token made or revoked, a call held for
  approval or answered, a pin approved, a source changed) is sent with ``NOTIFY`` in the
  transaction that made the change (:func:`mcpmux.store.database.notify`); every replica ``LISTEN``s. While
  a replica is not listening (the connection broke), it trusts no cache: tokens are read per request.
- **Ownership.** A 2025-11-25 session lives on the replica that opened it and a parked 2026-07-28
  call on the replica that runs it: both names carry that replica's id (``ID~...``), and
  :class:`Forwarder` sends a request naming another replica to it over the advertised URL. When
  the owner is gone, a session answers 404 (the client opens a new one, as the spec says) and a
  parked call's retry is told to call again.
- **Sealing.** Every replica seals stateless clients' ``requestState`` under one key kept in
  ``mcpmux_cluster_keys``, so whichever replica a retry reaches can check it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import socket
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState, RequestStateSecurity
from sqlalchemy import Float, delete, literal_column, select, text, update
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpmux._version import __version__
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.policy import StateStore
from mcpmux.policy.approval import Answer, ApprovalRequest
from mcpmux.policy.pending import HeldApproval
from mcpmux.policy.schema import cluster_keys, held_approvals, replicas
from mcpmux.store.database import EVENTS_CHANNEL, insert_or_ignore, notify, shown, upsert
from mcpmux.web.security import CREDENTIAL

__all__ = [
    "CONSOLE_COOKIE",
    "FORWARDED_BY",
    "HEARTBEAT_S",
    "OWNER_SEPARATOR",
    "STALE_S",
    "Cluster",
    "Forwarder",
    "Replica",
    "ReplicaOptions",
    "SharedHeld",
]

logger = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
STALE_S = 8.0
"""A replica whose heartbeat is older than this is gone (four missed beats)."""
FORGET_S = 3600.0
"""Rows of replicas gone this long are deleted (they are kept a while for the console's history)."""
RELISTEN_S = 1.0
REREAD_S = 1.0
OWNER_SEPARATOR = "~"
FORWARDED_BY = "x-mcpmux-forwarded-by"
REPLICA_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
REQUEST_STATE_KEY = "request-state"
CONNECT_TIMEOUT_S = 3.0
LOCK_WAIT_S = 15.0
"""How long a starting replica waits for its id's previous holder (a killed process whose
connection the database has not noticed yet) before it gives up."""
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te", b"trailer", b"upgrade",
     b"content-length", b"host"}
)  # fmt: skip
_SESSION_HEADER = b"mcp-session-id"


@dataclass(frozen=True, slots=True)
class ReplicaOptions:
    """This replica: its id (``--replica-id``) and the URL other replicas reach it at (``--advertise``)."""

    id: str
    advertise: str

    @classmethod
    def of(cls, replica_id: str | None, advertise: str | None, *, port: int | None = None) -> ReplicaOptions:
        """From the command line: the id defaults to the host name, the URL to the host name and ``port``.

        Raises:
            ConfigError: the id or the URL is malformed.
        """
        chosen = replica_id or socket.gethostname().split(".")[0]
        if not REPLICA_ID.fullmatch(chosen):
            reason = f"{chosen!r} must match {REPLICA_ID.pattern} (it is part of session ids)"
            raise ConfigError(ConfigProblem("<cli>", "--replica-id", reason))
        url = advertise or (f"http://{socket.gethostname()}:{port}" if port else "")
        parsed = httpx.URL(url) if url else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            reason = f"{url!r} is not an http(s) URL other replicas can reach this one at, e.g. http://10.0.0.5:8080"
            raise ConfigError(ConfigProblem("<cli>", "--advertise", reason))
        return cls(chosen, url.rstrip("/"))


@dataclass(frozen=True, slots=True)
class Replica:
    """A replica as the registry has it."""

    id: str
    advertise: str
    host: str
    pid: int
    version: str
    started_at: float
    heartbeat_at: float
    sessions: int
    in_flight: int
    age_s: float = 0.0
    """Seconds since its last heartbeat, by the database's clock."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Stats:
    forwarded: dict[str, int] = field(default_factory=dict)
    owner_gone: int = 0
    events: int = 0
    listening: bool = False


class Cluster:
    """This process as one replica of a gateway on a shared PostgreSQL database.

    Args:
        store: the state database (PostgreSQL; the replicas share it).
        me: this replica's id and advertised URL.
        load: ``(sessions, calls in flight)`` of this replica now, for its heartbeat.

    Raises:
        ConfigError: the store is not PostgreSQL.
    """

    def __init__(
        self, store: StateStore, me: ReplicaOptions, *, load: Callable[[], tuple[int, int]] | None = None
    ) -> None:
        if store.dialect != "postgresql":
            reason = (
                f"replicas share their state through PostgreSQL, and {store.path} is {store.dialect}: "
                "pass --db postgresql+psycopg://USER@HOST/DB (or set MCPMUX_DB) on every replica"
            )
            raise ConfigError(ConfigProblem("<cli>", "--replica-id", reason))
        self.store, self.me, self.id = store, me, me.id
        self.load = load or (lambda: (0, 0))
        self.stats = _Stats()
        self.started_at = time.time()
        self._peers: dict[str, Replica] = {}
        self._read_at = 0.0
        self._reread = anyio.Lock()
        self._handlers: dict[str, list[Callable[[str], None]]] = {}
        self._client: httpx.AsyncClient | None = None
        self._key = self._shared_key()

    # -- names that say who owns them -------------------------------------------------------------

    def session_id(self) -> str:
        """A new session id that names this replica (192 random bits after the id)."""
        return f"{self.id}{OWNER_SEPARATOR}{secrets.token_hex(24)}"

    def request_state_security(self, ttl: float) -> RequestStateSecurity:
        """How stateless clients' ``requestState`` is sealed: the shared key, this replica's id in front."""
        return RequestStateSecurity(codec=_OwnedCodec(self.id, self._key), ttl=ttl)

    # -- the registry -----------------------------------------------------------------------------

    @property
    def listening(self) -> bool:
        """Whether this replica hears the others' events now (else its caches are not trusted)."""
        return self.stats.listening

    def peers(self) -> list[Replica]:
        """The live replicas (this one included) as of the last heartbeat."""
        return sorted(self._peers.values(), key=lambda r: r.id)

    def replica(self, replica_id: str) -> Replica | None:
        """The live replica ``replica_id`` as of the last read of the registry (see :meth:`lookup`)."""
        return self._peers.get(replica_id)

    async def lookup(self, replica_id: str) -> Replica | None:
        """The live replica ``replica_id``; one not known yet is looked for in a read of the registry
        that starts after this call (a replica that joined since the last heartbeat is found, so its
        sessions are never refused as gone). Reads are shared by every lookup waiting for one and
        start at most once per :data:`REREAD_S`: names that clients make up cannot make a query each.
        """
        found = self._peers.get(replica_id)
        if found is not None:
            return found
        asked = time.monotonic()
        async with self._reread:
            if self._read_at < asked:  # no read began after we asked: begin one (others share it)
                await anyio.sleep(max(0.0, self._read_at + REREAD_S - time.monotonic()))
                self._peers = await anyio.to_thread.run_sync(self._read_peers)
        return self._peers.get(replica_id)

    def forget(self, replica_id: str) -> None:
        """``replica_id`` did not answer: treat it as gone until its next heartbeat is read."""
        self._peers.pop(replica_id, None)

    def on(self, topic: str, handler: Callable[[str], None]) -> None:
        """Call ``handler(detail)`` for each event on ``topic``, and with ``"*"`` after listening (again):
        whatever was missed meanwhile may have changed."""
        self._handlers.setdefault(topic, []).append(handler)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the id, listen, and beat until cancelled; then leave the registry.

        Raises:
            ConfigError: another live process holds this replica id.
        """
        locked, joined = anyio.Event(), False
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._listen_forever, locked)
                with anyio.move_on_after(LOCK_WAIT_S + CONNECT_TIMEOUT_S * 2):
                    await locked.wait()
                if not locked.is_set():
                    reason = f"could not take the replica id {self.id!r} in {LOCK_WAIT_S:g} s"
                    reason += ": another live replica holds it"
                    raise ConfigError(ConfigProblem("<cli>", "--replica-id", reason))
                joined = True  # the id is ours: the rows under it are ours to delete when we leave
                await anyio.to_thread.run_sync(self._beat)
                task_status.started()
                while True:
                    await anyio.sleep(HEARTBEAT_S)
                    try:
                        await anyio.to_thread.run_sync(self._beat)
                    except SQLAlchemyError as exc:
                        logger.warning("replica %s: heartbeat failed (%s); trying again", self.id, exc)
        finally:
            with anyio.CancelScope(shield=True):
                if joined:
                    await anyio.to_thread.run_sync(self._leave)
                if self._client is not None:
                    await self._client.aclose()

    def _beat(self) -> None:
        sessions, in_flight = self.load()
        row = {
            "id": self.id, "advertise": self.me.advertise, "host": socket.gethostname(), "pid": os.getpid(),
            "version": __version__, "started_at": self.started_at, "heartbeat_at": text("extract(epoch from now())"),
            "sessions": sessions, "in_flight": in_flight,
        }  # fmt: skip
        with self.store.write() as db:
            db.execute(upsert(db, replicas, row))
            forgotten = replicas.c.heartbeat_at < text(f"extract(epoch from now()) - {FORGET_S}")
            db.execute(delete(replicas).where(forgotten))
        self._peers = self._read_peers()

    def _read_peers(self) -> dict[str, Replica]:
        self._read_at = time.monotonic()
        age = literal_column("extract(epoch from now()) - mcpmux_replicas.heartbeat_at", Float)
        with self.store.read() as db:
            rows = db.execute(select(replicas, age.label("age"))).mappings().all()
        found = {r["id"]: Replica(**{k: v for k, v in r.items() if k != "age"}, age_s=float(r["age"])) for r in rows}
        return {k: v for k, v in found.items() if v.age_s < STALE_S}

    def _leave(self) -> None:
        try:
            with self.store.write() as db:
                db.execute(delete(replicas).where(replicas.c.id == self.id))
                db.execute(delete(held_approvals).where(held_approvals.c.replica == self.id))
                notify(db, "replicas")
        except SQLAlchemyError as exc:
            logger.warning("replica %s could not leave the registry (%s); it ages out in %g s", self.id, exc, STALE_S)

    def _shared_key(self) -> str:
        """The replicas' request-state key: made by the first replica, read by the others."""
        row = {"name": REQUEST_STATE_KEY, "secret": secrets.token_hex(32), "created_at": time.time()}
        with self.store.write() as db:
            db.execute(insert_or_ignore(db, cluster_keys).values(row))
            secret = db.execute(select(cluster_keys.c.secret).where(cluster_keys.c.name == REQUEST_STATE_KEY)).scalar()
        return str(secret)

    # -- events ------------------------------------------------------------------------------------

    async def _listen_forever(self, locked: anyio.Event) -> None:
        while True:
            try:
                async for payload in self._listen():
                    if payload == "*":
                        locked.set()
                    self._dispatch(payload)
            except (OSError, _LockTaken) as exc:
                if self.stats.listening:
                    logger.warning("replica %s stopped hearing the others (%s); listening again", self.id, exc)
                else:
                    logger.debug("replica %s cannot listen yet: %s", self.id, exc)
            self.stats.listening = False
            await anyio.sleep(RELISTEN_S)

    async def _listen(self) -> AsyncIterator[str]:
        """Payloads; ``"*"`` first, once the connection holds the id's lock and listens."""
        import psycopg

        from mcpmux.store.database import conninfo

        try:
            async with await psycopg.AsyncConnection.connect(
                conninfo(self.store.url), autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S)
            ) as connection:
                key = zlib.crc32(f"mcpmux-replica:{self.id}".encode())
                taken = await (await connection.execute("SELECT pg_try_advisory_lock(%s)", (key,))).fetchone()
                if not (taken and taken[0]):
                    raise _LockTaken(self.id)
                await connection.execute(f"LISTEN {EVENTS_CHANNEL}")
                self.stats.listening = True
                yield "*"
                async for note in connection.notifies():
                    yield note.payload
        except psycopg.Error as exc:
            raise ConnectionError(f"listening on {shown(self.store.url)}: {exc}") from exc

    def _dispatch(self, payload: str) -> None:
        topic, _, detail = payload.partition(":")
        self.stats.events += 1
        topics: Iterable[str] = self._handlers if topic == "*" else (topic,)
        for name in list(topics):
            for handler in self._handlers.get(name, ()):
                try:
                    handler(detail if topic != "*" else "*")
                except Exception:  # one handler's bug must not stop the others hearing events
                    logger.exception("replica %s: handling the event %r failed", self.id, payload)

    # -- forwarding --------------------------------------------------------------------------------

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client that forwards to other replicas (no proxies from the environment)."""
        if self._client is None:
            timeout = httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=None, write=30.0, pool=30.0)
            self._client = httpx.AsyncClient(timeout=timeout, trust_env=False, limits=httpx.Limits(max_connections=256))
        return self._client

    def to_json(self) -> dict[str, Any]:
        """This replica and its peers, for ``/healthz``, the REST API and the console."""
        return {
            "id": self.id, "advertise": self.me.advertise, "listening": self.listening,
            "peers": [p.to_json() for p in self.peers()], "forwarded": dict(self.stats.forwarded),
            "owner_gone": self.stats.owner_gone,
        }  # fmt: skip

    def forwarding(self, app: ASGIApp) -> ASGIApp:
        """``app`` behind a :class:`Forwarder` over this cluster (the gateway's HTTP app calls it)."""
        return Forwarder(app, self)


class _LockTaken(Exception):
    def __init__(self, replica_id: str) -> None:
        super().__init__(f"another live process holds the replica id {replica_id!r}")


class _OwnedCodec:
    """AES-GCM under the replicas' shared key, with the sealing replica's id in front (``ID~v1....``),
    so a balancer-agnostic retry can be sent to the replica where its call waits."""

    def __init__(self, replica_id: str, key: str) -> None:
        self.prefix = f"{replica_id}{OWNER_SEPARATOR}"
        self.inner = AESGCMRequestStateCodec([key])

    def seal(self, payload: bytes) -> str:
        return self.prefix + self.inner.seal(payload)

    def unseal(self, token: str) -> bytes:
        owner, separator, sealed = token.partition(OWNER_SEPARATOR)
        if not separator or not REPLICA_ID.fullmatch(owner):
            raise InvalidRequestState("malformed")
        return self.inner.unseal(sealed)


def owner_of(name: str) -> str | None:
    """The replica id at the front of a session id or sealed ``requestState`` (``None``: names none)."""
    owner, separator, _ = name.partition(OWNER_SEPARATOR)
    return owner if separator and REPLICA_ID.fullmatch(owner) else None


_STATE_MARK = b'"requestState"'
CONSOLE_COOKIE = "mcpmux_replica"
"""Names the replica where a console session lives (set beside the console's own cookie at sign-in)."""


class Forwarder:
    """Sends requests that belong to another replica to that replica.

    MCP requests at ``prefix`` name their owner in the session id or the ``requestState``; a web
    console session lives where its person signed in, which the replica marks with a cookie of its
    own (:data:`CONSOLE_COOKIE`) beside the console's. Sits behind the security middleware (an MCP
    request is authenticated before it goes anywhere) and in front of the SDK. A request forwarded
    once is never forwarded again (no loops).
    """

    def __init__(self, app: ASGIApp, cluster: Cluster, prefix: str = "/mcp", console: str = "/ui") -> None:
        self.app, self.cluster, self.prefix, self.console = app, cluster, prefix, console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or FORWARDED_BY.encode() in dict(scope["headers"]):
            await self.app(scope, receive, send)
        elif path == self.prefix or path.startswith(self.prefix + "/"):
            await self._mcp(scope, receive, send)
        elif path == self.console or path.startswith(self.console + "/"):
            await self._console(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _console(self, scope: Scope, receive: Receive, send: Send) -> None:
        owner = _cookie(dict(scope["headers"]).get(b"cookie", b""), CONSOLE_COOKIE)
        if owner is not None and owner != self.cluster.id and await self.cluster.lookup(owner) is not None:
            await self._forward(owner, scope, await _body(receive), send, receive, session=False, console=True)
            return
        mark = f"{CONSOLE_COOKIE}={self.cluster.id}; Path={self.console}; HttpOnly; SameSite=Strict".encode()

        async def marking(message: Message) -> None:
            # A sign-in here (the console sets its session cookie): later requests find their way back.
            if message["type"] == "http.response.start" and any(
                k == b"set-cookie" and not v.startswith(CONSOLE_COOKIE.encode()) for k, v in message["headers"]
            ):
                message = {**message, "headers": [*message["headers"], (b"set-cookie", mark)]}
            await send(message)

        await self.app(scope, receive, marking)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        session = headers.get(_SESSION_HEADER)
        if session is not None:
            owner = owner_of(session.decode("latin-1"))
            if owner is not None and owner != self.cluster.id:
                await self._forward(owner, scope, await _body(receive), send, receive, session=True)
                return
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _body(receive)
        owner = _state_owner(body)
        if owner is not None and owner != self.cluster.id and await self.cluster.lookup(owner) is not None:
            await self._forward(owner, scope, body, send, receive, session=False)
            return
        # Ours, or its owner is gone: served here (a retry of a call that lived elsewhere is told to call again).
        await self.app(scope, _replay(body, receive), send)

    async def _forward(
        self, owner: str, scope: Scope, body: bytes, send: Send, receive: Receive, *, session: bool,
        console: bool = False,
    ) -> None:  # fmt: skip
        replica = await self.cluster.lookup(owner)
        if replica is None:
            await self._gone(owner, scope, body, send, receive, session=session)
            return
        query = scope.get("query_string", b"")
        url = replica.advertise + scope["path"] + (f"?{query.decode('latin-1')}" if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP]
        host = dict(scope["headers"]).get(b"host")
        if host is not None:
            headers.append((b"host", host))  # the owner applies the same Host rules to what the client sent
        credential = scope.get(CREDENTIAL)
        if credential is not None:
            headers.append((b"authorization", credential.encode("latin-1")))
        headers.append((FORWARDED_BY.encode(), self.cluster.id.encode()))
        client = self.cluster.client
        request = client.build_request(scope["method"], url, headers=headers, content=body)
        try:
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # Nothing reached it: it is gone (or going), and nothing ran there.
            logger.info("replica %s (%s) did not answer a forwarded request: %s", owner, replica.advertise, exc)
            self.cluster.forget(owner)
            if console:  # served here: the person signs in again
                await self.app(scope, _replay(body, receive), send)
                return
            await self._gone(owner, scope, body, send, receive, session=session)
            return
        except httpx.HTTPError as exc:
            # It had the request and broke off before answering: it may have run it, so it is not
            # sent anywhere else (at most once); the client is told, as a balancer would tell it.
            logger.info("replica %s (%s) broke off a forwarded request: %s", owner, replica.advertise, exc)
            self.cluster.forget(owner)
            message = f"replica {owner}, which holds this session or call, broke off before answering ({exc!r})"
            await _error(send, 502, message)
            return
        stats = self.cluster.stats.forwarded
        stats[owner] = stats.get(owner, 0) + 1
        try:
            out = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.multi_items()]
            keep = [(k, v) for k, v in out if k not in _HOP_BY_HOP or k == b"content-length"]
            await send({"type": "http.response.start", "status": response.status_code, "headers": keep})
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
                try:
                    async for chunk in response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.HTTPError as exc:
                    # The owner died mid-answer: the client sees the stream end, as it would with the owner.
                    logger.info("replica %s broke off a forwarded answer: %s", owner, exc)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            await response.aclose()

    async def _gone(
        self, owner: str, scope: Scope, body: bytes, send: Send, receive: Receive, *, session: bool
    ) -> None:
        self.cluster.stats.owner_gone += 1
        if not session:
            await self.app(scope, _replay(body, receive), send)
            return
        # The spec's answer for a session that no longer exists: the client starts a new one.
        await _error(send, 404, f"Session not found: replica {owner} that held it is gone; initialize a new session")


async def _error(send: Send, status: int, message: str) -> None:
    """A JSON-RPC error (no request id) with the HTTP ``status``."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600 if status == 404 else -32603, "message": message}}
    payload = json.dumps(error).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


async def _body(receive: Receive) -> bytes:
    """The whole request body (the security middleware in front bounds its size)."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then what the client sends next (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


def _cookie(header: bytes, name: str) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header, if it names a replica."""
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and REPLICA_ID.fullmatch(value):
            return value
    return None


def _state_owner(body: bytes) -> str | None:
    """The replica that sealed the ``requestState`` of a JSON-RPC request body, if it carries one."""
    if _STATE_MARK not in body:
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None
    params = message.get("params") if isinstance(message, dict) else None
    state = params.get("requestState") if isinstance(params, dict) else None
    return owner_of(state) if isinstance(state, str) else None


class SharedHeld:
    """The calls held for a person on every replica, in ``mcpmux_held_approvals`` (a
    :class:`~mcpmux.policy.pending.HeldBoard`): a person answering on any replica's console
    releases the call on the replica where it waits."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.store = cluster, cluster.store

    def post(self, held: HeldApproval) -> None:
        row = {
            "id": held.id, "replica": self.cluster.id, "summary": json.dumps(held.to_json(), default=str),
            "held_at": held.held_at, "expires_at": held.expires_at,
        }  # fmt: skip
        with self.store.write() as db:
            db.execute(held_approvals.insert().values(row))
            notify(db, "held", held.id)

    def withdraw(self, held_id: str) -> None:
        with self.store.write() as db:
            db.execute(delete(held_approvals).where(held_approvals.c.id == held_id))
            notify(db, "held", held_id)

    def take(self, held_id: str, answer: Answer, by: str) -> HeldApproval | None:
        h = held_approvals.c
        with self.store.write() as db:
            taken = db.execute(
                update(held_approvals)
                .where(h.id == held_id, h.answer.is_(None), h.expires_at > time.time())
                .values(answer=answer.value, answered_by=by)
                .returning(h.summary, h.held_at, h.expires_at)
            ).first()
            if taken is not None:
                notify(db, "answered", held_id)
        if taken is None:
            return None
        held = _held_from(held_id, json.loads(taken.summary), taken.held_at, taken.expires_at)
        held.answer, held.answered_by = answer, by
        return held

    def answer_of(self, held_id: str) -> tuple[Answer, str] | None:
        h = held_approvals.c
        with self.store.read() as db:
            row = db.execute(select(h.answer, h.answered_by).where(h.id == held_id)).first()
        if row is None or row.answer is None:
            return None
        return Answer(row.answer), str(row.answered_by or "")

    def listed(self) -> list[HeldApproval]:
        h = held_approvals.c
        with self.store.read() as db:
            rows = db.execute(
                select(h.id, h.summary, h.held_at, h.expires_at).where(h.answer.is_(None), h.expires_at > time.time())
            ).all()
        return [_held_from(r.id, json.loads(r.summary), r.held_at, r.expires_at) for r in rows]


def _held_from(held_id: str, summary: dict[str, Any], held_at: float, expires_at: float) -> HeldApproval:
    """A call held on another replica, as this one shows it (its arguments redacted there already)."""
    request = ApprovalRequest(
        name=str(summary.get("name", "")), server=str(summary.get("server", "")), tool=str(summary.get("tool", "")),
        arguments=summary.get("arguments") or {}, reason=str(summary.get("rule", "")),
        face=str(summary.get("face", "gateway")), caller=summary.get("caller"),
    )  # fmt: skip
    return HeldApproval(held_id, request, summary.get("arguments"), held_at, expires_at)
