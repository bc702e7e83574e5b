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
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import mcp_types as types

from mcpmux.manager import ToolInfo
from mcpmux.policy import _scan_rules as rules

__all__ = ["SEVERITIES", "Finding", "Severity", "scan_tool", "scan_tools", "suspect"]

Severity = Literal["low", "medium", "high"]
SEVERITIES: tuple[Severity, ...] = ("low", "medium", "high")
"""Severities, mildest first."""
_SKIPPED_KEYS = frozenset({"pattern", "format", "$schema", "$id", "$ref", "type"})
_MAX_DECODED_CHARS = 4096


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
    name = str(definition.get("name", ""))
    others = rules.mention_pattern(other_tools, own=name)
    found: dict[tuple[str, str], Finding] = {}
    for location, text in _strings(definition):
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
    listed = list(tools)
    own = {str(_as_json(tool).get("name", "")) for tool in listed}
    others = [name for name in other_tools if name.rpartition(":")[2] not in own]
    return [finding for tool in listed for finding in scan_tool(tool, server=server, other_tools=others)]


def suspect(tool: ToolInfo, everyone: Sequence[ToolInfo]) -> str | None:
    """Why ``tool`` should be quarantined (its first high finding), or ``None``; fits ``Guard(suspicion=)``.

    ``everyone`` is the whole index: the tools of other servers are the names a poisoned
    description might shadow.
    """
    siblings = {info.tool for info in everyone if info.server == tool.server}
    others = [name for info in everyone if info.server != tool.server and info.tool not in siblings
              for name in (info.name, info.tool)]  # fmt: skip
    for finding in scan_tool(tool, server=tool.server, other_tools=others):
        if finding.severity == "high":
            return f"scanner: {finding.message} in {finding.location}: {finding.excerpt}"
    return None


def _check(text: str, others: re.Pattern[str] | None) -> Iterator[rules.Hit]:
    yield from rules.check_text(text, others)
    hidden = rules.tag_text(text)
    if hidden:
        for hit in rules.check_text(hidden, others):
            yield rules.Hit("high", hit.rule, f"hidden (Unicode tag characters): {hit.message}", hit.excerpt)
    for blob in rules.blobs(text):
        decoded = _decode(blob)
        inner = list(rules.check_text(decoded, others)) if decoded else []
        if inner:
            yield rules.Hit("high", inner[0].rule, f"base64-encoded: {inner[0].message}", inner[0].excerpt)
        else:
            yield rules.Hit("medium", "encoded-blob", "a long base64-looking blob", rules.excerpt(blob, 0, len(blob)))


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


def _strings(value: Any, location: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a JSON value with its location; keys of objects too (``path#key``)."""
    if isinstance(value, str):
        yield location, value
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = f"{location}.{key}" if location else str(key)
            yield f"{inner}#key", str(key)
            if key not in _SKIPPED_KEYS:
                yield from _strings(item, inner)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{location}[{index}]")


def _rank(finding: Finding) -> int:
    return SEVERITIES.index(finding.severity)
