"""``mcpmux builtin KIND``: serve a built-in server on stdio for any MCP host."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("builtin")
@click.argument("kind", type=click.Choice(["workspace", "content_store", "content-store"]))
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), help="Workspace root (default: .).")
@click.option("--database", type=click.Path(dir_okay=False, path_type=Path), help="Content store database file.")
@click.option("--allow-wide-root", is_flag=True, help="Serve / or your home directory itself (refused by default).")
def builtin(kind: str, root: Path | None, database: Path | None, allow_wide_root: bool) -> None:
    """Serve the built-in server KIND on stdio (stdout carries only MCP messages)."""
    from mcpmux.servers import run_stdio

    run_stdio(kind, root=root, database=database, allow_wide_root=allow_wide_root)
