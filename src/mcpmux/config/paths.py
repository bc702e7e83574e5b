"""Where mcpmux reads and writes files: config, state (logs) and data (catalog, stores)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DB_ENV",
    "ConfigSource",
    "config_sources",
    "configured_url",
    "data_dir",
    "project_config_file",
    "server_log_file",
    "state_dir",
    "trusted_projects_file",
    "user_config_file",
]

APP_NAME = "mcpmux"


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var, "").strip()
    return Path(value) if value and Path(value).is_absolute() else Path.home() / fallback


def user_config_file() -> Path:
    """``$XDG_CONFIG_HOME/mcpmux/config.yaml`` (``~/.config/mcpmux/config.yaml`` by default)."""
    return _xdg("XDG_CONFIG_HOME", ".config") / APP_NAME / "config.yaml"


def project_config_file(cwd: Path | None = None) -> Path:
    """``./mcpmux.yaml`` in ``cwd`` (the current directory by default)."""
    return (cwd or Path.cwd()) / "mcpmux.yaml"


def state_dir() -> Path:
    """Logs and run state: ``$MCPMUX_STATE_DIR``, else ``$XDG_STATE_HOME/mcpmux``."""
    override = os.environ.get("MCPMUX_STATE_DIR", "").strip()
    return Path(override) if override else _xdg("XDG_STATE_HOME", ".local/state") / APP_NAME


def data_dir() -> Path:
    """Databases (catalog, pins, audit, content store): ``$MCPMUX_DATA_DIR``, else XDG data."""
    override = os.environ.get("MCPMUX_DATA_DIR", "").strip()
    return Path(override) if override else _xdg("XDG_DATA_HOME", ".local/share") / APP_NAME


def trusted_projects_file() -> Path:
    """The user's trust decisions about project config files: ``<data dir>/trusted-projects.json``."""
    return data_dir() / "trusted-projects.json"


def server_log_file(server: str) -> Path:
    """The stderr log of a server: ``<state dir>/logs/<server>.log`` (not created here)."""
    # Every child's start asks (50 at once): the directory is remembered per value of the
    # variables it depends on, so a changed environment is still followed.
    environ = os.environ
    key = (environ.get("MCPMUX_STATE_DIR"), environ.get("XDG_STATE_HOME"), environ.get("HOME"))
    logs = _logs_dirs.get(key)
    if logs is None:
        logs = _logs_dirs[key] = state_dir() / "logs"
    return logs / f"{server}.log"


_logs_dirs: dict[tuple[str | None, str | None, str | None], Path] = {}


DB_ENV = "MCPMUX_DB"
"""The one database of every part of mcpmux (a SQLAlchemy URL), over ``storage.url`` of the config."""


def configured_url(config_url: str | None = None) -> str | None:
    """The one database every part uses: ``MCPMUX_DB`` when set, else ``storage.url`` of the
    config; ``None`` when neither is (each part then uses its own SQLite file in the data dir)."""
    return os.environ.get(DB_ENV) or config_url or None


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """A place configuration may come from, and whether a file is there."""

    role: str
    path: Path

    @property
    def exists(self) -> bool:
        return self.path.is_file()


def config_sources(explicit: Path | str | None = None, *, cwd: Path | None = None) -> list[ConfigSource]:
    """The candidate files in precedence order (lowest first), present or not.

    ``explicit`` (``--config``) wins over ``MCPMUX_CONFIG``; either is added last.
    """
    sources = [ConfigSource("user", user_config_file()), ConfigSource("project", project_config_file(cwd))]
    chosen = explicit or os.environ.get("MCPMUX_CONFIG") or None
    if chosen:
        role = "--config" if explicit else "MCPMUX_CONFIG"
        sources.append(ConfigSource(role, Path(chosen).expanduser()))
    return sources
