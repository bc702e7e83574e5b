"""The pytest plugin: its fixtures and marker, here and in a project with no conftest at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcpmux.errors import PolicyError
from mcpmux.host import Host
from mcpmux.manager import Manager
from mcpmux.testing import MockServer, Served, assert_called

pytestmark = [pytest.mark.anyio, pytest.mark.network, pytest.mark.subprocess]


@pytest.fixture
def mcp_mock() -> MockServer:
    mock = MockServer("demo").tool("echo", result="echoed").tool("other", result="x")
    return mock.tool("wipe", result="gone", annotations={"destructiveHint": True})


@pytest.mark.mcp_transports
async def test_the_marker_runs_a_test_on_every_transport_through_a_manager(
    mcpmux_manager: Manager, mcp_mock: MockServer, mcp_served: Served, mcp_transport: str
) -> None:
    assert mcp_served.transport == mcp_transport
    result = await mcpmux_manager.call_tool("demo:echo", {"text": "hi"})
    assert result.content[0].text == "echoed"  # type: ignore[union-attr]
    assert_called(mcp_mock, "echo", text="hi")


@pytest.mark.mcp_transports("memory", "stdio")
async def test_the_host_fixture_guards_every_call(mcpmux_host: Host, mcp_mock: MockServer) -> None:
    result = await mcpmux_host.call_tool("demo:echo", {"text": "hi"})
    assert result.content[0].text == "echoed"  # type: ignore[union-attr]
    with pytest.raises(PolicyError):  # destructive: asks, and no one can answer here
        await mcpmux_host.call_tool("demo:wipe", {})
    assert [call.tool for call in mcp_mock.calls] == ["echo"]


@pytest.mark.mcp_transports("tcp", "http")
async def test_the_marker_takes_a_subset(mcp_transport: str) -> None:
    assert mcp_transport in ("tcp", "http")


async def test_without_the_marker_the_mock_is_served_in_memory(mcp_served: Served) -> None:
    assert mcp_served.transport == "memory"


def test_assert_called_lists_what_was_received_when_it_fails() -> None:
    mock = MockServer("demo").tool("echo", result="x")
    with pytest.raises(AssertionError, match=r"was not called with echo\(text='hi'\)"):
        assert_called(mock, "echo", text="hi")


PROJECT_TEST = """
import pytest
from mcpmux.testing import MockServer, assert_called

pytestmark = pytest.mark.anyio

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.fixture
def mcp_mock():
    return MockServer("shop").tool("price", result={"eur": 3})

@pytest.mark.mcp_transports("memory", "tcp", "websocket", "http")
async def test_price(mcpmux_manager, mcp_mock):
    result = await mcpmux_manager.call_tool("shop:price", {"sku": "A1"})
    assert result.structured_content == {"eur": 3}
    assert_called(mcp_mock, "price", sku="A1")
"""


@pytest.mark.slow
def test_a_project_without_conftest_gets_the_plugin_from_its_entry_point(tmp_path: Path) -> None:
    (tmp_path / "test_shop.py").write_text(textwrap.dedent(PROJECT_TEST))
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\naddopts = --strict-markers\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
