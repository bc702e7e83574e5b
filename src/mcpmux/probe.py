"""One server, probed directly: connect, ping, list, and report what happened and how long it took.

::

    report = await probe(config.server("time"), config)
    report.info.protocol_version, report.counts["tools"], report.timings_s["connect"]

This is the diagnostic path of ``mcpmux test`` and ``mcpmux doctor``: no supervision, retries,
catalog or policy in between, so what is reported is what one connection does. It lists and
pings and never calls a tool, so no policy is skipped; faces use it instead of holding a
connection themselves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mcp_types as types

from mcpmux.config.effective import with_effective_sandbox
from mcpmux.config.models import Config, ServerConfig
from mcpmux.errors import MCPMuxError

if TYPE_CHECKING:
    from mcpmux.connection import ConnectionInfo

__all__ = ["LISTS", "ProbeReport", "probe"]

LISTS = ("tools", "resources", "resource_templates", "prompts")


@dataclass(frozen=True, slots=True)
class ProbeReport:
    """What one probe saw.

    Attributes:
        server: the server as probed (the global sandbox merged in, as the manager runs it).
        info: what the server said of itself at connect time.
        counts: how many of each list it returned (only the lists asked for).
        tools: the tool definitions, when ``tools`` was listed.
        timings_s: ``connect`` (transport and handshake), ``ping`` and ``list``, in seconds.
    """

    server: ServerConfig
    info: ConnectionInfo
    counts: dict[str, int]
    tools: list[types.Tool] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)


async def probe(
    server: ServerConfig, config: Config, *, lists: tuple[str, ...] = LISTS, ping: bool = True
) -> ProbeReport:
    """Connect to ``server`` alone, optionally ping it, list ``lists``, close, and report.

    Raises:
        MCPMuxError: the connection or a request failed (a timeout carries the connect hints).
    """
    from mcpmux.connection import Connection
    from mcpmux.manager.hints import explain_timeout

    # Probed as the manager would run it: the global security.sandbox applies to this server too.
    boxed = with_effective_sandbox(server, config.security)
    started = time.perf_counter()
    connection = Connection(boxed, config.settings)
    try:
        await connection.connect()
    except MCPMuxError as exc:
        explain_timeout(boxed, exc)
        raise
    try:
        connected = time.perf_counter()
        if ping:
            await connection.ping()
        pinged = time.perf_counter()
        counts: dict[str, int] = {}
        tools: list[types.Tool] = []
        for kind in lists:
            if kind == "tools":
                tools = await connection.list_tools()
                counts[kind] = len(tools)
            elif kind == "resources":
                counts[kind] = len(await connection.list_resources())
            elif kind == "resource_templates":
                counts[kind] = len(await connection.list_resource_templates())
            elif kind == "prompts":
                counts[kind] = len(await connection.list_prompts())
            else:
                raise ValueError(f"unknown list {kind!r}: one of {', '.join(LISTS)}")
        listed = time.perf_counter()
        timings = {"connect": connected - started, "ping": pinged - connected, "list": listed - pinged}
        return ProbeReport(boxed, connection.info, counts, tools, timings)
    finally:
        await connection.close()
