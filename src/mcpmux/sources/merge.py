"""Registered sources beside the configuration's servers, for every face."""

from __future__ import annotations

import logging
from pathlib import Path

from mcpmux.config.models import Config
from mcpmux.config.paths import configured_url, data_dir

__all__ = ["registry_exists", "with_registered"]

logger = logging.getLogger(__name__)

_DEFAULT_FILE = "sources.db"


def registry_exists(url: str | None = None) -> bool:
    """Whether there is a registry to read: a URL given (``--db``, ``MCPMUX_DB``, ``storage.url``),
    or the default file present."""
    return bool(url or configured_url()) or (data_dir() / _DEFAULT_FILE).is_file()


def with_registered(config: Config, url: str | None = None) -> Config:
    """``config`` plus the registered sources (none, and nothing imported, when no registry exists).

    A configured server of the same name wins. A source that cannot be built (a secret that does not
    open, a variable without a value) is left out with a warning naming it: one bad source never
    stops a command.
    """
    url = url or configured_url(config.storage.url)
    if not registry_exists(url):
        return config
    from mcpmux.errors import MCPMuxError
    from mcpmux.sources.registry import SourceRegistry

    registry = SourceRegistry.configured(config, url)
    try:
        taken = {s.name for s in config.servers}
        servers, secrets = list(config.servers), set(config.secret_values)
        for source in registry.all():
            if source.name in taken:
                logger.warning("registered source %r is shadowed by the configured server of that name", source.name)
                continue
            try:
                server = registry.server_config(source)
            except MCPMuxError as exc:
                logger.warning("registered source %r left out: %s", source.name, exc)
                continue
            servers.append(server)
            secrets.update(server.secret_values)
        return config.model_copy(update={"servers": tuple(servers), "secret_values": frozenset(secrets)})
    finally:
        registry.close()


def default_file() -> Path:
    """The default SQLite file of the registry."""
    return data_dir() / _DEFAULT_FILE
