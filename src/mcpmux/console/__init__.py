"""The web console at ``/ui``: servers, tools, resources, prompts, approvals, audit and sources in a browser.

Served by ``mcpmux serve --http`` and ``mcpmux api`` (``--no-ui`` turns it off); see docs/console.md.
"""

from mcpmux.console.app import PREFIX, build_console

__all__ = ["PREFIX", "build_console"]
