"""``python -m mcpmux.servers KIND [--root DIR] [--database FILE] [--allow-wide-root]``: serve on stdio."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from mcpmux.errors import ConfigError
from mcpmux.servers import BUILTIN_KINDS, run_stdio


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, log to stderr, and serve; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m mcpmux.servers", description=__doc__)
    parser.add_argument("kind", choices=[*BUILTIN_KINDS, "content-store"], help="which built-in server")
    parser.add_argument("--root", type=Path, default=None, help="directory to confine file access to")
    parser.add_argument("--database", type=Path, default=None, help="content store SQLite file or :memory:")
    parser.add_argument(
        "--allow-wide-root", action="store_true", help="serve / or the home directory itself (refused by default)"
    )
    parser.add_argument(
        "--inside-sandbox", action="store_true", help="the host runs this server inside its sandbox (for the status)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG (to stderr)")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG if args.verbose else logging.WARNING)
    try:
        run_stdio(
            args.kind,
            root=args.root,
            database=args.database,
            allow_wide_root=args.allow_wide_root,
            inside_sandbox=args.inside_sandbox,
        )
    except ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
