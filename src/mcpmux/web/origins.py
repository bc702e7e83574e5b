"""``Host`` and ``Origin`` values parsed and compared exactly: scheme, host and port, nothing by prefix.

A value is first parsed the way a browser or an HTTP server would read it; anything that is not
plainly ``host[:port]`` (a ``Host`` header) or ``scheme://host[:port]`` (an ``Origin``) is refused:
userinfo (``http://localhost:80@evil.example``), a path, whitespace or control characters, an
unbracketed IPv6 address, the opaque origin ``null``. Host names compare case-insensitively and
without brackets (``[::1]`` is ``::1``); nothing else is normalised, so ``localhost.`` (trailing
dot) and ``localhost.evil.example`` are other hosts.

A rule is written like the value it accepts; its port may be ``*`` (any port). A ``Host`` rule
without a port accepts only a ``Host`` without one; an ``Origin`` rule without a port means the
scheme's default port, as does an ``Origin`` without one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ANY_PORT", "Address", "AddressRules", "parse_host", "parse_origin"]

ANY_PORT = -1
DEFAULT_PORTS = {"http": 80, "https": 443}
CACHE_LIMIT = 64
MAX_PORT = 65535
# RFC 3986 authority without userinfo: an IP literal in brackets or a reg-name, then an optional port.
_AUTHORITY = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)(?::(?P<port>[0-9]{1,5}|\*))?")


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed ``Host`` (``scheme`` empty) or ``Origin``; ``port`` is ``None`` when not given."""

    scheme: str
    host: str
    port: int | None


def _plain(value: str) -> bool:
    return bool(value) and value.isascii() and value.isprintable() and " " not in value and "\\" not in value


def _authority(netloc: str, scheme: str, *, wildcard: bool) -> Address | None:
    match = _AUTHORITY.fullmatch(netloc)
    if match is None:
        return None
    host, port = match["host"].lower(), match["port"]
    if port == "*":
        return Address(scheme, host.strip("[]"), ANY_PORT) if wildcard else None
    if port is not None and int(port) > MAX_PORT:
        return None
    return Address(scheme, host.strip("[]"), int(port) if port is not None else None)


def parse_host(value: str, *, wildcard: bool = False) -> Address | None:
    """The ``Host`` header ``value`` as an :class:`Address`, or ``None`` if it is malformed.

    ``wildcard`` accepts ``:*`` as the port (for rules).
    """
    if not _plain(value):
        return None
    return _authority(value, "", wildcard=wildcard)


def parse_origin(value: str, *, wildcard: bool = False) -> Address | None:
    """The ``Origin`` header ``value`` as an :class:`Address`, or ``None`` (``null``, malformed).

    ``wildcard`` accepts ``:*`` as the port (for rules).
    """
    if not _plain(value):
        return None
    scheme, sep, rest = value.partition("://")
    scheme = scheme.lower()
    if not sep or not scheme.isalpha() or "/" in rest:
        return None
    address = _authority(rest, scheme, wildcard=wildcard)
    if address is None or address.port is not None or scheme not in DEFAULT_PORTS:
        return address
    return Address(scheme, address.host, DEFAULT_PORTS[scheme])


class AddressRules:
    """A list of accepted addresses, compiled once; :meth:`allows` caches the values it accepted.

    Raises:
        ValueError: a rule is malformed (named in the message).
    """

    def __init__(self, rules: Iterable[str], *, origin: bool) -> None:
        self._parse = parse_origin if origin else parse_host
        self._rules: set[tuple[str, str, int | None]] = set()
        for rule in rules:
            address = self._parse(rule, wildcard=True)
            if address is None:
                raise ValueError(f"{rule!r} is not a valid {'origin' if origin else 'host'} rule")
            self._rules.add((address.scheme, address.host, address.port))
        self._accepted: set[str] = set()

    def allows(self, value: str) -> bool:
        """Whether the header ``value`` names an accepted address exactly."""
        if value in self._accepted:
            return True
        address = self._parse(value)
        if address is None:
            return False
        rules = self._rules
        ok = (address.scheme, address.host, address.port) in rules or (address.scheme, address.host, ANY_PORT) in rules
        if ok and len(self._accepted) < CACHE_LIMIT:
            self._accepted.add(value)
        return ok
