"""Server->client requests of the upstreams, relayed to the downstream client that caused them.

An upstream asks for sampling or elicitation while it runs a tool; the gateway puts the request to
the downstream call in flight on that server (the latest one when several are) and returns the
answer. The guard's approval questions take the same way (:meth:`Relay.approve` is an
:class:`~mcpmux.policy.Approver`): an elicitation form to the client whose call needs approval,
but only when that client may approve at all (``security.gateway_approvers``: the stdio client, a
token made with ``--can-approve``). Any other caller is refused without being asked: a client
answering its own question is no approval, least of all a web page on a loopback gateway.

How a question reaches a client depends on its era, so each call in flight is an :class:`Asker`:
a handshake-era (2025-11-25) call is a :class:`LiveCall`, asked on its own channel; a stateless-era
(2026-07-28) call that can answer is a :class:`~mcpmux.gateway.stateless.ParkedCall`, asked through
an ``input_required`` result. A client that did not declare the capability gets nothing: the
upstream receives an error, and an approval is "no" (the audit row says "declined").
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel

from mcpmux.config.models import GatewayApprovers
from mcpmux.errors import ApprovalDenied
from mcpmux.policy import APPROVAL_META, Answer, ApprovalRequest, Approver
from mcpmux.web.caller import caller_of

__all__ = ["RELAY_TIMEOUT_S", "UNVERIFIED", "Asker", "LiveCall", "Relay"]

logger = logging.getLogger(__name__)

RELAY_TIMEOUT_S = 300.0
_Result = TypeVar("_Result", bound=BaseModel)
Ctx = ServerRequestContext[Any, Any]
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "enum": [a.value for a in Answer],
            "description": "yes, no, always for this tool, always for this server",
        }
    },
    "required": ["decision"],
}
_current: ContextVar[Asker | None] = ContextVar("mcpmux_gateway_call", default=None)
_answerer: ContextVar[str | None] = ContextVar("mcpmux_gateway_answerer", default=None)
UNVERIFIED = "unverified"
"""The approval identity of a caller that may not approve: nothing is ever remembered for it."""
MAY_NOT_APPROVE = "needs approval; this caller may not approve"
MAY_NOT_APPROVE_HINT = (
    "approve from a client whose token may approve (mcpmux token create NAME --can-approve; "
    "security.gateway_approvers), or allow this one tool in the configuration: "
    "security.approval_rules [{{tools: '{tool}', action: allow}}]"
)


class Asker(Protocol):
    """A downstream call that questions can be put to."""

    @property
    def ctx(self) -> Ctx:
        """The request context of the call's current request (for notifications)."""
        ...

    def can_ask(self, wanted: types.ClientCapabilities) -> bool:
        """Whether the client declared ``wanted`` and can be reached with a question now."""
        ...

    async def ask(self, request: Any, result: type[_Result]) -> _Result | types.ErrorData:
        """Put ``request`` to the client and return its answer (or the error it gave)."""
        ...

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Pass the upstream's progress on to the client."""
        ...


class LiveCall:
    """A handshake-era call: questions go out as requests on the call's own channel."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx

    def can_ask(self, wanted: types.ClientCapabilities) -> bool:
        return self.ctx.session.can_send_request and self.ctx.session.check_client_capability(wanted)

    async def ask(self, request: Any, result: type[_Result]) -> _Result | types.ErrorData:
        metadata = ServerMessageMetadata(related_request_id=self.ctx.request_id)
        try:
            return await self.ctx.session.send_request(
                request, result, request_read_timeout_seconds=RELAY_TIMEOUT_S, metadata=metadata
            )
        except MCPError as exc:
            logger.info("relaying %s downstream failed: %s", request.method, exc)
            return exc.error

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await self.ctx.session.report_progress(progress, total, message)


class Relay:
    """The downstream calls in flight per upstream server, and the relayed requests."""

    def __init__(self, approvers: GatewayApprovers | None = None) -> None:
        self._calls: dict[str, list[Asker]] = defaultdict(list)
        self.approvers = approvers if approvers is not None else GatewayApprovers()
        self.held: Approver | None = None
        """Where a question goes that its own client may not or cannot answer: a person at the console
        (:class:`~mcpmux.policy.pending.PendingApprovals`, ``gateway_approvers.console``); ``None``: refused."""

    def calling(self, server: str, call: Asker, answerer: str | None = None) -> _Calling:
        """Mark ``call`` as a downstream call running on ``server`` for the duration of a ``with`` block.

        ``answerer`` is the identity under which its client may approve (see
        :func:`~mcpmux.web.caller.approver_of`), or ``None`` when it may not.
        """
        return _Calling(self._calls[server], call, answerer)

    def caller_of_call(self, server: str) -> Ctx | None:
        """The request context of the latest downstream call in flight on ``server``, if any."""
        call = self._latest(server)
        return call.ctx if call is not None else None

    def _latest(self, server: str) -> Asker | None:
        calls = self._calls.get(server)
        return calls[-1] if calls else None

    async def approve(self, request: ApprovalRequest) -> Answer:
        """Ask the client whose call this is, by elicitation; "no" when it cannot be asked.

        A client that may not or cannot answer is held for a person instead when :attr:`held` is set.

        Raises:
            ApprovalDenied: the client may not approve (it is refused, not asked).
        """
        call = _current.get()
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        if self.held is not None and (call is None or _answerer.get() is None or not call.can_ask(wanted)):
            # The person is shown who calls (the token or clientInfo), not the identity "always" binds.
            shown = request if call is None else replace(request, caller=caller_of(call.ctx) or request.caller)
            return await self.held(shown)
        if call is not None and _answerer.get() is None:
            logger.info("%s needs approval and its caller may not approve: refused", request.name)
            raise ApprovalDenied(request.name, MAY_NOT_APPROVE, hint=MAY_NOT_APPROVE_HINT.format(tool=request.name))
        if call is None or not call.can_ask(wanted):
            logger.info("%s needs approval and its client cannot be asked: declined", request.name)
            return Answer.NO
        arguments = json.dumps(dict(request.arguments), default=str)[:2000]
        message = f"Allow {request.name} ({request.reason})? Arguments: {arguments}"
        # Marked, so an mcpmux client answers it through its own guard (mcpmux.policy.chained).
        question = {"tool": request.name, "reason": request.reason, "arguments": dict(request.arguments)}
        params = types.ElicitRequestFormParams(
            message=message, requested_schema=APPROVAL_SCHEMA, _meta={APPROVAL_META: question}
        )
        return _decision(await call.ask(types.ElicitRequest(params=params), types.ElicitResult))

    async def sampling(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        """Relay ``sampling/createMessage`` from ``server``."""
        wanted = types.ClientCapabilities(sampling=types.SamplingCapability())
        request = types.CreateMessageRequest(params=params)
        return await self._relay(server, wanted, request, types.CreateMessageResult)

    async def elicitation(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        """Relay ``elicitation/create`` from ``server``."""
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        return await self._relay(server, wanted, types.ElicitRequest(params=params), types.ElicitResult)

    async def _relay(
        self, server: str, wanted: types.ClientCapabilities, request: Any, result: type[_Result]
    ) -> _Result | types.ErrorData:
        call = self._latest(server)
        if call is None or not call.can_ask(wanted):
            reason = f"{request.method} from {server!r}: the downstream client cannot answer it"
            return types.ErrorData(code=types.METHOD_NOT_FOUND, message=reason)
        return await call.ask(request, result)


class _Calling:
    """The block of :meth:`Relay.calling` (a class: a generator-based context manager costs ~2 us per call)."""

    __slots__ = ("_answerer", "_call", "_calls", "_tokens")

    def __init__(self, calls: list[Asker], call: Asker, answerer: str | None) -> None:
        self._calls, self._call, self._answerer = calls, call, answerer

    def __enter__(self) -> None:
        self._calls.append(self._call)
        self._tokens = _current.set(self._call), _answerer.set(self._answerer)

    def __exit__(self, *exc_info: object) -> None:
        current, answering = self._tokens
        _answerer.reset(answering)
        _current.reset(current)
        self._calls.remove(self._call)


def _decision(answer: object) -> Answer:
    """The approval an elicitation answer gives: anything but an accepted, valid decision is "no"."""
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept" or not answer.content:
        return Answer.NO
    try:
        return Answer(str(answer.content.get("decision")))
    except ValueError:
        return Answer.NO
