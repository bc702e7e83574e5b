"""Server->client requests of the upstreams, relayed to the downstream client that caused them.

An upstream asks for sampling or elicitation while it runs a tool; the gateway sends the request
on the channel of the downstream call in flight on that server (the latest one when several are)
and returns the answer. A downstream client that did not declare the capability, or a stateless
(2026-07-28) client that has no back channel, gets nothing: the upstream receives an error, the
policy's answer when no one can be asked.

The guard's approval questions take the same way (:meth:`Relay.approve` is an
:class:`~mcpmux.policy.Approver`): an elicitation form to the client whose call needs approval.
A stateless-era client that declared elicitation is asked the 2026-07-28 way instead: the call is
answered with an ``input_required`` result carrying the form (:class:`InputRequired`), and the
client's retry brings the answer back in ``inputResponses``, with the ``requestState`` the gateway
minted (sealed, bound to the tool, its arguments and the caller). A client that cannot be asked
gets the answer "no" (the audit row says "declined").
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from mcpmux.gateway.caller import caller_of
from mcpmux.policy import Answer, ApprovalRequest

__all__ = ["APPROVAL_INPUT", "RELAY_TIMEOUT_S", "InputRequired", "Relay"]

logger = logging.getLogger(__name__)

RELAY_TIMEOUT_S = 300.0
APPROVAL_INPUT = "mcpmux/approval"
"""The key of the approval question in a stateless-era ``input_required`` result."""
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
_current: ContextVar[Ctx | None] = ContextVar("mcpmux_gateway_call", default=None)
_answers: ContextVar[Mapping[str, Any] | None] = ContextVar("mcpmux_gateway_answers", default=None)


class InputRequired(Exception):
    """A stateless-era client has to answer first: the call's result is :attr:`result`."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        super().__init__("the client must answer before the call can go on")
        self.result = result


def approval_state(ctx: Ctx) -> str:
    """The ``requestState`` of an approval question put to the caller behind ``ctx``."""
    return f"approval:{caller_of(ctx) or ''}"


class Relay:
    """The downstream calls in flight per upstream server, and the relayed requests."""

    def __init__(self) -> None:
        self._calls: dict[str, list[Ctx]] = defaultdict(list)

    @contextmanager
    def calling(self, server: str, ctx: Ctx, answers: Mapping[str, Any] | None = None) -> Iterator[None]:
        """Mark ``ctx`` as a downstream call running on ``server`` for the duration of the block.

        ``answers`` are the ``inputResponses`` a stateless-era retry carried to questions of ours.
        """
        self._calls[server].append(ctx)
        token, answers_token = _current.set(ctx), _answers.set(answers)
        try:
            yield
        finally:
            _answers.reset(answers_token)
            _current.reset(token)
            self._calls[server].remove(ctx)

    def caller_of_call(self, server: str) -> Ctx | None:
        """The latest downstream call in flight on ``server``, if any."""
        calls = self._calls.get(server)
        return calls[-1] if calls else None

    async def approve(self, request: ApprovalRequest) -> Answer:
        """Ask the client whose call this is, by elicitation; "no" when it cannot be asked."""
        ctx = _current.get()
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        stateless = ctx is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if ctx is None or not (ctx.session.check_client_capability(wanted) and (stateless or _can_ask(ctx, wanted))):
            logger.info("%s needs approval and its client cannot be asked: declined", request.name)
            return Answer.NO
        arguments = json.dumps(dict(request.arguments), default=str)[:2000]
        message = f"Allow {request.name} ({request.reason})? Arguments: {arguments}"
        question = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
        )
        if stateless:
            answers = _answers.get()
            if answers is None or APPROVAL_INPUT not in answers:
                asked = types.InputRequiredResult(
                    input_requests={APPROVAL_INPUT: question}, request_state=approval_state(ctx)
                )
                raise InputRequired(asked)
            return _decision(answers[APPROVAL_INPUT])
        return _decision(await _send(ctx, question, types.ElicitResult))

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
        ctx = self.caller_of_call(server)
        if ctx is None or not _can_ask(ctx, wanted):
            reason = f"{request.method} from {server!r}: the downstream client cannot answer it"
            return types.ErrorData(code=types.METHOD_NOT_FOUND, message=reason)
        return await _send(ctx, request, result)


def _decision(answer: object) -> Answer:
    """The approval an elicitation answer gives: anything but an accepted, valid decision is "no"."""
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept" or not answer.content:
        return Answer.NO
    try:
        return Answer(str(answer.content.get("decision")))
    except ValueError:
        return Answer.NO


def _can_ask(ctx: Ctx, wanted: types.ClientCapabilities) -> bool:
    return ctx.session.can_send_request and ctx.session.check_client_capability(wanted)


async def _send(ctx: Ctx, request: Any, result: type[_Result]) -> _Result | types.ErrorData:
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
    try:
        return await ctx.session.send_request(
            request, result, request_read_timeout_seconds=RELAY_TIMEOUT_S, metadata=metadata
        )
    except MCPError as exc:
        logger.info("relaying %s downstream failed: %s", request.method, exc)
        return exc.error
