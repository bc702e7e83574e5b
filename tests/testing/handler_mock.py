"""A mock with a Python handler, for ``python -m mcpmux.testing --module tests.testing.handler_mock:build``."""

from __future__ import annotations

from mcpmux.testing import MockServer


def build() -> MockServer:
    return MockServer("handlers").tool("shout", lambda text: f"{text.upper()}!")
