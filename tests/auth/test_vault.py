"""The token store: the keyring when a real backend is there, else an encrypted file; the refresh lock."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import keyring
import pytest
from keyring.backend import KeyringBackend

from mcpmux.auth.vault import AuthRecord, FileVault, KeyringVault, TokenSet, auth_dir, open_vault, record_lock

pytestmark = pytest.mark.anyio


class MemoryKeyring(KeyringBackend):
    """A keyring backend in memory (the unit tests' stand-in for the OS keyring)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        from keyring.errors import PasswordDeleteError

        if self.items.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


@pytest.fixture
def memory_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    monkeypatch.delenv("MCPMUX_TOKEN_STORE", raising=False)
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


def record(server: str = "notes") -> AuthRecord:
    tokens = TokenSet(access_token="at-secret-123456", refresh_token="rt-secret-654321", expires_at=1.0)
    return AuthRecord(server=server, resource="https://mcp.example.com/mcp", tokens=tokens)


def test_a_usable_keyring_is_the_store_and_keeps_records(memory_keyring: MemoryKeyring) -> None:
    vault = open_vault()
    assert isinstance(vault, KeyringVault)
    vault.save(record("a"))
    vault.save(record("b"))
    assert vault.servers() == ["a", "b"]
    assert vault.load("a") == record("a")
    assert vault.delete("a") is True
    assert vault.delete("a") is False
    assert vault.servers() == ["b"]
    assert not (auth_dir() / "a.token").exists()


def test_without_a_usable_keyring_the_store_is_the_encrypted_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPMUX_TOKEN_STORE", raising=False)
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        vault = open_vault()
    finally:
        keyring.set_keyring(previous)
    assert isinstance(vault, FileVault)


def test_a_tampered_token_file_is_ignored_not_trusted(caplog: pytest.LogCaptureFixture) -> None:
    vault = FileVault(auth_dir())
    vault.save(record())
    path = auth_dir() / "notes.token"
    path.write_bytes(path.read_bytes()[:-4] + b"AAAA")
    assert vault.load("notes") is None
    assert "cannot be decrypted" in caplog.text


def test_records_never_show_their_tokens() -> None:
    shown = repr(record()) + str(record()) + str(record().describe())
    assert "at-secret" not in shown
    assert "rt-secret" not in shown


async def test_the_refresh_lock_admits_one_holder_at_a_time() -> None:
    inside: list[int] = []
    most = 0

    async def hold(n: int) -> None:
        nonlocal most
        async with record_lock("notes"):
            inside.append(n)
            most = max(most, len(inside))
            await anyio.sleep(0.05)
            inside.remove(n)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(hold, n)
    assert most == 1


async def test_a_lock_held_too_long_times_out_with_its_path() -> None:
    with anyio.fail_after(30):
        async with record_lock("notes"):
            with pytest.raises(TimeoutError, match=r"notes\.lock"):
                async with record_lock("notes", timeout_s=0.2):
                    pass
