"""What a mock server says (:class:`MockSpec`: the builder and its data), apart from serving it.

:class:`mcpmux.testing.mock.MockServer` is this builder plus ``serve()`` and ``replay()``: the
serving and replay modules depend on this one, and the public class on them. A mock is a
description (tools, resources, templates, prompts, failures, era, bearer token) plus the calls
it received; everything it says can be written to JSON (:meth:`MockSpec.to_spec`) so a child
process over stdio serves the same server, as long as its tools answer fixed results (a Python
handler cannot cross a process boundary: serve such a mock from a module path instead).
"""

from __future__ import annotations

import base64
import inspect
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import mcp_types as types

from mcpmux.errors import UsageError
from mcpmux.testing.failures import (
    Crash,
    Delay,
    Error,
    Failure,
    GarbageOutput,
    Hang,
    HugeResult,
    ListChangedAfter,
    Startup,
    failure_from_json,
    failure_to_json,
)

if TYPE_CHECKING:
    from mcpmux.testing.replay import ReplayBook

__all__ = ["ERAS", "Call", "Era", "MockSpec", "MockTool", "apply_spec", "to_result"]

Era = Literal["2025-11-25", "2026-07-28", "both"]
ERAS: tuple[Era, ...] = ("2025-11-25", "2026-07-28", "both")
InitializeAnswer = Literal["-32022", "-32020", "-32601", "claim"]
INITIALIZE_ANSWERS: tuple[InitializeAnswer, ...] = ("-32022", "-32020", "-32601", "claim")
Handler = Callable[..., Any]
DEFAULT_SCHEMA: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True, slots=True)
class Call:
    """One ``tools/call`` a mock received: the tool, its arguments, when (``time.time()``) and in which era."""

    tool: str
    arguments: dict[str, Any]
    at: float
    protocol_version: str = ""


@dataclass
class MockTool:
    """One tool of a mock: its definition, its answer (a handler or a fixed result) and its failures."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_SCHEMA))
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    handler: Handler | None = None
    result: Any = None
    failures: list[Failure] = field(default_factory=list)
    raw: dict[str, Any] | None = None
    """A recorded definition, shown as it is (replay)."""

    def definition(self) -> types.Tool:
        """The tool as ``tools/list`` shows it."""
        if self.raw is not None:
            return types.Tool.model_validate(self.raw)
        return types.Tool.model_validate(
            {
                "name": self.name,
                "description": self.description,
                "inputSchema": self.input_schema,
                "outputSchema": self.output_schema,
                "annotations": self.annotations,
            }
        )

    async def answer(
        self, arguments: dict[str, Any], context: Any = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The tool's result for ``arguments``: the handler's (awaited if async) or the fixed one.

        A handler with a parameter named ``ctx`` gets ``context`` there (the server's
        :class:`~mcpmux.testing.ToolContext`: progress, questions to the client, notifications).
        """
        if self.handler is None:
            return to_result(self.result)
        wants_context = context is not None and "ctx" in inspect.signature(self.handler).parameters
        value = self.handler(**arguments, ctx=context) if wants_context else self.handler(**arguments)
        if inspect.isawaitable(value):
            value = await value
        return to_result(value)


def to_result(value: Any) -> types.CallToolResult | types.InputRequiredResult:
    """What a handler returned, as a ``CallToolResult`` (or the ``input_required`` it asks with).

    A result stays as it is; a string is one text block; a dict is structured content (and its
    JSON as text); a list of content blocks is the content; ``None`` is no content; anything else
    JSON-serialisable is its JSON as text.
    """
    if isinstance(value, types.CallToolResult | types.InputRequiredResult):
        return value
    if value is None:
        return types.CallToolResult(content=[])
    if isinstance(value, str):
        return types.CallToolResult(content=[types.TextContent(text=value)])
    if isinstance(value, dict):
        text = json.dumps(value, sort_keys=True)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=value)
    if isinstance(value, list) and value and all(isinstance(item, types.ContentBlock) for item in value):
        return types.CallToolResult(content=list(value))
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value))])


@dataclass(frozen=True, slots=True)
class _Resource:
    uri: str
    name: str
    mime_type: str | None
    text: str | None
    blob: bytes | None

    def contents(self, uri: str) -> types.TextResourceContents | types.BlobResourceContents:
        if self.blob is not None:
            blob = base64.b64encode(self.blob).decode()
            return types.BlobResourceContents(uri=uri, mime_type=self.mime_type, blob=blob)
        return types.TextResourceContents(uri=uri, mime_type=self.mime_type, text=self.text or "")


@dataclass(frozen=True, slots=True)
class _Prompt:
    name: str
    description: str | None
    arguments: tuple[str, ...]
    template: str

    def render(self, arguments: Mapping[str, str]) -> types.GetPromptResult:
        missing = [name for name in self.arguments if name not in arguments]
        if missing:
            from mcp.shared.exceptions import MCPError

            raise MCPError(types.INVALID_PARAMS, f"prompt {self.name!r} needs the arguments {missing}")
        text = self.template.format_map(dict(arguments))
        message = types.PromptMessage(role="user", content=types.TextContent(text=text))
        return types.GetPromptResult(description=self.description, messages=[message])


class MockSpec:
    """A scriptable MCP server's description and received calls (served as :class:`~mcpmux.testing.mock.MockServer`).

    Build it with the chained methods, then look at :attr:`calls`.

    Args:
        name: the server's name (also the name of the ``ServerConfig`` it is served as).
        version: the version in its ``serverInfo``.
    """

    def __init__(self, name: str, *, version: str = "1.0.0") -> None:
        self.name, self.version = name, version
        self.tools: dict[str, MockTool] = {}
        self.resources: dict[str, _Resource] = {}
        self.templates: list[types.ResourceTemplate] = []
        self.template_readers: list[tuple[types.ResourceTemplate, Handler]] = []
        self.completer: Handler | None = None
        self.prompts: dict[str, _Prompt] = {}
        self.failures: list[Failure] = []
        self.startup = Startup()
        self.subscribable = True
        self.bearer: str | None = None
        self.answered_version: str | None = None
        self.served_era: Era = "both"
        self.initialize_answer: InitializeAnswer = "-32022"
        self.replaying: Path | None = None
        self.book: ReplayBook | None = None
        self.listed_resources: list[types.Resource] = []
        self.listed_prompts: list[types.Prompt] = []
        self._calls: list[Call] = []
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        self._call_sources: list[Callable[[], list[Call]]] = []

    # -- building ------------------------------------------------------------------------------

    def tool(
        self,
        name: str,
        handler: Handler | None = None,
        *,
        result: Any = None,
        description: str | None = None,
        schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | types.ToolAnnotations | None = None,
    ) -> Self:
        """Add (or replace) a tool answered by ``handler(**arguments)`` or, without one, by ``result``.

        ``annotations`` takes wire names (``{"readOnlyHint": True}``) or a ``ToolAnnotations``.
        """
        if isinstance(annotations, types.ToolAnnotations):
            annotations = annotations.model_dump(by_alias=True, exclude_none=True)
        self.tools[name] = MockTool(
            name=name,
            description=description,
            input_schema=dict(schema) if schema is not None else dict(DEFAULT_SCHEMA),
            output_schema=dict(output_schema) if output_schema is not None else None,
            annotations=dict(annotations) if annotations is not None else None,
            handler=handler,
            result=result,
        )
        self._changed()
        return self

    def resource(
        self, uri: str, content: str | bytes, *, name: str | None = None, mime_type: str | None = None
    ) -> Self:
        """Add a resource whose contents are ``content`` (text, or bytes served as a blob)."""
        text, blob = (None, content) if isinstance(content, bytes) else (content, None)
        self.resources[uri] = _Resource(uri, name or uri.rsplit("/", 1)[-1] or uri, mime_type, text, blob)
        return self

    def resource_template(
        self,
        uri_template: str,
        handler: Handler | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Self:
        """Add a resource template; ``handler(**variables)`` (sync or async) reads the URIs it matches.

        The handler returns text, or bytes served as a blob. Without one the template is listed only
        (reading a URI it matches needs a :meth:`resource`).
        """
        template = types.ResourceTemplate(
            uri_template=uri_template, name=name or uri_template, description=description, mime_type=mime_type
        )
        self.templates.append(template)
        if handler is not None:
            self.template_readers.append((template, handler))
        return self

    def completion(self, handler: Handler) -> Self:
        """Answer ``completion/complete`` with ``handler(ref, argument_name, value)`` (sync or async): the values.

        ``ref`` is the request's ``PromptReference`` or ``ResourceTemplateReference``. Set it before
        serving: the ``completions`` capability is announced only by a mock that has one.
        """
        self.completer = handler
        return self

    def prompt(
        self, name: str, template: str, *, description: str | None = None, arguments: Sequence[str] = ()
    ) -> Self:
        """Add a prompt: one user message, ``template`` formatted with the (required) ``arguments``."""
        self.prompts[name] = _Prompt(name, description, tuple(arguments), template)
        return self

    def require_bearer(self, token: str) -> Self:
        """Refuse (HTTP 401) any HTTP, SSE or WebSocket request without ``Authorization: Bearer <token>``."""
        self.bearer = token
        return self

    def resource_subscriptions(self, enabled: bool = True) -> Self:
        """Whether ``resources/subscribe`` is served (the default) or not, as most servers in the wild.

        Without it, the capabilities say ``resources.subscribe: false`` and a subscribe gets -32601.
        """
        self.subscribable = enabled
        return self

    def protocol_version(self, version: str) -> Self:
        """Answer ``initialize`` with ``version`` whatever the client asked (protocol version drift)."""
        self.answered_version = version
        return self

    def era(self, era: Era, *, initialize_answer: InitializeAnswer = "-32022") -> Self:
        """Serve only the 2025-11-25 handshake era, only the stateless 2026-07-28 era, or both (default).

        ``initialize_answer`` is how a 2026-07-28-only mock answers ``initialize``, as real servers
        do: error ``-32022`` naming the versions served (the SDK's answer), ``-32020`` (a header
        mismatch), ``-32601`` (method not found), or ``claim`` (a result claiming 2026-07-28).

        Raises:
            UsageError: an era or an answer other than these.
        """
        if era not in ERAS:
            raise UsageError(f"unknown era {era!r} for mock {self.name!r}", hint=f"one of: {', '.join(ERAS)}")
        if initialize_answer not in INITIALIZE_ANSWERS:
            hint = f"one of: {', '.join(INITIALIZE_ANSWERS)}"
            raise UsageError(f"unknown initialize answer {initialize_answer!r} for mock {self.name!r}", hint=hint)
        self.served_era, self.initialize_answer = era, initialize_answer
        return self

    # -- failures ------------------------------------------------------------------------------

    def fail(self, failure: Failure, tool: str | None = None) -> Self:
        """Inject ``failure`` into calls of ``tool`` (every call when ``None``).

        Raises:
            UsageError: ``tool`` is not a tool of this mock.
        """
        if tool is None:
            self.failures.append(failure)
        else:
            self._tool(tool).failures.append(failure)
        return self

    def crash(self, tool: str | None = None, *, exit_code: int = 1) -> Self:
        """End the server in the middle of a call (see :class:`~mcpmux.testing.failures.Crash`)."""
        return self.fail(Crash(exit_code), tool)

    def hang(self, tool: str | None = None) -> Self:
        """Never answer a call."""
        return self.fail(Hang(), tool)

    def delay(self, seconds: float, tool: str | None = None) -> Self:
        """Answer a call after ``seconds``."""
        return self.fail(Delay(seconds), tool)

    def error(self, code: int, message: str, tool: str | None = None) -> Self:
        """Answer a call with the JSON-RPC error ``code`` / ``message``."""
        return self.fail(Error(code, message), tool)

    def garbage_output(self, tool: str | None = None) -> Self:
        """Write a non-JSON line and answer with an invalid result."""
        return self.fail(GarbageOutput(), tool)

    def huge_result(self, mb: float, tool: str | None = None) -> Self:
        """Answer with ``mb`` megabytes of text."""
        return self.fail(HugeResult(mb), tool)

    def list_changed_after(self, n: int, tool: str | None = None) -> Self:
        """After ``n`` calls (of ``tool``, or of any tool), add a tool and announce ``tools/list_changed``."""
        return self.fail(ListChangedAfter(n), tool)

    # -- startup ---------------------------------------------------------------------------------

    def slow_start(self, seconds: float) -> Self:
        """Answer nothing for ``seconds`` after starting (a cold ``npx``/``uvx`` start; connect timeouts).

        A child sleeps before it reads stdin; a session in this process or on a socket waits
        before it reads its first message.
        """
        return self._start(delay=seconds)

    def garbage_on_start(self, lines: int) -> Self:
        """Write ``lines`` non-JSON lines on a child's stdout before serving (a banner on the wire).

        Only a child (``stdio``) has a stdout to spoil; other transports ignore it.
        """
        return self._start(garbage_lines=lines)

    def exit_on_start(self, code: int = 1, stderr: str = "fatal: refusing to start (mock)") -> Self:
        """Never serve: a child writes ``stderr`` and exits with ``code`` before the handshake.

        A session in this process or on a socket ends at once (its streams close).
        """
        return self._start(exit_code=code, stderr=stderr)

    def _start(self, **changes: Any) -> Self:
        self.startup = replace(self.startup, **changes)
        return self

    def _tool(self, name: str) -> MockTool:
        try:
            return self.tools[name]
        except KeyError:
            known = ", ".join(sorted(self.tools)) or "none yet"
            raise UsageError(f"mock {self.name!r} has no tool {name!r} (tools: {known})") from None

    # -- calls -----------------------------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        """Every ``tools/call`` received so far, in order (from a child process too)."""
        with self._lock:
            own = list(self._calls)
        for source in self._call_sources:
            own.extend(source())
        return sorted(own, key=lambda call: call.at)

    def record(self, call: Call) -> None:
        """Keep ``call`` (the serving code calls this for each ``tools/call``)."""
        with self._lock:
            self._calls.append(call)

    def count(self, tool: str | None = None) -> int:
        """How many calls (of ``tool``) were received."""
        return sum(1 for call in self.calls if tool is None or call.tool == tool)

    def add_call_source(self, source: Callable[[], list[Call]]) -> Callable[[], None]:
        """Also count the calls ``source`` returns (a child's call log); returns its remover."""
        self._call_sources.append(source)
        return lambda: self._call_sources.remove(source)

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever the tool list changes (a served session announces it)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def __iter__(self) -> Iterator[MockTool]:
        return iter(self.tools.values())

    # -- the JSON spec ------------------------------------------------------------------------------

    def to_spec(self) -> dict[str, Any]:
        """Everything this mock says, as JSON (for ``python -m mcpmux.testing``).

        Raises:
            UsageError: a tool has a Python handler (serve it from a module path instead).
        """
        if self.replaying is None:
            handled = [tool.name for tool in self.tools.values() if tool.handler is not None]
            handled += [template.uri_template for template, _ in self.template_readers]
            handled += ["completion"] if self.completer is not None else []
            if handled:
                raise UsageError(
                    f"mock {self.name!r}: {handled} have Python handlers, which a child process cannot run",
                    hint="give them fixed results, or serve it from a module: serve('stdio', module='pkg.mod:mock')",
                )
        return {
            "name": self.name,
            "version": self.version,
            "era": self.served_era,
            "initialize_answer": self.initialize_answer,
            "protocol_version": self.answered_version,
            "bearer": self.bearer,
            "replay": str(self.replaying) if self.replaying is not None else None,
            "match": self.book.match if self.book is not None else "strict",
            "failures": [failure_to_json(f) for f in self.failures],
            "startup": self.startup.to_json(),
            "subscriptions": self.subscribable,
            "tools": [_tool_spec(tool) for tool in self.tools.values()],
            "resources": [_resource_spec(r) for r in self.resources.values()],
            "templates": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in self.templates],
            "prompts": [
                {"name": p.name, "description": p.description, "arguments": list(p.arguments), "template": p.template}
                for p in self.prompts.values()
            ],
        }


def apply_spec(mock: MockSpec, spec: Mapping[str, Any]) -> None:
    """Set on ``mock`` everything a :meth:`MockSpec.to_spec` object says beyond its name, version and replay."""
    mock.era(spec.get("era", "both"), initialize_answer=spec.get("initialize_answer", "-32022"))
    mock.answered_version = spec.get("protocol_version")
    mock.bearer = spec.get("bearer")
    mock.failures = [failure_from_json(f) for f in spec.get("failures", [])]
    mock.startup = Startup.from_json(spec.get("startup"))
    mock.subscribable = bool(spec.get("subscriptions", True))
    for item in spec.get("tools", []):
        mock.tools[item["name"]] = _tool_from_spec(item)
    for item in spec.get("resources", []):
        blob = base64.b64decode(item["blob"]) if item.get("blob") is not None else None
        mock.resources[item["uri"]] = _Resource(
            item["uri"], item["name"], item.get("mime_type"), item.get("text"), blob
        )
    mock.templates = [types.ResourceTemplate.model_validate(t) for t in spec.get("templates", [])]
    for item in spec.get("prompts", []):
        mock.prompt(item["name"], item["template"], description=item.get("description"), arguments=item["arguments"])


def _tool_spec(tool: MockTool) -> dict[str, Any]:
    return {
        "definition": tool.definition().model_dump(mode="json", by_alias=True, exclude_none=True),
        "result": to_result(tool.result).model_dump(mode="json", by_alias=True, exclude_none=True),
        "failures": [failure_to_json(f) for f in tool.failures],
        "name": tool.name,
    }


def _tool_from_spec(item: Mapping[str, Any]) -> MockTool:
    definition = item["definition"]
    return MockTool(
        name=item["name"],
        description=definition.get("description"),
        input_schema=definition.get("inputSchema", dict(DEFAULT_SCHEMA)),
        output_schema=definition.get("outputSchema"),
        annotations=definition.get("annotations"),
        result=types.CallToolResult.model_validate(item["result"]),
        failures=[failure_from_json(f) for f in item.get("failures", [])],
    )


def _resource_spec(resource: _Resource) -> dict[str, Any]:
    blob = base64.b64encode(resource.blob).decode() if resource.blob is not None else None
    return {
        "uri": resource.uri,
        "name": resource.name,
        "mime_type": resource.mime_type,
        "text": resource.text,
        "blob": blob,
    }
