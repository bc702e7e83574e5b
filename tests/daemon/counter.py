"""A server with state: ``bump`` counts the calls this process has answered (per-client isolation tests)."""

from __future__ import annotations

import os

from mcpmux.testing import MockServer


def counter() -> MockServer:
    """``bump`` -> ``"<count> pid <pid>"``; ``python -m mcpmux.testing --module tests.daemon.counter:counter``."""
    state = {"count": 0}

    def bump() -> str:
        state["count"] += 1
        return f"{state['count']} pid {os.getpid()}"

    return MockServer("counter").tool("bump", bump)
