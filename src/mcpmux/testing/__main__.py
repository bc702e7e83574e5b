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
from pathlib import Path

from mcpmux.testing.child import GARBAGE_LINE, run_stdio
from mcpmux.testing.mock import MockServer

__all__ = ["GARBAGE_LINE", "load_mock", "main"]


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
    run_stdio(load_mock(options.spec, options.module), Path(options.calls) if options.calls else None)


if __name__ == "__main__":
    main()
