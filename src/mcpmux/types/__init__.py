"""The shared vocabulary: tool, resource and prompt infos, server states, events, client callbacks, JSON shapes.

Faces import these plain types from here, never from the manager or the connection. Names load on first
use (see ``mcpmux._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
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
    from mcpmux.types.events import (
        Event as Event,
        EventHub as EventHub,
        ListChanged as ListChanged,
        StateChanged as StateChanged,
    )
    from mcpmux.types.json_shapes import JSONObject as JSONObject
    from mcpmux.types.models import (
        PromptInfo as PromptInfo,
        ResourceInfo as ResourceInfo,
        ServerState as ServerState,
        ServerStatus as ServerStatus,
        ToolInfo as ToolInfo,
        Transition as Transition,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)
