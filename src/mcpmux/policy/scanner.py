"""The poisoning scanner: hidden instructions in tool definitions, found before a model reads them.

Every string of a definition is untrusted text (DESIGN section 6): the name, title and description,
and everything in the schemas (descriptions, titles, enum values, defaults, property names). The
rules (:mod:`mcpmux.policy._scan_rules`) look for instruction markup, concealment phrases,
sensitive paths, invisible or bidi Unicode, exfiltration hints, mentions of other servers' tools and
encoded blobs. A ``high`` finding quarantines the tool (the guard acts on it); ``medium`` and
``low`` are shown by ``mcpmux scan``.

::

    findings = scan_tools(tools, server="notes", other_tools=["mail:send_email"])
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import weakref
from collections.abc import Iterable, Iterator, Sequence, Set
from dataclasses import asdict, dataclass
from typing import Any, Literal

import mcp_types as types

from mcpmux.manager import ToolInfo
from mcpmux.manager.registry import IndexVersion, ToolSnapshot
from mcpmux.policy import _scan_rules as rules
from mcpmux.policy._mentions import MentionMatcher, MentionSearch, is_distinctive, might_mention

__all__ = ["SEVERITIES", "Finding", "Severity", "scan_tool", "scan_tools", "suspect"]

Severity = Literal["low", "medium", "high"]
SEVERITIES: tuple[Severity, ...] = ("low", "medium", "high")
"""Severities, mildest first."""
_SKIPPED_KEYS = frozenset({"pattern", "format", "$schema", "$id", "$ref", "type"})
_MAX_DECODED_CHARS = 4096
CACHED_TEXT_CHARS = 512
CACHED_TEXTS = 8192


@dataclass(frozen=True, slots=True)
class Finding:
    """One suspicious spot in a tool definition.

    Attributes:
        server: the server that offers the tool.
        tool: the tool's own name on that server.
        severity: ``high`` quarantines the tool; ``medium`` and ``low`` are reported only.
        rule: what was found (``markup``, ``concealment``, ``sensitive-path``, ``invisible-unicode``,
            ``exfiltration``, ``shadowing``, ``other-tool``, ``model-directive``, ``encoded-blob``).
        message: a sentence a person can act on.
        location: where in the definition (``description``, ``inputSchema.properties.path.description``;
            a property name is ``inputSchema.properties.path#key``).
        excerpt: the text around the match, invisible characters shown as ``<U+202E>``.
    """

    server: str
    tool: str
    severity: Severity
    rule: str
    message: str
    location: str
    excerpt: str

    def to_json(self) -> dict[str, str]:
        """The finding as JSON-ready data (the ``--json`` schema of ``mcpmux scan``)."""
        return asdict(self)


def scan_tool(
    tool: ToolInfo | types.Tool | dict[str, Any], *, server: str, other_tools: Iterable[str] = ()
) -> list[Finding]:
    """Every finding in one tool definition, most severe first.

    Args:
        tool: the definition, as the manager indexes it, as the SDK model, or as JSON.
        server: the server that offers it.
        other_tools: names of OTHER servers' tools, canonical (``mail:send_email``) or bare; a
            description that mentions them is flagged (cross-tool shadowing).
    """
    definition = _as_json(tool)
    return _scan(definition, server, rules.mention_search(other_tools, own=str(definition.get("name", ""))))


def _scan(definition: dict[str, Any], server: str, others: MentionSearch | None) -> list[Finding]:
    name = str(definition.get("name", ""))
    found: dict[tuple[str, str], Finding] = {}
    for location, text in _strings(definition, quiet=_QUIET):
        for hit in _check(text, others):
            finding = Finding(server, name, hit.severity, hit.rule, hit.message, location, hit.excerpt)
            key = (hit.rule, location)
            if key not in found or _rank(finding) > _rank(found[key]):
                found[key] = finding
    return sorted(found.values(), key=lambda finding: (-_rank(finding), finding.location, finding.rule))


def scan_tools(
    tools: Iterable[ToolInfo | types.Tool | dict[str, Any]], *, server: str, other_tools: Iterable[str] = ()
) -> list[Finding]:
    """Every finding in the tools of one server; a tool mentioning a sibling on the same server is fine."""
    definitions = [_as_json(tool) for tool in tools]
    own = {str(definition.get("name", "")) for definition in definitions}
    others = [name for name in other_tools if name.rpartition(":")[2] not in own]
    matcher = MentionMatcher(candidate for name in others for candidate in (name, name.rpartition(":")[2]))
    findings: list[Finding] = []
    for definition in definitions:
        name = str(definition.get("name", ""))
        search = functools.partial(matcher.search, accept=name.__ne__) if matcher else None
        findings += _scan(definition, server, search)
    return findings


def suspect(tool: ToolInfo, everyone: Sequence[ToolInfo]) -> str | None:
    """Why ``tool`` should be quarantined (its first high finding), or ``None``; fits ``Guard(suspicion=)``.

    ``everyone`` is the whole index: the tools of other servers are the names a poisoned
    description might shadow. The names are indexed once per version of the registry's tools
    (a :class:`~mcpmux.manager.registry.ToolSnapshot`), so scanning a whole index is linear.
    """
    for finding in _scan(_as_json(tool), tool.server, _mentions_of(everyone).search_for(tool)):
        if finding.severity == "high":
            return f"scanner: {finding.message} in {finding.location}: {finding.excerpt}"
    return None


class _IndexMentions:
    """Every distinctive name of one index of tools, with the tools offering it."""

    __slots__ = ("_matcher", "_offered", "_siblings", "_tools")

    def __init__(self, everyone: Iterable[ToolInfo]) -> None:
        self._tools = _by_server(everyone)
        self._offered: dict[str, frozenset[tuple[str, str]]] = {}
        self._siblings: dict[str, frozenset[str]] = {}
        offered: dict[str, set[tuple[str, str]]] = {}
        for server, infos in self._tools.items():
            self._siblings[server] = frozenset(info.tool for info in infos)
            for info in infos:
                for candidate in _candidates(info):
                    offered.setdefault(candidate, set()).add((server, info.tool))
        self._offered = {candidate: frozenset(offers) for candidate, offers in offered.items()}
        self._matcher = MentionMatcher(self._offered)

    def updated(self, everyone: Iterable[ToolInfo]) -> _IndexMentions:
        """The mentions of ``everyone``, derived from these when few servers changed (a re-list).

        A server changed when its tools are not the very objects indexed here (the registry hands
        out the same :class:`ToolInfo` until a server re-lists); only its names are taken out and
        put back. Many changed servers: built anew.
        """
        tools = _by_server(everyone)
        changed = [s for s in tools.keys() | self._tools.keys() if not _same(tools.get(s, ()), self._tools.get(s, ()))]
        if len(changed) * 4 > len(tools):
            return _IndexMentions(everyone)
        new = _IndexMentions(())
        new._tools, new._offered, new._siblings = tools, dict(self._offered), dict(self._siblings)
        touched: dict[str, set[tuple[str, str]]] = {}
        for server in changed:
            new._siblings.pop(server, None)
            for infos, adding in ((self._tools.get(server, ()), False), (tools.get(server, ()), True)):
                for info in infos:
                    for candidate in _candidates(info):
                        if candidate not in touched:
                            touched[candidate] = set(self._offered.get(candidate, ()))
                        if adding:
                            touched[candidate].add((server, info.tool))
                        else:
                            touched[candidate].discard((server, info.tool))
            if server in tools:
                new._siblings[server] = frozenset(info.tool for info in tools[server])
        added, removed = [], []
        for candidate, offers in touched.items():
            was = candidate in self._offered
            if offers:
                new._offered[candidate] = frozenset(offers)
                if not was:
                    added.append(candidate)
            else:
                new._offered.pop(candidate, None)
                if was:
                    removed.append(candidate)
        new._matcher = self._matcher.changed(added, removed)
        return new

    def search_for(self, tool: ToolInfo) -> MentionSearch | None:
        """The search for names ``tool`` must not mention: other servers' tools that its own server lacks."""
        if not self._matcher:
            return None
        server, own, siblings = tool.server, tool.tool, self._siblings.get(tool.server, frozenset())

        def foreign(candidate: str) -> bool:
            offers = self._offered[candidate]
            return candidate != own and any(s != server and name not in siblings for s, name in offers)

        return functools.partial(self._matcher.search, accept=foreign)


def _by_server(everyone: Iterable[ToolInfo]) -> dict[str, tuple[ToolInfo, ...]]:
    grouped: dict[str, list[ToolInfo]] = {}
    for info in everyone:
        grouped.setdefault(info.server, []).append(info)
    return {server: tuple(infos) for server, infos in grouped.items()}


def _same(these: Sequence[ToolInfo], those: Sequence[ToolInfo]) -> bool:
    # Identity, not equality: the objects of the older index are alive (it holds them), so a new
    # object never has an old one's identity; equal definitions re-listed count as changed (harmless).
    return len(these) == len(those) and all(a is b for a, b in zip(these, those, strict=True))


def _candidates(info: ToolInfo) -> set[str]:
    """The distinctive names a text may mention ``info`` by (canonical and bare)."""
    names = {info.name, info.name.rpartition(":")[2], info.tool, info.tool.rpartition(":")[2]}
    return {name for name in names if is_distinctive(name)}


_BY_VERSION: weakref.WeakKeyDictionary[IndexVersion, _IndexMentions] = weakref.WeakKeyDictionary()
_LATEST: list[_IndexMentions] = []  # the mentions built last: a re-list derives its own from them


def _mentions_of(everyone: Sequence[ToolInfo]) -> _IndexMentions:
    if not isinstance(everyone, ToolSnapshot):
        return _IndexMentions(everyone)
    mentions = _BY_VERSION.get(everyone.version)
    if mentions is None:
        mentions = _LATEST[0].updated(everyone) if _LATEST else _IndexMentions(everyone)
        _BY_VERSION[everyone.version] = mentions
        _LATEST[:] = [mentions]
    return mentions


# Short strings known to have no hits whatever the other tools are (keys, "object", "string", plain
# descriptions): a definition's walk skips them without a call. Bounded: emptied when full.
_QUIET: set[str] = set()


def _check(text: str, others: MentionSearch | None) -> Iterable[rules.Hit]:
    if len(text) > CACHED_TEXT_CHARS:
        scanned = _TextScan.of(text)
    else:
        scanned = _scan_text(text)
        if scanned.settled == ():
            if len(_QUIET) >= CACHED_TEXTS:
                _QUIET.clear()
            _QUIET.add(text)
    if scanned.settled is not None:
        return scanned.settled
    return _hits(text, scanned, others)


def _hits(text: str, scanned: _TextScan, others: MentionSearch | None) -> Iterator[rules.Hit]:
    yield from scanned.hits
    yield from rules.mentions(text, others)
    if scanned.hidden:
        for hit in (*scanned.hidden_hits, *rules.mentions(scanned.hidden, others)):
            yield rules.Hit("high", hit.rule, f"hidden (Unicode tag characters): {hit.message}", hit.excerpt)
    for blob, decoded, decoded_hits in scanned.blobs:
        inner = list(decoded_hits) or (list(rules.mentions(decoded, others)) if decoded else [])
        if inner:
            yield rules.Hit("high", inner[0].rule, f"base64-encoded: {inner[0].message}", inner[0].excerpt)
        else:
            yield rules.Hit("medium", "encoded-blob", "a long base64-looking blob", rules.excerpt(blob, 0, len(blob)))


@dataclass(frozen=True, slots=True)
class _TextScan:
    """What the rules find in one string whatever the other tools are (all but the mentions).

    ``settled`` is every hit when no tool name can be mentioned in the string (it has none of
    the characters every name worth looking for has, nor hidden or encoded text): most keys and
    short values of a schema.
    """

    hits: tuple[rules.Hit, ...]
    hidden: str
    hidden_hits: tuple[rules.Hit, ...]
    blobs: tuple[tuple[str, str | None, tuple[rules.Hit, ...]], ...]
    settled: tuple[rules.Hit, ...] | None = None

    @classmethod
    def of(cls, text: str) -> _TextScan:
        hidden = rules.tag_text(text)
        decoded = [(blob, _decode(blob)) for blob in rules.blobs(text)]
        scanned = cls(
            tuple(rules.text_hits(text)),
            hidden,
            tuple(rules.text_hits(hidden)) if hidden else (),
            tuple((blob, text, tuple(rules.text_hits(text)) if text else ()) for blob, text in decoded),
        )
        if hidden or any(text for _, text in decoded) or might_mention(text):
            return scanned
        return dataclasses.replace(scanned, settled=tuple(_hits(text, scanned, None)))


@functools.lru_cache(maxsize=CACHED_TEXTS)
def _scan_text(text: str) -> _TextScan:
    # Definitions repeat their strings (keys, "type", common property descriptions): scan each once.
    return _TextScan.of(text)


def _decode(blob: str) -> str | None:
    try:
        raw = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True)[:_MAX_DECODED_CHARS]
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return text if all(char.isprintable() or char.isspace() for char in text) else None


def _as_json(tool: ToolInfo | types.Tool | dict[str, Any]) -> dict[str, Any]:
    if isinstance(tool, dict):
        return tool
    if isinstance(tool, ToolInfo):
        return _as_json(tool.definition)
    dumped: dict[str, Any] = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def _strings(value: Any, location: str = "", *, quiet: Set[str] = frozenset()) -> list[tuple[str, str]]:
    """Every string of a JSON value with its location; keys of objects too (``path#key``).

    Strings in ``quiet`` are left out.
    """
    found: list[tuple[str, str]] = []
    _collect(value, location, found, quiet)
    return found


def _collect(value: Any, location: str, found: list[tuple[str, str]], quiet: Set[str]) -> None:
    # A plain recursive function: recursive generators cost a frame resumption per level and string.
    if isinstance(value, str):
        if value not in quiet:
            found.append((location, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = f"{location}.{key}" if location else str(key)
            if key not in quiet:
                found.append((f"{inner}#key", str(key)))
            if key in _SKIPPED_KEYS:
                continue
            if isinstance(item, str):  # most values: no call for them
                if item not in quiet:
                    found.append((inner, item))
            elif isinstance(item, dict | list):
                _collect(item, inner, found, quiet)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _collect(item, f"{location}[{index}]", found, quiet)


def _rank(finding: Finding) -> int:
    return SEVERITIES.index(finding.severity)
