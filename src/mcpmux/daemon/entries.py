"""``mcpmux export --via-daemon``: host entries that run ``mcpmux connect NAME`` instead of the server.

Another host (Claude Desktop or Code, Cursor, VS Code) then shares the daemon's warm, guarded
instance instead of spawning its own. Only stdio entries that may be shared are rewritten; the
environment and secrets stay in mcpmux's configuration (the shim reads it), so the host's file
holds none of them. A server defined outside the user's config file gets ``--config FILE``, since
the host starts the shim in a directory of its own choosing.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from mcpmux.types.json_shapes import JSONObject

__all__ = ["connect_entries", "mcpmux_command"]


def mcpmux_command() -> list[str]:
    """The absolute command that runs this mcpmux (the host's PATH may not have it)."""
    installed = shutil.which("mcpmux")
    if installed:
        return [str(Path(installed).resolve())]
    return [sys.executable, "-m", "mcpmux"]


def connect_entries(servers: Sequence[JSONObject], defined_in: dict[str, Path | None]) -> list[JSONObject]:
    """``servers`` with each shareable stdio entry replaced by a ``mcpmux connect NAME`` entry.

    Args:
        servers: entries as written in mcpmux's configuration.
        defined_in: per server name, the file that defines it when that is not the user's config file.
    """
    command = mcpmux_command()
    out: list[JSONObject] = []
    for entry in servers:
        name = str(entry.get("name"))
        shareable = entry.get("type", "stdio") == "stdio" and entry.get("share", "machine") != "per-call"
        if not shareable or entry.get("enabled") is False:
            out.append(entry)
            continue
        config = defined_in.get(name)
        args = [*command[1:], *(["--config", str(config.resolve())] if config else []), "connect", name]
        rewritten: JSONObject = {"name": name, "command": command[0], "args": args}
        if entry.get("description"):
            rewritten["description"] = entry["description"]
        out.append(rewritten)
    return out
