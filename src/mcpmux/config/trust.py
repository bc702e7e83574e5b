"""Whose configuration runs: a project's ``mcpmux.yaml`` is used only once this user trusted what it says.

A repository can carry a ``./mcpmux.yaml`` (in any format the loader reads: ours, Claude's ``.mcp.json``
shape, VS Code's, a registry manifest). Loading it starts its stdio commands, connects to its URLs with
``${VAR}`` values of the user's environment in their headers, and can loosen ``security``. So the
*project* file is used only when this user has trusted exactly what it says now:

- the decision is per file and per content: the SHA-256 of the file as the loader sees it (its servers and
  sections after format detection, an ``envFile``'s variables included, comments and layout not), kept in
  ``<data dir>/trusted-projects.json`` (0600). A changed file is a new question;
- the user file (``~/.config/mcpmux/config.yaml``) and the file named by ``--config`` / ``MCPMUX_CONFIG``
  are the user's own and always trusted; an empty project file needs no decision;
- ``mcpmux trust [PATH]`` records a decision, ``mcpmux untrust [PATH]`` withdraws it, ``mcpmux trust --list``
  shows them. A command in a terminal asks once (the CLI installs the question with :func:`set_prompt`);
  without a terminal, or from the library, an untrusted file is refused with
  :class:`~mcpmux.errors.UntrustedConfigError`, which says what the file would run and what to do;
- ``MCPMUX_TRUST_PROJECT_FILES=1`` in the environment trusts every project file: for a CI job or a
  container that only ever runs its own repository. A file cannot set it (it is read from the environment);
- a file mcpmux itself edits (``add``, ``remove``, ``enable``...) stays trusted when it was, and a file
  ``add`` creates is trusted; an edit of an untrusted file leaves it untrusted.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpmux.config.document import Document
from mcpmux.config.formats import normalise_document
from mcpmux.config.parse import read_data
from mcpmux.config.paths import trusted_projects_file
from mcpmux.errors import ConfigError, UntrustedConfigError

__all__ = [
    "TRUST_ALL_ENV",
    "TrustPrompt",
    "TrustRecord",
    "TrustStore",
    "check_project",
    "describe",
    "document_digest",
    "file_digest",
    "server_line",
    "set_prompt",
    "starts_nothing",
    "trust_all",
    "trusting_edit",
]

TRUST_ALL_ENV = "MCPMUX_TRUST_PROJECT_FILES"
"""Set to ``1`` to trust every project file (CI, containers of one's own repository)."""

_FORMAT = 1
_TRUE = ("1", "true", "yes", "on")

TrustPrompt = Callable[[Path, list[str], bool], bool]
"""``prompt(path, what_it_runs, changed) -> trusted?``: the CLI's question in a terminal."""

_prompt: TrustPrompt | None = None


def set_prompt(prompt: TrustPrompt | None) -> None:
    """Install (or remove) the question an untrusted project file gets before it is refused."""
    global _prompt
    _prompt = prompt


def document_digest(document: Document) -> str:
    """The hex SHA-256 of what a document says: its servers and sections in mcpmux's shape."""
    body = {
        "servers": [server.data for server in document.servers],
        "sections": {key: value for key, (_origin, value) in sorted(document.sections.items())},
    }
    text = json.dumps(body, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: Path) -> str | None:
    """The digest of the file at ``path`` as the loader reads it; ``None`` when it is missing or unreadable."""
    document = _document(path)
    return None if document is None else document_digest(document)


def _document(path: Path) -> Document | None:
    try:
        return normalise_document(read_data(path), str(path), path)
    except (ConfigError, OSError):
        return None


def _starts_nothing(document: Document) -> bool:
    return not document.servers and not document.sections


def starts_nothing(path: Path) -> bool:
    """The file at ``path`` says nothing to trust (it is empty, or has no servers and no sections)."""
    document = _document(path)
    return document is not None and _starts_nothing(document)


def describe(document: Document) -> list[str]:
    """One line per thing a document makes mcpmux do: the commands it starts, the URLs it reaches, the
    sections it sets. Values are shown as written (``${VAR}`` unexpanded: where a secret would go)."""
    lines = [server_line(server.data) for server in document.servers]
    return lines + [f"sets {key}" for key in sorted(document.sections)]


def server_line(data: Mapping[str, Any]) -> str:
    """What one server entry (mcpmux's shape) makes mcpmux do: ``server NAME: runs COMMAND ARGS`` or its URL."""
    name = data.get("name", "?")
    kind = data.get("type") or ("stdio" if "command" in data else "http" if "url" in data else "?")
    if kind == "stdio":
        words = [str(data.get("command", "")), *(str(a) for a in data.get("args") or [])]
        return f"server {name}: runs {_shell_words(words)}{_keys('env', data.get('env'))}"
    if kind == "builtin":
        return f"server {name}: built-in"
    target = data.get("url") or data.get("base_url") or data.get("spec") or ""
    return f"server {name}: {kind} {target}{_keys('headers', data.get('headers'))}"


def _keys(what: str, mapping: Any) -> str:
    """``  (env: A, B)``: the names a server is given (the values may be secrets)."""
    if not isinstance(mapping, Mapping) or not mapping:
        return ""
    return f"  ({what}: {', '.join(sorted(map(str, mapping)))})"


def _shell_words(words: list[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


@dataclass(frozen=True, slots=True)
class TrustRecord:
    """One decision: the file, the digest trusted, when (Unix seconds)."""

    path: str
    digest: str
    trusted_at: float

    def state(self) -> str:
        """``trusted`` (the file says what was trusted), ``changed``, or ``missing``."""
        current = file_digest(Path(self.path))
        if current is None:
            return "missing"
        return "trusted" if current == self.digest else "changed"


class TrustStore:
    """The user's decisions: ``<data dir>/trusted-projects.json``, written 0600 under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def default(cls) -> TrustStore:
        """The store of this user (``MCPMUX_DATA_DIR`` or XDG data)."""
        return cls(trusted_projects_file())

    def records(self) -> list[TrustRecord]:
        """Every decision, by path."""
        return [TrustRecord(path, *entry) for path, entry in sorted(self._read().items())]

    def digest_of(self, path: Path) -> str | None:
        """The digest trusted for ``path``, or ``None``."""
        entry = self._read().get(_key(path))
        return None if entry is None else entry[0]

    def trust(self, path: Path, digest: str) -> None:
        """Record that ``path`` saying ``digest`` is trusted (replacing an older decision)."""
        with self._locked() as entries:
            entries[_key(path)] = (digest, time.time())

    def untrust(self, path: Path) -> bool:
        """Withdraw the decision about ``path``; ``False`` when there was none."""
        with self._locked() as entries:
            return entries.pop(_key(path), None) is not None

    def _read(self) -> dict[str, tuple[str, float]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"cannot read the trusted projects file {self.path}: {exc.strerror}") from exc
        return _entries(text, self.path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, tuple[str, float]]]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entries = self._read()
            yield entries
            self._write(entries)
        finally:
            os.close(lock)

    def _write(self, entries: dict[str, tuple[str, float]]) -> None:
        body = {
            "format": _FORMAT,
            "projects": {path: {"sha256": digest, "trusted_at": at} for path, (digest, at) in sorted(entries.items())},
        }
        handle, temp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:  # mkstemp makes it 0600
                json.dump(body, stream, indent=1)
                stream.write("\n")
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def _key(path: Path) -> str:
    # Resolved: a decision is about the file read, whatever link or relative path led to it.
    return str(path.expanduser().resolve())


def _entries(text: str, where: Path) -> dict[str, tuple[str, float]]:
    try:
        body: Any = json.loads(text)
        projects = body["projects"]
        return {str(path): (str(entry["sha256"]), float(entry["trusted_at"])) for path, entry in projects.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"the trusted projects file {where} is damaged ({exc}); delete it and trust your projects again"
        ) from exc


def trust_all(environ: Mapping[str, str]) -> bool:
    """``MCPMUX_TRUST_PROJECT_FILES`` is on in ``environ``."""
    return environ.get(TRUST_ALL_ENV, "").strip().lower() in _TRUE


def check_project(path: Path, document: Document, environ: Mapping[str, str] | None = None) -> None:
    """Let a project file's ``document`` be used, or raise.

    Raises:
        UntrustedConfigError: nobody trusted what the file says (or it changed since), and the question
            was not asked (no terminal) or was answered no.
    """
    if trust_all(os.environ if environ is None else environ):
        return
    if _starts_nothing(document):
        return
    digest = document_digest(document)
    store = TrustStore.default()
    trusted = store.digest_of(path)
    if trusted == digest:
        return
    changed = trusted is not None
    lines = describe(document)
    if _prompt is None:
        raise UntrustedConfigError(str(path), lines, changed=changed)
    if not _prompt(path, lines, changed):
        raise UntrustedConfigError(str(path), lines, changed=changed, declined=True)
    store.trust(path, digest)


@contextlib.contextmanager
def trusting_edit(path: Path, *, created_is_trusted: bool, vouch: bool = True) -> Iterator[None]:
    """Around mcpmux's own edit of ``path``: a file trusted before it stays trusted after it, and a file the
    edit creates (or one that started nothing) is trusted when ``created_is_trusted``. An untrusted file
    that said something stays untrusted: the next command asks about all of it. ``vouch=False`` (an edit
    that copies in what nobody reviewed: ``mcpmux import`` of a project's ``.mcp.json``) trusts nothing."""
    store = TrustStore.default()
    before = _document(path) if path.exists() else None
    if not vouch:
        keep = False
    elif before is None or _starts_nothing(before):
        keep = created_is_trusted and (before is not None or not path.exists())
    else:
        keep = store.digest_of(path) == document_digest(before)
    yield
    if keep:
        after = file_digest(path)
        if after is not None:
            store.trust(path, after)
