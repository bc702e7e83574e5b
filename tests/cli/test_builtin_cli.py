"""``mcpmux builtin KIND`` serves a built-in server on stdio to any MCP client."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.forkserver import MCPMUX

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


@pytest.mark.parametrize("kind", ["workspace", "content-store"])
async def test_builtin_serves_on_stdio_for_another_host(kind: str, tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hello from the workspace\n", encoding="utf-8")
    args = ["builtin", kind, "--root", str(tmp_path)]
    if "content" in kind:
        args += ["--database", str(tmp_path / "c.db")]
    params = StdioServerParameters(command=MCPMUX, args=args)
    with anyio.fail_after(30):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            if kind == "workspace":
                assert "read_file" in names
                result = await session.call_tool("read_file", {"path": "hello.txt"})
                assert "hello from the workspace" in str(result.content[0])
            else:
                assert {"add_content", "search"} <= set(names)


def test_mcpmux_builtin_refuses_a_too_wide_root_unless_told(tmp_path: Path) -> None:
    import os
    import subprocess

    env = dict(os.environ, HOME=str(tmp_path / "home"))
    refused = subprocess.run(
        [MCPMUX, "builtin", "workspace", "--root", "/"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        env=env, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "refuses to serve the configured root '/'" in refused.stderr
    served = subprocess.run(
        [MCPMUX, "builtin", "workspace", "--root", "/", "--allow-wide-root"], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert served.returncode == 0, served.stderr
