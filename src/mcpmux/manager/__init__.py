"""Many servers: supervision, one namespaced registry, routing, the catalog cache, events."""

from mcpmux.manager.compat import MCPClient, MCPManager
from mcpmux.manager.events import Event, ListChanged, StateChanged
from mcpmux.manager.manager import Manager
from mcpmux.manager.models import PromptInfo, ResourceInfo, ServerState, ServerStatus, ToolInfo, Transition
from mcpmux.manager.registry import Registry, ServerCatalog
from mcpmux.manager.supervisor import Supervisor

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
