"""Approval questions of a chained mcpmux: one question, one answer, end to end.

When an mcpmux gateway is another mcpmux's upstream (``mcpmux call`` or ``chat`` -> ``mcpmux serve
--stdio``), the inner guard asks its approval question by elicitation, marked with
:data:`APPROVAL_META`. The outer host does not show it as a form (that asked the person up to three
times, and a form answer of ``y`` came back as "declined"): :class:`ChainedApprovals` answers it
through the outer :class:`~mcpmux.policy.Guard`, which

- answers "yes" at once when the person already approved that very call here (asked, or by a
  remembered "always"): the question was asked once, at the outer end;
- else asks its own approver once, as an approval of the outer tool, and remembers an "always"
  answer like any other; without an approver the answer is "no".

Any other elicitation goes to the face's own elicitation callback (or is refused without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

from mcpmux.policy.approval import Answer
from mcpmux.types.callbacks import ElicitationCallback

if TYPE_CHECKING:
    from mcpmux.policy.guard import Guard

__all__ = ["APPROVAL_META", "ChainedApprovals", "approval_question"]

APPROVAL_META = "io.mcpmux/approval"
"""The ``_meta`` key of an mcpmux gateway's approval elicitation: ``{tool, reason, arguments}``."""


def approval_question(params: types.ElicitRequestParams) -> Mapping[str, Any] | None:
    """The approval an elicitation asks for, if it is an mcpmux gateway's approval question."""
    if not isinstance(params, types.ElicitRequestFormParams) or not params.meta:
        return None
    question = params.meta.get(APPROVAL_META)
    return question if isinstance(question, Mapping) and isinstance(question.get("arguments"), Mapping) else None


class ChainedApprovals:
    """The elicitation callback of a host: approval questions of an upstream mcpmux go to the guard.

    Args:
        fallback: answers every other elicitation (``None``: they are refused with an error).

    Bind the guard once it exists (:meth:`bind`); until then approval questions are answered "no".
    """

    def __init__(self, fallback: ElicitationCallback | None = None) -> None:
        self.fallback = fallback
        self.guard: Guard | None = None

    def bind(self, guard: Guard) -> None:
        """Answer approval questions through ``guard``."""
        self.guard = guard

    async def __call__(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        question = approval_question(params)
        if question is None:
            if self.fallback is None:
                reason = f"elicitation from {server!r}: this mcpmux face cannot answer questions"
                return types.ErrorData(code=types.INVALID_REQUEST, message=reason)
            return await self.fallback(server, params)
        answer = Answer.NO if self.guard is None else await self.guard.answer_upstream_approval(server, question)
        return types.ElicitResult(action="accept", content={"decision": answer.value})
