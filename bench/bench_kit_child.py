"""A test kit mock as a child process against an SDK ``MCPServer`` script, in one run.

Each case starts a stdio child through mcpmux's ``Connection``, makes one ``tools/call`` and
closes it (what a test that runs a fixture server pays per server). Cases: an SDK ``MCPServer``
script (what the project's fixture servers were), a ``MockServer`` script (``run_stdio``, Python
handlers), and ``python -m mcpmux.testing --spec`` (fixed results). The project's own tests moved
their fixture servers onto the kit: this keeps its child start honest (target: <= 1.1x MCPServer).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from harness import report

RUNS = 9
SDK_SCRIPT = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("echo")
@server.tool()
def echo(text: str) -> str:
    return text
if __name__ == "__main__":
    server.run()
"""
KIT_SCRIPT = """
from mcpmux.testing import MockServer
mock = MockServer("echo").tool("echo", lambda text: text)
if __name__ == "__main__":
    mock.run_stdio()
"""


async def _once(argv: list[str]) -> float:
    from mcpmux.config.models import Settings, StdioServerConfig
    from mcpmux.connection import Connection

    config = StdioServerConfig(name="echo", command=argv[0], args=tuple(argv[1:]))
    start = time.perf_counter()
    async with Connection(config, Settings(connect_timeout_ms=60_000)) as conn:
        await conn.call_tool("echo", {"text": "hi"})
    return time.perf_counter() - start


async def _median_s(argv: list[str]) -> float:
    await _once(argv)  # warm the file cache
    return statistics.median([await _once(argv) for _ in range(RUNS)])


def main() -> None:
    from mcpmux.testing import MockServer

    with tempfile.TemporaryDirectory() as scratch:
        sdk, kit, spec = Path(scratch, "sdk.py"), Path(scratch, "kit.py"), Path(scratch, "spec.json")
        sdk.write_text(SDK_SCRIPT)
        kit.write_text(KIT_SCRIPT)
        spec.write_text(json.dumps(MockServer("echo").tool("echo", result="hi").to_spec()))
        cases = {
            "SDK MCPServer script": [sys.executable, str(sdk)],
            "MockServer script (run_stdio)": [sys.executable, str(kit)],
            "python -m mcpmux.testing --spec": [sys.executable, "-m", "mcpmux.testing", "--spec", str(spec)],
        }
        results = {name: anyio.run(_median_s, argv) for name, argv in cases.items()}
    base = results["SDK MCPServer script"]
    rows = [[name, round(seconds, 3), round(seconds / base, 2)] for name, seconds in results.items()]
    report("kit_child", ["child", "median s (start, call, stop)", "x MCPServer"], rows, runs=RUNS, target_ratio=1.1)


if __name__ == "__main__":
    main()
