"""Scale: the index and the guarded listing from 500 to 5,000 tools over 50 servers (issue 24).

For each tool count, in one process and without any server process (the lists are fed to the
registry as a server's ``tools/list`` would be):

- index: every server's lists into the :class:`~mcpmux.manager.registry.Registry` (CPU seconds);
- first guarded listing: ``Guard.tools()`` on a fresh state database: each definition is hashed,
  scanned for poisoning (mentions of every other server's tools included) and pinned (CPU seconds);
- re-list one server: one server lists again with one definition changed: the registry update, then
  the guarded listing of everything (milliseconds of CPU each);
- per tool: the first guarded listing divided by the tool count (flat when growth is linear).

Each tool count is measured in a fresh process (no cache of the scanner or of the hashes carried
over from a smaller count), ``--repeats`` times; the least CPU of each column is reported (CPU time
on a shared machine only grows with the load). Opening the state database (its migrations, once
per process) is its own column, out of the listing's figure.

Targets: 5,000 tools, first guarded listing < 1 s of CPU; re-list of one server < 10 ms; linear.
Run: ``.venv/bin/python bench/run.py scale`` (``--counts 500,1000`` to choose the tool counts).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import mcp_types as types

sys.path.insert(0, str(Path(__file__).parent))
from harness import report

from mcpmux.config.models import Config, StdioServerConfig
from mcpmux.manager import Manager
from mcpmux.manager.registry import ServerCatalog
from mcpmux.policy import Guard, StateStore

SERVERS = 50
COUNTS = (500, 1000, 2000, 3000, 5000)
_VERBS = ("get", "list", "create", "update", "delete", "search", "read", "write", "send", "sync")
_NOUNS = ("issue", "file", "page", "record", "message", "event", "user", "branch", "table", "note")


def server_names() -> list[str]:
    return [f"srv{index:02d}" for index in range(SERVERS)]


def tool(server: int, index: int, rng: random.Random) -> types.Tool:
    """A plausible tool; one in 50 mentions a tool of another server, as real descriptions sometimes do."""
    name = f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}_{server}_{index}"
    text = f"{name.replace('_', ' ').capitalize()} in the workspace. Returns JSON with the {rng.choice(_NOUNS)}."
    if index % 50 == 7:
        text += f" Use together with srv{(server + 1) % SERVERS:02d}:list_note_{(server + 1) % SERVERS}_0."
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": f"The {rng.choice(_NOUNS)} id."},
            "limit": {"type": "integer", "description": "How many at most.", "default": 20},
        },
        "required": ["id"],
    }
    return types.Tool(name=name, description=text, input_schema=schema)


def catalogs(total: int) -> dict[str, ServerCatalog]:
    rng = random.Random(total)
    per_server = total // SERVERS
    return {
        name: ServerCatalog(tools=tuple(tool(s, i, rng) for i in range(per_server)))
        for s, name in enumerate(server_names())
    }


def cpu(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return time.process_time() - started


def measure(total: int, scratch: Path) -> list[object]:
    lists = catalogs(total)
    config = Config(servers=tuple(StdioServerConfig(name=n, command="true") for n in server_names()))
    manager = Manager(config, catalog=False, start=False)
    for name in server_names():
        manager.registry.add_server(name, name)

    def index() -> None:
        for name, catalog in lists.items():
            manager.registry.update(name, catalog)

    index_s = cpu(index)
    with StateStore(scratch / f"state-{total}.db") as store:
        open_s = cpu(lambda: store.engine)
        guard = Guard(manager, store=store)
        first_s = cpu(guard.tools)
        listed = len(guard.tools())
        victim = server_names()[SERVERS // 2]
        old = lists[victim].tools
        changed = (old[0].model_copy(update={"description": "Changed: " + (old[0].description or "")}), *old[1:])
        relist_s = cpu(lambda: manager.registry.update(victim, ServerCatalog(tools=changed)))
        guarded_relist_s = cpu(guard.tools)
    return [total, listed, open_s, index_s, first_s, first_s / total * 1e6, relist_s * 1e3, guarded_relist_s * 1e3]


def measured(total: int, repeats: int) -> list[object]:
    """``measure(total)`` in ``repeats`` fresh processes: the least of each figure."""
    runs: list[list[object]] = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(total)], capture_output=True, text=True, check=True, timeout=900
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return [min(run[i] for run in runs) for i in range(len(runs[0]))]  # type: ignore[type-var]


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)), help="tool counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per count (the least CPU counts)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one count, printed as JSON (a child run)
    options = parser.parse_args(list(argv))
    if options.one:
        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps(measure(options.one, Path(scratch))))
        return
    counts = [int(count) for count in options.counts.split(",")]
    rows = [measured(total, options.repeats) for total in counts]
    columns = [
        "tools", "listed", "open state db CPU s", "index CPU s", "first guarded listing CPU s", "per tool CPU us",
        "re-list 1 server: index CPU ms", "then guarded listing CPU ms",
    ]  # fmt: skip
    report("scale", columns, rows, servers=SERVERS, repeats=options.repeats)


if __name__ == "__main__":
    main(sys.argv[1:])
