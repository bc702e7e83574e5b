"""Choose the protocol era of a connection: the 2025-11-25 handshake or the 2026-07-28 stateless era.

``auto`` is handshake-first, not probe-first. Every server in the wild answers ``initialize``;
a ``server/discover`` probe costs an extra round trip on each of them and, on a server that ignores
unknown methods, the SDK's fixed 10 s wait (measured: 10.01 s against 0.02 s). The handshake era
also keeps what a host needs on every transport: server-to-client requests (sampling, elicitation,
roots) and unsolicited list_changed notifications. ``auto`` follows what a modern-only server says
to ``initialize``, each positive evidence that it speaks only the stateless era, and then discovers
at the best mutual version:

- ``-32022`` (unsupported protocol version) naming a modern version;
- ``-32020`` (header mismatch): only a stateless-era server checks ``MCP-Protocol-Version`` there;
- ``-32601`` (method not found): a server without the handshake;
- a result claiming a modern version (the conformance suite's 2026 mock servers do all four).

``2026-07-28`` pins the stateless era and never falls back; ``2025-11-25`` pins the handshake.
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
    except _ModernVersionClaimed as claim:
        if choice != "auto":
            raise ProtocolVersionMismatch(server, LATEST_HANDSHAKE_VERSION, claim.version) from claim
        await _discover(session, server, refused=f"initialize answered with version {claim.version}")
    except MCPError as exc:
        if choice == "auto" and _says_modern_only(exc):
            await _discover(session, server, refused=f"initialize answered {exc.code} {exc.message!r}")
            return
        if exc.code == types.UNSUPPORTED_PROTOCOL_VERSION:
            raise ProtocolVersionMismatch(server, LATEST_HANDSHAKE_VERSION, _offered(exc)) from exc
        raise


class _ModernVersionClaimed(Exception):
    """An ``initialize`` result naming a stateless-era version: the server speaks that era."""

    def __init__(self, version: str) -> None:
        super().__init__(version)
        self.version = version


async def _handshake(session: ClientSession, server: str) -> None:
    try:
        await session.initialize()
    except RuntimeError as exc:
        text = str(exc)
        if not text.startswith(_UNSUPPORTED_PREFIX):
            raise
        version = text[len(_UNSUPPORTED_PREFIX) :]
        if is_modern(version):
            raise _ModernVersionClaimed(version) from exc
        raise ProtocolVersionMismatch(server, LATEST_HANDSHAKE_VERSION, version) from exc


async def _discover(session: ClientSession, server: str, *, refused: str = "") -> None:
    """Discover; ``refused`` says how the server answered ``initialize`` when this is the fallback."""
    try:
        await session.discover()
    except MCPError as exc:
        if exc.code == types.METHOD_NOT_FOUND:
            offered = (
                f"neither era ({refused}; server/discover answered {exc.code} {exc.message!r})"
                if refused
                else "only the initialize handshake (no server/discover)"
            )
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


def _says_modern_only(exc: MCPError) -> bool:
    """Whether an error answer to ``initialize`` shows a server of the stateless era only."""
    if exc.code in (types.HEADER_MISMATCH, types.METHOD_NOT_FOUND):
        return True
    if exc.code != types.UNSUPPORTED_PROTOCOL_VERSION:
        return False
    return any(v in MODERN_PROTOCOL_VERSIONS for v in _supported(exc) or ())


def _offered(exc: MCPError) -> str:
    supported = _supported(exc)
    return ", ".join(supported) if supported else exc.message
