"""``python -m mcpmux``."""

from mcpmux.cli.main import main

main()
