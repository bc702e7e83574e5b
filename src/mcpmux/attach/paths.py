"""Where the daemon of this user lives: its runtime directory, socket, lock and log, and who may use them.

The directory is ``$XDG_RUNTIME_DIR/mcpmux`` (the login's private tmpfs), else ``/tmp/mcpmux-$UID``,
created 0700. A directory or socket that another user owns, or that others may write to, is refused
before it is used: another user could otherwise stand in for the daemon and see every call.

One user may run several homes at once (containers, CI, ``HOME=... mcpmux``): each has a daemon of
its own, keyed by the user file, data and state directories it would use (:func:`home_key`), so a
command never reaches a daemon that runs another home's servers with another home's databases.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from mcpmux.config.paths import data_dir, state_dir, user_config_file
from mcpmux.errors import DaemonUnavailable

__all__ = [
    "MAX_SOCKET_PATH_BYTES", "check_owned", "home_key", "lock_path", "log_path", "runtime_dir", "socket_path",
]  # fmt: skip

MAX_SOCKET_PATH_BYTES = 107  # sun_path is 108 bytes with its terminating NUL (Linux)


def runtime_dir(*, create: bool = True) -> Path:
    """The daemon's private directory, created 0700 if missing.

    Raises:
        DaemonUnavailable: the directory is another user's or open to others.
    """
    base = os.environ.get("XDG_RUNTIME_DIR")
    directory = Path(base) / "mcpmux" if base else Path(f"/tmp/mcpmux-{os.getuid()}")
    if create:
        directory.mkdir(mode=0o700, parents=base is not None, exist_ok=True)
    if directory.exists():
        check_owned(directory, private=True)
    return directory


def home_key() -> str:
    """12 hex digits naming this home: its user config file, data and state directories (HOME, XDG, MCPMUX_*)."""
    places = "\0".join(str(p.absolute()) for p in (user_config_file(), data_dir(), state_dir()))
    return hashlib.sha256(places.encode()).hexdigest()[:12]


def socket_path() -> Path:
    """The daemon's Unix socket: ``daemon-KEY.sock`` of this home (``MCPMUX_DAEMON_SOCKET`` overrides it)."""
    explicit = os.environ.get("MCPMUX_DAEMON_SOCKET")
    path = Path(explicit) if explicit else runtime_dir() / f"daemon-{home_key()}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise DaemonUnavailable(path, f"the socket path is longer than {MAX_SOCKET_PATH_BYTES} bytes")
    return path


def lock_path() -> Path:
    """The lock file the serving daemon holds (``flock``); it also records the daemon's pid."""
    return socket_path().with_suffix(".lock")


def log_path() -> Path:
    """Where a daemon started in the background writes its log."""
    return socket_path().with_suffix(".log")


def check_owned(path: Path, *, private: bool = False) -> None:
    """Refuse ``path`` unless this user owns it and no one else may write to it (or, ``private``, enter it).

    Raises:
        DaemonUnavailable: owned by another user, or group/world writable (accessible when ``private``).
    """
    info = path.lstat()
    if info.st_uid != os.getuid():
        raise DaemonUnavailable(path, f"it is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})")
    if stat.S_ISLNK(info.st_mode):
        raise DaemonUnavailable(path, "it is a symbolic link")
    mask = 0o077 if private else 0o022
    if info.st_mode & mask:
        raise DaemonUnavailable(path, f"its mode {stat.S_IMODE(info.st_mode):o} lets other users in")
