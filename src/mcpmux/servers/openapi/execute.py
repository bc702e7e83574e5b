"""Execute one :class:`~mcpmux.servers.openapi.convert.Operation` as an HTTP request with httpx.

The request is built from the operation's bindings, never from the caller's text: path values are
percent-encoded whole (``../admin`` cannot climb, ``//evil.example`` cannot change the host), the
scheme and host always come from the source's base URL, redirects are never followed (a 3xx is the
answer), and the caller cannot set the source's credentials or the framing headers. Where the base
URL came from the document rather than the user, every request first checks that its host resolves
only to public addresses (no loopback, private, link-local or metadata address: server-side
request forgery), and then connects to the address it checked (the ``Host`` header and TLS server
name stay the host's), so a name that answers differently the second time (DNS rebinding) cannot
steer the connection somewhere private. The answer is read up to a size cap; a non-2xx status is a tool error with the
status and an excerpt of the body.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import re
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
import httpx
from mcp_types import CallToolResult, ImageContent, TextContent

from mcpmux.config.models import OpenAPIAuth
from mcpmux.servers.openapi.convert import Operation, ParamBinding

__all__ = ["EXCERPT_CHARS", "HttpTarget", "OpenAPIExecutor", "is_public_address", "origin_of"]

logger = logging.getLogger(__name__)

EXCERPT_CHARS = 2_000


@dataclass(frozen=True)
class HttpTarget:
    """Where an OpenAPI source's requests go and how they authenticate.

    Attributes:
        base_url: the service URL (scheme, host, base path).
        explicit: the user chose ``base_url``: every request goes there (operation-level servers of
            the document are ignored) and it is trusted.
        allow_private: requests to document-chosen hosts may reach non-public addresses.
        trusted_origin: ``(scheme, host, port)`` the user chose by fetching the document from it;
            document-chosen URLs on that origin are trusted.
        auth: the source's credentials, or ``None``.
        api_key: ``(name, location)`` for an ``api_key`` auth without its own.
        headers: extra headers sent with every request.
    """

    base_url: str
    explicit: bool = False
    allow_private: bool = False
    trusted_origin: tuple[str, str, int] | None = None
    auth: OpenAPIAuth | None = None
    api_key: tuple[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)


class OpenAPIExecutor:
    """Runs operations against one target with one ``httpx.AsyncClient`` (owned by the caller)."""

    def __init__(self, server: str, target: HttpTarget, client: httpx.AsyncClient, max_response_bytes: int) -> None:
        self.server, self.target, self.client = server, target, client
        self.max_response_bytes = max_response_bytes

    async def call(self, operation: Operation, arguments: dict[str, Any]) -> CallToolResult:
        """Send ``operation`` with ``arguments`` and return the answer as a tool result (never raises
        for a failure of the service: that is an ``isError`` result)."""
        problem = _argument_problem(operation, arguments)
        if problem is not None:
            return _error(problem)
        target = self.target
        base = operation.servers[0] if operation.servers and not target.explicit else target.base_url
        url = base.rstrip("/") + "/" + _fill_path(operation.path, operation.params, arguments).lstrip("/")
        shown = f"{operation.method.upper()} {url}"
        trusted = target.explicit or target.allow_private or origin_of(base) == target.trusted_origin
        address: str | None = None
        if not trusted:
            address, refusal = await _checked_address(url)
            if refusal is not None:
                return _error(f"refused {shown}: {refusal}")
        try:
            request = self._request(operation, url, arguments)
            if address is not None:
                request = _pinned(request, address)
            return await self._send(request, shown)
        except httpx.TimeoutException as exc:
            return _error(f"{self.server}: {shown} timed out ({type(exc).__name__}); is the service overloaded?")
        except httpx.ConnectError as exc:
            return _error(f"{self.server}: {shown} failed: cannot connect ({exc}); is the service running?")
        except httpx.HTTPError as exc:
            return _error(f"{self.server}: {shown} failed: {type(exc).__name__}: {exc}")
        except (TypeError, ValueError) as exc:
            return _error(f"cannot build {shown}: {exc}")

    def _request(self, operation: Operation, url: str, arguments: dict[str, Any]) -> httpx.Request:
        query: list[tuple[str, str | int | float | bool | None]] = []
        headers: dict[str, str] = {"Accept": "application/json, */*;q=0.5"}
        cookies: dict[str, str] = {}
        for param in operation.params:
            if param.arg not in arguments or arguments[param.arg] is None:
                continue
            value = arguments[param.arg]
            if param.location == "query":
                query.extend(_query_pairs(param.name, value))
            elif param.location == "header":
                headers[param.name] = _text(value)
            elif param.location == "cookie":
                cookies[param.name] = _text(value)
        headers.update(self.target.headers)
        self._authenticate(headers, query, cookies)
        if cookies:
            headers["Cookie"] = "; ".join(f"{k}={quote(v, safe='')}" for k, v in cookies.items())
        content, body_headers = _body(operation, arguments)
        headers.update(body_headers)
        return self.client.build_request(operation.method.upper(), url, params=query, headers=headers, content=content)

    def _authenticate(
        self, headers: dict[str, str], query: list[tuple[str, str | int | float | bool | None]], cookies: dict[str, str]
    ) -> None:
        auth = self.target.auth
        if auth is None:
            return
        if auth.type == "bearer" and auth.token is not None:
            headers["Authorization"] = f"Bearer {auth.token.get_secret_value()}"
        elif auth.type == "basic" and auth.password is not None:
            pair = f"{auth.username}:{auth.password.get_secret_value()}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        elif auth.type == "api_key" and auth.value is not None:
            name, location = auth.name, auth.location
            if (name is None or location is None) and self.target.api_key is not None:
                name, location = name or self.target.api_key[0], location or self.target.api_key[1]  # type: ignore[assignment]
            secret = auth.value.get_secret_value()
            if location == "query":
                query.append((name or "api_key", secret))
            elif location == "cookie":
                cookies[name or "api_key"] = secret
            else:
                headers[name or "X-API-Key"] = secret

    async def _send(self, request: httpx.Request, shown: str) -> CallToolResult:
        response = await self.client.send(request, stream=True, follow_redirects=False)
        try:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self.max_response_bytes:
                    return _error(f"{shown}: the answer is larger than {self.max_response_bytes} bytes; not read")
        finally:
            await response.aclose()
        return _result(response, bytes(body), shown)


def _argument_problem(operation: Operation, arguments: dict[str, Any]) -> str | None:
    missing = [name for name in operation.required if arguments.get(name) is None]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    known = set(operation.input_schema.get("properties", {}))
    unknown = sorted(set(arguments) - known)
    if unknown:
        return f"unknown argument(s): {', '.join(unknown)} (known: {', '.join(sorted(known)) or 'none'})"
    return None


def _fill_path(template: str, params: tuple[ParamBinding, ...], arguments: dict[str, Any]) -> str:
    values = {p.name: arguments.get(p.arg) for p in params if p.location == "path"}

    def one(match: re.Match[str]) -> str:
        text = _text(values.get(match.group(1), ""))
        # quote() leaves '.', so a whole '.' or '..' would still climb a level: encode it too.
        encoded = quote(text, safe="")
        return encoded.replace(".", "%2E") if text.strip(".") == "" else encoded

    return re.sub(r"{([^{}]+)}", one, template)


def _query_pairs(name: str, value: Any) -> list[tuple[str, str | int | float | bool | None]]:
    if isinstance(value, dict):  # style form, explode: each property is a parameter of its own
        return [(str(k), _text(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [(name, _text(v)) for v in value]
    return [(name, _text(value))]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _body(operation: Operation, arguments: dict[str, Any]) -> tuple[bytes | None, dict[str, str]]:
    binding = operation.body
    if binding is None:
        return None, {}
    if binding.arg is not None:
        if binding.arg not in arguments:
            return None, {}
        value: Any = arguments[binding.arg]
    else:
        value = {name: arguments[name] for name in binding.fields if name in arguments}
        if not value and operation.method not in ("post", "put", "patch"):
            return None, {}
    media = binding.media_type.split(";")[0].strip().lower()
    if "json" in media:
        return json.dumps(value).encode("utf-8"), {"Content-Type": binding.media_type}
    if media == "application/x-www-form-urlencoded" and isinstance(value, dict):
        request = httpx.Request("POST", "http://form.invalid/", data={k: _text(v) for k, v in value.items()})
        return request.read(), {"Content-Type": request.headers["Content-Type"]}
    if media == "multipart/form-data" and isinstance(value, dict):
        files = [(k, (None, _text(v).encode("utf-8"))) for k, v in value.items()]
        request = httpx.Request("POST", "http://form.invalid/", files=files)
        return request.read(), {"Content-Type": request.headers["Content-Type"]}
    return _text(value).encode("utf-8"), {"Content-Type": binding.media_type}


def _result(response: httpx.Response, body: bytes, shown: str) -> CallToolResult:
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    text = body.decode(response.encoding or "utf-8", errors="replace")
    parsed: Any = None
    if "json" in media or (not media and body[:1] in (b"{", b"[")):
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
    if not response.is_success:
        excerpt = text[:EXCERPT_CHARS] + ("..." if len(text) > EXCERPT_CHARS else "")
        reason = response.reason_phrase or ""
        message = f"HTTP {response.status_code} {reason} from {shown}: {excerpt}".rstrip(": ")
        structured = {"status": response.status_code, "body": parsed if parsed is not None else excerpt}
        location = response.headers.get("location")
        if location and response.is_redirect:
            structured["location"] = location
            message += f" (Location: {location}; redirects are not followed)"
        return CallToolResult(content=[TextContent(text=message)], structured_content=structured, is_error=True)
    if media.startswith("image/"):
        data = base64.b64encode(body).decode("ascii")
        return CallToolResult(content=[ImageContent(data=data, mime_type=media)])
    if parsed is not None:
        structured = parsed if isinstance(parsed, dict) else {"result": parsed}
        return CallToolResult(content=[TextContent(text=text)], structured_content=structured)
    if media and not (media.startswith("text/") or "xml" in media or "json" in media) and _binary(body):
        return CallToolResult(content=[TextContent(text=f"{len(body)} bytes of {media} from {shown}")])
    return CallToolResult(content=[TextContent(text=text)])


def _binary(body: bytes) -> bool:
    return b"\x00" in body[:4096]


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=message)], is_error=True)


def origin_of(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``url``, the port filled in from the scheme."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def is_public_address(address: str) -> bool:
    """``True`` for a globally routable address (not loopback, private, link-local, reserved, ...)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def _checked_address(url: str) -> tuple[str | None, str | None]:
    """``(address, None)``: the public address to connect to for ``url``'s host; or ``(None, why)``
    when that host may not be reached from a document-chosen URL (it resolves to any non-public one)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return None, f"cannot resolve {host!r}: {exc}"
    addresses = [str(info[4][0]) for info in infos]
    private = sorted({address for address in addresses if not is_public_address(address)})
    if private:
        return None, (
            f"the document's server {host!r} resolves to a non-public address ({', '.join(private)}); "
            "set base_url (or allow_private_network: true) to call it"
        )
    if not addresses:
        return None, f"cannot resolve {host!r}: no address"
    return addresses[0], None


def _pinned(request: httpx.Request, address: str) -> httpx.Request:
    """``request`` sent to ``address`` (the one that was checked) instead of its host's name, which
    httpx would resolve again; the ``Host`` header and the TLS server name (SNI and certificate
    check) stay the host's."""
    host = request.url.host
    if host == address.split("%", 1)[0]:
        return request
    request.url = request.url.copy_with(host=address.split("%", 1)[0])
    request.extensions = {**request.extensions, "sni_hostname": host}
    return request
