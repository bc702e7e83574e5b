"""Whether an HTTP MCP server asks for OAuth: ``mcpmux add NAME -t http URL`` offers ``mcpmux login``."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import httpx2

__all__ = ["DETECT_TIMEOUT_S", "asks_for_oauth"]

logger = logging.getLogger(__name__)

DETECT_TIMEOUT_S = 5.0
"""A server that does not answer by then is left alone (it may simply not be running yet)."""

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mcpmux", "version": "add"}},
}


async def asks_for_oauth(
    url: str, headers: Mapping[str, str] | None = None, *, timeout_s: float = DETECT_TIMEOUT_S, verify_tls: bool = True
) -> bool:
    """Whether ``url`` answers an ``initialize`` with 401 and an OAuth challenge (MCP authorization).

    The challenge must name the ``Bearer`` or ``DPoP`` scheme; a ``resource_metadata`` parameter or
    protected resource metadata at the well-known path (RFC 9728) confirms it is MCP's OAuth and not
    some other login. Network errors and timeouts answer ``False``: adding a server never fails for them.
    """
    request_headers = {"Accept": "application/json, text/event-stream", **(headers or {})}
    try:
        async with httpx2.AsyncClient(timeout=timeout_s, verify=verify_tls, follow_redirects=False) as http:
            response = await http.post(url, json=_INITIALIZE, headers=request_headers)
            challenge = response.headers.get("WWW-Authenticate", "")
            if response.status_code != 401 or not challenge.lower().lstrip().startswith(("bearer", "dpop")):
                return False
            if "resource_metadata" in challenge:
                return True
            parsed = httpx2.URL(url)
            metadata = parsed.copy_with(path="/.well-known/oauth-protected-resource" + parsed.path.rstrip("/"))
            return (await http.get(metadata)).status_code == 200
    except httpx2.HTTPError as exc:
        logger.debug("oauth detection: %s did not answer: %r", url, exc)
        return False
