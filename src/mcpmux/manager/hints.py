"""What to tell a user whose server did not connect in time: the setting to raise, and why it is slow.

A package runner (``npx``, ``uvx``, ``pipx run``, ``docker run``, ...) downloads the package (or
pulls the image) on its first run, which often takes longer than the connect timeout; later runs
start from its cache.
"""

from __future__ import annotations

import os

from mcpmux.config.models import ServerConfig, StdioServerConfig
from mcpmux.errors import MCPTimeoutError

__all__ = ["CONNECT_TIMEOUT_HINT", "connect_timeout_hint", "explain_timeout", "package_runner"]

CONNECT_TIMEOUT_HINT = (
    "raise the server's `connect_timeout_ms` (`mcpmux add NAME --connect-timeout 120s ...`) if it is just slow to start"
)

# Runners that fetch what they run on first use: executable -> subcommands that fetch (empty: any).
_RUNNERS: dict[str, frozenset[str]] = {
    "npx": frozenset(),
    "pnpx": frozenset(),
    "bunx": frozenset(),
    "uvx": frozenset(),
    "pipx": frozenset({"run"}),
    "uv": frozenset({"run", "tool"}),
    "npm": frozenset({"exec", "x"}),
    "pnpm": frozenset({"dlx", "exec"}),
    "yarn": frozenset({"dlx"}),
    "bun": frozenset({"x"}),
    "deno": frozenset({"run"}),
    "docker": frozenset({"run"}),
    "podman": frozenset({"run"}),
}


def package_runner(server: ServerConfig) -> str | None:
    """The package runner a stdio server is started with (``"npx"``, ``"docker run"``, ...), if any."""
    if not isinstance(server, StdioServerConfig):
        return None
    name = os.path.basename(server.command).removesuffix(".exe").removesuffix(".cmd")
    subcommands = _RUNNERS.get(name)
    if subcommands is None:
        return None
    if not subcommands:
        return name
    first = next((arg for arg in server.args if not arg.startswith("-")), None)
    return f"{name} {first}" if first in subcommands else None


def connect_timeout_hint(server: ServerConfig) -> str:
    """The hint for a connect timeout of ``server``: the setting to raise, and a runner's first download
    (or, sandboxed, that the sandbox hides the runner's cache and network)."""
    # Imported here: the transports package imports the SDK, which the manager keeps off its import path.
    from mcpmux.processes.sandbox import package_runner_note

    if isinstance(server, StdioServerConfig) and (note := package_runner_note(server)) is not None:
        return note
    runner = package_runner(server)
    if runner is None:
        return CONNECT_TIMEOUT_HINT
    fetches = "pulls the image" if runner.split()[0] in ("docker", "podman") else "downloads the package"
    return (
        f"the first run of `{runner}` {fetches}: raise `connect_timeout_ms` "
        f"(`mcpmux add {server.name} --connect-timeout 300s ...`) or run the command once by hand"
    )


def explain_timeout(server: ServerConfig, error: BaseException) -> None:
    """Give a connect timeout of ``server`` the hint that fits it (other errors are left alone)."""
    if isinstance(error, MCPTimeoutError) and error.operation == "connect":
        error.hint = connect_timeout_hint(server)
