"""Which URLs an OAuth step may fetch or send a person to.

Rules (issue 18, security): an authorization server's endpoints and metadata are https, except on
loopback; metadata URLs that resolve to private, loopback or link-local addresses are refused (SSRF:
a hostile resource server pointing mcpmux at a cloud metadata service or an intranet host) unless
the server's ``auth.allow_private_addresses`` is set, or the URL is on the host the user configured
for the server itself.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import anyio
import httpx2

from mcpmux.config.models import OAuthConfig, SseServerConfig, StreamableHttpServerConfig
from mcpmux.errors import OAuthError

__all__ = ["GuardedTransport", "UrlPolicy", "is_loopback_host", "policy_for"]

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface (by address or the name ``localhost``)."""
    address = _address(host)
    return host.lower() in _LOOPBACK_NAMES if address is None else address.is_loopback


def _is_private(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


@dataclass(frozen=True)
class UrlPolicy:
    """The checks of one server's OAuth traffic.

    Attributes:
        server: the configured server name (for errors).
        resource_host: the host of the server's configured URL (the user chose it: always allowed).
        allow_private: ``auth.allow_private_addresses`` of the server.
    """

    server: str
    resource_host: str
    allow_private: bool = False

    def check_scheme(self, url: httpx2.URL) -> None:
        """Refuse anything but https, except http on loopback.

        Raises:
            OAuthError: the URL is not allowed.
        """
        if url.scheme == "https" or (url.scheme == "http" and is_loopback_host(url.host)):
            return
        raise OAuthError(
            self.server,
            str(url.copy_with(query=None)),
            f"refused an OAuth URL with scheme {url.scheme!r}: only https is allowed (http only on loopback)",
            hint="the server's OAuth metadata is misconfigured or hostile; ask its operator",
        )

    async def check(self, url: httpx2.URL) -> None:
        """Refuse a URL that breaks the rules; resolves host names to judge their addresses.

        Raises:
            OAuthError: the URL is not allowed.
        """
        self.check_scheme(url)
        host = url.host
        if self.allow_private or host.lower() == self.resource_host.lower():
            return
        literal = _address(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                infos = await anyio.getaddrinfo(host, url.port or 443, type=socket.SOCK_STREAM)
            except OSError as exc:
                where = str(url.copy_with(query=None))
                raise OAuthError(self.server, where, f"cannot resolve {host!r}: {exc}") from exc
            addresses = [ip for ip in (_address(str(info[4][0])) for info in infos) if ip is not None]
        for address in addresses:
            if _is_private(address):
                raise OAuthError(
                    self.server,
                    str(url.copy_with(query=None)),
                    f"refused to fetch {host!r}: it is a private, loopback or link-local address ({address}), "
                    "not the server's own host (SSRF guard)",
                    hint="if this authorization server is really yours, set "
                    "`auth: {allow_private_addresses: true}` on the server",
                )


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that checks every OAuth request against a :class:`UrlPolicy` first."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, policy: UrlPolicy) -> None:
        self._inner, self._policy = inner, policy

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await self._policy.check(request.url)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def policy_for(server: StreamableHttpServerConfig | SseServerConfig) -> UrlPolicy:
    """The URL rules of ``server``'s OAuth traffic."""
    auth = server.auth or OAuthConfig()
    return UrlPolicy(server.name, httpx2.URL(server.url).host, auth.allow_private_addresses)
