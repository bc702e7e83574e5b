"""Every private name of a dependency that mcpmux uses, one module per dependency (STYLE 19).

A dependency's public API is used wherever it has one. What remains is read here and nowhere
else, each name with a comment saying why it is needed and which public API would replace it:

- :mod:`mcpmux._private.mcp_sdk`: the official MCP SDK (``mcp``);
- :mod:`mcpmux._private.uvicorn`: uvicorn's httptools protocol and server;
- :mod:`mcpmux._private.anyio`: the asyncio writer inside anyio's stream of a child's stdin.

``tests/test_private_apis.py`` checks every name and signature listed in a module's
``PRIVATE_NAMES`` against the installed dependency, so a release that moves one fails there, by
name and version, and not somewhere in the gateway. The modules import nothing of one another,
and this package imports none of them.
"""
