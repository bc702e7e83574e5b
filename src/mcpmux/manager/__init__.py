"""Many servers: supervision, one namespaced registry, routing, the catalog cache, events.

Names load on first use (see ``mcpmux._lazy``): importing the package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.manager.compat import (
        MCPClient as MCPClient,
        MCPManager as MCPManager,
    )
    from mcpmux.manager.manager import (
        Manager as Manager,
    )
    from mcpmux.manager.registry import (
        Registry as Registry,
        ServerCatalog as ServerCatalog,
    )
    from mcpmux.manager.supervisor import (
        Supervisor as Supervisor,
    )
    from mcpmux.types.events import (
        Event as Event,
        ListChanged as ListChanged,
        StateChanged as StateChanged,
    )
    from mcpmux.types.models import (
        PromptInfo as PromptInfo,
        ResourceInfo as ResourceInfo,
        ServerState as ServerState,
        ServerStatus as ServerStatus,
        ToolInfo as ToolInfo,
        Transition as Transition,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)
