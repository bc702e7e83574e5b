"""One live MCP server: session, protocol era, deadlines, callbacks and error mapping.

Names load on first use (see ``mcpmux._lazy``): importing the package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.connection.connection import (
        CLIENT_INFO as CLIENT_INFO,
        MAX_PAGES as MAX_PAGES,
        Connection as Connection,
        TransportFactory as TransportFactory,
    )
    from mcpmux.connection.info import (
        ConnectionInfo as ConnectionInfo,
    )
    from mcpmux.connection.results import (
        ToolResult as ToolResult,
        raise_for_tool_error as raise_for_tool_error,
    )
    from mcpmux.types.callbacks import (
        ClientCallbacks as ClientCallbacks,
        ElicitationCallback as ElicitationCallback,
        ListChangedCallback as ListChangedCallback,
        ListKind as ListKind,
        LogCallback as LogCallback,
        ProgressCallback as ProgressCallback,
        ResourceUpdatedCallback as ResourceUpdatedCallback,
        RootsCallback as RootsCallback,
        SamplingCallback as SamplingCallback,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)
