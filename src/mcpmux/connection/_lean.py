"""The lean path: ``tools/call`` and ``resources/read`` on a stdio session, past the SDK's dispatcher.

The SDK spends most of a call on machinery around it (two memory-stream hops, a timer and a
tracing span per request, the answer validated four times: the envelope, the revision's wire
model, its re-serialisation, the result model). Here the request line is written with the
transport's own writer and the transport's reader hands the answer back by id
(:mod:`mcpmux.transports.direct`): parsed by the SDK's JSON parser (pydantic-core's) and validated
once into the SDK's result model.

The behaviour is the stream path's: the same deadline (``notifications/cancelled`` sent on a
timeout or a caller's cancellation, with the SDK's reasons), the same errors (each built by the
connection's :class:`~mcpmux.connection._evidence.Evidence` from the SDK's own exception shapes),
an oversized answer refused at once, a lost transport failing the call with the child's exit.
Answers the single validation does not take (a later revision's fields, a shape only the full
check explains) go through the SDK's exact sequence of checks. Everything else, initialize, lists,
notifications, progress, the server's own requests, the 2026-07-28 era and the HTTP transports,
stays on the SDK's path. ``MCPMUX_LEAN_PATH=0`` switches it off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Final

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import methods
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json, to_json

from mcpmux.connection._evidence import Evidence
from mcpmux.transports.direct import DirectReplies, Line, Unclaimed, asyncio_loop
from mcpmux.transports.framing import parse_message

__all__ = ["ENV_SWITCH", "LeanPath", "lean_enabled"]

ENV_SWITCH: Final = "MCPMUX_LEAN_PATH"
"""Set to ``0`` to send every request through the SDK's dispatcher."""
CANCEL_WRITE_TIMEOUT_S: Final = 5.0
"""How long a ``notifications/cancelled`` may take to write (the SDK's bound for the same write)."""
NEWEST_REVISION: Final = "2026-07-28"

_NO_SCOPE: Final = contextlib.nullcontext()


def lean_enabled() -> bool:
    """Whether connections take the lean path where they can (``MCPMUX_LEAN_PATH`` is not ``0``)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


class LeanPath:
    """The lean path of one connection (a stdio session in a 2024-2025 era).

    Args:
        server: the server's name, for errors.
        replies: the transport's table of direct requests.
        evidence: the connection's evidence, which maps every failure as on the stream path.
        version: the negotiated protocol version.
    """

    def __init__(self, server: str, replies: DirectReplies, evidence: Evidence, version: str) -> None:
        self.server = server
        self._replies = replies
        self._evidence = evidence
        self._loop = asyncio_loop()
        self._parse_tool = _parser("tools/call", version, types.CallToolResult)
        self._parse_read = _parser("resources/read", version, types.ReadResourceResult)

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None, limit: float) -> types.CallToolResult:
        """``tools/call`` ``name`` with ``arguments`` under the deadline ``limit`` (seconds)."""
        params = {"name": name} if arguments is None else {"name": name, "arguments": arguments}
        result = await self._request("tools/call", to_json(params), self._parse_tool, limit)
        assert isinstance(result, types.CallToolResult), "the parser returns the result model"
        return result

    async def read_resource(self, uri: str, limit: float) -> types.ReadResourceResult:
        """``resources/read`` ``uri`` under the deadline ``limit`` (seconds)."""
        result = await self._request("resources/read", to_json({"uri": uri}), self._parse_read, limit)
        assert isinstance(result, types.ReadResourceResult), "the parser returns the result model"
        return result

    async def _request(self, method: str, params: bytes, parse: Callable[[Line], object], limit: float) -> object:
        replies = self._replies
        if replies.closed:
            raise self._mapped(method, _closed(), limit)
        request_id, reply = replies.expect(method, parse)
        line = b'{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}\n' % (request_id, method.encode(), params)
        loop = self._loop
        # On asyncio the deadline is a timer of the loop that wakes the waiter (a cancel scope per
        # request costs a third of the path); elsewhere a cancel scope.
        deadline = loop.time() + limit if loop is not None else anyio.current_time() + limit
        timer = loop.call_at(deadline, replies.expire, request_id) if loop is not None else None
        written = False
        try:
            with anyio.fail_at(deadline) if timer is None else _NO_SCOPE:
                # A caller already cancelled never sends the request (so it never needs a cancel).
                await anyio.lowlevel.checkpoint_if_cancelled()
                written = True
                await replies.writer.send_line(line, deadline)
                await reply.wait()
        except TimeoutError:
            if written:
                await self._cancel(request_id, f"timed out after {limit}s", shield=False)
            raise self._mapped(method, _timed_out(method), limit) from None
        except anyio.get_cancelled_exc_class():
            if written:
                await self._cancel(request_id, "caller cancelled", shield=True)
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if self._evidence.watch is not None:
                self._evidence.watch.write_failed = True
            raise self._mapped(method, _closed(), limit) from None
        finally:
            if timer is not None:
                timer.cancel()
            replies.forget(request_id)
        if reply.timed_out:
            await self._cancel(request_id, f"timed out after {limit}s", shield=False)
            raise self._mapped(method, _timed_out(method), limit)
        if reply.error is not None:
            raise self._mapped(method, reply.error, limit) from reply.error
        value = reply.value
        if value is None:  # the transport ended before the answer
            raise self._mapped(method, _closed(), limit)
        if isinstance(value, types.ErrorData):
            error = MCPError(code=value.code, message=value.message, data=value.data)
            raise self._mapped(method, error, limit) from error
        return value

    def _mapped(self, method: str, exc: Exception, limit: float) -> Exception:
        return self._evidence.mapped(method, exc, limit, self._evidence.statuses)

    async def _cancel(self, request_id: int, reason: str, *, shield: bool) -> None:
        """Send ``notifications/cancelled`` for an abandoned request, bounded (and shielded if asked)."""
        params = to_json({"requestId": request_id, "reason": reason})
        line = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":%s}\n' % params
        with anyio.move_on_after(CANCEL_WRITE_TIMEOUT_S, shield=shield):
            # A transport already gone has nobody left to stop.
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._replies.writer.send_line(line)


def _timed_out(method: str) -> MCPError:
    # The SDK's own deadline error, which the evidence maps to MCPTimeoutError.
    return MCPError(code=types.REQUEST_TIMEOUT, message=f"Request {method!r} timed out")


def _closed() -> MCPError:
    # The SDK's own "connection closed" shape, which the evidence maps to what ended the transport.
    return MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")


def _parser(method: str, version: str, model: type[types.Result]) -> Callable[[Line], object]:
    """Parse an answer line into the result model; answers it cannot take (errors too) go the SDK's way."""
    foreign = _later_revision_fields(method, version)

    def parse(line: Line) -> object:
        try:
            # The SDK's own JSON parser (pydantic-core's), then one validation from Python objects:
            # for a big text, half the time and memory of validate_json, which copies each string
            # it tries against a union member.
            message = from_json(line)
        except ValueError:
            return _as_the_sdk_does(line, method, version, model, foreign)
        result = message.get("result") if type(message) is dict else None
        if (
            type(result) is not dict
            or message.get("jsonrpc") != "2.0"
            or "error" in message
            or not foreign.isdisjoint(result)
        ):
            return _as_the_sdk_does(line, method, version, model, foreign)
        try:
            return model.model_validate(result, by_name=False)
        except ValidationError:
            return _as_the_sdk_does(line, method, version, model, foreign)

    return parse


def _as_the_sdk_does(
    line: Line, method: str, version: str, model: type[types.Result], foreign: frozenset[str]
) -> object:
    """The SDK's own sequence for an answer: envelope, the revision's wire model, later fields dropped, result model.

    Raises:
        Unclaimed: not a JSON-RPC answer: the stream path logs and ignores it, as it always did.
        pydantic.ValidationError: the result is not what ``method`` returns (the call fails with it).
    """
    try:
        message = parse_message(line).message
    except ValidationError as exc:
        raise Unclaimed from exc
    if isinstance(message, types.JSONRPCError):
        return message.error
    if not isinstance(message, types.JSONRPCResponse):
        raise Unclaimed
    raw = message.result
    with contextlib.suppress(KeyError):  # a method the revision's table does not know: no wire check
        methods.validate_server_result(method, version, raw)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return model.model_validate(raw, by_name=False)


@cache
def _later_revision_fields(method: str, version: str) -> frozenset[str]:
    """Result keys the newest revision has for ``method`` and ``version`` has not (the SDK drops them)."""
    return _wire_fields(methods.SERVER_RESULTS.get((method, NEWEST_REVISION))) - _wire_fields(
        methods.SERVER_RESULTS.get((method, version))
    )


def _wire_fields(target: object) -> frozenset[str]:
    members = getattr(target, "__args__", (target,))
    fields: set[str] = set()
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            fields.update(field.alias or name for name, field in member.model_fields.items())
    return frozenset(fields)
