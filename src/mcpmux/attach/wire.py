"""The daemon's first-request protocol, in the standard library alone (the thin client imports it).

A connection starts with one JSON-RPC request line (its id is :data:`REQUEST_ID`) and one answer;
what follows depends on the method (:mod:`.attach` describes the requests and their params).
"""

from __future__ import annotations

import json

from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "ATTACH",
    "ATTACH_ALL",
    "ATTACH_KNOWN",
    "MAX_ATTACH_BYTES",
    "REQUEST_ID",
    "STATUS",
    "STOP",
    "TOOLS",
    "UNKNOWN_KEY",
    "error_reply",
    "request_line",
    "result_reply",
]

ATTACH, ATTACH_ALL, STATUS, STOP = "mcpmux/attach", "mcpmux/attach-all", "mcpmux/status", "mcpmux/stop"
TOOLS = "mcpmux/tools"
"""With an attach's ``params``: the instance's tools as its guard lists them (synthetic ones too), one answer."""
ATTACH_KNOWN = "mcpmux/attach-known"
"""An attach by the digest of the client's configuration inputs (:mod:`.known`), as an earlier attach
of the same inputs left it; answered :data:`UNKNOWN_KEY` when the daemon holds no such attach."""
UNKNOWN_KEY = -32004
REQUEST_ID = "mcpmux"
# The first line is read before anything else is known about the client: kept small.
MAX_ATTACH_BYTES = 1024 * 1024


def request_line(method: str, params: JSONObject | None = None) -> bytes:
    """One request line of ``method``."""
    message: JSONObject = {"jsonrpc": "2.0", "id": REQUEST_ID, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


def result_reply(result: JSONObject) -> bytes:
    """The success answer to the first request."""
    return json.dumps({"jsonrpc": "2.0", "id": REQUEST_ID, "result": result}).encode() + b"\n"


def error_reply(message: str, code: int = -32000) -> bytes:
    """The error answer to the first request."""
    error = {"code": code, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": REQUEST_ID, "error": error}).encode() + b"\n"
