"""Allow/deny lists and approval rules, decided from configuration alone."""

from __future__ import annotations

from typing import Any

from mcpmux.config.models import ApprovalRule, SecurityConfig, ServerSecurity, StdioServerConfig
from mcpmux.policy.rules import Rules
from mcpmux.types.models import ToolInfo


def tool(name: str, *, annotations: dict[str, Any] | None = None) -> ToolInfo:
    server, _, bare = name.partition(":")
    return ToolInfo.make(name=name, server=server, tool=bare, description="", input_schema={}, annotations=annotations)


def rules(security: SecurityConfig, **servers: ServerSecurity) -> Rules:
    configs = {n: StdioServerConfig(name=n, command="x", security=s) for n, s in servers.items()}
    configs.setdefault("fs", StdioServerConfig(name="fs", command="x"))
    return Rules(security, configs)


def test_deny_wins_over_allow_and_names_the_rule() -> None:
    decided = rules(SecurityConfig(allowed_tools=("fs:*",), denied_tools=("fs:delete_*",))).listing(tool("fs:delete_x"))
    assert (decided.action, decided.rule) == ("deny", "security.denied_tools 'fs:delete_*'")


def test_an_allow_list_excludes_everything_it_does_not_match() -> None:
    r = rules(SecurityConfig(allowed_tools=("fs:read_*", "fs:list_directory")))
    assert r.listing(tool("fs:read_file")).action == "allow"
    assert r.listing(tool("fs:write_file")).rule == "security.allowed_tools (no pattern matches)"


def test_a_servers_own_block_may_use_bare_tool_names() -> None:
    r = rules(SecurityConfig(), fs=ServerSecurity(denied_tools=("write_*",)))
    assert r.listing(tool("fs:write_file")).rule == "servers.fs.security.denied_tools 'write_*'"
    assert r.listing(tool("other:write_file")).action == "allow"


def test_patterns_never_confuse_similar_server_names() -> None:
    r = rules(SecurityConfig(denied_tools=("web:*",)))
    assert r.listing(tool("web:search")).action == "deny"
    assert r.listing(tool("web_scraper:search")).action == "allow"


def test_destructive_tools_ask_by_default_and_read_only_ones_do_not() -> None:
    r = rules(SecurityConfig())
    assert r.call(tool("fs:rm", annotations={"destructiveHint": True}), {}).action == "ask"
    assert r.call(tool("fs:read", annotations={"readOnlyHint": True}), {}).action == "allow"


def test_an_explicit_require_approval_false_silences_destructive_hints() -> None:
    r = rules(SecurityConfig.model_validate({"require_approval": False}))
    assert r.call(tool("fs:rm", annotations={"destructiveHint": True}), {}).action == "allow"


def test_require_approval_patterns_ask_only_for_matches() -> None:
    r = rules(SecurityConfig(require_approval=("fs:write_*",)))
    assert r.call(tool("fs:write_file"), {}).rule == "security.require_approval 'fs:write_*'"
    assert r.call(tool("fs:read_file"), {}).action == "allow"


def test_argument_aware_rules_come_first_and_the_first_match_wins() -> None:
    security = SecurityConfig(
        require_approval=True,
        approval_rules=(
            ApprovalRule(tools="fs:read_*", action="allow"),
            ApprovalRule(tools="fs:write_*", arguments={"path": "/tmp/*"}, action="allow"),
            ApprovalRule(tools="fs:write_*", arguments={"path": "/etc/*"}, action="deny"),
        ),
    )
    r = rules(security)
    assert r.call(tool("fs:read_file"), {"path": "/etc/passwd"}).action == "allow"
    assert r.call(tool("fs:write_file"), {"path": "/tmp/x"}).rule == "security.approval_rules[1]"
    assert r.call(tool("fs:write_file"), {"path": "/etc/hosts"}).action == "deny"
    assert r.call(tool("fs:write_file"), {"path": "/home/x"}).rule == "security.require_approval"
    assert r.call(tool("fs:write_file"), {}).action == "ask"  # a rule on a missing argument does not match
