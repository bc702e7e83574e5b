"""The daemon's client is tested against a real daemon: the daemon tests' fixture."""

from tests.daemon.conftest import daemon_fixture

__all__ = ["daemon_fixture"]
