"""Guard: allow/deny, approval, pinned tool definitions, the poisoning scanner, audit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.policy.approval import (
        Answer as Answer,
        ApprovalRequest as ApprovalRequest,
        Approvals as Approvals,
        Approver as Approver,
    )
    from mcpmux.policy.audit import (
        AuditLog as AuditLog,
        AuditRow as AuditRow,
    )
    from mcpmux.policy.chained import (
        APPROVAL_META as APPROVAL_META,
        ChainedApprovals as ChainedApprovals,
    )
    from mcpmux.policy.guard import (
        Exposure as Exposure,
        Guard as Guard,
        Suspicion as Suspicion,
    )
    from mcpmux.policy.pins import (
        Pin as Pin,
        PinBook as PinBook,
        definition_hash as definition_hash,
    )
    from mcpmux.policy.rules import (
        Decision as Decision,
        Rules as Rules,
    )
    from mcpmux.policy.scanner import (
        Finding as Finding,
        scan_tool as scan_tool,
        scan_tools as scan_tools,
        suspect as suspect,
    )
    from mcpmux.policy.scope import (
        ToolScope as ToolScope,
        agent_scope as agent_scope,
    )
    from mcpmux.policy.store import StateStore as StateStore

__getattr__, __dir__ = lazy_exports(__name__, __file__)
