"""Many servers: supervision, one namespaced registry, routing, the catalog cache, events.

Names load on first use (see ``mcpmux._lazy``): importing the package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.manager.compat import (
        MCPClient,
        MCPManager,
    )
    from mcpmux.manager.events import (
        Event,
        ListChanged,
        StateChanged,
    )
    from mcpmux.manager.manager import (
        Manager,
    )
    from mcpmux.manager.models import (
        PromptInfo,
        ResourceInfo,
        ServerState,
        ServerStatus,
        ToolInfo,
        Transition,
    )
    from mcpmux.manager.registry import (
        Registry,
        ServerCatalog,
    )
    from mcpmux.manager.supervisor import (
        Supervisor,
    )

__all__ = [
    "Event",
    "ListChanged",
    "MCPClient",
    "MCPManager",
    "Manager",
    "PromptInfo",
    "Registry",
    "ResourceInfo",
    "ServerCatalog",
    "ServerState",
    "ServerStatus",
    "StateChanged",
    "Supervisor",
    "ToolInfo",
    "Transition",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Event": "mcpmux.manager.events",
        "ListChanged": "mcpmux.manager.events",
        "MCPClient": "mcpmux.manager.compat",
        "MCPManager": "mcpmux.manager.compat",
        "Manager": "mcpmux.manager.manager",
        "PromptInfo": "mcpmux.manager.models",
        "Registry": "mcpmux.manager.registry",
        "ResourceInfo": "mcpmux.manager.models",
        "ServerCatalog": "mcpmux.manager.registry",
        "ServerState": "mcpmux.manager.models",
        "ServerStatus": "mcpmux.manager.models",
        "StateChanged": "mcpmux.manager.events",
        "Supervisor": "mcpmux.manager.supervisor",
        "ToolInfo": "mcpmux.manager.models",
        "Transition": "mcpmux.manager.models",
    },
)
