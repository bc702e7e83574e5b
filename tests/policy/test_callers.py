"""Approval rules for some callers: ``callers`` globs over the identity, ``group:NAME`` over verified groups."""

from __future__ import annotations

import mcp_types as types

from mcpmux.config.models import ApprovalRule, SecurityConfig
from mcpmux.policy.callers import Caller, matching_caller
from mcpmux.policy.rules import Rules
from mcpmux.types.models import ToolInfo

TOOL = ToolInfo("fs:write", "fs", types.Tool(name="write", input_schema={"type": "object"}))


def test_a_caller_with_groups_reads_as_its_identity_and_groups_and_keeps_both() -> None:
    alice = Caller("token:oauth:alice", ["dev", "admins", "dev"])
    assert alice == "token:oauth:alice (groups: admins, dev)"
    assert (alice.identity, alice.groups) == ("token:oauth:alice", ("admins", "dev"))
    assert Caller("token:oauth:bob") == "token:oauth:bob"


def test_patterns_match_the_identity_or_a_group_by_glob() -> None:
    alice = Caller("token:oauth:alice", ["team-red"])
    assert matching_caller(alice, ["group:team-*"]) == "group:team-*"
    assert matching_caller(alice, ["token:oauth:*"]) == "token:oauth:*"
    assert matching_caller(alice, ["token:oauth:alice (groups: team-red)"]) is None  # the identity, not the text
    assert matching_caller("agent:triage", ["agent:*"]) == "agent:*"
    assert matching_caller(None, ["*"]) is None


def test_the_first_rule_for_the_caller_decides_and_the_rule_names_who_matched() -> None:
    rules = Rules(
        SecurityConfig(
            require_approval=False,
            approval_rules=(
                ApprovalRule(tools="fs:*", callers=("group:interns",), action="deny"),
                ApprovalRule(tools="fs:*", callers=("token:oauth:*",), action="ask"),
            ),
        ),
        {},
    )
    intern = rules.call(TOOL, {}, Caller("token:oauth:ivy", ["interns"]))
    assert intern.action == "deny" and intern.rule == "security.approval_rules[0] (caller 'group:interns')"
    assert rules.call(TOOL, {}, Caller("token:oauth:bob", ["staff"])).action == "ask"
    assert rules.call(TOOL, {}, "chat").action == "allow"
