"""The field suite: real MCP servers from npm and PyPI through every face of mcpmux, and faults on them."""
