"""Where OAuth records live: the OS keyring when one is usable, else an encrypted 0600 file.

One record per server (:class:`AuthRecord`): the client identity (kept and reused, never registered
again per login), the discovered endpoints, and the tokens. Every mcpmux process of the machine
reads the same records; a refresh runs under :func:`record_lock`, a lock on a file in the data dir,
so that one process refreshes and the others pick the new token up.

The file store encrypts with Fernet (AES-128-CBC + HMAC-SHA256) under a key kept beside it (0600):
it protects copies of the token file (backups, a synced data dir), not a reader with the key file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from mcpmux.config.paths import data_dir

__all__ = [
    "LOCK_TIMEOUT_S",
    "AuthRecord",
    "FileVault",
    "KeyringVault",
    "TokenSet",
    "Vault",
    "open_vault",
    "record_lock",
]

logger = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 60.0
"""Bound on waiting for another process's refresh (a token request has its own, shorter, timeout)."""
LOCK_POLL_S = 0.02
KEYRING_SERVICE = "mcpmux-oauth"
STORE_ENV = "MCPMUX_TOKEN_STORE"
"""``keyring`` or ``file`` forces a store; unset picks the keyring when a real backend is present."""

Grant = Literal["authorization_code", "client_credentials", "jwt_bearer"]


class TokenSet(BaseModel):
    """The tokens of one server. ``expires_at`` is a Unix time, ``None`` when the server gave no lifetime."""

    model_config = ConfigDict(frozen=True)

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    scope: str | None = None
    expires_at: float | None = None
    lifetime_s: float | None = None

    def __repr__(self) -> str:
        refresh = self.refresh_token is not None
        return f"TokenSet(scope={self.scope!r}, expires_at={self.expires_at!r}, refresh={refresh})"

    __str__ = __repr__


class AuthRecord(BaseModel):
    """What mcpmux keeps for one server: identity, endpoints, tokens (never printed; see :meth:`describe`)."""

    model_config = ConfigDict(frozen=True)

    server: str
    resource: str
    grant: Grant = "authorization_code"
    issuer: str | None = None
    token_endpoint: str | None = None
    client: dict[str, object] | None = None
    tokens: TokenSet | None = None
    wanted_scope: str | None = None
    dpop_key: str | None = None
    """The PEM of the P-256 key the tokens are bound to (RFC 9449), when the server uses DPoP."""
    updated_at: float = 0.0

    def __repr__(self) -> str:
        return f"AuthRecord(server={self.server!r}, resource={self.resource!r}, tokens={self.tokens!r})"

    __str__ = __repr__

    def describe(self) -> dict[str, object]:
        """What ``mcpmux auth status`` may show: method, issuer, scopes, expiry; never a token or secret."""
        tokens = self.tokens
        return {
            "server": self.server,
            "method": self.grant,
            "resource": self.resource,
            "issuer": self.issuer,
            "client_id": None if self.client is None else self.client.get("client_id"),
            "logged_in": tokens is not None,
            "scopes": (tokens.scope or "").split() if tokens is not None else [],
            "expires_at": tokens.expires_at if tokens is not None else None,
            "refreshable": bool(tokens and tokens.refresh_token) or self.grant != "authorization_code",
            "dpop": self.dpop_key is not None,
        }


class Vault(Protocol):
    """A machine-wide store of :class:`AuthRecord`, one per server name."""

    kind: str

    def load(self, server: str) -> AuthRecord | None:
        """The record of ``server``, or ``None``."""
        ...

    def save(self, record: AuthRecord) -> None:
        """Store ``record`` (replacing the server's previous one)."""
        ...

    def delete(self, server: str) -> bool:
        """Forget ``server``'s record; whether there was one."""
        ...

    def servers(self) -> list[str]:
        """The servers that have a record."""
        ...


def _parse(server: str, text: str | bytes | None) -> AuthRecord | None:
    if text is None:
        return None
    try:
        return AuthRecord.model_validate_json(text)
    except ValidationError:
        logger.warning("oauth: the stored record of server %r is unreadable; it is ignored", server)
        return None


class FileVault:
    """Records as Fernet-encrypted files ``<dir>/<server>.token`` (0600), key in ``<dir>/.key`` (0600)."""

    kind = "file"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _fernet(self) -> object:
        from cryptography.fernet import Fernet

        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        key_file = self.directory / ".key"
        with contextlib.suppress(FileExistsError):
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(Fernet.generate_key())
        return Fernet(key_file.read_bytes().strip())

    def load(self, server: str) -> AuthRecord | None:
        from cryptography.fernet import Fernet, InvalidToken

        path = self.directory / f"{server}.token"
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        fernet = self._fernet()
        assert isinstance(fernet, Fernet)
        try:
            return _parse(server, fernet.decrypt(blob))
        except InvalidToken:
            logger.warning("oauth: %s cannot be decrypted with %s; it is ignored", path, self.directory / ".key")
            return None

    def save(self, record: AuthRecord) -> None:
        from cryptography.fernet import Fernet

        fernet = self._fernet()
        assert isinstance(fernet, Fernet)
        blob = fernet.encrypt(record.model_dump_json().encode())
        path = self.directory / f"{record.server}.token"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(blob)
        os.replace(tmp, path)  # readers in other processes see the old or the new record, never half

    def delete(self, server: str) -> bool:
        try:
            (self.directory / f"{server}.token").unlink()
        except FileNotFoundError:
            return False
        return True

    def servers(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name.removesuffix(".token") for p in self.directory.glob("*.token"))


class KeyringVault:
    """Records in the OS keyring (service ``mcpmux-oauth``), an index of names beside them."""

    kind = "keyring"
    _INDEX = "_servers"

    def load(self, server: str) -> AuthRecord | None:
        import keyring

        return _parse(server, keyring.get_password(KEYRING_SERVICE, server))

    def save(self, record: AuthRecord) -> None:
        import keyring

        keyring.set_password(KEYRING_SERVICE, record.server, record.model_dump_json())
        names = set(self.servers()) | {record.server}
        keyring.set_password(KEYRING_SERVICE, self._INDEX, json.dumps(sorted(names)))

    def delete(self, server: str) -> bool:
        import keyring
        from keyring.errors import PasswordDeleteError

        try:
            keyring.delete_password(KEYRING_SERVICE, server)
        except PasswordDeleteError:
            return False
        names = set(self.servers()) - {server}
        keyring.set_password(KEYRING_SERVICE, self._INDEX, json.dumps(sorted(names)))
        return True

    def servers(self) -> list[str]:
        import keyring

        raw = keyring.get_password(KEYRING_SERVICE, self._INDEX)
        names = json.loads(raw) if raw else []
        return [str(n) for n in names] if isinstance(names, list) else []


def _keyring_usable() -> bool:
    import keyring
    from keyring.backends import fail

    try:
        backend = keyring.get_keyring()
    except Exception as exc:  # noqa: BLE001 - any backend failure means: not usable here
        logger.debug("oauth: no usable keyring (%r)", exc)
        return False
    return not isinstance(backend, fail.Keyring) and backend.priority > 0


def auth_dir() -> Path:
    """``<data dir>/oauth``: the encrypted records (file store) and the refresh locks."""
    return data_dir() / "oauth"


def open_vault() -> Vault:
    """The machine's store: ``MCPMUX_TOKEN_STORE`` if set, else the keyring when usable, else the file."""
    choice = os.environ.get(STORE_ENV, "").strip().lower()
    if choice == "keyring" or (choice != "file" and _keyring_usable()):
        return KeyringVault()
    return FileVault(auth_dir())


@contextlib.contextmanager
def _nonblocking_lock(path: Path) -> Iterator[bool]:
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@asynccontextmanager
async def record_lock(server: str, timeout_s: float = LOCK_TIMEOUT_S) -> AsyncIterator[None]:
    """Hold the machine-wide lock of ``server``'s record (an ``flock`` on ``<data dir>/oauth/<server>.lock``).

    Polled without blocking, so a cancelled waiter leaves at once and never holds the lock.

    Raises:
        TimeoutError: another process held it for ``timeout_s``.
    """
    directory = auth_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{server}.lock"
    deadline = time.monotonic() + timeout_s
    while True:
        with _nonblocking_lock(path) as held:
            if held:
                yield
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the OAuth lock {path} was held by another process for {timeout_s:.0f} s")
        await anyio.sleep(LOCK_POLL_S)
