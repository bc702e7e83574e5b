"""The guard: the one path from every face to a server, with policy and audit on the way.

::

    guard = Guard(manager, face="cli", approver=ask_in_terminal)
    guard.tools()                                # only what may be listed: not denied, not quarantined
    await guard.call_tool("fs:write_file", args) # rules -> pin -> approval -> call -> audit row

Faces never call the manager directly; a tool that is denied, quarantined or not approved never
reaches its server, and every attempt, refused or not, leaves an audit row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from mcpmux.errors import ApprovalDenied, MCPMuxError, ToolDefinitionChanged, ToolDenied, ToolQuarantined
from mcpmux.manager import Manager, PromptInfo, ResourceInfo, ServerStatus, ToolInfo
from mcpmux.policy.approval import Answer, ApprovalRequest, Approvals, ApprovalScope, Approver
from mcpmux.policy.audit import AuditLog, argument_digest
from mcpmux.policy.pins import PinBook, PinVerdict, definition_hash, server_identity
from mcpmux.policy.rules import Decision, Rules
from mcpmux.policy.scanner import Finding, scan_tool, suspect
from mcpmux.policy.store import StateStore

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

__all__ = ["Exposure", "Guard", "Suspicion"]

Suspicion = Callable[[ToolInfo, Sequence[ToolInfo]], str | None]
"""Returns why a tool looks poisoned (a high-severity scanner finding), or ``None``."""

HASH_CACHE_LIMIT = 8192
# Names the narrow rule (this one tool), never the switch that turns every approval off.
NO_APPROVER_HINT = (
    "run the command in a terminal to answer the prompt, or allow this one tool in the configuration: "
    "security.approval_rules [{{tools: '{tool}', action: allow}}]"
)


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
    arguments: dict[str, Any]
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
        self.store = store or StateStore()
        self.rules = Rules(config.security, {s.name: s for s in config.servers})
        self.approvals = Approvals(self.store, project)
        identities = {s.name: server_identity(s, self.approvals.project) for s in config.servers}
        self.pins = PinBook(self.store, config.security.pinning, identities)
        self.audit = AuditLog(self.store, config.secret_values)
        self._suspicion = suspicion
        self._exposures: dict[tuple[str, str, str], Exposure] = {}
        self._hashes: dict[int, tuple[ToolInfo, str]] = {}
        self._in_flight: dict[str, list[_InFlight]] = {}

    # -- what may be seen --------------------------------------------------------------------

    def tools(self, server: str | None = None) -> list[ToolInfo]:
        """The tools that may be listed and called: not denied, not quarantined."""
        return [e.tool for e in self.exposures(server) if e.exposed]

    def withheld(self, server: str | None = None) -> list[Exposure]:
        """The tools held back, with the reason (denied by a rule, or quarantined)."""
        return [e for e in self.exposures(server) if not e.exposed]

    def exposures(self, server: str | None = None) -> list[Exposure]:
        """Every tool with its exposure verdict."""
        return [self._exposure(tool) for tool in self.manager.tools(server)]

    def _exposure(self, tool: ToolInfo) -> Exposure:
        key = (tool.server, tool.tool, self._hash(tool))
        cached = self._exposures.get(key)
        if cached is not None:
            return cached
        listing = self.rules.listing(tool)
        if listing.action == "deny":
            exposure = Exposure(tool, False, "denied", listing.rule)
        else:
            scanner = self._suspicion
            suspicion = None if scanner is None else lambda: scanner(tool, self.manager.tools())
            verdict = self.pins.check(tool, suspicion=suspicion)
            exposure = Exposure(
                tool, verdict.exposed, "ok" if verdict.exposed else "quarantined", verdict.reason, verdict
            )
        self._exposures[key] = exposure
        return exposure

    def _hash(self, tool: ToolInfo) -> str:
        # The index hands out the same ToolInfo until a server re-lists: hash each object once.
        cached = self._hashes.get(id(tool))
        if cached is None or cached[0] is not tool:
            if len(self._hashes) > HASH_CACHE_LIMIT:  # re-listed servers leave old objects behind
                self._hashes.clear()
            cached = (tool, definition_hash(tool))
            self._hashes[id(tool)] = cached
        return cached[1]

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
        """Every resource and template (of ``server`` if given)."""
        return self.manager.resources(server)

    def prompts(self, server: str | None = None) -> list[PromptInfo]:
        """Every prompt (of ``server`` if given)."""
        return self.manager.prompts(server)

    def status(self) -> list[ServerStatus]:
        """The state of every server."""
        return self.manager.status()

    # -- calls -----------------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        caller: str | None = None,
        answered_by: str | None = None,
        timeout: float | None = None,
        on_progress: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        """Call ``name`` if the policy allows it (asking when it says so), and audit the attempt.

        ``caller`` is who calls (for the audit log); ``answered_by`` who answers its approval
        questions (``caller`` if not given): on faces other than the local ones, "always" answers
        are remembered for that identity alone (:class:`~mcpmux.policy.approval.ApprovalScope`).

        Raises:
            ToolNotFound: no such tool.
            ToolDenied: an allow/deny rule forbids it.
            ToolQuarantined, ToolDefinitionChanged: its definition is held back until approved.
            ApprovalDenied: approval was needed and not given.
            MCPMuxError: the call itself failed (see :meth:`Manager.call_tool`).
        """
        args = dict(arguments or {})
        tool = self.manager.resolve_tool(name)
        decision = await self._decide(tool, args, caller, answered_by)
        scope = ApprovalScope.of(self.face, answered_by or caller)
        with self._calling(_InFlight(tool, args, scope, decision.by_person)):
            return await self._run(tool, args, caller, decision, self.manager.call_tool(
                name, args, timeout=timeout, on_progress=on_progress
            ))  # fmt: skip

    @contextmanager
    def _calling(self, call: _InFlight) -> Iterator[None]:
        # Cheap on the hot path: arguments are compared only when a server asks (answer_upstream_approval).
        calls = self._in_flight.setdefault(call.tool.server, [])
        calls.append(call)
        try:
            yield
        finally:
            calls.remove(call)
            if not calls and self._in_flight.get(call.tool.server) is calls:
                del self._in_flight[call.tool.server]

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

    async def _decide(
        self, tool: ToolInfo, args: dict[str, Any], caller: str | None, answered_by: str | None = None
    ) -> Decision:
        decision = self.rules.call(tool, args)
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
        if decision.action == "ask":
            return await self._ask(tool, args, caller, decision, ApprovalScope.of(self.face, answered_by or caller))
        return decision

    async def _ask(
        self, tool: ToolInfo, args: dict[str, Any], caller: str | None, decision: Decision, scope: ApprovalScope
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
        self, tool: ToolInfo, args: dict[str, Any], caller: str | None, decision: Decision, call: Any
    ) -> types.CallToolResult:
        started = time.monotonic()
        label = "asked" if decision.action == "ask" else "allowed"

        def audit(outcome: str, error: str | None = None, size: int | None = None) -> None:
            elapsed = (time.monotonic() - started) * 1000
            self.audit.record(
                face=self.face, caller=caller, server=tool.server, tool=tool.tool, name=tool.name, arguments=args,
                decision=label, rule=decision.rule, duration_ms=elapsed, outcome=outcome, error=error,
                result_bytes=size,
            )  # fmt: skip

        try:
            result: types.CallToolResult = await call
        except anyio.get_cancelled_exc_class():
            audit("cancelled")
            raise
        except MCPMuxError as exc:
            audit("error", str(exc))
            raise
        audit("tool-error" if result.is_error else "ok", size=len(result.model_dump_json(by_alias=True)))
        return result

    def _refused(self, tool: ToolInfo, args: dict[str, Any], caller: str | None, decision: str, rule: str) -> None:
        self.audit.record(
            face=self.face, caller=caller, server=tool.server, tool=tool.tool, name=tool.name, arguments=args,
            decision=decision, rule=rule, duration_ms=None, outcome="refused",
        )  # fmt: skip

    async def read_resource(
        self, server: str, uri: str, *, caller: str | None = None, answered_by: str | None = None
    ) -> types.ReadResourceResult:
        """Read ``uri`` from ``server`` under the rules of its ``server:read_resource`` tool, audited."""
        namespace = self.manager.supervisor(server).config.namespace
        name = f"{namespace}:read_resource" if namespace else "read_resource"
        result = await self.call_tool(name, {"uri": uri}, caller=caller, answered_by=answered_by)
        contents = [b.resource for b in result.content if isinstance(b, types.EmbeddedResource)]
        return types.ReadResourceResult(contents=contents)

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        *,
        caller: str | None = None,
        answered_by: str | None = None,
    ) -> types.GetPromptResult:
        """Render a prompt; prompts are not tools, so only allow/deny of ``server:get_prompt`` applies."""
        prompt = self.manager.registry.resolve_prompt(name)
        namespace = self.manager.supervisor(prompt.server).config.namespace
        synthetic = f"{namespace}:get_prompt" if namespace else "get_prompt"
        tool = next((t for t in self.manager.tools(prompt.server) if t.name == synthetic), None)
        if tool is not None:
            await self._decide(tool, {"name": prompt.prompt, "arguments": arguments or {}}, caller, answered_by)
        return await self.manager.get_prompt(name, arguments)
