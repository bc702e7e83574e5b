"""Calls of stateless-era (2026-07-28) clients that may have to ask their client something.

Such a client has no back channel: a question (the guard's approval, an upstream's sampling or
elicitation request) reaches it only as an ``input_required`` result, and its answers come back
with the retried request (SEP-2322). So the gateway runs such a call as a task of its own, a
:class:`ParkedCall`, and each request of the client is one *round*:

- a round waits until the call ends (then its result is the answer) or asks something (then the
  answer is ``input_required`` with the questions and a ``requestState`` naming the call);
- the retry names the call again, hands its ``inputResponses`` to the questions waiting for them,
  and waits the same way.

The ``requestState`` goes out sealed by the SDK's boundary (bound to the tool, its arguments and a
key of this process) and names the caller too, so a call can be resumed only by whoever started
it. A question nobody answers within :data:`~mcpmux.gateway.relay.RELAY_TIMEOUT_S` is answered
with an error, and a finished call whose result nobody collects is forgotten after as long.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcpmux.gateway.relay import RELAY_TIMEOUT_S, Ctx

__all__ = ["MAX_PARKED_PER_CALLER", "ParkedCall", "ParkedCalls"]

logger = logging.getLogger(__name__)

_Result = TypeVar("_Result", bound=BaseModel)
_STATE_PREFIX = "call:"
MAX_PARKED_PER_CALLER = 64
"""Calls of one caller that may wait for its answers at once. A parked call outlives the request
that started it (up to RELAY_TIMEOUT_S, with its upstream call in flight): without a bound, one
client could leave any number behind in a few requests."""


@dataclass
class _Question:
    request: types.InputRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: types.InputResponse | None = None


class ParkedCall:
    """One stateless-era call, running between the client's rounds (an :class:`~mcpmux.gateway.relay.Asker`)."""

    def __init__(self, ctx: Ctx, caller: str | None) -> None:
        self.id = secrets.token_urlsafe(18)
        self.ctx, self.caller = ctx, caller
        self.finished_at: float | None = None
        self._keys = itertools.count(1)
        self._questions: dict[str, _Question] = {}
        self._changed = anyio.Event()
        self._result: types.CallToolResult | None = None
        self._error: BaseException | None = None
        self._scope = anyio.CancelScope()
        self._waiting = 0

    @property
    def state(self) -> str:
        """The ``requestState`` that names this call (and its caller) in an ``input_required`` result."""
        return f"{_STATE_PREFIX}{self.id}:{self.caller or ''}"

    async def run(self, call: Callable[[], Awaitable[types.CallToolResult]]) -> None:
        """Run ``call`` to its end, keeping its result or error for the round that collects it."""
        try:
            with self._scope:
                self._result = await call()
            if self._scope.cancelled_caught:
                self._error = MCPError(types.INTERNAL_ERROR, "the call was cancelled: its client left it")
        except Exception as exc:  # noqa: BLE001 - not swallowed: the round that collects it raises it
            self._error = exc
        finally:
            self.finished_at = time.monotonic()
            self._notify()

    def _notify(self) -> None:
        """Wake every round waiting on this call (several may: a retry racing a replay)."""
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Progress of the call, to the client's current round (lost between rounds)."""
        try:
            await self.ctx.session.report_progress(progress, total, message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            logger.debug("progress lost between rounds: %r", exc)

    def can_ask(self, wanted: types.ClientCapabilities) -> bool:
        # A stateless-era client declares its capabilities with each request: the current round's count.
        return self.ctx.session.check_client_capability(wanted)

    async def ask(self, request: Any, result: type[_Result]) -> _Result | types.ErrorData:
        """Hold ``request`` for the next round to put to the client; wait for the answer a retry brings."""
        key = f"mcpmux-{next(self._keys)}"
        question = self._questions[key] = _Question(request)
        self._notify()
        try:
            with anyio.move_on_after(RELAY_TIMEOUT_S):
                await question.answered.wait()
        finally:
            del self._questions[key]
        if question.answer is None:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the client did not answer {request.method}")
        try:
            return result.model_validate(question.answer.model_dump(by_alias=True, exclude_none=True))
        except ValidationError as exc:
            return types.ErrorData(code=types.INVALID_PARAMS, message=f"not an answer to {request.method}: {exc}")

    async def round(
        self, ctx: Ctx, answers: Mapping[str, types.InputResponse] | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Serve one request of the client: hand over its answers, then wait for the result or a question.

        Raises:
            Exception: whatever the call raised.
        """
        self.ctx = ctx
        for key, answer in (answers or {}).items():
            question = self._questions.get(key)
            if question is not None and question.answer is None:
                question.answer = answer
                question.answered.set()
        while True:
            # Taken before looking, so a change after the look wakes this round (and any other).
            changed = self._changed
            if self.finished_at is not None:
                if self._error is not None:
                    raise self._error
                assert self._result is not None, "run() keeps a result or an error"
                return self._result
            asked = {key: q.request for key, q in self._questions.items() if q.answer is None}
            if asked:
                return types.InputRequiredResult(input_requests=asked, request_state=self.state)
            self._waiting += 1
            try:
                await changed.wait()
            except anyio.get_cancelled_exc_class():
                # The client gave up this round while nothing was asked of it: it left the call,
                # unless another round of it still waits for the result.
                if self._waiting == 1:
                    self._scope.cancel()
                raise
            finally:
                self._waiting -= 1


class ParkedCalls:
    """The stateless-era calls of one gateway, by the ``requestState`` that names them."""

    def __init__(self) -> None:
        self._calls: dict[str, ParkedCall] = {}

    def add(self, call: ParkedCall) -> None:
        """Keep ``call`` until its result is collected.

        Raises:
            MCPError: its caller already has :data:`MAX_PARKED_PER_CALLER` calls waiting.
        """
        self._forget_stale()
        waiting = sum(1 for c in self._calls.values() if c.caller == call.caller and c.finished_at is None)
        if waiting >= MAX_PARKED_PER_CALLER:
            raise MCPError(
                types.INVALID_REQUEST,
                f"{waiting} calls of this client already wait for its answers (at most {MAX_PARKED_PER_CALLER}): "
                f"answer their input_required questions, or let them expire ({RELAY_TIMEOUT_S:g} s)",
            )
        self._calls[call.id] = call

    def resume(self, state: str, caller: str | None) -> ParkedCall | None:
        """The call that ``state`` names, if it is ours, still known and started by ``caller``."""
        if not state.startswith(_STATE_PREFIX):
            return None
        call_id, _, state_caller = state.removeprefix(_STATE_PREFIX).partition(":")
        call = self._calls.get(call_id)
        if call is None or call.caller != caller or state_caller != (caller or ""):
            return None
        return call

    def done(self, call: ParkedCall) -> None:
        """Forget ``call``: its result went to the client."""
        self._calls.pop(call.id, None)

    def _forget_stale(self) -> None:
        cutoff = time.monotonic() - RELAY_TIMEOUT_S
        for call_id, call in list(self._calls.items()):
            if call.finished_at is not None and call.finished_at < cutoff:
                logger.debug("forgetting a finished call whose client never came back for it")
                del self._calls[call_id]
