"""The pytest plugin of :mod:`mcpmux.testing` (registered by entry point: installing mcpmux is enough).

Fixtures (async ones run under anyio's pytest plugin: mark the test ``@pytest.mark.anyio``):

- ``mcp_mock``: the :class:`~mcpmux.testing.MockServer` under test, ``MockServer("mock")`` by
  default; override the fixture to build your own.
- ``mcp_transport``: the transport it is served on (``memory`` unless the test is marked).
- ``mcp_served``: ``mcp_mock`` served on ``mcp_transport`` for the test (a :class:`~mcpmux.testing.Served`).
- ``mcpmux_host``: a started :class:`~mcpmux.host.Host` over ``mcp_served``: every verb through the
  guard (policy, pins, audit), its state store a fresh file of the test.
- ``mcpmux_manager``: a started, unguarded :class:`~mcpmux.manager.Manager` over ``mcp_served``.

Marker: ``@pytest.mark.mcp_transports`` runs the test once per transport (memory, stdio, tcp,
websocket, sse, http); ``@pytest.mark.mcp_transports("tcp", "http")`` on those only.

Assertion helper: :func:`mcpmux.testing.assert_called`.

Nothing heavy is imported until a fixture is used, so the plugin costs other test suites nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mcpmux.host import Host
    from mcpmux.manager import Manager
    from mcpmux.testing.mock import MockServer
    from mcpmux.testing.serving import Served

MARKER = "mcp_transports"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*transports): run the test once per mcpmux.testing transport (all six when none are named)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    from mcpmux.testing.serving import TRANSPORTS

    chosen = tuple(marker.args) or TRANSPORTS
    unknown = [t for t in chosen if t not in TRANSPORTS]
    if unknown:
        raise pytest.UsageError(f"{MARKER}: unknown transports {unknown}; choose from {', '.join(TRANSPORTS)}")
    if "mcp_transport" not in metafunc.fixturenames:
        metafunc.fixturenames.append("mcp_transport")
    metafunc.parametrize("mcp_transport", chosen, indirect=True, ids=list(chosen))


@pytest.fixture
def mcp_transport(request: pytest.FixtureRequest) -> str:
    """The transport ``mcp_served`` uses: ``memory``, or each one under ``@pytest.mark.mcp_transports``."""
    return str(getattr(request, "param", "memory"))


@pytest.fixture
def mcp_mock() -> MockServer:
    """The mock under test (override this fixture to build your own)."""
    from mcpmux.testing.mock import MockServer

    return MockServer("mock")


@pytest.fixture
async def mcp_served(mcp_mock: MockServer, mcp_transport: Any) -> AsyncIterator[Served]:
    """``mcp_mock`` served on ``mcp_transport`` for the duration of the test."""
    async with mcp_mock.serve(mcp_transport) as served:
        yield served


@pytest.fixture
async def mcpmux_manager(mcp_served: Served) -> AsyncIterator[Manager]:
    """A started mcpmux :class:`~mcpmux.manager.Manager` connected to ``mcp_served`` (no catalog cache)."""
    from mcpmux.testing.session import open_manager

    async with open_manager(mcp_served) as manager:
        yield manager


@pytest.fixture
async def mcpmux_host(mcp_served: Served, tmp_path: Any) -> AsyncIterator[Host]:
    """A started mcpmux :class:`~mcpmux.host.Host` over ``mcp_served``; its state store lives in ``tmp_path``."""
    from mcpmux.testing.session import open_host

    async with open_host(mcp_served, state_dir=tmp_path) as host:
        yield host
