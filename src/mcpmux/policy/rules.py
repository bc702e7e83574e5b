"""Allow/deny lists and approval rules: what may be listed, and which calls need a person's yes.

Patterns are globs over canonical names (``filesystem:read_*``); in a server's own ``security:``
block they may also name the server's bare tool names (``read_*``). Deny wins over allow.
A call is decided in this order: deny lists, then the first matching ``approval_rules`` entry
(argument-aware; caller-aware with ``callers``, see :mod:`mcpmux.policy.callers`), then
``require_approval`` (``true``, ``false`` or patterns), then the tool's
``destructiveHint`` (asks unless ``require_approval: false`` was set explicitly), else allow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from mcpmux.config.models import ApprovalRule, SecurityConfig, ServerConfig, ServerSecurity
from mcpmux.policy.callers import matching_caller
from mcpmux.types.models import ToolInfo

__all__ = ["Action", "Decision", "Rules"]

Action = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the rules say about one call (or one listing), and which rule said it."""

    action: Action
    rule: str
    by_person: bool = False  # a person approved it (asked now, or a remembered "always")


class Rules:
    """The allow/deny and approval rules of the global ``security`` block and every server's own."""

    def __init__(self, security: SecurityConfig, servers: Mapping[str, ServerConfig]) -> None:
        self._global = security
        self._servers = {name: s.security or ServerSecurity() for name, s in servers.items()}

    def listing(self, tool: ToolInfo) -> Decision:
        """Whether ``tool`` may be listed and called at all (deny wins; an allow list excludes the rest)."""
        local = self._servers.get(tool.server, ServerSecurity())
        for where, patterns in (("security", self._global.denied_tools), (tool.server, local.denied_tools)):
            if (match := _first_match(tool, patterns or (), local=where != "security")) is not None:
                return Decision("deny", f"{_block(where)}.denied_tools {match!r}")
        for where, allowed in (("security", self._global.allowed_tools), (tool.server, local.allowed_tools)):
            if allowed is not None and _first_match(tool, allowed, local=where != "security") is None:
                return Decision("deny", f"{_block(where)}.allowed_tools (no pattern matches)")
        return Decision("allow", "allowed")

    def reads_arguments(self, server: str) -> bool:
        """Whether a call's decision on ``server`` may depend on its arguments or its caller (an approval
        rule may match them)."""
        local = self._servers.get(server)
        return bool(self._global.approval_rules or (local is not None and local.approval_rules))

    def call(self, tool: ToolInfo, arguments: Mapping[str, Any], caller: str | None = None) -> Decision:
        """Allow, ask or deny one call of ``tool`` with ``arguments`` by ``caller``."""
        listed = self.listing(tool)
        if listed.action == "deny":
            return listed
        local = self._servers.get(tool.server, ServerSecurity())
        for where, rules in ((tool.server, local.approval_rules), ("security", self._global.approval_rules)):
            for index, rule in enumerate(rules):
                who = matching_caller(caller, rule.callers) if rule.callers else ""
                if who is not None and _rule_matches(rule, tool, arguments, local=where != "security"):
                    named = f" (caller {who!r})" if who else ""
                    return Decision(rule.action, f"{_block(where)}.approval_rules[{index}]{named}")
        return self._require_approval(tool, local)

    def _require_approval(self, tool: ToolInfo, local: ServerSecurity) -> Decision:
        setting, where = local.require_approval, tool.server
        explicit = setting is not None
        if setting is None:
            setting, where = self._global.require_approval, "security"
            explicit = "require_approval" in self._global.model_fields_set
        if setting is True:
            return Decision("ask", f"{_block(where)}.require_approval")
        if isinstance(setting, tuple) and (match := _first_match(tool, setting, local=where != "security")):
            return Decision("ask", f"{_block(where)}.require_approval {match!r}")
        destructive = bool((tool.annotations or {}).get("destructiveHint"))
        if destructive and not (explicit and setting is False):
            return Decision("ask", "destructiveHint annotation")
        return Decision("allow", f"{_block(where)}.require_approval" if explicit else "default")


def _block(where: str) -> str:
    return "security" if where == "security" else f"servers.{where}.security"


def _first_match(tool: ToolInfo, patterns: tuple[str, ...], *, local: bool) -> str | None:
    subjects = _subjects(tool)
    for pattern in patterns:
        if any(fnmatchcase(subject, pattern) for subject in subjects) or (local and fnmatchcase(tool.tool, pattern)):
            return pattern
    return None


def _subjects(tool: ToolInfo) -> tuple[str, ...]:
    """The names a global pattern is matched against: the canonical name, and for a tool without a
    namespace (its server's prefix is empty) ``SERVER:TOOL`` too, so ``fs:*`` covers server fs
    whatever its prefix. Such a tool's bare name counts only when it has no ``:``: a server may not
    name its tool ``other:read_x`` and pass for server ``other`` (or slip past a deny of ``other:*``)."""
    if tool.name != tool.tool:
        return (tool.name,)
    qualified = f"{tool.server}:{tool.tool}"
    return (qualified,) if ":" in tool.tool else (tool.name, qualified)


def _rule_matches(rule: ApprovalRule, tool: ToolInfo, arguments: Mapping[str, Any], *, local: bool) -> bool:
    if _first_match(tool, (rule.tools,), local=local) is None:
        return False
    for key, pattern in rule.arguments.items():
        if key not in arguments or not fnmatchcase(_as_text(arguments[key]), pattern):
            return False
    return True


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
