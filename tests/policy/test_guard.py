"""The guard over a real manager: what is listed, what is called, what is asked, what is audited."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Config, SecurityConfig, Settings, StdioServerConfig
from mcpmux.errors import ApprovalDenied, ToolDefinitionChanged, ToolDenied, ToolQuarantined
from mcpmux.manager import Manager
from mcpmux.policy import Answer, ApprovalRequest, Guard, StateStore
from mcpmux.testing import MockServer
from tests.manager.conftest import factory, stdio

pytestmark = pytest.mark.anyio

CHANGING = str(Path(__file__).parents[1] / "fixtures" / "changing_server.py")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


def counting_server(calls: list[str]) -> MockServer:
    def read_file(path: str, token: str = "") -> str:
        calls.append(f"read {path}")
        return f"contents of {path}"

    def delete_file(path: str) -> str:
        calls.append(f"delete {path}")
        return f"deleted {path}"

    path = {"path": {"type": "string"}}
    read = {"type": "object", "properties": {**path, "token": {"type": "string", "default": ""}}, "required": ["path"]}
    delete = {"type": "object", "properties": path, "required": ["path"]}
    return (
        MockServer("files")
        .tool("read_file", read_file, schema=read, annotations=types.ToolAnnotations(read_only_hint=True))
        .tool("delete_file", delete_file, schema=delete, annotations=types.ToolAnnotations(destructive_hint=True))
    )


def in_process(calls: list[str], security: SecurityConfig) -> Manager:
    config = Config(servers=(stdio("fs"),), security=security, secret_values=frozenset({"hunter2-secret"}))
    return Manager(config, connection_factory=factory({"fs": counting_server(calls)}), catalog=False)


async def test_a_denied_tool_is_not_listed_and_never_reaches_the_server(store: StateStore) -> None:
    calls: list[str] = []
    async with in_process(calls, SecurityConfig(denied_tools=("fs:delete_*",))) as manager:
        guard = Guard(manager, store=store)
        assert [t.name for t in guard.tools()] == ["fs:read_file"]
        assert [(e.tool.name, e.kind) for e in guard.withheld()] == [("fs:delete_file", "denied")]
        with pytest.raises(ToolDenied, match=r"security\.denied_tools 'fs:delete_\*'"):
            await guard.call_tool("fs:delete_file", {"path": "/x"})
    assert calls == []
    [row] = guard.audit.query()
    assert (row.decision, row.outcome, row.rule) == ("denied", "refused", "security.denied_tools 'fs:delete_*'")


async def test_without_an_approver_a_destructive_call_is_refused_with_a_hint(store: StateStore) -> None:
    calls: list[str] = []
    async with in_process(calls, SecurityConfig()) as manager:
        guard = Guard(manager, store=store)
        with pytest.raises(ApprovalDenied) as caught:
            await guard.call_tool("fs:delete_file", {"path": "/x"})
        assert "destructiveHint" in str(caught.value) and "approval_rules" in (caught.value.hint or "")
        assert calls == []


async def test_approval_answers_yes_no_and_always(store: StateStore, tmp_path: Path) -> None:
    calls: list[str] = []
    answers = [Answer.NO, Answer.YES, Answer.ALWAYS_TOOL]
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Answer:
        asked.append(request)
        return answers.pop(0)

    async with in_process(calls, SecurityConfig()) as manager:
        guard = Guard(manager, store=store, approver=approver, project=tmp_path)
        with pytest.raises(ApprovalDenied, match="declined"):
            await guard.call_tool("fs:delete_file", {"path": "/1"})
        await guard.call_tool("fs:delete_file", {"path": "/2"})
        await guard.call_tool("fs:delete_file", {"path": "/3"})
        await guard.call_tool("fs:delete_file", {"path": "/4"})  # remembered: not asked again
    assert calls == ["delete /2", "delete /3", "delete /4"]
    assert [r.arguments["path"] for r in asked] == ["/1", "/2", "/3"]
    assert asked[0].reason == "destructiveHint annotation"
    outcomes = [(r.decision, r.outcome) for r in reversed(guard.audit.query())]
    assert outcomes == [("denied", "refused"), ("asked", "ok"), ("asked", "ok"), ("allowed", "ok")]


async def test_an_always_binds_only_the_scope_that_gave_it(store: StateStore, tmp_path: Path) -> None:
    calls: list[str] = []
    asked: list[tuple[str, str | None]] = []

    async def approver(request: ApprovalRequest) -> Answer:
        asked.append((request.face, request.caller))
        return Answer.ALWAYS_SERVER

    async with in_process(calls, SecurityConfig()) as manager:
        gateway = Guard(manager, face="gateway", store=store, approver=approver, project=tmp_path)
        await gateway.call_tool("fs:delete_file", {"path": "/1"}, caller="x/1", answered_by="token:alice")
        await gateway.call_tool("fs:delete_file", {"path": "/2"}, caller="x/1", answered_by="token:alice")
        await gateway.call_tool("fs:delete_file", {"path": "/3"}, caller="x/1", answered_by="token:bob")
        terminal = Guard(manager, face="cli", store=store, project=tmp_path)  # no one to ask
        with pytest.raises(ApprovalDenied, match="no one can be asked"):
            await terminal.call_tool("fs:delete_file", {"path": "/4"})
        chat = Guard(manager, face="chat", store=store, approver=approver, project=tmp_path)
        await chat.call_tool("fs:delete_file", {"path": "/5"})
        await terminal.call_tool("fs:delete_file", {"path": "/6"})  # the person's "always" in chat holds in the CLI
    assert asked == [("gateway", "token:alice"), ("gateway", "token:bob"), ("chat", None)]
    assert calls == ["delete /1", "delete /2", "delete /3", "delete /5", "delete /6"]


async def test_an_upstream_mcpmux_question_about_no_call_in_flight_is_answered_no(
    store: StateStore, tmp_path: Path
) -> None:
    from mcpmux.policy.chained import APPROVAL_META, ChainedApprovals

    chained, asked = ChainedApprovals(), []
    answers: list[types.ElicitResult | types.ErrorData] = []

    async def approver(request: ApprovalRequest) -> Answer:
        asked.append(request.name)
        question = {"tool": "inner:delete_file", "reason": "rule", "arguments": dict(request.arguments)}
        params = types.ElicitRequestFormParams(message="Allow?", requested_schema={}, _meta={APPROVAL_META: question})
        answers.append(await chained("fs", params))  # a question from the server about a call not yet running
        return Answer.YES

    async with in_process([], SecurityConfig()) as manager:
        guard = Guard(manager, face="cli", store=store, approver=approver, project=tmp_path)
        chained.bind(guard)
        await guard.call_tool("fs:delete_file", {"path": "/1"})
    assert asked == ["fs:delete_file"]
    assert [a.content for a in answers if isinstance(a, types.ElicitResult)] == [{"decision": "no"}]


async def test_every_call_is_audited_with_secrets_redacted(store: StateStore) -> None:
    calls: list[str] = []
    async with in_process(calls, SecurityConfig()) as manager:
        guard = Guard(manager, store=store, face="cli")
        await guard.call_tool("fs:read_file", {"path": "/a/hunter2-secret", "token": "abc"}, caller="alice")
    [row] = guard.audit.query(server="fs", tool="read_file")
    assert (row.face, row.caller, row.decision, row.outcome) == ("cli", "alice", "allowed", "ok")
    assert row.args == {"path": "/a/****", "token": "****"}
    assert len(row.args_digest) == 64 and row.result_bytes and row.duration_ms is not None
    assert guard.audit.query(server="other") == []


def changing(variant: str) -> Config:
    server = StdioServerConfig(name="ch", command=sys.executable, args=(CHANGING,), env={"TOOLS_VARIANT": variant})
    return Config(servers=(server,), settings=Settings(connect_timeout_ms=20_000))


@pytest.mark.subprocess
@pytest.mark.parametrize("variant", ["description", "schema", "annotations"])
async def test_a_definition_changed_on_restart_is_quarantined_until_approved(store: StateStore, variant: str) -> None:
    with anyio.fail_after(60):
        async with Manager(changing("base"), catalog=False) as manager:
            assert "ch:read_notes" in [t.name for t in Guard(manager, store=store).tools()]
        async with Manager(changing(variant), catalog=False) as manager:
            guard = Guard(manager, store=store)
            assert "ch:read_notes" not in [t.name for t in guard.tools()]
            assert "ch:delete_notes" in [t.name for t in guard.tools()]
            with pytest.raises(ToolDefinitionChanged) as caught:
                await guard.call_tool("ch:read_notes", {"path": "n.txt"})
            assert caught.value.diff.startswith("--- pinned\n+++ now")
            assert guard.approve("ch", "read_notes") == 1
            result = await guard.call_tool("ch:read_notes", {"path": "n.txt"})
            assert "notes of n.txt" in str(result.content[0])


@pytest.mark.subprocess
async def test_a_tool_added_after_list_changed_waits_for_approval_under_strict(store: StateStore) -> None:
    config = changing("base").model_copy(update={"security": SecurityConfig(pinning="strict")})
    with anyio.fail_after(60):
        async with Manager(config, catalog=False) as manager:
            guard = Guard(manager, store=store)
            assert guard.tools() == []
            guard.approve("ch")
            async with manager.subscribe() as events:
                await guard.call_tool("ch:add_tool", {"name": "late"})
                while "ch:late" not in [t.name for t in manager.tools()]:
                    await events.receive()
            assert "ch:late" not in [t.name for t in guard.tools()]
            with pytest.raises(ToolQuarantined, match="strict"):
                await guard.call_tool("ch:late")
            guard.approve("ch", "late")
            result = await guard.call_tool("ch:late")
            assert "late ran" in str(result.content[0])


@pytest.mark.subprocess
async def test_a_tool_added_after_list_changed_is_pinned_but_held_under_tofu(store: StateStore) -> None:
    # A server pinned already cannot slip a new tool past the pins (issue 22: rename-aware pins).
    with anyio.fail_after(60):
        async with Manager(changing("base"), catalog=False) as manager:
            guard = Guard(manager, store=store)
            async with manager.subscribe() as events:
                await guard.call_tool("ch:add_tool", {"name": "late"})
                while "ch:late" not in [t.name for t in manager.tools()]:
                    await events.receive()
            assert "ch:late" not in [t.name for t in guard.tools()]
            pin = guard.pins.get("ch", "late")
            assert pin is not None and not pin.approved


@pytest.mark.subprocess
async def test_a_poisoned_description_is_quarantined_on_first_sight(store: StateStore) -> None:
    with anyio.fail_after(60):
        async with Manager(changing("poisoned"), catalog=False) as manager:
            guard = Guard(manager, store=store)
            [held] = guard.withheld()
            assert (held.tool.name, held.kind) == ("ch:read_notes", "quarantined")
            assert held.reason.startswith("scanner: ")
            with pytest.raises(ToolQuarantined, match="scanner"):
                await guard.call_tool("ch:read_notes", {"path": "~/.ssh/id_rsa"})
            assert [r.outcome for r in guard.audit.query()] == ["refused"]
