"""The OAuth of one HTTP server's MCP traffic, for the transports: ``auth_for(server)``."""

from __future__ import annotations

from mcpmux.auth.broker import BrokeredAuth, TokenBroker
from mcpmux.auth.netguard import policy_for
from mcpmux.auth.vault import AuthRecord, open_vault
from mcpmux.config.models import NetworkServerConfig, SseServerConfig, StreamableHttpServerConfig

__all__ = ["auth_for"]


def auth_for(server: NetworkServerConfig) -> BrokeredAuth | None:
    """The ``httpx2`` auth of ``server``: its OAuth tokens, or ``None`` when it does not use OAuth.

    A server uses OAuth when it has an ``auth`` block, or when someone ran ``mcpmux login`` for it
    and it sets no ``Authorization`` header of its own.
    """
    if not isinstance(server, StreamableHttpServerConfig | SseServerConfig):
        return None
    vault = open_vault()
    own_header = any(key.lower() == "authorization" for key in server.headers)
    if server.auth is None and (own_header or server.name not in vault.servers()):
        return None
    broker = TokenBroker(server.name, server.url, vault, policy_for(server), verify_tls=server.verify_tls)
    bootstrap = None
    if server.auth is not None and server.auth.grant == "client_credentials":

        async def bootstrap() -> AuthRecord:
            from mcpmux.auth.login import login

            return await login(server, vault)

    return BrokeredAuth(broker, bootstrap)
