"""Choose the protocol era of a connection: the 2025-11-25 handshake or the 2026-07-28 stateless era.

``auto`` is handshake-first, not probe-first. Every server in the wild answers ``initialize``;
a ``server/discover`` probe costs an extra round trip on each of them and, on a server that ignores
unknown methods, the SDK's fixed 10 s wait (measured: 10.01 s against 0.02 s). The handshake era
also keeps what a host needs on every transport: server-to-client requests (sampling, elicitation,
roots) and unsolicited list_changed notifications. A modern-only server answers the handshake with
``-32022`` naming its versions; that is positive evidence, and ``auto`` then discovers at the best
mutual version. ``2026-07-28`` pins the stateless era and never falls back.
"""

from __future__ import annotations

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcpmux.config.models import ProtocolChoice
from mcpmux.errors import ProtocolVersionMismatch

__all__ = ["is_modern", "negotiate"]

_UNSUPPORTED_PREFIX = "Unsupported protocol version from the server: "


def is_modern(version: str | None) -> bool:
    """Whether ``version`` is a stateless-era (2026-07-28 and later) protocol version."""
    return version in MODERN_PROTOCOL_VERSIONS


async def negotiate(session: ClientSession, server: str, choice: ProtocolChoice) -> None:
    """Run the handshake or discovery ``choice`` asks for on an entered ``session``.

    Raises:
        ProtocolVersionMismatch: the server shares no version of the chosen era with us.
        MCPError: the server rejected the handshake for another reason.
    """
    if choice == "2026-07-28":
        await _discover(session, server)
        return
    try:
        await _handshake(session, server)
    except MCPError as exc:
        if choice == "auto" and _mutual_modern(exc):
            await _discover(session, server)
            return
        if exc.code == types.UNSUPPORTED_PROTOCOL_VERSION:
            raise ProtocolVersionMismatch(server, LATEST_HANDSHAKE_VERSION, _offered(exc)) from exc
        raise


async def _handshake(session: ClientSession, server: str) -> None:
    try:
        await session.initialize()
    except RuntimeError as exc:
        text = str(exc)
        if not text.startswith(_UNSUPPORTED_PREFIX):
            raise
        raise ProtocolVersionMismatch(server, LATEST_HANDSHAKE_VERSION, text[len(_UNSUPPORTED_PREFIX) :]) from exc


async def _discover(session: ClientSession, server: str) -> None:
    try:
        await session.discover()
    except MCPError as exc:
        if exc.code == types.METHOD_NOT_FOUND:
            offered = "only the initialize handshake (no server/discover)"
            raise ProtocolVersionMismatch(server, LATEST_MODERN_VERSION, offered) from exc
        if exc.code == types.UNSUPPORTED_PROTOCOL_VERSION:
            raise ProtocolVersionMismatch(server, LATEST_MODERN_VERSION, _offered(exc)) from exc
        raise
    except RuntimeError as exc:  # adopt(): the discover result names no modern version we speak
        raise ProtocolVersionMismatch(server, LATEST_MODERN_VERSION, str(exc)) from exc


def _supported(exc: MCPError) -> list[str] | None:
    try:
        return types.UnsupportedProtocolVersionErrorData.model_validate(exc.error.data).supported
    except ValidationError:
        return None


def _mutual_modern(exc: MCPError) -> bool:
    if exc.code != types.UNSUPPORTED_PROTOCOL_VERSION:
        return False
    return any(v in MODERN_PROTOCOL_VERSIONS for v in _supported(exc) or ())


def _offered(exc: MCPError) -> str:
    supported = _supported(exc)
    return ", ".join(supported) if supported else exc.message
