"""What a user plugs into a connection: answers to server requests and observers of notifications.

Every callback receives the configured server name first, so one object can serve many
connections (the manager shares one set across servers). A callback left ``None`` is not
advertised as a client capability; a server that asks anyway gets a JSON-RPC error saying the
feature is not supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import mcp_types as types

__all__ = [
    "ClientCallbacks",
    "ElicitationCallback",
    "ListChangedCallback",
    "ListKind",
    "LogCallback",
    "ProgressCallback",
    "ResourceUpdatedCallback",
    "RootsCallback",
    "SamplingCallback",
]

ListKind = Literal["tools", "resources", "prompts"]


class SamplingCallback(Protocol):
    """Answers ``sampling/createMessage``: run the model, or return ``ErrorData`` to decline."""

    async def __call__(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData: ...


class ElicitationCallback(Protocol):
    """Answers ``elicitation/create`` in form mode (``ElicitRequestFormParams``) and URL mode
    (``ElicitRequestURLParams``) with accept, decline or cancel."""

    async def __call__(
        self, server: str, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData: ...


class RootsCallback(Protocol):
    """Answers ``roots/list`` with the directories the server may work in."""

    async def __call__(self, server: str) -> types.ListRootsResult | types.ErrorData: ...


class LogCallback(Protocol):
    """Observes ``notifications/message`` (also logged to ``mcpmux.server.<name>``)."""

    async def __call__(self, server: str, params: types.LoggingMessageNotificationParams) -> None: ...


class ListChangedCallback(Protocol):
    """Observes ``notifications/{tools,resources,prompts}/list_changed``."""

    async def __call__(self, server: str, kind: ListKind) -> None: ...


class ResourceUpdatedCallback(Protocol):
    """Observes ``notifications/resources/updated`` for a subscribed resource."""

    async def __call__(self, server: str, uri: str) -> None: ...


class ProgressCallback(Protocol):
    """Observes every ``notifications/progress`` of this connection (per-call ones go to ``on_progress``)."""

    async def __call__(self, server: str, params: types.ProgressNotificationParams) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientCallbacks:
    """The pluggable client side of one or many connections; every field is optional."""

    sampling: SamplingCallback | None = None
    elicitation: ElicitationCallback | None = None
    roots: RootsCallback | None = None
    on_log: LogCallback | None = None
    on_list_changed: ListChangedCallback | None = None
    on_resource_updated: ResourceUpdatedCallback | None = None
    on_progress: ProgressCallback | None = None
