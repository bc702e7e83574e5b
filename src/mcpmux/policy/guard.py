"""The guard: the one path from every face to a server, with policy and audit on the way.

::

    guard = Guard(manager, face="cli", approver=ask_in_terminal)
    guard.tools()                                # only what may be listed: not denied, not quarantined
    await guard.call_tool("fs:write_file", args) # rules -> pin -> approval -> call -> audit row

Faces never call the manager directly (they are built on :class:`mcpmux.Host`, a guard that owns
its manager and stores). Every verb that reaches a server goes through here: tool calls, resource
reads and prompts (rules, pins, approval), and completions, subscriptions and log levels (the
server's allow/deny rules). What is denied, quarantined or not approved never reaches its server,
and every attempt, refused or not, leaves an audit row.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types

from mcpmux.config.models import AgentConfig, Config, ServerConfig, declared_for
from mcpmux.connection.skills import LoadedSkill, SkillEntry, load_skill
from mcpmux.errors import (
    ApprovalDenied,
    InvalidArguments,
    MCPMuxError,
    NotFound,
    ResourceNotDeclared,
    ToolDefinitionChanged,
    ToolDenied,
    ToolQuarantined,
    closest,
)
from mcpmux.manager import Manager, PromptInfo, ResourceInfo, ServerStatus, ToolInfo
from mcpmux.policy.approval import Answer, ApprovalRequest, Approvals, ApprovalScope, Approver
from mcpmux.policy.audit import AuditLog, argument_digest
from mcpmux.policy.cache import ResultCache
from mcpmux.policy.pins import PinBook, PinLookup, PinVerdict, definition_hash, server_identity
from mcpmux.policy.rules import Decision, Rules
from mcpmux.policy.scanner import Finding, scan_tool, suspect
from mcpmux.policy.scope import ToolScope, agent_scope
from mcpmux.policy.store import StateStore
from mcpmux.policy.switches import ServerSwitches
from mcpmux.policy.toolsets import Toolset
from mcpmux.policy.validation import ArgumentCheck
from mcpmux.types.events import Event
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream
    from mcp.shared.dispatcher import ProgressFnT

    from mcpmux.connection import ConnectionInfo

logger = logging.getLogger(__name__)

__all__ = ["Exposure", "Guard", "SkillInfo", "Suspicion"]

Suspicion = Callable[[ToolInfo, Sequence[ToolInfo]], str | None]
"""Returns why a tool looks poisoned (a high-severity scanner finding), or ``None``."""

_R = TypeVar("_R")

DECISIONS_KEPT = 8192
READ_RESOURCE, GET_PROMPT = "read_resource", "get_prompt"
# Requests about a server rather than one of its tools: ruled by the server's allow/deny rules
# (a server every one of whose tools is denied is denied), never asked about, always audited.
COMPLETE, SUBSCRIBE, UNSUBSCRIBE = "completion/complete", "resources/subscribe", "resources/unsubscribe"
SET_LEVEL, RESTART, REFRESH = "logging/setLevel", "mcpmux/restart", "mcpmux/refresh"
ENABLE, DISABLE = "mcpmux/enable", "mcpmux/disable"
# Names the narrow rule (this one tool), never the switch that turns every approval off.
NO_APPROVER_HINT = (
    "run the command in a terminal to answer the prompt, or allow this one tool in the configuration: "
    "security.approval_rules [{{tools: '{tool}', action: allow}}]"
)


@dataclass(frozen=True, slots=True)
class SkillInfo:
    """A skill and the server that lists it."""

    server: str
    entry: SkillEntry


@dataclass(frozen=True, slots=True)
class Exposure:
    """Whether a tool is listed, and if not, why (``denied`` or ``quarantined``)."""

    tool: ToolInfo
    exposed: bool
    kind: str
    reason: str
    verdict: PinVerdict | None = None


@dataclass(slots=True)
class _InFlight:
    """A call on its way to a server, for the approval questions that server may ask back."""

    tool: ToolInfo
    arguments: JSONObject
    scope: ApprovalScope
    approved: bool


class Guard:
    """Policy over a :class:`Manager`: allow/deny, pins, approval and audit for every call.

    Args:
        manager: the started manager.
        face: who calls (``library``, ``cli``, ``chat``, ``gateway``, ``api``), for the audit log.
        approver: asks a person; without one, a call that needs approval is refused with a hint.
        store: the state database (pins, approvals, audit); the default file if ``None``.
        project: the project whose remembered approvals apply (the current directory by default).
        suspicion: flags poisoned tool definitions (the scanner's high findings by default); a
            flagged tool is quarantined. ``None`` turns the scanner off.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        face: str = "library",
        approver: Approver | None = None,
        store: StateStore | None = None,
        project: Path | str | None = None,
        suspicion: Suspicion | None = suspect,
    ) -> None:
        config = manager.config
        self.manager, self.face, self.approver = manager, face, approver
        self.store = store or StateStore.configured(config)
        self.rules = Rules(config.security, {s.name: s for s in config.servers})
        self.approvals = Approvals(self.store, project)
        identities = {s.name: server_identity(s, self.approvals.project) for s in config.servers}
        self.pins = PinBook(self.store, config.security.pinning, identities)
        self.audit = AuditLog(self.store, config.secret_values)
        self.switches = ServerSwitches(self.store)
        self._suspicion = suspicion
        self._exposures: dict[tuple[str, str, str], Exposure] = {}
        self._in_flight: dict[str, list[_InFlight]] = {}
        self._servers: dict[str, ServerConfig] = {}
        self._decisions: dict[int, tuple[ToolInfo, Decision]] = {}
        self._servers_of: Config | None = None
        self._check_arguments = ArgumentCheck()
        self.cache = ResultCache()
        self.scope: ToolScope | None = None
        self.toolset: Toolset | None = None

    # -- what may be seen --------------------------------------------------------------------

    def tools(self, server: str | None = None) -> list[ToolInfo]:
        """The tools that may be listed and called: not denied, not quarantined."""
        return [e.tool for e in self.exposures(server) if e.exposed]

    def withheld(self, server: str | None = None) -> list[Exposure]:
        """The tools held back, with the reason (denied by a rule, or quarantined)."""
        return [e for e in self.exposures(server) if not e.exposed]

    def exposures(self, server: str | None = None) -> list[Exposure]:
        """Every tool with its exposure verdict."""
        taken: list[Sequence[ToolInfo]] = []  # one snapshot of the index per listing, taken if the scanner asks

        def snapshot() -> Sequence[ToolInfo]:
            if not taken:
                taken.append(self.manager.tools())  # the index's own snapshot (the scanner caches by its version)
            return taken[0]

        tools = self.manager.tools(server)
        if self.toolset is not None:
            tools = [t for t in tools if self.toolset.has_tool(t)]
        lookup = self.pins.lookup()  # the pins of the listing: one query per server asked about, not per tool
        return [self._exposure(tool, snapshot, lookup) for tool in tools]

    def _exposure(
        self,
        tool: ToolInfo,
        everyone: Callable[[], Sequence[ToolInfo]] | None = None,
        lookup: PinLookup | None = None,
    ) -> Exposure:
        if self.scope is not None and not self.scope.admits(tool):
            return Exposure(tool, False, "denied", self.scope.rule)
        digest = self._hash(tool)
        key = (tool.server, tool.tool, digest)
        cached = self._exposures.get(key)
        if cached is not None:
            return cached
        listing = self.rules.listing(tool)
        if listing.action == "deny":
            exposure = Exposure(tool, False, "denied", listing.rule)
        else:
            scanner = self._suspicion
            others = everyone or self.manager.tools
            scan = None if scanner is None else lambda t: scanner(t, others())
            suspicion = None if scan is None else lambda: scan(tool)
            server_tools = partial(self.manager.tools, tool.server)
            verdict = self.pins.check(
                tool, suspicion=suspicion, listing=server_tools, scan=scan, digest=digest, lookup=lookup
            )
            exposure = Exposure(
                tool, verdict.exposed, "ok" if verdict.exposed else "quarantined", verdict.reason, verdict
            )
        self._exposures[key] = exposure
        return exposure

    def _hash(self, tool: ToolInfo) -> str:
        return definition_hash(tool)  # computed once per ToolInfo object (the index reuses them)

    def high_findings(self, server: str, tool: str | None = None) -> list[Finding]:
        """The scanner's high findings in the held-back definitions that :meth:`approve` would approve."""
        held = [e.tool for e in self.withheld(server) if e.kind == "quarantined" and (not tool or e.tool.tool == tool)]
        others = [t.name for t in self.manager.tools() if not t.synthetic and t.server != server]
        found = (scan_tool(info, server=info.server, other_tools=others) for info in held)
        return [f for findings in found for f in findings if f.severity == "high"]

    def approve(self, server: str, tool: str | None = None) -> int:
        """Approve the quarantined or unapproved definitions of ``server`` (or one tool); return how many."""
        approved = self.pins.approve(server, tool)
        self._exposures.clear()
        return len(approved)

    def resources(self, server: str | None = None) -> list[ResourceInfo]:
        """Every resource and template (of ``server`` if given) whose ``server:read_resource`` is not denied."""
        readable = self._verb_allowed(READ_RESOURCE)
        toolset = self.toolset
        return [
            r
            for r in self.manager.resources(server)
            if readable(r.server) and (toolset is None or toolset.has_resource(r.server, r.uri))
        ]

    def prompts(self, server: str | None = None) -> list[PromptInfo]:
        """Every prompt (of ``server`` if given) whose ``server:get_prompt`` is not denied."""
        renderable = self._verb_allowed(GET_PROMPT)
        toolset = self.toolset
        prompts = self.manager.prompts(server)
        return [p for p in prompts if renderable(p.server) and (toolset is None or toolset.has_prompt(p))]

    def _verb_allowed(self, verb: str) -> Callable[[str], bool]:
        """Whether the rules list ``server:verb``, asked once per server."""
        known: dict[str, bool] = {}

        def allowed(server: str) -> bool:
            if server not in known:
                known[server] = self._verb_listing(server, verb).action != "deny"
            return known[server]

        return allowed

    def status(self) -> list[ServerStatus]:
        """The state of every configured server (denied ones included: this is the operator's view)."""
        return self.manager.status()

    @property
    def config(self) -> Config:
        """The configuration the host runs."""
        return self.manager.config

    @property
    def servers(self) -> list[str]:
        """The configured server names, in configuration order."""
        return self.manager.servers

    def capabilities(self) -> types.ServerCapabilities:
        """The union of the capabilities of the connected servers that are not denied (and of the toolset's kinds)."""
        union = self.manager.capabilities(s for s in self.manager.servers if not self.is_denied(s))
        toolset = self.toolset
        if toolset is None:
            return union
        return union.model_copy(
            update={
                "resources": union.resources if toolset.resources else None,
                "prompts": union.prompts if toolset.prompts else None,
                "completions": union.completions if toolset.resources or toolset.prompts else None,
            }
        )

    def server_info(self, server: str) -> ConnectionInfo | None:
        """What ``server`` said of itself when it connected (``None`` while it is not connected, or denied)."""
        return None if self.is_denied(server) else self.manager.server_info(server)

    def list_hint(self, server: str, method: str) -> tuple[int, bool] | None:
        """``server``'s cache hint on its last ``method`` listing: ``(ttlMs, private)``, or ``None``."""
        return self.manager.list_hint(server, method)

    def stderr_tail(self, server: str) -> str | None:
        """The last lines ``server`` wrote to stderr (stdio servers), while its connection is open."""
        return self.manager.stderr_tail(server)

    def last_error(self, server: str) -> MCPMuxError | None:
        """The error of ``server``'s last failed attempt (with its hint), if any."""
        return self.manager.last_error(server)

    @asynccontextmanager
    async def events(self) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
        """Server state and list changes as they happen."""
        async with self.manager.subscribe() as stream:
            yield stream

    def with_face(self, face: str, approver: Approver | None = None) -> Guard:
        """This guard for another face in the same process: same manager, rules, pins, approvals and audit."""
        other = Guard.__new__(Guard)
        other.__dict__.update(self.__dict__)
        other.face, other.approver = face, approver
        return other

    def for_agent(self, agent: AgentConfig | str) -> Guard:
        """This guard held to one agent's allow-list (its ``tools`` or ``toolset``).

        Tools outside it are neither listed nor callable: a call is refused like a denied tool
        and audited with the caller ``agent:NAME``.

        Raises:
            UsageError: no such agent, or its toolset is not configured.
        """
        entry = self.config.agent(agent) if isinstance(agent, str) else agent
        return self.scoped(agent_scope(self.config, entry))

    def scoped(self, scope: ToolScope) -> Guard:
        """This guard (same face, approver, stores) held to ``scope`` as well as the rules."""
        other = self.with_face(self.face, self.approver)
        other.scope = scope
        return other

    def with_toolset(self, toolset: Toolset | None) -> Guard:
        """This guard restricted to ``toolset``: what is outside it is neither listed nor reachable.

        A tool, prompt or resource outside the toolset is refused like one the rules deny
        (:class:`~mcpmux.errors.ToolDenied`, audited as ``denied``). ``None``: no restriction.
        """
        other = Guard.__new__(Guard)
        other.__dict__.update(self.__dict__)
        other.toolset = toolset
        return other

    def _outside(self, tool: ToolInfo, args: JSONObject, caller: str | None, inside: bool) -> None:
        """Refuse (audited, as a denial) what the toolset does not hold; ``inside``: the toolset's verdict."""
        if self.toolset is not None and not inside:
            self._refused(tool, args, caller, "denied", self.toolset.rule)
            raise ToolDenied(tool.name, self.toolset.rule)

    # -- calls -----------------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str | ToolInfo,
        arguments: Mapping[str, Any] | None = None,
        *,
        caller: str | None = None,
        answered_by: str | None = None,
        timeout: float | None = None,
        on_progress: ProgressFnT | None = None,
        validate: bool | None = None,
        cache: bool = True,
    ) -> types.CallToolResult:
        """Call ``name`` if the policy allows it (asking when it says so), and audit the attempt.

        ``name`` is a canonical name, or the :class:`ToolInfo` a face resolved already (its name
        is then not looked up again, unless its server re-listed since: the definition judged is
        always the one the server has now). ``caller`` is who calls (for the audit log); ``answered_by``
        who answers its approval questions (``caller`` if not given): on faces other than the
        local ones, "always" answers are remembered for that identity alone
        (:class:`~mcpmux.policy.approval.ApprovalScope`).

        The arguments are checked against the tool's ``inputSchema`` once the rules allow the call
        and before anyone is asked (see :mod:`mcpmux.policy.validation`), unless ``validate`` is
        false or, when it is ``None``, the server's ``validate: false`` says so; invalid arguments
        are refused (audited) and never sent.

        A server's ``cache`` block may answer from a kept result (see :mod:`mcpmux.policy.cache`);
        the audit row then says ``cache-hit`` (a cacheable call that went out says ``cache miss``
        in its rule). ``cache=False`` always calls the server (and keeps nothing).

        Raises:
            ToolNotFound: no such tool.
            ToolDenied: an allow/deny rule forbids it.
            ToolQuarantined, ToolDefinitionChanged: its definition is held back until approved.
            ApprovalDenied: approval was needed and not given.
            InvalidArguments: the arguments do not match the tool's input schema.
            MCPMuxError: the call itself failed (see :meth:`Manager.call_tool`).
        """
        args = dict(arguments or {})
        tool, caller = await self._resolved(name, caller)
        if tool.synthetic or self.toolset is not None:
            self._within_scope(tool, args, caller)
        check = validate if validate is not None else self._validates(tool)
        # _decide, without a frame of its own when no one is asked.
        decision = self._judge(tool, args, caller, check_arguments=check)
        if decision.action == "ask":
            decision = await self._ask(tool, args, caller, decision, ApprovalScope.of(self.face, answered_by or caller))
        server = self._server_config(tool.server)
        cacheable = cache and ResultCache.cacheable(server, tool)
        if cacheable:
            hit = self._cache_hit(tool, args, caller, decision)
            if hit is not None:
                return hit
            decision = Decision(decision.action, f"{decision.rule}; cache miss", by_person=decision.by_person)
        scope = ApprovalScope.of(self.face, answered_by or caller)
        in_flight = _InFlight(tool, args, scope, decision.by_person)
        self._calling(in_flight)
        # _run inlined (the hot path: one frame less for every resumption of the call).
        started = time.monotonic()
        try:
            result = await self.manager.call_resolved(tool, args, timeout=timeout, on_progress=on_progress)
        except anyio.get_cancelled_exc_class():
            self._ran(tool, args, caller, decision, started, "cancelled")
            raise
        except MCPMuxError as exc:
            self._ran(tool, args, caller, decision, started, "error", str(exc))
            raise
        finally:
            self._called(in_flight)
        outcome = "tool-error" if result.is_error else "ok"
        self._ran(tool, args, caller, decision, started, outcome, result_bytes=_tool_result_size(result))
        if cacheable:
            self.cache.store(server, tool, args, caller, result)
        return result

    async def _resolved(self, name: str | ToolInfo, caller: str | None) -> tuple[ToolInfo, str | None]:
        """The tool called (as its server lists it now; a server still starting is waited for, bounded) and
        who calls (this view's caller unless told)."""
        caller = caller if caller is not None or self.scope is None else self.scope.caller
        if isinstance(name, ToolInfo):
            return self.manager.fresh(name), caller
        return await self.manager.resolve_tool_waiting(name), caller

    def _within_scope(self, tool: ToolInfo, args: JSONObject, caller: str | None) -> None:
        """Refuses (audited) a call that this guard's toolset leaves out, or a read it may not make.

        ``server:read_resource`` is a read like :meth:`read_resource`'s: the same URI checks, before
        anything; ``server:get_prompt`` a render like :meth:`get_prompt`'s: the toolset's prompt
        patterns rule it.
        """
        if tool.synthetic and tool.tool == READ_RESOURCE:
            self._readable(tool, args, caller, str(args.get("uri", "")))
        elif self.toolset is None:
            return
        elif tool.synthetic and tool.tool == GET_PROMPT:
            wanted = str(args.get("name", ""))
            prompt = next((p for p in self.manager.prompts(tool.server) if p.prompt == wanted), None)
            self._outside(tool, args, caller, prompt is not None and self.toolset.has_prompt(prompt))
        else:
            self._outside(tool, args, caller, self.toolset.has_tool(tool))

    def _cache_hit(
        self, tool: ToolInfo, args: JSONObject, caller: str | None, decision: Decision
    ) -> types.CallToolResult | None:
        """A kept result of this call, audited as ``cache-hit``; ``None``: none is kept."""
        hit = self.cache.lookup(tool, args, caller)
        if hit is not None:
            self.audit.record(
                face=self.face, caller=caller, server=tool.server, tool=tool.tool, name=tool.name, arguments=args,
                decision="asked" if decision.action == "ask" else "allowed", rule=decision.rule, duration_ms=0.0,
                outcome="cache-hit", result_bytes=_tool_result_size(hit),
            )  # fmt: skip
        return hit

    def _calling(self, call: _InFlight) -> None:
        # Cheap on the hot path: arguments are compared only when a server asks (answer_upstream_approval).
        self._in_flight.setdefault(call.tool.server, []).append(call)

    def _called(self, call: _InFlight) -> None:
        calls = self._in_flight.get(call.tool.server)
        if calls is not None:
            calls.remove(call)
            if not calls:
                del self._in_flight[call.tool.server]

    def _rules_call(self, tool: ToolInfo, args: JSONObject, caller: str | None) -> Decision:
        """``rules.call``, kept per ToolInfo object when no approval rule can look at the arguments
        or the caller (then the decision depends on the tool alone)."""
        if self.rules.reads_arguments(tool.server):
            return self.rules.call(tool, args, caller)
        kept = self._decisions.get(id(tool))
        if kept is None or kept[0] is not tool:
            if len(self._decisions) >= DECISIONS_KEPT:  # re-listed servers leave old objects behind
                self._decisions.clear()
            kept = self._decisions[id(tool)] = (tool, self.rules.call(tool, args, caller))
        return kept[1]

    def _server_config(self, name: str) -> ServerConfig:
        """``manager.config.server(name)`` by one dictionary lookup (rebuilt if the configuration is replaced)."""
        config = self.manager.config
        if self._servers_of is not config:
            self._servers, self._servers_of = {s.name: s for s in config.servers}, config
        found = self._servers.get(name)
        return found if found is not None else config.server(name)  # raises ServerNotConfigured

    async def answer_upstream_approval(self, server: str, question: Mapping[str, Any]) -> Answer:
        """Answer an upstream mcpmux's approval question about our call in flight on ``server``.

        ``question`` is the :data:`~mcpmux.policy.chained.APPROVAL_META` of its elicitation. "yes"
        if the person approved that call here already (or an "always" of theirs covers it), else
        the approver is asked once, as for a call of ours; "no" when there is no such call or no
        one to ask (see :mod:`mcpmux.policy.chained`).
        """
        arguments = dict(question.get("arguments") or {})
        digest = argument_digest(arguments)
        calls = [c for c in self._in_flight.get(server, ()) if argument_digest(c.arguments) == digest]
        if not calls:
            return Answer.NO
        call = calls[-1]
        if call.approved or self.approvals.remembered(server, call.tool.tool, call.scope):
            return Answer.YES
        if self.approver is None:
            return Answer.NO
        tool = call.tool
        reason = f"{server} asks: {question.get('reason') or 'approval required'}"
        request = ApprovalRequest(
            tool.name, server, tool.tool, arguments, reason, tool.description, tool.annotations or {},
            face=self.face, caller=call.scope.caller or None,
        )  # fmt: skip
        try:
            answer = await self.approver(request)
        except ApprovalDenied:
            return Answer.NO
        if answer is Answer.ALWAYS_TOOL:
            self.approvals.remember(server, tool.tool, call.scope)
        elif answer is Answer.ALWAYS_SERVER:
            self.approvals.remember(server, None, call.scope)
        call.approved = answer is not Answer.NO
        return Answer.YES if call.approved else Answer.NO

    def _validates(self, tool: ToolInfo) -> bool:
        """Whether ``tool``'s arguments are checked: its server's ``validate`` (synthetic tools: never)."""
        if tool.synthetic:
            return False
        return self._server_config(tool.server).validate_arguments

    async def _decide(
        self,
        tool: ToolInfo,
        args: JSONObject,
        caller: str | None,
        answered_by: str | None = None,
        *,
        check_arguments: bool = False,
    ) -> Decision:
        decision = self._judge(tool, args, caller, check_arguments=check_arguments)
        if decision.action == "ask":
            return await self._ask(tool, args, caller, decision, ApprovalScope.of(self.face, answered_by or caller))
        return decision

    def _judge(self, tool: ToolInfo, args: JSONObject, caller: str | None, *, check_arguments: bool) -> Decision:
        """The rules, scope, pin and argument checks of a call (refusals audited and raised); "ask" left to ask."""
        decision = self._rules_call(tool, args, caller)
        if decision.action != "deny" and self.scope is not None and not self.scope.admits(tool):
            decision = Decision("deny", self.scope.rule)
        if decision.action == "deny":
            self._refused(tool, args, caller, "denied", decision.rule)
            raise ToolDenied(tool.name, decision.rule)
        exposure = self._exposure(tool)
        if not exposure.exposed:
            self._refused(tool, args, caller, "quarantined", exposure.reason)
            pin = exposure.verdict.pin if exposure.verdict else None
            approve_as = f"{tool.server}:{tool.tool}"
            if pin is not None and pin.pending_hash is not None:
                raise ToolDefinitionChanged(tool.name, pin.diff(), approve_as=approve_as)
            raise ToolQuarantined(tool.name, exposure.reason, approve_as=approve_as)
        if check_arguments:
            try:
                self._check_arguments(tool, args)
            except InvalidArguments as exc:
                self._refused(tool, args, caller, "invalid", "; ".join(str(p) for p in exc.problems))
                raise
        return decision

    async def _ask(
        self, tool: ToolInfo, args: JSONObject, caller: str | None, decision: Decision, scope: ApprovalScope
    ) -> Decision:
        if self.approvals.remembered(tool.server, tool.tool, scope):
            return Decision("allow", f"remembered approval of {scope} ({decision.rule})", by_person=True)
        if self.approver is None:
            self._refused(tool, args, caller, "denied", f"{decision.rule}: no one to ask")
            raise ApprovalDenied(
                tool.name,
                f"{decision.rule} requires approval and no one can be asked",
                hint=NO_APPROVER_HINT.format(tool=tool.name),
            )
        request = ApprovalRequest(
            tool.name, tool.server, tool.tool, args, decision.rule, tool.description, tool.annotations or {},
            face=self.face, caller=scope.caller or caller,
        )  # fmt: skip
        try:
            answer = await self.approver(request)
        except ApprovalDenied as exc:  # the approver refused to ask (this caller may not approve)
            self._refused(tool, args, caller, "denied", f"{decision.rule}: {exc.reason}")
            raise
        if answer is Answer.NO:
            self._refused(tool, args, caller, "denied", f"{decision.rule}: declined")
            raise ApprovalDenied(tool.name, "declined")
        if answer is Answer.ALWAYS_TOOL:
            self.approvals.remember(tool.server, tool.tool, scope)
        elif answer is Answer.ALWAYS_SERVER:
            self.approvals.remember(tool.server, None, scope)
        return Decision("ask", f"{decision.rule}: approved ({answer.value})", by_person=True)

    async def _run(
        self,
        tool: ToolInfo,
        args: JSONObject,
        caller: str | None,
        decision: Decision,
        call: Awaitable[_R],
        size: Callable[[_R], int | None],
        is_error: Callable[[_R], bool] = lambda _: False,
    ) -> _R:
        started = time.monotonic()
        try:
            result = await call
        except anyio.get_cancelled_exc_class():
            self._ran(tool, args, caller, decision, started, "cancelled")
            raise
        except MCPMuxError as exc:
            self._ran(tool, args, caller, decision, started, "error", str(exc))
            raise
        self._ran(tool, args, caller, decision, started, "tool-error" if is_error(result) else "ok", None, size(result))
        return result

    def _ran(
        self,
        tool: ToolInfo,
        args: JSONObject,
        caller: str | None,
        decision: Decision,
        started: float,
        outcome: str,
        error: str | None = None,
        result_bytes: int | None = None,
    ) -> None:
        """The audit row of a request that went out (see :meth:`_run`)."""
        self.audit.record(
            face=self.face, caller=caller, server=tool.server, tool=tool.tool, name=tool.name, arguments=args,
            decision="asked" if decision.action == "ask" else "allowed", rule=decision.rule,
            duration_ms=(time.monotonic() - started) * 1000, outcome=outcome, error=error, result_bytes=result_bytes,
        )  # fmt: skip

    def _refused(self, tool: ToolInfo, args: JSONObject, caller: str | None, decision: str, rule: str) -> None:
        self.audit.record(
            face=self.face, caller=caller, server=tool.server, tool=tool.tool, name=tool.name, arguments=args,
            decision=decision, rule=rule, duration_ms=None, outcome="refused",
        )  # fmt: skip

    # -- resources and prompts -----------------------------------------------------------------

    def _readable(self, tool: ToolInfo, args: JSONObject, caller: str | None, uri: str) -> None:
        """Refuse (audited, never sent) a read of ``uri`` through ``tool`` (a ``server:read_resource``)
        that the toolset does not hold or that none of the server's declared ``resources`` covers.

        Every read takes this check: :meth:`read_resource` and a call of the synthetic tool alike.
        """
        if self.toolset is not None:
            self._outside(tool, args, caller, self.toolset.has_resource(tool.server, uri))
        declared = self.manager.config.server(tool.server).resources
        if declared is not None and declared_for(declared, uri) is None:
            refusal = ResourceNotDeclared(tool.server, tool.name, uri)
            self._refused(tool, args, caller, "denied", refusal.rule)
            raise refusal

    async def read_resource(
        self,
        server: str,
        uri: str,
        *,
        caller: str | None = None,
        answered_by: str | None = None,
        timeout: float | None = None,
    ) -> types.ReadResourceResult:
        """Read ``uri`` from ``server`` under the rules of its ``server:read_resource`` tool, audited.

        A server with declared ``resources`` is read only at URIs they cover; others are refused
        (:class:`~mcpmux.errors.ToolDenied`, audited) and never sent.
        """
        tool = self._verb_tool(server, READ_RESOURCE)
        args: JSONObject = {"uri": uri}
        self._readable(tool, args, caller, uri)
        decision = await self._decide(tool, args, caller, answered_by)
        read = self.manager.read_resource(server, uri, timeout=timeout)
        return await self._run(tool, args, caller, decision, read, _contents_size)

    async def skills(self, server: str | None = None, *, timeout: float | None = None) -> list[SkillInfo]:
        """The skills of every enabled server (or of ``server``) that declares the skills extension.

        Listing reads no skill file (the extension's no-prefetch rule). A server that cannot be
        reached is left out when all are listed, and raises when named.
        """
        if server is not None:
            return [SkillInfo(server, entry) for entry in await self.manager.list_skills(server, timeout=timeout)]
        names = [s.name for s in self.manager.status() if s.state != "disabled"]
        found: dict[str, list[SkillEntry]] = {}

        async def one(name: str) -> None:
            try:
                found[name] = await self.manager.list_skills(name, timeout=timeout)
            except MCPMuxError as exc:  # not swallowed: said, and the others are listed
                logger.warning("server %r: its skills could not be listed: %s", name, exc)

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(one, name)
        return [SkillInfo(name, entry) for name in names for entry in found.get(name, [])]

    async def load_skill(
        self, server: str, skill: str, *, caller: str | None = None, timeout: float | None = None
    ) -> LoadedSkill:
        """Load ``skill`` (its name or ``SKILL.md`` URI) of ``server``: every file read under the rules of
        ``server:read_resource`` (allowed, audited) and checked against the listing before the next.

        Raises:
            NotFound: the server lists no such skill.
            SkillRejected: a file does not match its listing; the rest is not read.
        """
        listed = await self.manager.list_skills(server, timeout=timeout)
        entry = next((e for e in listed if skill in (e.name, e.uri)), None)
        if entry is None:
            hint = f"`mcpmux skills {server}` lists them"
            raise NotFound("skill", f"{server}:{skill}", closest(skill, [e.name for e in listed]), hint=hint)
        return await load_skill(
            server, entry, lambda uri: self.read_resource(server, uri, caller=caller, timeout=timeout)
        )

    async def get_prompt(
        self,
        name: str | PromptInfo,
        arguments: dict[str, str] | None = None,
        *,
        caller: str | None = None,
        answered_by: str | None = None,
        timeout: float | None = None,
    ) -> types.GetPromptResult:
        """Render a prompt under the rules of its server's ``server:get_prompt`` tool, audited."""
        prompt = self.manager.resolve_prompt(name) if isinstance(name, str) else name
        tool = self._verb_tool(prompt.server, GET_PROMPT)
        args: JSONObject = {"name": prompt.prompt, "arguments": arguments or {}}
        if self.toolset is not None:
            self._outside(tool, args, caller, self.toolset.has_prompt(prompt))
        decision = await self._decide(tool, args, caller, answered_by)
        render = self.manager.get_prompt(prompt, arguments, timeout=timeout)
        return await self._run(tool, args, caller, decision, render, _prompt_size)

    def resolve_tool(self, name: str) -> ToolInfo:
        """The tool with canonical ``name``, resolved once at a face's edge (see :meth:`call_tool`)."""
        return self.manager.resolve_tool(name)

    def resolve_prompt(self, name: str) -> PromptInfo:
        """The prompt with canonical ``name`` (raises :class:`~mcpmux.errors.ToolNotFound`)."""
        return self.manager.resolve_prompt(name)

    # -- requests about a server ---------------------------------------------------------------

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context: dict[str, str] | None = None,
        *,
        server: str | None = None,
        caller: str | None = None,
    ) -> types.CompleteResult:
        """Completions of one argument of a prompt (``ref.name`` canonical) or a template of ``server``.

        Ruled like the prompt (``server:get_prompt``) or the resource reads (``server:read_resource``).
        """
        if isinstance(ref, types.PromptReference):
            prompt = self.manager.resolve_prompt(ref.name)
            inside = self.toolset is None or self.toolset.has_prompt(prompt)
            server, verb, ref = prompt.server, GET_PROMPT, ref.model_copy(update={"name": prompt.prompt})
        elif server is None:
            raise ValueError("completing a resource template needs the server that lists it")
        else:
            verb, inside = READ_RESOURCE, self.toolset is None or self.toolset.has_resource(server, ref.uri)
        args: JSONObject = {"ref": ref.model_dump(mode="json", by_alias=True), "argument": argument}
        self._outside(self._verb_tool(server, COMPLETE), args, caller, inside)
        tool, decision = self._server_request(server, COMPLETE, args, caller, ruled_by=verb)
        completing = self.manager.complete(server, ref, argument, context)
        return await self._run(tool, args, caller, decision, completing, lambda r: len(r.completion.values))

    async def subscribe_resource(self, server: str, uri: str, *, caller: str | None = None) -> None:
        """Ask ``server`` for updates of ``uri``, ruled like its resource reads."""
        args: JSONObject = {"uri": uri}
        if self.toolset is not None:
            self._outside(self._verb_tool(server, SUBSCRIBE), args, caller, self.toolset.has_resource(server, uri))
        tool, decision = self._server_request(server, SUBSCRIBE, args, caller, ruled_by=READ_RESOURCE)
        await self._run(tool, args, caller, decision, self.manager.subscribe_resource(server, uri), _no_size)

    async def unsubscribe_resource(self, server: str, uri: str, *, caller: str | None = None) -> bool:
        """Drop a subscription to ``uri`` on ``server`` if it is connected; say whether one was sent."""
        args: JSONObject = {"uri": uri}
        tool, decision = self._server_request(server, UNSUBSCRIBE, args, caller, ruled_by=READ_RESOURCE)
        return await self._run(tool, args, caller, decision, self.manager.unsubscribe_resource(server, uri), _no_size)

    async def set_logging_level(
        self, level: types.LoggingLevel, *, server: str | None = None, caller: str | None = None
    ) -> list[str]:
        """Set the log level of ``server`` (or of every server that is not denied); return the servers told.

        Only connected servers that log and speak the 2025 era are told (the 2026-07-28 protocol has
        no ``logging/setLevel``). A named server that is denied is refused.
        """
        told: list[str] = []
        args: dict[str, Any] = {"level": level}
        for name in [server] if server is not None else self.manager.servers:
            if server is None and self.is_denied(name):
                continue
            tool, decision = self._server_request(name, SET_LEVEL, args, caller)
            if not self.manager.takes_log_level(name):
                continue  # nothing is sent, so nothing is audited
            setting = self.manager.set_logging_level(name, level)
            if await self._run(tool, args, caller, decision, setting, _no_size):
                told.append(name)
        return told

    async def restart(self, server: str, *, caller: str | None = None) -> None:
        """Close and reconnect ``server`` (waits for the new attempt), audited."""
        tool, decision = self._server_request(server, RESTART, {}, caller)
        await self._run(tool, {}, caller, decision, self.manager.restart(server), _no_size)

    async def refresh(self, server: str | None = None, *, caller: str | None = None) -> None:
        """Connect and re-list ``server`` (or every enabled server that is not denied), audited."""
        names = [server] if server is not None else [s for s in self.manager.servers if not self.is_denied(s)]
        for name in names:
            tool, decision = self._server_request(name, REFRESH, {}, caller)
            await self._run(tool, {}, caller, decision, self.manager.refresh(name), _no_size)

    async def disable(self, server: str, *, caller: str | None = None) -> bool:
        """Stop ``server`` and keep it stopped (its tools leave every listing), audited; say if it was enabled.

        Remembered in the state database (:class:`~mcpmux.policy.switches.ServerSwitches`): it stays
        disabled across restarts and on every replica until enabled; the configuration file is not changed.
        """
        tool, decision = self._server_request(server, DISABLE, {}, caller)
        reason = f"disabled at run time by {caller}" if caller else "disabled at run time"
        changed = await self._run(tool, {}, caller, decision, self.manager.disable(server, reason), _no_size)
        await anyio.to_thread.run_sync(self.switches.disable, self.pins.identity(server), server, reason, caller)
        return changed

    async def enable(self, server: str, *, caller: str | None = None) -> bool:
        """Enable ``server`` and start it (waits for its first attempt), audited; say if it was disabled.

        Forgets a remembered disable (the configuration decides again at the next start)."""
        tool, decision = self._server_request(server, ENABLE, {}, caller)
        changed = await self._run(tool, {}, caller, decision, self.manager.enable(server), _no_size)
        await anyio.to_thread.run_sync(self.switches.enable, self.pins.identity(server), server)
        return changed

    def _server_request(
        self, server: str, verb: str, args: JSONObject, caller: str | None, *, ruled_by: str | None = None
    ) -> tuple[ToolInfo, Decision]:
        """The audit identity of a request about ``server`` and the rules' word on it (refusals audited)."""
        tool = self._verb_tool(server, verb)
        if ruled_by is not None:
            decision = self._verb_listing(server, ruled_by)
        elif self.is_denied(server):
            decision = Decision("deny", f"every tool of {server!r} is denied")
        else:
            decision = Decision("allow", "allowed")
        if decision.action == "deny":
            self._refused(tool, args, caller, "denied", decision.rule)
            raise ToolDenied(tool.name, decision.rule)
        return tool, decision

    def _verb_tool(self, server: str, verb: str) -> ToolInfo:
        """The index's synthetic tool for ``verb`` on ``server``, or one made for the rules and the audit."""
        for tool in self.manager.tools(server):
            if tool.synthetic and tool.tool == verb:
                return tool
        namespace = self.manager.config.server(server).namespace
        name = f"{namespace}:{verb}" if namespace else verb
        return ToolInfo.make(name=name, server=server, tool=verb, synthetic=True)

    def _verb_listing(self, server: str, verb: str) -> Decision:
        tool = self._verb_tool(server, verb)
        if self.scope is not None and not self.scope.admits(tool):
            return Decision("deny", self.scope.rule)
        return self.rules.listing(tool)

    def is_denied(self, server: str) -> bool:
        """Whether the rules deny every tool of ``server`` (its synthetic ones too; ``server:*`` when none is known)."""
        tools = self.manager.tools(server)
        if not tools:
            tools = [self._verb_tool(server, "*")]
        scope = self.scope
        return all(self.rules.listing(t).action == "deny" or (scope and not scope.admits(t)) for t in tools)


def _no_size(_: object) -> None:
    return None


def _block_size(block: types.ContentBlock) -> int:
    """Bytes of a content block's payload, read from its fields (no serialisation)."""
    if isinstance(block, types.TextContent):
        return len(block.text)
    if isinstance(block, types.ImageContent | types.AudioContent):
        return len(block.data)
    if isinstance(block, types.EmbeddedResource):
        return _resource_size(block.resource)
    return len(block.uri)  # a ResourceLink


def _resource_size(contents: types.TextResourceContents | types.BlobResourceContents) -> int:
    return len(contents.text) if isinstance(contents, types.TextResourceContents) else len(contents.blob)


def _tool_result_size(result: types.CallToolResult) -> int:
    """The payload size of a result: text characters and encoded binary data, as sent (not re-serialised)."""
    return sum(_block_size(block) for block in result.content)


def _contents_size(result: types.ReadResourceResult) -> int:
    return sum(_resource_size(c) for c in result.contents)


def _prompt_size(result: types.GetPromptResult) -> int:
    return sum(_block_size(m.content) for m in result.messages)
