"""The one exception tree of mcpmux.

Every error mcpmux raises derives from :class:`MCPMuxError`, carries its evidence as attributes
(``server``, ``tool``, ``code``, ``stderr_tail``, ...) and says what failed, where, and what to do.
Foreign exceptions are converted where they are met (``raise ... from exc``). Timeouts also derive
from the builtin :class:`TimeoutError`.

::

    MCPMuxError
    ├── ConfigError                    invalid configuration; lists every problem (exit 2)
    │   ├── UnresolvedVariable         a server's ``${VAR}`` is unset: only that server fails
    │   ├── UntrustedConfigError       a project's ``mcpmux.yaml`` this user has not trusted (yet, or since it changed)
    │   └── SpecError                  an OpenAPI document cannot become tools (not OpenAPI, too big, bad $ref)
    ├── UsageError                     a command was given something it cannot use (exit 2)
    │   ├── NotFound                   it names nothing that exists (server, token, file); closest names given
    │   │   ├── ServerNotConfigured    a command named a server the config does not have
    │   │   └── ToolNotFound           no tool (resource, prompt) has that name; closest names given
    │   ├── NameNotQualified           a tool name without its ``server:`` prefix
    │   ├── InvalidArguments           a call's arguments do not match the tool's input schema
    │   └── SourceError                a source cannot be registered or changed as asked (nothing is stored)
    │       └── SourceExists           a source (or configured server) of that name exists
    ├── TransportError                 a server could not be started, reached or kept (exit 3)
    │   ├── CommandNotFound            a stdio command is not on PATH
    │   ├── ServerExited               the child process exited (before or after the handshake)
    │   ├── ConnectFailed              refused, DNS, TLS: the peer could not be reached
    │   │   └── DaemonUnavailable      the local daemon's socket is missing, refused or not trusted
    │   ├── HTTPStatusError            the peer answered with an HTTP error status
    │   │   └── AuthRequired           401/403: credentials are needed (exit 4)
    │   │       └── OAuthError         an OAuth step failed or was refused (discovery, login, refresh)
    │   ├── MessageTooLarge            a message above ``max_message_bytes``
    │   │   └── ResponseTooLarge       the answer to a request was above it; that request failed (exit 1)
    │   └── ConnectionClosed           the connection closed while a request was in flight
    │       └── SessionExpired         the HTTP peer no longer knows the session (it restarted)
    ├── ProtocolError                  the peer broke the protocol (exit 3)
    │   ├── ProtocolVersionMismatch    no protocol version both sides speak
    │   └── SkillRejected              a skill's files do not match its listing: not loaded
    ├── MCPTimeoutError (TimeoutError) a deadline passed (exit 3)
    ├── ServerError                    the server answered a request with a JSON-RPC error (exit 1)
    ├── ToolError                      a tool returned ``isError: true`` (exit 1)
    ├── NameCollision                  two tools map to one provider name (exit 2)
    ├── ServerUnavailable              the server is failed, disabled or its circuit is open (exit 3)
    │   └── ServerDisabled             disabled in the configuration or at run time
    ├── Busy                           too many calls queued for one server (exit 1)
    └── PolicyError                    the guard refused a call (exit 1)
        ├── ToolDenied                 an allow/deny rule forbids the tool
        │   └── ResourceNotDeclared    a read outside the server's declared ``resources``
        ├── ApprovalDenied             approval was required and not given
        └── ToolQuarantined            the tool's definition changed, is unapproved or looks poisoned
            └── ToolDefinitionChanged  the definition differs from its pin (a diff is attached)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ERROR_META",
    "EXIT_AUTH",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "ApprovalDenied",
    "ArgumentProblem",
    "AuthRequired",
    "Busy",
    "CommandNotFound",
    "ConfigError",
    "ConfigProblem",
    "ConnectFailed",
    "ConnectionClosed",
    "DaemonUnavailable",
    "HTTPStatusError",
    "InvalidArguments",
    "MCPMuxError",
    "MCPTimeoutError",
    "MessageTooLarge",
    "NameCollision",
    "NameNotQualified",
    "NotFound",
    "OAuthError",
    "PolicyError",
    "ProtocolError",
    "ProtocolVersionMismatch",
    "RemoteError",
    "ResourceNotDeclared",
    "ResponseTooLarge",
    "ServerDisabled",
    "ServerError",
    "ServerExited",
    "ServerNotConfigured",
    "ServerUnavailable",
    "SessionExpired",
    "SkillRejected",
    "SourceError",
    "SourceExists",
    "SpecError",
    "ToolDefinitionChanged",
    "ToolDenied",
    "ToolError",
    "ToolNotFound",
    "ToolQuarantined",
    "TransportError",
    "UnresolvedVariable",
    "UntrustedConfigError",
    "UsageError",
    "closest",
    "error_meta",
    "exit_code_for",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_AUTH = 4
EXIT_INTERRUPTED = 130

STDERR_TAIL_IN_MESSAGE = 400


def _tail(text: str, limit: int = STDERR_TAIL_IN_MESSAGE) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


class MCPMuxError(Exception):
    """Root of every error mcpmux raises.

    Attributes:
        hint: one line telling the user what to do next, or ``None``.
    """

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem found in a configuration source.

    Attributes:
        source: the file (or ``"<defaults>"``, ``"<cli>"``) the problem is in.
        path: where in the document, e.g. ``mcp.servers[2].url``; empty for the whole file.
        reason: what is wrong, never containing a secret value.
        line: 1-based line of the problem when known.
        column: 1-based column when known.
    """

    source: str
    path: str
    reason: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        return f"{where}: {self.path}: {self.reason}" if self.path else f"{where}: {self.reason}"


class ConfigError(MCPMuxError):
    """The configuration is invalid; it is rejected as a whole.

    Attributes:
        problems: every problem found, in document order.
    """

    hint = "fix the listed problems; `mcpmux config validate FILE` checks a file on its own"

    def __init__(self, problems: list[ConfigProblem] | ConfigProblem | str) -> None:
        if isinstance(problems, str):
            problems = [ConfigProblem("<config>", "", problems)]
        elif isinstance(problems, ConfigProblem):
            problems = [problems]
        self.problems = list(problems)
        count = len(self.problems)
        head = "invalid configuration" if count != 1 else "invalid configuration:"
        if count == 1:
            message = f"{head} {self.problems[0]}"
        else:
            message = f"{head} ({count} problems)\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(message)


class UntrustedConfigError(ConfigError):
    """A project's config file (``./mcpmux.yaml``) this user has not trusted, or that changed since they did
    (:mod:`mcpmux.config.trust`): nothing of it runs until they do.

    Attributes:
        path: the file.
        runs: one line per command it would start, URL it would reach, section it would set.
        changed: it was trusted once and says something else now.
    """

    def __init__(self, path: str, runs: list[str], *, changed: bool, declined: bool = False) -> None:
        self.path, self.runs, self.changed = path, list(runs), changed
        state = "changed since you trusted it" if changed else "is not trusted on this machine"
        reason = f"project config {state}; nothing of it runs until you trust it"
        super().__init__(ConfigProblem(path, "", reason))
        if declined:  # the list was just shown with the question
            self.args = (f"{path}: not trusted (you answered no); nothing of it runs",)
            self.hint = f"`mcpmux trust {path}` once you have read it"
            return
        listed = "".join(f"\n  - {line}" for line in self.runs[:20])
        more = f"\n  - ... and {len(self.runs) - 20} more" if len(self.runs) > 20 else ""
        self.args = (f"{path}: {reason}. It would:{listed}{more}",)
        self.hint = (
            f"read it, then `mcpmux trust {path}` (or run the command in a terminal to be asked); "
            "`--config FILE` uses a file of your own instead"
        )


class SpecError(ConfigError):
    """An OpenAPI (or Swagger) document cannot be turned into tools; nothing of it is used.

    Attributes:
        source: the document's path or URL.
        path: where in the document (``paths./pets.get.parameters[0]``), empty for the whole of it.
        reason: what is wrong.
    """

    hint = "fix or replace the document, or narrow it with include_tags/include_operations"

    def __init__(self, source: str, path: str, reason: str) -> None:
        super().__init__(ConfigProblem(source, path, reason))
        self.source, self.path, self.reason = source, path, reason
        self.args = (f"invalid OpenAPI document: {self.problems[0]}",)


# -- usage -------------------------------------------------------------------------------------


class UsageError(MCPMuxError):
    """A command (or a library call) was given something it cannot use; not a configuration problem."""


class NotFound(UsageError):
    """A name given to a command names nothing that exists.

    Attributes:
        kind: what was looked for (``server``, ``tool``, ``token``, ``file``, ...).
        name: the name given.
        suggestions: the closest existing names, best first.
    """

    def __init__(
        self, kind: str, name: str, suggestions: list[str], *, detail: str = "", hint: str | None = None
    ) -> None:
        close = f"; did you mean {', '.join(repr(s) for s in suggestions[:3])}?" if suggestions else ""
        super().__init__(f"no {kind} named {name!r}{close}{detail}", hint=hint)
        self.kind, self.name, self.suggestions = kind, name, suggestions


class SourceError(UsageError):
    """A source cannot be registered or changed as asked; nothing of the request was stored.

    Attributes:
        source: the source's name (or id).
        reason: what is wrong.
    """

    def __init__(self, source: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"source {source!r}: {reason}", hint=hint)
        self.source, self.reason = source, reason


class SourceExists(SourceError):
    """A source, or a server of the configuration, already has that name."""


def closest(name: str, known: Iterable[str], *, limit: int = 3) -> list[str]:
    """The names of ``known`` closest to ``name`` (for "did you mean"), best first."""
    import difflib

    return difflib.get_close_matches(name, list(known), n=limit, cutoff=0.5)


class ServerNotConfigured(NotFound):
    """A command named a server that no configuration source defines."""

    def __init__(self, server: str, known: list[str]) -> None:
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(
            "server",
            server,
            closest(server, known),
            detail=f" (configured: {listing})",
            hint="`mcpmux list` shows the configured servers; `mcpmux add` adds one",
        )
        self.server, self.known = server, known


class NameNotQualified(UsageError):
    """A tool (or prompt) name lacks its ``server:`` prefix."""

    def __init__(self, name: str, suggestions: list[str], *, kind: str = "tool") -> None:
        close = f"; did you mean {', '.join(repr(s) for s in suggestions[:3])}?" if suggestions else ""
        super().__init__(
            f"{kind} name {name!r} has no server prefix: name it as SERVER:{kind.upper()}{close}",
            hint=f"`mcpmux {kind}s` lists every {kind} under its canonical name",
        )
        self.name, self.suggestions, self.kind = name, suggestions, kind


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One way a call's arguments miss the tool's input schema.

    Attributes:
        path: where, as a dotted path into the arguments (``path``, ``edits[0].oldText``); ``""``
            for the arguments object itself.
        expected: what the schema asks for there (``type 'string'``, ``one of ['a', 'b']``).
        given: what the call sent there, shortened (``None`` when the argument is missing).
    """

    path: str
    expected: str
    given: str | None

    def __str__(self) -> str:
        where = f"argument {self.path!r}" if self.path else "the arguments"
        return f"{where}: expected {self.expected}, got {self.given if self.given is not None else 'nothing'}"


class InvalidArguments(UsageError):
    """A call's arguments do not match the tool's ``inputSchema``; nothing was sent to the server.

    Attributes:
        server, tool: the tool called.
        problems: every mismatch found, each naming the argument, what was expected and what was given.
    """

    def __init__(self, server: str, tool: str, problems: list[ArgumentProblem]) -> None:
        listing = "; ".join(str(p) for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(
            f"invalid arguments for tool {tool!r} on server {server!r}: {listing}{more}",
            hint=f"`mcpmux tools {server}:{tool}` shows its parameters; pass --no-validate "
            f"(or set `validate: false` on the server) if the server's schema is wrong",
        )
        self.server, self.tool, self.problems = server, tool, problems


class UnresolvedVariable(ConfigError):
    """A server's ``${VAR}`` references name unset variables without a default.

    The rest of the configuration loads; only this server cannot start (state ``failed``).

    Attributes:
        server: the server whose fields use the variables.
        variables: the unset variables, in the order the fields use them.
    """

    def __init__(self, server: str, problems: list[ConfigProblem], variables: list[str]) -> None:
        super().__init__(problems)
        self.server, self.variables = server, variables
        names = ", ".join(dict.fromkeys(variables))
        where = "; ".join(f"{p.path} ({p.source}{f':{p.line}' if p.line else ''})" for p in self.problems)
        self.args = (f"server {server!r} uses unset environment variable(s) {names}: {where}",)
        first = variables[0] if variables else "VAR"
        self.hint = f"export {names} before running mcpmux, or give a default in the file: ${{{first}:-value}}"


# -- transport ---------------------------------------------------------------------------------


class TransportError(MCPMuxError):
    """A server could not be started, reached, or kept connected.

    Attributes:
        server: the configured server name.
    """

    def __init__(self, server: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"server {server!r}: {message}", hint=hint)
        self.server = server


class CommandNotFound(TransportError):
    """The command of a stdio server is not on PATH (or not executable)."""

    def __init__(self, server: str, command: str, search_path: str) -> None:
        shown = search_path if len(search_path) <= 300 else search_path[:300] + "..."
        super().__init__(
            server,
            f"command {command!r} not found on PATH ({shown})",
            hint=f"install {command!r} or give its absolute path in the server's `command`",
        )
        self.command, self.search_path = command, search_path


# What a child's stderr says when TLS verification or a proxy failed (Python, Node, Rust/uv, curl, pip).
_TLS_OR_PROXY_TROUBLE = re.compile(
    r"certificate|UnknownIssuer|CERT_[A-Z_]+|SSLError|SSL routines|ssl\.SSL|proxy|tunnel connection failed",
    re.IGNORECASE,
)


class ServerExited(TransportError):
    """The server's process exited; ``stderr_tail`` holds its last words."""

    def __init__(self, server: str, exit_code: int | None, stderr_tail: str, *, during: str = "") -> None:
        when = f" {during}" if during else ""
        code = "was killed" if exit_code is None else f"exited with code {exit_code}"
        tail = _tail(stderr_tail)
        detail = f": {tail}" if tail else " (no stderr output)"
        hint = f"`mcpmux logs {server}` shows its full stderr"
        if _TLS_OR_PROXY_TROUBLE.search(stderr_tail):
            hint = (
                "its stderr reports a certificate or proxy error, and mcpmux gives a child only an allow-listed "
                "environment (trust stores such as SSL_CERT_FILE and the *_PROXY variables pass by default): if it "
                "needs another variable of your shell (a custom CA path such as PIP_CERT, a proxy setting), add its "
                "name or a glob to `settings: {env_passthrough: [NAME]}` or set it in the server's `env`; " + hint
            )
        super().__init__(server, f"process {code}{when}{detail}", hint=hint)
        self.exit_code, self.stderr_tail = exit_code, stderr_tail


class ConnectFailed(TransportError):
    """The peer could not be reached: refused, unknown host, TLS failure."""

    def __init__(self, server: str, target: str, reason: str) -> None:
        super().__init__(server, f"cannot connect to {target}: {reason}", hint="is the server running there?")
        self.target, self.reason = target, reason


class DaemonUnavailable(ConnectFailed):
    """The ``mcpmux daemon`` cannot be used: no socket, not answering, not trusted, or it refused.

    Attributes:
        socket: the daemon's socket path (or the directory or file that was refused).
    """

    def __init__(self, socket: object, reason: str, *, server: str = "daemon") -> None:
        super().__init__(server, f"the mcpmux daemon at {socket}", reason)
        self.socket = str(socket)
        self.hint = "start it with `mcpmux daemon start`, or run without it: `mcpmux --no-daemon ...`"


class HTTPStatusError(TransportError):
    """The peer answered an HTTP request with an error status."""

    def __init__(self, server: str, url: str, status: int, body: str = "") -> None:
        snippet = f": {_tail(body, 200)}" if body.strip() else ""
        super().__init__(server, f"HTTP {status} from {url}{snippet}")
        self.url, self.status, self.body = url, status, body


class AuthRequired(HTTPStatusError):
    """The peer requires credentials (HTTP 401, or 403 on a protected resource)."""

    def __init__(self, server: str, url: str, status: int = 401, body: str = "") -> None:
        super().__init__(server, url, status, body)
        self.hint = "set the server's `headers` (e.g. Authorization: Bearer ${TOKEN})"


class OAuthError(AuthRequired):
    """An OAuth 2.1 step for a server failed or was refused (exit 4).

    Attributes:
        url: the URL the failing step was about (never carries a token).
        reason: what went wrong, without secrets.
    """

    def __init__(self, server: str, url: str, reason: str, *, hint: str | None = None) -> None:
        TransportError.__init__(self, server, f"OAuth: {reason} ({url})", hint=hint or f"run `mcpmux login {server}`")
        self.url, self.status, self.body, self.reason = url, 401, "", reason


class MessageTooLarge(TransportError):
    """A message exceeded the configured ``max_message_bytes``.

    Attributes:
        size: the message's size in bytes (at least this many when the stream ended inside it).
        limit: the cap it exceeded.
        request_id: the JSON-RPC id the message carried, when the framer could read it.
        is_response: whether it was a response (``True``), a request or notification (``False``),
            or could not be told (``None``).
        ends_stream: whether the transport closed because of it (a WebSocket closes with 1009).
    """

    def __init__(
        self,
        server: str,
        size: int,
        limit: int,
        *,
        direction: str = "received",
        request_id: int | str | None = None,
        is_response: bool | None = None,
        ends_stream: bool = False,
    ) -> None:
        super().__init__(
            server,
            f"{direction} a message of at least {size} bytes, above the limit of {limit} bytes",
            hint="raise `settings.max_message_bytes` if the server is trusted to send such messages",
        )
        self.size, self.limit, self.direction = size, limit, direction
        self.request_id, self.is_response, self.ends_stream = request_id, is_response, ends_stream


class ResponseTooLarge(MessageTooLarge):
    """The answer to a request exceeded ``max_message_bytes``: it was dropped and the request failed at once.

    Attributes:
        method: the request it answered (``tools/call``, ...).
        cap: the cap it exceeded (the same as ``limit``).
    """

    def __init__(self, server: str, method: str, size: int, cap: int, *, request_id: int | str | None = None) -> None:
        # Its own message: the user asked for something and this is why it failed, not a bare wire event.
        TransportError.__init__(
            self,
            server,
            f"response to {method} too large ({size} bytes > {cap} bytes cap)",
            hint=f"raise `settings.max_message_bytes` (now {cap}) if the server is trusted to send such answers",
        )
        self.size, self.limit, self.direction = size, cap, "received"
        self.request_id, self.is_response, self.ends_stream = request_id, True, False
        self.method, self.cap = method, cap


class ConnectionClosed(TransportError):
    """The connection closed while a request was still waiting for its answer."""


class SessionExpired(ConnectionClosed):
    """A Streamable HTTP peer answered that it no longer knows our session (typically: it restarted).

    The request it answered was refused unseen, so it is safe to send again on a new session.
    """

    def __init__(self, server: str, url: str, status: int) -> None:
        super().__init__(
            server,
            f"the session at {url} has ended (HTTP {status}: the server no longer knows it; it probably restarted)",
            hint="a new session is opened on the next call",
        )
        self.url, self.status = url, status


# -- protocol ----------------------------------------------------------------------------------


class ProtocolError(MCPMuxError):
    """The peer broke the protocol (unparseable handshake, unexpected answer)."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(f"server {server!r}: {message}")
        self.server = server


class SkillRejected(ProtocolError):
    """A skill's files do not match what its server listed (size, digest or frontmatter): not loaded."""

    def __init__(self, server: str, skill: str, reason: str) -> None:
        super().__init__(server, f"skill {skill} was not loaded: {reason}")
        self.skill, self.reason = skill, reason
        self.hint = "the server serves other files than it lists; tell its maintainer, or do not use this skill"


class ProtocolVersionMismatch(ProtocolError):
    """The two sides share no protocol version."""

    def __init__(self, server: str, wanted: str, offered: str) -> None:
        super().__init__(server, f"protocol version mismatch: we speak {wanted}, the server offered {offered}")
        self.wanted, self.offered = wanted, offered


class MCPTimeoutError(MCPMuxError, TimeoutError):
    """A deadline passed: connect, handshake, or a request."""

    def __init__(self, server: str, operation: str, timeout_s: float) -> None:
        if operation == "connect":
            hint = "raise the server's `connect_timeout_ms` if it is just slow to start"
        else:
            hint = "raise `timeout_ms` (or pass --timeout) if the server is just slow"
        super().__init__(f"server {server!r}: {operation} timed out after {timeout_s:g} s", hint=hint)
        self.server, self.operation, self.timeout_s = server, operation, timeout_s


class ServerError(MCPMuxError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, server: str, method: str, code: int, message: str, data: object = None) -> None:
        super().__init__(f"server {server!r} rejected {method}: {message} (code {code})")
        self.server, self.method, self.code, self.error_message, self.data = (
            server,
            method,
            code,
            message,
            data,
        )


class ToolError(MCPMuxError):
    """A tool ran and reported failure (``isError: true``); ``text`` is what it said."""

    def __init__(self, server: str, tool: str, text: str) -> None:
        super().__init__(f"tool {tool!r} on server {server!r} failed: {_tail(text)}")
        self.server, self.tool, self.text = server, tool, text


class ToolNotFound(NotFound):
    """No tool, resource or prompt has that canonical name."""

    def __init__(self, name: str, suggestions: list[str], *, kind: str = "tool") -> None:
        super().__init__(kind, name, suggestions, hint="`mcpmux tools` lists every tool")


class NameCollision(MCPMuxError):
    """Two canonical names would map to one provider name."""

    def __init__(self, profile: str, provider_name: str, first: str, second: str) -> None:
        super().__init__(
            f"tools {first!r} and {second!r} both map to {provider_name!r} for {profile}",
            hint="give one of the servers a `prefix`, or rename it",
        )
        self.profile, self.provider_name, self.first, self.second = profile, provider_name, first, second


class ServerUnavailable(MCPMuxError):
    """The server cannot take calls now: failed, disabled, or its circuit breaker is open."""

    def __init__(self, server: str, reason: str, *, retry_after_s: float | None = None) -> None:
        after = f"; retrying after {retry_after_s:.0f} s" if retry_after_s else ""
        super().__init__(
            f"server {server!r} is unavailable: {reason}{after}",
            hint=f"`mcpmux show {server}` has its state history and stderr",
        )
        self.server, self.reason, self.retry_after_s = server, reason, retry_after_s


class ServerDisabled(ServerUnavailable):
    """The server is disabled (in its configuration, or at run time by an operator)."""

    def __init__(self, server: str, reason: str = "disabled") -> None:
        super().__init__(server, reason)
        self.hint = (
            f"enable it: `mcpmux enable {server}` (the configuration file), or at run time the console's "
            f"Enable button, POST /api/servers/{server}/enable (scope admin) or `/mcp enable {server}` in the chat"
        )


class Busy(MCPMuxError):
    """Too many calls are waiting for one server."""

    def __init__(self, server: str, in_flight: int, queued: int) -> None:
        super().__init__(
            f"server {server!r} is busy: {in_flight} calls running and {queued} queued",
            hint="retry later, or raise settings.max_concurrent_calls / max_queued_calls in the configuration",
        )
        self.server, self.in_flight, self.queued = server, in_flight, queued


class PolicyError(MCPMuxError):
    """The guard refused a call; ``tool`` is the canonical name."""

    def __init__(self, tool: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.tool = tool


class ToolDenied(PolicyError):
    """An allow/deny rule forbids the tool; ``rule`` names it."""

    def __init__(self, tool: str, rule: str) -> None:
        super().__init__(
            tool, f"tool {tool!r} is denied by {rule}", hint="change allowed_tools/denied_tools to allow it"
        )
        self.rule = rule


class ResourceNotDeclared(ToolDenied):
    """A read of a URI that none of the server's declared ``resources`` globs covers."""

    def __init__(self, server: str, tool: str, uri: str) -> None:
        rule = f"{uri!r} is not among the resources declared for server {server!r}"
        PolicyError.__init__(
            self, tool, f"resource {uri!r} of server {server!r} is not exposed: {rule}",
            hint=f"add a glob covering it to the `resources:` list of server {server!r}, or remove the list",
        )  # fmt: skip
        self.rule, self.server, self.uri = rule, server, uri


class ApprovalDenied(PolicyError):
    """Approval was required and was not given (declined, or no one could be asked)."""

    def __init__(self, tool: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(tool, f"call to {tool!r} was not approved: {reason}", hint=hint)
        self.reason = reason


class ToolQuarantined(PolicyError):
    """The tool is held back until a person approves it (``mcpmux approve``)."""

    def __init__(self, tool: str, reason: str, *, approve_as: str | None = None) -> None:
        # ``approve_as`` is ``server:tool`` (what `mcpmux approve` takes): the canonical name may
        # have another prefix, or none (``prefix: ""``).
        super().__init__(
            tool,
            f"tool {tool!r} is quarantined: {reason}",
            hint=f"review it with `mcpmux pins`, then approve it with `mcpmux approve {approve_as or tool}`",
        )
        self.reason = reason


class ToolDefinitionChanged(ToolQuarantined):
    """The tool's definition differs from the pinned one; ``diff`` shows how."""

    def __init__(self, tool: str, diff: str, *, approve_as: str | None = None) -> None:
        super().__init__(tool, f"its definition changed since it was pinned:\n{diff}", approve_as=approve_as)
        self.diff = diff


_EXIT_CODES: dict[type[BaseException], int] = {
    ConfigError: EXIT_USAGE,
    UsageError: EXIT_USAGE,
    AuthRequired: EXIT_AUTH,
    ResponseTooLarge: EXIT_FAILED,
    TransportError: EXIT_UNREACHABLE,
    ProtocolError: EXIT_UNREACHABLE,
    MCPTimeoutError: EXIT_UNREACHABLE,
    ServerError: EXIT_FAILED,
    ToolError: EXIT_FAILED,
    NameCollision: EXIT_USAGE,
    ServerUnavailable: EXIT_UNREACHABLE,
    Busy: EXIT_FAILED,
    PolicyError: EXIT_FAILED,
    MCPMuxError: EXIT_FAILED,
    KeyboardInterrupt: EXIT_INTERRUPTED,
}


def exit_code_for(exc: BaseException) -> int:
    """Return the CLI exit code for ``exc``: the entry of its nearest class in the table."""
    if isinstance(exc, RemoteError):
        return exc.exit_code
    for cls in type(exc).__mro__:
        if cls in _EXIT_CODES:
            return _EXIT_CODES[cls]
    return EXIT_FAILED


# -- errors that crossed a process boundary (the daemon) -------------------------------------

ERROR_META = "io.mcpmux/error"
"""The ``_meta`` key of a gateway's ``isError`` result that is an mcpmux error, not the tool's (:func:`error_meta`)."""


class RemoteError(MCPMuxError):
    """An error another mcpmux (the daemon) raised and reported with :func:`error_meta`; ``kind`` is its class."""

    def __init__(self, kind: str, message: str, hint: str | None, exit_code: int) -> None:
        super().__init__(message, hint=hint)
        self.kind, self.exit_code = kind, exit_code


def error_meta(exc: MCPMuxError) -> dict[str, object]:
    """What a client needs to report ``exc`` as this process would: class, its kinds, hint, exit code."""
    kinds = [c.__name__ for c in type(exc).__mro__ if issubclass(c, MCPMuxError)]
    return {"type": type(exc).__name__, "kinds": kinds, "hint": exc.hint, "exit_code": exit_code_for(exc)}
