"""Provider names: the table between canonical ``server:tool`` names and what a provider accepts.

An LLM provider (or a downstream MCP client) sees tool names under rules of its own: OpenAI wants
``^[a-zA-Z0-9_-]{1,64}$``, Gemini a letter first, the MCP gateway ``[A-Za-z0-9_.-]{1,128}``. A
:class:`NameTable` maps every canonical name to one provider name and back. Routing goes through
the table, never by splitting a provider name, because ``a__b:c`` and ``a:b__c`` both read
``a__b__c``: such pairs are reported as :class:`~mcpmux.errors.NameCollision`, never confused.

A provider name depends only on its own canonical name (and the profile and separator), so the
table is the same across restarts and whatever order the servers are listed in.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mcpmux.canonical_names import CANONICAL_SEPARATOR, canonical_name
from mcpmux.errors import NameCollision, ToolNotFound

__all__ = ["DEFAULT_SEPARATOR", "PROFILES", "NameProfile", "NameTable", "get_profile", "provider_name"]

DEFAULT_SEPARATOR = "__"
HASH_HEX_CHARS = 8
START_PREFIX = "t_"
_SUGGESTIONS = 3


@dataclass(frozen=True, slots=True)
class NameProfile:
    """The name rules of one provider.

    Attributes:
        name: the profile's key in :data:`PROFILES`.
        allowed: the legal characters, as the body of a regex character class; must include
            ``0-9``, ``a-f``, ``t`` and ``_`` (hash suffixes and the ``t_`` prefix use them).
        max_length: the longest legal name, in characters (more than 10).
        first: the legal first characters (a character class body), or ``None`` for any allowed one.
    """

    name: str
    allowed: str
    max_length: int
    first: str | None = None
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _illegal: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        head = f"[{self.first}][{self.allowed}]{{0,{self.max_length - 1}}}"
        body = f"[{self.allowed}]{{1,{self.max_length}}}"
        object.__setattr__(self, "pattern", re.compile(head if self.first else body))
        object.__setattr__(self, "_illegal", re.compile(f"[^{self.allowed}]+"))
        # Shortened and unreadable names end in '_' + hex digits; prefixed ones start with 't_'.
        if self._illegal.search("0123456789abcdef_t") or self.max_length <= HASH_HEX_CHARS + len(START_PREFIX):
            raise ValueError(f"profile {self.name!r} must allow [0-9a-f_t] and more than 10 characters")

    def is_valid(self, name: str) -> bool:
        """Whether ``name`` is legal for this provider."""
        return self.pattern.fullmatch(name) is not None


# Gemini (FunctionDeclaration.name) documents a-z, A-Z, 0-9, '_', '.', '-' (newer docs also ':'),
# at most 64, starting with a letter or '_'. We take the safe subset: no ':' and a letter first.
PROFILES: Mapping[str, NameProfile] = MappingProxyType(
    {
        "openai": NameProfile("openai", "a-zA-Z0-9_-", 64),
        "anthropic": NameProfile("anthropic", "a-zA-Z0-9_-", 128),
        "gemini": NameProfile("gemini", "a-zA-Z0-9_.-", 64, first="a-zA-Z"),
        "mcp": NameProfile("mcp", "A-Za-z0-9_.-", 128),
    }
)


def get_profile(profile: str | NameProfile) -> NameProfile:
    """Return the profile named ``profile`` (or ``profile`` itself).

    Raises:
        ValueError: no such profile.
    """
    if isinstance(profile, NameProfile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown name profile {profile!r} (known: {', '.join(sorted(PROFILES))})") from None


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_HEX_CHARS]


def _map_part(part: str, profile: NameProfile) -> str:
    # Accents fold to their base letter (é -> e) so the name stays readable; other illegal runs
    # become one '_'. A part with nothing readable left keeps only a hash, so it is still distinct.
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", part) if not unicodedata.combining(ch))
    mapped = profile._illegal.sub("_", folded)
    return mapped if any(ch.isalnum() for ch in mapped) else _short_hash(part)


def provider_name(canonical: str, profile: str | NameProfile = "openai", *, separator: str = DEFAULT_SEPARATOR) -> str:
    """The provider name of one canonical name, on its own (no collision check).

    ``server:tool`` becomes ``server__tool``; characters the profile forbids are mapped to ``_``; a
    name that must start with a letter gets the prefix ``t_``; a name past the profile's limit is cut
    and ends with ``_`` plus 8 hex digits of the SHA-256 of the canonical name.

    Raises:
        ValueError: unknown profile, or a separator the profile does not allow.
    """
    rules = get_profile(profile)
    if not separator or rules._illegal.search(separator):
        raise ValueError(f"separator {separator!r} is not legal in {rules.name} names")
    # Server names cannot contain ':', so the first one ends the namespace.
    namespace, sep, item = canonical.partition(CANONICAL_SEPARATOR)
    parts = [namespace, item] if sep else [canonical]
    name = separator.join(_map_part(part, rules) for part in parts)
    if rules.first and not re.match(f"[{rules.first}]", name):
        name = START_PREFIX + name
    if len(name) > rules.max_length:
        name = f"{name[: rules.max_length - HASH_HEX_CHARS - 1]}_{_short_hash(canonical)}"
    return name


class NameTable:
    """The two-way map between canonical names and one profile's provider names.

    Args:
        names: canonical names (``server:tool``), or ``(namespace, tool)`` pairs.
        profile: a key of :data:`PROFILES` or a :class:`NameProfile`.
        separator: what joins namespace and tool in provider names.

    Raises:
        NameCollision: two canonical names map to one provider name (both named, sorted).
        ValueError: unknown profile or illegal separator.
    """

    def __init__(
        self,
        names: Iterable[str | tuple[str, str]],
        profile: str | NameProfile = "openai",
        *,
        separator: str = DEFAULT_SEPARATOR,
        kind: str = "tool",
    ) -> None:
        self.profile = get_profile(profile)
        self.separator, self.kind = separator, kind
        canonicals = sorted({n if isinstance(n, str) else canonical_name(*n) for n in names})
        self._to_provider: dict[str, str] = {}
        self._to_canonical: dict[str, str] = {}
        for canonical in canonicals:
            provider = provider_name(canonical, self.profile, separator=separator)
            if provider in self._to_canonical:
                first, second = sorted((self._to_canonical[provider], canonical))
                raise NameCollision(self.profile.name, provider, first, second)
            self._to_provider[canonical] = provider
            self._to_canonical[provider] = canonical

    def to_provider(self, canonical: str) -> str:
        """The provider name of ``canonical``.

        Raises:
            ToolNotFound: ``canonical`` is not in the table (closest canonical names suggested).
        """
        try:
            return self._to_provider[canonical]
        except KeyError:
            raise ToolNotFound(canonical, _closest(canonical, self._to_provider)) from None

    def to_canonical(self, provider: str) -> str:
        """The canonical name behind the provider name ``provider``.

        Raises:
            ToolNotFound: no tool (or :attr:`kind`) has that provider name (closest names suggested).
        """
        try:
            return self._to_canonical[provider]
        except KeyError:
            raise ToolNotFound(provider, _closest(provider, self._to_canonical), kind=self.kind) from None

    def __contains__(self, provider: object) -> bool:
        """Whether ``provider`` is a provider name in the table."""
        return provider in self._to_canonical

    def __len__(self) -> int:
        return len(self._to_canonical)

    def __iter__(self) -> Iterator[str]:
        """The provider names, in canonical-name order."""
        return iter(self._to_provider.values())

    def items(self) -> list[tuple[str, str]]:
        """Every ``(provider name, canonical name)`` pair, in canonical-name order."""
        return [(provider, canonical) for canonical, provider in self._to_provider.items()]

    def __repr__(self) -> str:
        return f"NameTable(profile={self.profile.name!r}, names={len(self)})"


def _closest(name: str, known: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(name, list(known), n=_SUGGESTIONS, cutoff=0.5)
