"""``MockServer``: a scriptable MCP server for tests, built on the SDK's low-level server.

A mock is a description (tools, resources, templates, prompts, failures, era, bearer token)
plus the calls it received (:class:`~mcpmux.testing.spec.MockSpec`, the builder).
:mod:`mcpmux.testing.serving` serves it on any transport; everything a mock says can be written
to JSON (:meth:`MockServer.to_spec`) so a child process over stdio serves the same server, as
long as its tools answer fixed results (a Python handler cannot cross a process boundary: serve
such a mock from a module path instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpmux.testing.replay import Match, read_recording, replay_into
from mcpmux.testing.spec import ERAS, Call, Era, InitializeAnswer, MockSpec, MockTool, apply_spec, to_result

if TYPE_CHECKING:
    # Loaded by serve() only: a mock run as a child (run_stdio) never needs mcpmux's configuration.
    from mcpmux.testing.serving import Served, TransportName

__all__ = ["ERAS", "Call", "Era", "InitializeAnswer", "MockServer", "MockTool", "to_result"]


class MockServer(MockSpec):
    """A scriptable MCP server for tests.

    Build it with the chained methods, serve it with :meth:`serve` (or hand it to the pytest
    fixture ``mcp_mock``), then look at :attr:`calls`::

        mock = MockServer("demo").tool("echo", lambda text: text, schema={...}).tool("boom", result="x").crash("boom")
        async with mock.serve("tcp") as served:
            ...  # served.config is the ServerConfig to give mcpmux, served.url the address

    Args:
        name: the server's name (also the name of the ``ServerConfig`` it is served as).
        version: the version in its ``serverInfo``.
    """

    def serve(self, transport: TransportName = "memory", **options: Any) -> AbstractAsyncContextManager[Served]:
        """Serve this mock on ``transport`` (``memory``, ``stdio``, ``tcp``, ``websocket``, ``sse``, ``http``).

        See :func:`mcpmux.testing.serving.serve` for the options.
        """
        from mcpmux.testing.serving import serve

        return serve(self, transport, **options)

    def run_stdio(self, calls: str | Path | None = None) -> None:
        """Serve this mock on this process's stdin/stdout until stdin closes, then exit.

        For a script that is a mock server (``if __name__ == "__main__": mock.run_stdio()``), the
        way ``python -m mcpmux.testing`` serves one; tools may have Python handlers. Each call is
        appended to ``calls`` (JSON lines) when given.

        Raises:
            SystemExit: always (see :func:`mcpmux.testing.child.run_stdio`).
        """
        from mcpmux.testing.child import run_stdio

        run_stdio(self, Path(calls) if calls is not None else None)

    @classmethod
    def replay(cls, path: str | Path, *, match: Match = "strict", name: str | None = None) -> MockServer:
        """A mock that answers what a recorded session (``mcpmux record``) answered.

        See :mod:`mcpmux.testing.replay`.

        Raises:
            UsageError: the file is missing, not JSON lines, or not a recording.
        """
        path = Path(path)
        session, exchanges = read_recording(path)
        info = session.get("server_info") or {}
        mock = cls(name or session["server"], version=str(info.get("version", "1.0.0")))
        replay_into(mock, path, exchanges, match=match)
        return mock

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> MockServer:
        """The mock a :meth:`to_spec` object describes."""
        if spec.get("replay"):
            mock = cls.replay(spec["replay"], name=spec["name"], match=spec.get("match", "strict"))
        else:
            mock = cls(spec["name"], version=spec.get("version", "1.0.0"))
        apply_spec(mock, spec)
        return mock
