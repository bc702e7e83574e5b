"""What mcpmux derives from one server's configuration: its effective sandbox and its fingerprint.

Both are pure functions of the configuration, kept here (not beside their users in the manager
and the transports) so that light paths such as the fast ``mcpmux list`` can use them without
importing the MCP SDK.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import SecretStr

from mcpmux.config.models import (
    BuiltinServerConfig,
    SandboxConfig,
    SecurityConfig,
    ServerConfig,
    ServerSecurity,
    StdioServerConfig,
)
from mcpmux.types.json_shapes import JSONObject

__all__ = ["effective_policy", "effective_sandbox", "fingerprint", "with_effective_sandbox"]

_FINGERPRINT_DOMAIN = "mcpmux-catalog-v1"


def effective_sandbox(server: ServerConfig, security: SecurityConfig) -> SandboxConfig | None:
    """The sandbox ``server`` runs in: the global one with the server's explicitly set keys over it.

    A server's own ``sandbox:`` block that does not say ``enabled`` turns the sandbox on (asking
    for paths means asking for isolation). Returns ``None`` when it is not enabled, and for network
    servers (no process of ours to isolate). For a built-in server it isolates the commands its
    tools run (the workspace's ``execute_shell`` and ``execute_python``).
    """
    if not isinstance(server, StdioServerConfig | BuiltinServerConfig):
        return None
    merged = security.sandbox
    own = server.security.sandbox if server.security else None
    if own is not None:
        update = {"enabled": True} | {key: getattr(own, key) for key in own.model_fields_set}
        merged = merged.model_copy(update=update)
    return merged if merged.enabled else None


_NO_SANDBOX = SandboxConfig(enabled=False)
_ONLY_NO_SANDBOX = ServerSecurity(sandbox=_NO_SANDBOX)
"""A server with no ``security`` block, unsandboxed: the usual case, built once (frozen, so shared)."""


def with_effective_sandbox(server: ServerConfig, security: SecurityConfig) -> ServerConfig:
    """``server`` with :func:`effective_sandbox` as its own sandbox: what its transport enforces."""
    if not isinstance(server, StdioServerConfig | BuiltinServerConfig):
        return server
    sandbox = effective_sandbox(server, security) or _NO_SANDBOX
    own = server.security
    if own is None:
        # One copy per server, not three (50 servers start at once): the same model as
        # ServerSecurity().model_copy(update={"sandbox": sandbox}), fields set included.
        boxed = _ONLY_NO_SANDBOX if sandbox is _NO_SANDBOX else ServerSecurity(sandbox=sandbox)
    else:
        boxed = own.model_copy(update={"sandbox": sandbox})
    return server.model_copy(update={"security": boxed})


def effective_policy(security: SecurityConfig, servers: tuple[ServerConfig, ...] = ()) -> JSONObject:
    """What the guard actually does with these settings, in words: which calls it asks about,
    which tools it withholds, which servers have rules of their own.

    It follows the guard's order (``mcpmux.policy.rules``): deny lists, an allow list, the first
    matching ``approval_rules`` entry, ``require_approval``, then a tool's ``destructiveHint``,
    which asks unless ``require_approval: false`` is set explicitly.
    """
    setting = security.require_approval
    explicit = "require_approval" in security.model_fields_set
    asks: list[str] = []
    if security.approval_rules:
        asks.append(f"first, {len(security.approval_rules)} approval_rules decide by tool and arguments")
    if setting is True:
        asks.append("every other call")
    else:
        if isinstance(setting, tuple) and setting:
            asks.append(f"calls of tools matching {', '.join(setting)}")
        if not (explicit and setting is False):
            asks.append("calls of tools annotated destructiveHint (set require_approval: false to stop)")
    out: JSONObject = {
        "asks": asks or ["nothing: every allowed call runs"],
        "withholds": [f"tools matching {p}" for p in security.denied_tools]
        + ([] if security.allowed_tools is None else [f"every tool not matching {', '.join(security.allowed_tools)}"]),
        "pins": {"off": "nothing", "tofu": "each tool on first sight", "strict": "nothing until approved"}[
            security.pinning
        ],
    }
    own = [s.name for s in servers if s.security is not None]
    if own:
        out["servers_with_own_rules"] = own
    return out


def fingerprint(server: ServerConfig) -> str:
    """SHA-256 (hex) of the server's whole configuration, secret values included.

    A changed token or URL therefore invalidates the cached lists; only this hash is stored.
    """
    data = server.model_dump(mode="python")
    canonical = json.dumps(data, default=_reveal, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{_FINGERPRINT_DOMAIN}\n{canonical}".encode()).hexdigest()


def _reveal(value: object) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot fingerprint a {type(value).__name__}")
