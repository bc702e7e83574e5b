"""The digest of everything a command's configuration load reads, so a warm call can skip the load.

A one-shot command through a running daemon (:mod:`mcpmux.attach.thin`) spends most of its time
loading the configuration: Python building the configuration's models, then validating the files.
The daemon holds the attach that an earlier command of the *same inputs* sent, keyed by this
digest (:data:`~mcpmux.attach.wire.ATTACH_KNOWN`); a command whose digest it holds sends only the
digest and the server's name, and imports neither pydantic nor the models.

The digest covers every input of the load and of the command's choice of the daemon: this
version of mcpmux, the working directory, the ``--config`` file and the ``--daemon``/``--no-daemon``
switch, the whole environment (``${VAR}`` values, ``HOME``, ``XDG_*``, ``MCPMUX_CONFIG``,
``MCPMUX_DAEMON``...) and the bytes of every candidate file (:func:`~mcpmux.config.paths.config_sources`,
present or not), and the user's trust decisions about project files (:mod:`mcpmux.config.trust`).
A change to any of them is another digest, so the command loads the configuration again. What the
digest cannot see is never keyed: a file naming an ``envFile`` (read by the load too) gives no digest,
and the command that stores an attach does so only when no source registry exists
(:func:`mcpmux.cli.thin`), whose entries would be read from a database.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from mcpmux._version import __version__
from mcpmux.config.paths import config_sources, trusted_projects_file

__all__ = ["KEY_CHARS", "config_key"]

KEY_CHARS = 64
_FORMAT = 1
_UNSEEN = b"envFile"
"""Text in a configuration file that makes the load read a file the digest does not cover."""


def config_key(explicit: str | None, daemon: str | None, *, cwd: Path | None = None) -> str | None:
    """The hex SHA-256 of the command's configuration inputs, or ``None`` when the load would read more.

    ``explicit`` is ``--config``, ``daemon`` the command line's daemon mode. Unreadable candidates
    (a directory, no permission) give ``None`` too: the ordinary load reports them.
    """
    env = os.environ
    where = cwd or Path.cwd()
    digest = hashlib.sha256()
    head = {"format": _FORMAT, "mcpmux": __version__, "cwd": str(where), "config": explicit, "daemon": daemon}
    digest.update(json.dumps(head, sort_keys=True).encode())
    digest.update(json.dumps(sorted(env.items())).encode())
    for source in config_sources(explicit, cwd=where):
        try:
            data = source.path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError:
            return None
        if data is not None and _UNSEEN in data:
            return None
        digest.update(json.dumps([source.role, str(source.path), None if data is None else len(data)]).encode())
        digest.update(data or b"")
    try:  # the user's trust decisions: `mcpmux untrust` must end a project file's warm path too
        digest.update(trusted_projects_file().read_bytes())
    except FileNotFoundError:
        digest.update(b"no trust decisions")
    except OSError:
        return None
    return digest.hexdigest()
