"""Old import paths that still work, with a :class:`DeprecationWarning`, after the one step of moves (issue 38).

Modules moved to the folders of DESIGN section 1 (the shared HTTP edge to ``mcpmux.web``, the team
server to ``mcpmux.serve``, plain types to ``mcpmux.types``, ...). A program that imports an old path
(``import mcpmux.gateway.tokens``, ``from mcpmux.database import Database``) gets the module at its
new path, the very same object, and one warning naming the new path. :data:`MODULES` is the table;
:class:`OldPaths`, put on :data:`sys.meta_path` by ``import mcpmux``, answers only those names, so
it costs nothing on any other import. Names that a package exported and that now live in another
package (``mcpmux.gateway.serve``) are in :data:`NAMES`, served by the old package's
``__getattr__`` through :func:`moved_name`. Both import the new place at run time, which the layer
contract does not see: a shim may point up (``mcpmux.gateway`` to ``mcpmux.serve``) for that reason alone.

The old paths go away in the release after next; the table is their one list.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import importlib.abc  # a structural type here: importing it at run time costs more than this whole module

__all__ = ["MODULES", "NAMES", "OldPaths", "install", "moved_name", "warn_moved"]

MODULES: dict[str, str] = {
    "mcpmux.bridge.agent": "mcpmux.agents.agent",
    "mcpmux.bridge.ask": "mcpmux.agents.ask",
    "mcpmux.daemon.attach": "mcpmux.attach.attach",
    "mcpmux.daemon.client": "mcpmux.attach.client",
    "mcpmux.daemon.thin": "mcpmux.attach.thin",
    "mcpmux.daemon.paths": "mcpmux.attach.paths",
    "mcpmux.daemon.wire": "mcpmux.attach.wire",
    "mcpmux.manager.usage": "mcpmux.processes.usage",
    "mcpmux.servers._reaper": "mcpmux.processes._reaper",
    "mcpmux.servers.confinement": "mcpmux.processes.confinement",
    "mcpmux.transports.sandbox": "mcpmux.processes.sandbox",
    "mcpmux.transports._landlock_exec": "mcpmux.processes._landlock_exec",
    "mcpmux.gateway.run": "mcpmux.serve.run",
    "mcpmux.gateway.cluster": "mcpmux.serve.cluster",
    "mcpmux.storage": "mcpmux.store.sqlite",
    "mcpmux.database": "mcpmux.store.database",
    "mcpmux.manager.models": "mcpmux.types.models",
    "mcpmux.connection.callbacks": "mcpmux.types.callbacks",
    "mcpmux.manager.events": "mcpmux.types.events",
    "mcpmux.json_shapes": "mcpmux.types.json_shapes",
    "mcpmux.gateway.security": "mcpmux.web.security",
    "mcpmux.gateway.tokens": "mcpmux.web.tokens",
    "mcpmux.gateway.origins": "mcpmux.web.origins",
    "mcpmux.gateway.slowloris": "mcpmux.web.slowloris",
    "mcpmux.gateway.oauth_resource": "mcpmux.web.oauth_resource",
    "mcpmux.gateway.introspection": "mcpmux.web.introspection",
    "mcpmux.gateway.caller": "mcpmux.web.caller",
    "mcpmux.api.problems": "mcpmux.web.problems",
}
"""Old module path -> new module path."""

NAMES: dict[str, dict[str, str]] = {
    "mcpmux.gateway": {"ServeOptions": "mcpmux.serve", "serve": "mcpmux.serve", "http_security": "mcpmux.serve"},
}
"""Old package -> {name it exported: the package that exports it now}."""


def warn_moved(old: str, new: str) -> None:
    """The one warning: what moved, where to, and that the old path goes away."""
    warnings.warn(
        f"{old} moved to {new}; import it from there (the old path goes away in a later release)",
        DeprecationWarning,
        stacklevel=3,
    )


def moved_name(package: str, name: str) -> Any:
    """``package.name`` from the package that exports it now (:data:`NAMES`), with the warning."""
    new = NAMES[package][name]
    warn_moved(f"{package}.{name}", f"{new}.{name}")
    value = getattr(importlib.import_module(new), name)
    setattr(sys.modules[package], name, value)  # one warning: ``from package import name`` looks twice
    return value


class OldPaths:
    """Imports an old module path as the module at its new path (:data:`MODULES`): a meta path finder and its loader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("importlib.abc.Loader", self))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MODULES[spec.name]
        warn_moved(spec.name, new)
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set the old path's spec on the shared module: it keeps its own.
        assert module.__spec__ is not None
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Puts :class:`OldPaths` on :data:`sys.meta_path` once per process."""
    if not any(isinstance(finder, OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(OldPaths())
