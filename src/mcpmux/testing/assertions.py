"""Assertions on what a mock received."""

from __future__ import annotations

from typing import Any

from mcpmux.testing.serving import Served
from mcpmux.testing.spec import Call, MockSpec

__all__ = ["assert_called"]


def assert_called(server: MockSpec | Served, tool: str, /, **arguments: Any) -> Call:
    """Assert that ``tool`` was called (with exactly ``arguments``, if given); return the latest such call.

    Raises:
        AssertionError: no such call, listing the calls the mock did receive.
    """
    mock = server.mock if isinstance(server, Served) else server
    calls = mock.calls
    matching = [c for c in calls if c.tool == tool and (not arguments or c.arguments == arguments)]
    if matching:
        return matching[-1]
    wanted = f"{tool}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})" if arguments else tool
    seen = "\n".join(f"  {c.tool}({c.arguments})" for c in calls) or "  (no calls at all)"
    raise AssertionError(f"mock {mock.name!r} was not called with {wanted}; it received:\n{seen}")
