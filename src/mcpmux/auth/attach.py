"""The OAuth of one HTTP server's MCP traffic, for the transports: ``auth_for(server)``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx2

from mcpmux.auth.broker import BrokeredAuth, TokenBroker
from mcpmux.auth.netguard import policy_for
from mcpmux.auth.vault import AuthRecord, open_vault
from mcpmux.config.models import NetworkServerConfig, SseServerConfig, StreamableHttpServerConfig

__all__ = ["Browser", "auth_for", "enable_interactive_login"]

Browser = Callable[[str], Awaitable[None]]

_browser: Browser | None = None


def enable_interactive_login(browser: Browser | None) -> None:
    """Let sessions of this process log in when a server asks (401 with no usable login, 403 step-up).

    For faces with a person at hand (chat, a conformance client): ``browser`` shows the URL. ``None``
    turns it off again (the default: servers then go to ``needs-auth`` and say ``mcpmux login NAME``).
    """
    global _browser
    _browser = browser


def auth_for(server: NetworkServerConfig) -> BrokeredAuth | None:
    """The ``httpx2`` auth of ``server``: its OAuth tokens, or ``None`` when it does not use OAuth.

    A server uses OAuth when it has an ``auth`` block, or when it sets no ``Authorization`` header of
    its own and someone ran ``mcpmux login`` for it (or this process logs in on demand).
    """
    if not isinstance(server, StreamableHttpServerConfig | SseServerConfig):
        return None
    vault = open_vault()
    own_header = any(key.lower() == "authorization" for key in server.headers)
    if server.auth is None and (own_header or (server.name not in vault.servers() and _browser is None)):
        return None
    broker = TokenBroker(server.name, server.url, vault, policy_for(server), verify_tls=server.verify_tls)
    bootstrap = None
    if server.auth is not None and server.auth.grant in ("client_credentials", "jwt_bearer"):

        async def bootstrap() -> AuthRecord:
            from mcpmux.auth.login import login

            return await login(server, vault)

    interactive = None
    browser = _browser
    if browser is not None and (server.auth is None or server.auth.grant == "authorization_code"):

        async def interactive(request: httpx2.Request, response: httpx2.Response) -> AuthRecord:
            from mcpmux.auth.login import login

            return await login(server, vault, browser=browser, challenge=(request, response))

    return BrokeredAuth(broker, bootstrap, interactive)
