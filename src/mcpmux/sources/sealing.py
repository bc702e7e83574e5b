"""Secrets of registered sources, encrypted at rest with AES-GCM.

The key is ``MCPMUX_SECRET_KEY`` (32 bytes as URL-safe base64, or 64 hex digits) when set, else the
file ``<data dir>/secret.key`` (created on first use, mode 0600). Each value is sealed with a fresh
96-bit nonce and bound to its source and variable name (associated data), so a ciphertext copied to
another row does not open. A value that does not open (the key changed) is an error naming the
source and variable, never a silent empty value.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mcpmux.config.paths import data_dir
from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["KEY_ENV", "KEY_FILE", "MASK", "SecretBox", "load_key"]

KEY_ENV = "MCPMUX_SECRET_KEY"
KEY_FILE = "secret.key"
MASK = "********"
_KEY_BYTES = 32
_NONCE_BYTES = 12


def load_key(directory: Path | None = None) -> bytes:
    """The secret key: ``MCPMUX_SECRET_KEY``, else ``directory/secret.key`` (created when missing).

    Raises:
        ConfigError: the variable or the file holds no usable 32-byte key.
    """
    text = os.environ.get(KEY_ENV)
    if text:
        return _decode_key(text.strip(), KEY_ENV)
    path = (directory or data_dir()) / KEY_FILE
    try:
        return _decode_key(path.read_text().strip(), str(path))
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = AESGCM.generate_key(bit_length=256)
    encoded = base64.urlsafe_b64encode(key).decode("ascii")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return _decode_key(path.read_text().strip(), str(path))
    with os.fdopen(fd, "w") as handle:
        handle.write(encoded + "\n")
    return key


def _decode_key(text: str, where: str) -> bytes:
    try:
        key = bytes.fromhex(text) if len(text) == 2 * _KEY_BYTES else base64.urlsafe_b64decode(text + "==")
    except (ValueError, binascii.Error):
        key = b""
    if len(key) != _KEY_BYTES:
        reason = "not a 32-byte key (URL-safe base64 or 64 hex digits); make one with: openssl rand -hex 32"
        raise ConfigError(ConfigProblem(where, "", reason))
    return key


class SecretBox:
    """Seals and opens secret values with one key.

    Args:
        key: 32 bytes (see :func:`load_key`).
    """

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def seal(self, value: str, *, source: str, name: str) -> bytes:
        """``value`` encrypted and bound to ``source`` and ``name``."""
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, value.encode("utf-8"), _bound(source, name))

    def open(self, sealed: bytes, *, source: str, name: str) -> str:
        """The value of ``sealed``.

        Raises:
            ConfigError: it does not open with this key (the key changed, or the row was tampered with).
        """
        try:
            plain = self._aead.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], _bound(source, name))
        except InvalidTag as exc:
            reason = (
                f"the stored secret {name!r} does not open with this key (was {KEY_ENV} or "
                f"{KEY_FILE} changed?); set it again with `mcpmux sources add` or restore the key"
            )
            raise ConfigError(ConfigProblem(f"source {source!r}", name, reason)) from exc
        return plain.decode("utf-8")


def _bound(source: str, name: str) -> bytes:
    return f"mcpmux-source-secret\0{source}\0{name}".encode()
