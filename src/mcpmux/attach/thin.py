"""One request through a running daemon, without the SDK, the manager or an event loop.

``mcpmux call`` and ``mcpmux read`` of a warm server should cost little more than starting Python
and reading the configuration: the daemon already runs the server behind its guard (policy,
pins, validation, approvals, audit naming this process). This client speaks the daemon's
protocol with the standard library's blocking socket: the attach line (the same
:class:`~mcpmux.attach.attach.Attach`, so the same warm instance as the full path), ``initialize``,
``tools/list`` (to route the call; a cached list in the daemon), then the one request.

It never changes what a command prints: whenever it cannot give the full path's answer it raises
:class:`NotThin` *before* anything ran on the server (no daemon, the daemon refused the entry, an
unknown tool, an error the guard raised before the call: the command then takes its ordinary path,
which reproduces the exact error). Once the request was sent, its outcome is the command's outcome:
a lost daemon is :class:`~mcpmux.errors.DaemonUnavailable` (exit 3), never a second call.

An approval the daemon's guard asks (its elicitation marked
:data:`~mcpmux.policy.chained.APPROVAL_META`) is put to ``approve`` (the terminal, or ``--yes``).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpmux._version import __version__
from mcpmux.attach.paths import check_owned, socket_path
from mcpmux.attach.wire import ATTACH, ATTACH_KNOWN, MAX_ATTACH_BYTES, REQUEST_ID, TOOLS, UNKNOWN_KEY, request_line
from mcpmux.canonical_names import canonical_name
from mcpmux.errors import ERROR_META, DaemonUnavailable, RemoteError
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    from mcpmux.config.models import Config, ServerConfig

__all__ = [
    "APPROVAL_META",
    "KNOWN_ATTACH_TIMEOUT_S",
    "ListedTool",
    "NotThin",
    "ThinSession",
    "Wire",
    "list_tools",
    "thin_answers",
]

APPROVAL_META = "io.mcpmux/approval"  # mcpmux.policy.chained.APPROVAL_META (that module imports the SDK)
PROTOCOL_VERSION = "2025-11-25"
CLIENT_INFO = {"name": "mcpmux", "version": __version__}  # as the SDK client of the full path says
KNOWN_ATTACH_TIMEOUT_S = 60.0
"""How long a known attach may take (the daemon answers it only from a warm instance)."""
_PRE_EXECUTION = frozenset({"UsageError", "PolicyError", "ConfigError"})
"""Error kinds the guard raises before anything reaches the server: the full path reproduces them."""

Progress = Callable[[float, float | None, str | None], None]
Approve = Callable[[Mapping[str, Any]], str]
"""Given the approval question ``{tool, reason, arguments}``, the decision (``yes``, ``no``, ``always-tool``...)."""


def thin_answers() -> tuple[str, ...]:
    """The server requests a CLI command answers (:func:`mcpmux.cli.host_cmds.managed`'s callbacks).

    Part of the instance's fingerprint: the thin path attaches to the very instance the full path uses.
    """
    return ("elicitation",)


@dataclass(frozen=True, slots=True)
class ListedTool:
    """A tool as the daemon's guard listed it, read like :class:`~mcpmux.manager.ToolInfo` by the renderers."""

    name: str
    server: str
    tool: str
    title: str | None
    description: str
    input_schema: JSONObject
    output_schema: JSONObject | None
    annotations: JSONObject | None
    synthetic: bool


def list_tools(config: Config, server: ServerConfig, *, timeout_s: float, path: Path | None = None) -> list[ListedTool]:
    """The tools of the daemon's instance of ``server`` under this configuration's canonical names.

    The daemon's guard lists them (:meth:`mcpmux.Host.tools`: denied and quarantined tools left out,
    ``read_resource``/``get_prompt`` made by mcpmux included), so the command prints what its own
    host would have listed.

    Raises:
        NotThin: no daemon answers, or it will not serve ``server`` (the full path decides what next).
    """
    from mcpmux.attach.attach import Attach, origin_of

    attach = Attach(origin_of(config), server, config.settings, config.security, client="cli", answers=thin_answers())
    try:
        where = path or socket_path()
        check_owned(where)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(where))
            sock.sendall(request_line(TOOLS, attach.params()))
            reply = _parse(_read_line(sock, max(config.settings.max_message_bytes, MAX_ATTACH_BYTES), timeout_s))
    except (OSError, ValueError, DaemonUnavailable) as exc:
        raise NotThin(f"the daemon did not list the tools: {exc}") from exc
    if "error" in reply or not isinstance((reply.get("result") or {}).get("tools"), list):
        raise NotThin(f"the daemon will not list them: {reply.get('error', reply)}")
    try:
        return [
            ListedTool(
                name=canonical_name(server.namespace, str(t["tool"])),
                server=server.name,
                tool=str(t["tool"]),
                title=t.get("title"),
                description=str(t.get("description") or ""),
                input_schema=t.get("input_schema") or {"type": "object"},
                output_schema=t.get("output_schema"),
                annotations=t.get("annotations"),
                synthetic=bool(t.get("synthetic")),
            )
            for t in reply["result"]["tools"]
        ]
    except (KeyError, TypeError, AttributeError) as exc:
        raise NotThin(f"the daemon's tool list is not one: {exc}") from exc


def _read_line(sock: socket.socket, limit: int, timeout_s: float) -> bytes:
    buffer = b""
    deadline = time.monotonic() + timeout_s
    while b"\n" not in buffer:
        if len(buffer) > limit:
            raise ValueError(f"an answer longer than {limit} bytes")
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the daemon closed the connection")
        buffer += chunk
    return buffer.partition(b"\n")[0]


class NotThin(Exception):
    """Nothing ran on the server: the command takes its ordinary path (the message says why)."""


class Wire:
    """A JSON object read like the SDK's model of it: ``mime_type`` is ``mimeType``, absent is ``None``.

    Enough for :mod:`mcpmux.cli.render`'s printers, so the thin path prints what the full path does.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        head, *rest = name.split("_")
        key = head + "".join(part.title() for part in rest)
        return _wire(self._data.get(key, self._data.get(name)))


def _wire(value: Any) -> Any:
    if isinstance(value, Mapping):
        return Wire(value)
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


class ThinSession:
    """One attached, initialized MCP session with the daemon's instance of a server (a context manager).

    Made by :meth:`attached` (the command loaded its configuration: the whole entry travels, and
    with ``known`` the daemon keeps it under the digest of the command's inputs) or :meth:`known`
    (only that digest and the server's name travel: the daemon serves the entry it kept, if its
    instance is warm). :attr:`meta` is what the command needs of its configuration then.

    Raises (on entry):
        NotThin: no daemon answers, or it will not serve the server (the full path decides what next).
    """

    def __init__(
        self, first: bytes, *, server_name: str, max_message_bytes: int, timeout_s: float, path: Path | None = None
    ) -> None:
        self.first, self.server_name, self.timeout_s = first, server_name, timeout_s
        self.max_message_bytes = max_message_bytes
        self.path = path
        self.meta: JSONObject = {}
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._next_id = 1
        self.sent = False

    @classmethod
    def attached(
        cls,
        config: Config,
        server: ServerConfig,
        *,
        timeout_s: float,
        path: Path | None = None,
        known: tuple[str, JSONObject] | None = None,
    ) -> ThinSession:
        """A session attached with the whole entry; ``known`` (the inputs' digest and what a command
        needs of the configuration) asks the daemon to keep this attach under that digest."""
        from mcpmux.attach.attach import Attach, origin_of

        attach = Attach(
            origin_of(config), server, config.settings, config.security, client="cli", answers=thin_answers()
        )
        params = attach.params()
        if known is not None:
            params["known"] = {"key": known[0], "name": server.name, "meta": known[1]}
        first = request_line(ATTACH, params)
        return cls(
            first, server_name=server.name, max_message_bytes=config.settings.max_message_bytes,
            timeout_s=timeout_s, path=path,
        )  # fmt: skip

    @classmethod
    def known(cls, key: str, server_name: str, *, path: Path | None = None) -> ThinSession:
        """A session attached by the digest of the command's inputs (:mod:`mcpmux.daemon.known`)."""
        first = request_line(ATTACH_KNOWN, {"key": key, "name": server_name})
        return cls(
            first, server_name=server_name, max_message_bytes=MAX_ATTACH_BYTES, timeout_s=KNOWN_ATTACH_TIMEOUT_S,
            path=path,
        )  # fmt: skip

    def __enter__(self) -> ThinSession:
        try:
            where = self.path or socket_path()
            check_owned(where)
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.settimeout(self.timeout_s)
            self._sock.connect(str(where))
        except (OSError, DaemonUnavailable) as exc:
            self.close()
            raise NotThin(f"no daemon: {exc}") from exc
        try:
            self._send_raw(self.first)
            reply = _parse(self._line(MAX_ATTACH_BYTES))
            if "error" in reply:
                unknown = isinstance(reply["error"], Mapping) and reply["error"].get("code") == UNKNOWN_KEY
                reason = "it keeps no attach of these inputs" if unknown else "it will not serve it"
                raise NotThin(f"{reason}: {reply['error'].get('message')}")
            self._adopt(reply.get("result"))
            hello = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"elicitation": {}},
                "clientInfo": CLIENT_INFO,
            }
            self._request("initialize", hello)
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            self.close()
            raise NotThin(f"the daemon did not attach it: {exc}") from exc
        except BaseException:
            self.close()
            raise
        return self

    def _adopt(self, result: Any) -> None:
        """Take what a known attach's answer says of the configuration (timeouts, limits, secrets)."""
        meta = result.get("meta") if isinstance(result, Mapping) else None
        if meta is None:
            return
        if not isinstance(meta, Mapping):
            raise ValueError("a known attach's answer without its meta")
        self.meta = dict(meta)
        self.timeout_s = float(meta["timeout_s"])
        self.max_message_bytes = int(meta["max_message_bytes"])
        if self._sock is not None:
            self._sock.settimeout(self.timeout_s)

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # -- requests ------------------------------------------------------------------------------

    def tool_names(self) -> set[str]:
        """The names the instance lists (bare: the daemon's instance has no prefix)."""
        names: set[str] = set()
        cursor: str | None = None
        while True:
            try:
                page = self._request("tools/list", {"cursor": cursor} if cursor else {})
            except (OSError, ValueError) as exc:
                raise NotThin(f"the daemon did not list the tools: {exc}") from exc
            names |= {str(t.get("name")) for t in page.get("tools", [])}
            cursor = page.get("nextCursor")
            if not cursor:
                return names

    def call(
        self, method: str, params: JSONObject, *, on_progress: Progress | None = None, approve: Approve | None = None
    ) -> JSONObject:
        """The result of ``method``; from here on the request counts as made.

        Raises:
            NotThin: the guard refused it before the server saw it (the full path says it exactly).
            RemoteError: the daemon's guard failed it afterwards (a timeout, the server exited...).
            DaemonUnavailable: the daemon went away before answering.
        """
        if on_progress is not None:
            params = {**params, "_meta": {"progressToken": "thin"}}
        self.sent = True
        try:
            result = self._request(method, params, on_progress=on_progress, approve=approve)
        except _JsonRpcError as exc:
            if method != "tools/call":  # reads and prompts do not change anything: say it exactly
                raise NotThin(f"the daemon answered {method} with an error: {exc}") from exc
            raise RemoteError("ServerError", f"server {self.server_name!r} rejected {method}: {exc}", None, 1) from exc
        except (OSError, ValueError) as exc:
            where = self.path or socket_path()
            raise DaemonUnavailable(where, f"the connection closed before it answered {method} ({exc})") from exc
        error = (result.get("_meta") or {}).get(ERROR_META)
        if isinstance(error, Mapping):
            if _PRE_EXECUTION & set(error.get("kinds", ())):
                raise NotThin(f"the daemon's guard refused it: {error.get('type')}")
            message = "\n".join(str(b.get("text", "")) for b in result.get("content", []))
            message = message.partition("\nhint: ")[0]
            raise RemoteError(str(error.get("type")), message, error.get("hint"), int(error.get("exit_code", 1)))
        return result

    # -- framing -------------------------------------------------------------------------------

    def _request(
        self, method: str, params: JSONObject, *, on_progress: Progress | None = None, approve: Approve | None = None
    ) -> JSONObject:
        ident = self._next_id
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        limit = self.max_message_bytes
        while True:
            message = _parse(self._line(limit))
            if message.get("id") == REQUEST_ID and "error" in message:  # the daemon failed the session
                raise ValueError(str((message["error"] or {}).get("message", message["error"])))
            if message.get("id") == ident and "method" not in message:
                if "error" in message:
                    raise _JsonRpcError(message["error"])
                result = message.get("result")
                return result if isinstance(result, dict) else {}
            if "method" in message:
                self._incoming(message, on_progress, approve)

    def _incoming(self, message: JSONObject, on_progress: Progress | None, approve: Approve | None) -> None:
        method, params = message["method"], message.get("params") or {}
        if method == "notifications/progress" and on_progress is not None:
            on_progress(float(params.get("progress", 0)), params.get("total"), params.get("message"))
            return
        if "id" not in message:
            return  # other notifications (list changes, logs) do not concern one request
        if method == "ping":
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            return
        question = (params.get("_meta") or {}).get(APPROVAL_META) if method == "elicitation/create" else None
        if isinstance(question, Mapping) and isinstance(question.get("arguments"), Mapping):
            decision = approve(question) if approve is not None else "no"
            answer = {"action": "accept", "content": {"decision": decision}}
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
            return
        reason = f"{method} from {self.server_name!r}: this mcpmux face cannot answer questions"
        self._send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32600, "message": reason}})

    def _send(self, message: JSONObject) -> None:
        self._send_raw(json.dumps(message).encode() + b"\n")

    def _send_raw(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)

    def _line(self, limit: int) -> bytes:
        assert self._sock is not None
        deadline = time.monotonic() + self.timeout_s
        while b"\n" not in self._buffer:
            if len(self._buffer) > limit:
                raise ValueError(f"a message longer than {limit} bytes")
            self._sock.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the daemon closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


def _parse(line: bytes) -> dict[str, Any]:
    """One JSON-RPC message; anything else (not an object, nested past the parser's depth) is a ValueError."""
    try:
        message = json.loads(line)
    except RecursionError as exc:
        raise ValueError("a message nested too deeply to read") from exc
    if not isinstance(message, dict):
        raise ValueError(f"not a JSON-RPC message: {line[:80]!r}")
    return message


class _JsonRpcError(Exception):
    def __init__(self, error: Any) -> None:
        message = error.get("message", error) if isinstance(error, Mapping) else error
        code = error.get("code") if isinstance(error, Mapping) else None
        super().__init__(f"{message} (code {code})")
        self.error = error
