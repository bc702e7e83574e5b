"""``python -m mcpmux.testing``: serve a mock on stdio, as a real child process.

    python -m mcpmux.testing --spec SPEC.json [--calls CALLS.jsonl]
    python -m mcpmux.testing --module pkg.mod:attr [--calls CALLS.jsonl]

``--spec`` reads a :meth:`MockServer.to_spec` file; ``--module`` imports ``attr`` from
``pkg.mod`` (a ``MockServer``, or a function returning one). Each ``tools/call`` is appended to
``--calls`` as one JSON line. A crash writes ``crashing (mock)`` to stderr and exits mid-call.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import anyio
from mcp.server.stdio import stdio_server

from mcpmux.testing.failures import Crash
from mcpmux.testing.mock import Call, MockServer
from mcpmux.testing.runtime import MockRuntime

GARBAGE_LINE = b"this line is not JSON-RPC (mock garbage_output)\n"


def load_mock(spec: str | None, module: str | None) -> MockServer:
    """The mock named on the command line.

    Raises:
        SystemExit: the module path does not name a mock.
    """
    if spec is not None:
        return MockServer.from_spec(json.loads(Path(spec).read_text()))
    assert module is not None
    module_name, _, attr = module.partition(":")
    found = getattr(importlib.import_module(module_name), attr or "mock")
    mock = found() if callable(found) and not isinstance(found, MockServer) else found
    if not isinstance(mock, MockServer):
        raise SystemExit(f"{module} is not a MockServer (nor a function returning one)")
    return mock


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mcpmux.testing", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--spec", help="a JSON spec written by MockServer.to_spec()")
    source.add_argument("--module", help="pkg.mod:attr naming a MockServer (or a function returning one)")
    parser.add_argument("--calls", help="append each tools/call to this file, one JSON line each")
    options = parser.parse_args(argv)
    mock = load_mock(options.spec, options.module)
    # stdio_server() reads and writes through its own wrappers; keep the raw fd for garbage lines.
    raw_stdout = os.dup(1)
    calls = Path(options.calls) if options.calls else None

    async def crash(failure: Crash) -> None:
        os.write(2, b"crashing (mock)\n")
        os._exit(failure.exit_code)

    def garbage() -> None:
        os.write(raw_stdout, GARBAGE_LINE)

    def logged(call: Call) -> None:
        if calls is not None:
            with calls.open("a") as log:
                log.write(json.dumps(asdict(call)) + "\n")

    runtime = MockRuntime(mock, on_crash=crash, on_garbage=garbage, on_call=logged)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await runtime.run(read, write, runtime.create_initialization_options())

    anyio.run(serve)
    sys.exit(0)


if __name__ == "__main__":
    main()
