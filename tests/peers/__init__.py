"""Real reference MCP peers (npm and PyPI), pinned here and installed by scripts/install-peers."""
