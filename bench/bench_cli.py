"""CLI start-up of the management face: ``mcpmux --help`` and ``mcpmux list`` over lazy servers.

``list`` runs on 10 lazy stdio servers whose lists are in the catalog cache, so it starts no
process and imports neither the manager nor the MCP SDK. Baseline in the same run: ``python -c
pass``. Targets: ``--help`` <= 0.2 s, lazy ``list`` <= 0.3 s (DESIGN section 5, issue 6).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import report

RUNS = 15
SERVERS = 10
TOOLS_PER_SERVER = 20


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _median_s(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of ``argv``; CPU time is steadier on a busy machine."""
    wall, cpu = [], []
    for _ in range(RUNS):
        start, start_cpu = time.perf_counter(), _cpu_s()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall.append(time.perf_counter() - start)
        cpu.append(_cpu_s() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def _prepare(root: Path) -> dict[str, str]:
    """A project with lazy servers and a warm catalog, in a private HOME."""
    env = dict(os.environ, HOME=str(root), MCPMUX_DATA_DIR=str(root / "data"), MCPMUX_STATE_DIR=str(root / "state"))
    env.pop("MCPMUX_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(root / "config")
    lines = ["mcp:", "  settings: {lazy: true}", "  servers:"]
    lines += [f"    - {{name: s{i}, command: server-{i}-not-installed, args: ['--n', '{i}']}}" for i in range(SERVERS)]
    (root / "mcpmux.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.environ.update({k: env[k] for k in ("HOME", "MCPMUX_DATA_DIR", "MCPMUX_STATE_DIR", "XDG_CONFIG_HOME")})
    import mcp_types as types

    from mcpmux.config import load_config
    from mcpmux.manager.catalog import Catalog, CatalogEntry, fingerprint
    from mcpmux.processes.sandbox import with_effective_sandbox

    tools = [types.Tool(name=f"tool_{n}", input_schema={"type": "object"}) for n in range(TOOLS_PER_SERVER)]
    with Catalog() as catalog:
        config = load_config(cwd=root)
        for server in config.servers:
            key = fingerprint(with_effective_sandbox(server, config.security))
            catalog.store(server.name, key, CatalogEntry(tools=tools))
    return env


_PROBE = (
    "import sys\nfrom mcpmux.cli.main import run\nrun(['list', '--json'])\n"
    "print('mcp' in sys.modules or 'mcpmux.manager' in sys.modules, file=sys.stderr)"
)


def _fast_path_taken(cwd: str, env: dict[str, str]) -> bool:
    """Whether ``list`` ran without the manager and the SDK (else the figure measures the slow path)."""
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stderr.strip().endswith("False")


def main() -> None:
    python = sys.executable
    mcpmux = str(Path(python).parent / "mcpmux")
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory() as root:
        try:
            env = _prepare(Path(root))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        cases = {
            "python -c pass": [python, "-c", "pass"],
            "mcpmux --help": [mcpmux, "--help"],
            f"mcpmux list ({SERVERS} lazy, cached)": [mcpmux, "list"],
            f"mcpmux list --json ({SERVERS} lazy, cached)": [mcpmux, "list", "--json"],
        }
        fast = _fast_path_taken(root, env)
        results = {name: _median_s(argv, root, env) for name, argv in cases.items()}
    floor = results["python -c pass"][0]
    rows = [[name, round(wall, 4), round(cpu, 4), round(wall / floor, 2)] for name, (wall, cpu) in results.items()]
    columns = ["command", "median wall s", "median cpu s", "x python -c pass (wall)"]
    report(
        "cli",
        columns,
        rows,
        runs=RUNS,
        list_fast_path=fast,
        load_average=os.getloadavg(),
        target_help_s=0.2,
        target_list_s=0.3,
    )


if __name__ == "__main__":
    main()
