"""A stdio MCP server whose ``count`` tool records each execution: one line per call id in ``$COUNTER_LOG``.

Every replica of the soak benchmark runs its own copy; all append to one file (``O_APPEND`` writes
of one short line do not interleave), so a call id found twice was executed twice.
"""

from __future__ import annotations

import os

from mcpmux.testing import MockServer

LOG = os.environ["COUNTER_LOG"]


def count(id: str) -> str:
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{id}\n".encode())
    finally:
        os.close(fd)
    return f"counted {id}"


mock = MockServer("counter").tool(
    "count", count, schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
)

if __name__ == "__main__":
    mock.run_stdio()
