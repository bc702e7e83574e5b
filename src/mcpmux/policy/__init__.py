"""Guard: allow/deny, approval, pinned tool definitions, the poisoning scanner, audit."""

from mcpmux.policy.approval import Answer, ApprovalRequest, Approvals, Approver
from mcpmux.policy.audit import AuditLog, AuditRow
from mcpmux.policy.chained import APPROVAL_META, ChainedApprovals
from mcpmux.policy.guard import Exposure, Guard, Suspicion
from mcpmux.policy.pins import Pin, PinBook, definition_hash
from mcpmux.policy.rules import Decision, Rules
from mcpmux.policy.scanner import Finding, scan_tool, scan_tools, suspect
from mcpmux.policy.scope import ToolScope, agent_scope
from mcpmux.policy.store import StateStore

__all__ = [
    "APPROVAL_META",
    "Answer",
    "ApprovalRequest",
    "Approvals",
    "Approver",
    "AuditLog",
    "AuditRow",
    "ChainedApprovals",
    "Decision",
    "Exposure",
    "Finding",
    "Guard",
    "Pin",
    "PinBook",
    "Rules",
    "StateStore",
    "Suspicion",
    "ToolScope",
    "agent_scope",
    "definition_hash",
    "scan_tool",
    "scan_tools",
    "suspect",
]
