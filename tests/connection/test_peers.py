"""``Connection`` against real reference servers no one here wrote (installed by scripts/install-peers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import ServerConfig, Settings, SseServerConfig, StdioServerConfig, StreamableHttpServerConfig
from mcpmux.connection import ClientCallbacks, Connection, ListKind, ToolResult
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess]

FAIL_AFTER_S = 120  # a whole session of server-everything; generous for a loaded 2-core machine


def stdio_peer(name: str, peer: str, *args: str) -> StdioServerConfig:
    """A stdio server entry for one of the installed peers."""
    command, argv = stdio_command(peer, *args)
    return StdioServerConfig(name=name, command=command, args=tuple(argv))


def form_answer(schema: dict[str, Any]) -> dict[str, Any]:
    """A form filled from its schema: defaults, else the first enum value, else a value of the type."""
    by_type: dict[str, Any] = {"string": "Ada", "number": 1, "integer": 1, "boolean": True}
    answer: dict[str, Any] = {}
    for name, spec in schema.get("properties", {}).items():
        if "default" in spec:
            answer[name] = spec["default"]
        elif spec.get("enum"):
            answer[name] = spec["enum"][0]
        elif spec.get("type") in by_type:
            answer[name] = by_type[spec["type"]]
    return answer


class Recorded:
    """Test callbacks that answer the server and remember what happened."""

    def __init__(self) -> None:
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[types.ElicitRequestParams] = []
        self.changed: list[ListKind] = []
        self.tools_changed = anyio.Event()
        self.updated = anyio.Event()
        self.logged = anyio.Event()

    async def sampling(self, server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="4"), model="t")

    async def elicitation(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicited.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=form_answer(params.requested_schema))

    async def list_changed(self, server: str, kind: ListKind) -> None:
        self.changed.append(kind)
        if kind == "tools":
            self.tools_changed.set()

    async def resource_updated(self, server: str, uri: str) -> None:
        self.updated.set()

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        self.logged.set()

    def callbacks(self) -> ClientCallbacks:
        return ClientCallbacks(
            sampling=self.sampling,
            elicitation=self.elicitation,
            on_list_changed=self.list_changed,
            on_resource_updated=self.resource_updated,
            on_log=self.log,
        )


@pytest.fixture(params=["stdio", "sse", "http"])
def everything(request: pytest.FixtureRequest) -> ServerConfig:
    """server-everything over each of its transports."""
    if request.param == "stdio":
        return stdio_peer("everything", "everything")
    if request.param == "sse":
        return SseServerConfig(name="everything", url=request.getfixturevalue("everything_sse").url)
    return StreamableHttpServerConfig(name="everything", url=request.getfixturevalue("everything_http").url)


def _text(result: types.CallToolResult) -> str:
    view = ToolResult.of(result)
    assert not view.is_error, view.text
    return view.text


@pytest.mark.slow
async def test_server_everything_works_end_to_end(everything: ServerConfig) -> None:
    recorded = Recorded()
    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    with anyio.fail_after(FAIL_AFTER_S):
        async with Connection(everything, Settings(), callbacks=recorded.callbacks()) as conn:
            if everything.type != "http":
                # The burst it sends on `initialized`; over Streamable HTTP it goes to a GET stream
                # the client opens only after sending `initialized`, so the server drops it.
                await recorded.tools_changed.wait()
            tools = {tool.name for tool in await conn.list_tools()}
            assert {"echo", "get-sum", "trigger-sampling-request", "trigger-elicitation-request"} <= tools
            assert len(await conn.list_resources()) >= 7
            assert len(await conn.list_resource_templates()) == 2
            assert {p.name for p in await conn.list_prompts()} >= {"simple-prompt", "args-prompt"}
            assert "hello" in _text(await conn.call_tool("echo", {"message": "hello"}))
            assert "5" in _text(await conn.call_tool("get-sum", {"a": 2, "b": 3}))
            await conn.call_tool(
                "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, on_progress=on_progress
            )
            assert "4" in _text(await conn.call_tool("trigger-sampling-request", {"prompt": "2+2?"}))
            _text(await conn.call_tool("trigger-elicitation-request", {}))
            _text(await conn.call_tool("trigger-url-elicitation", {"url": "https://example.invalid/sign-in"}))
            resource = await conn.read_resource("demo://resource/dynamic/text/1")
            prompt = await conn.get_prompt("args-prompt", {"city": "Lisbon"})
            ref = types.PromptReference(type="ref/prompt", name="completable-prompt")
            completion = await conn.complete(ref, {"name": "department", "value": "E"})
            await conn.set_logging_level("debug")
            await conn.call_tool("toggle-simulated-logging", {})
            await conn.subscribe_resource("demo://resource/static/document/features.md")
            await conn.call_tool("toggle-subscriber-updates", {})
            await recorded.logged.wait()
            await recorded.updated.wait()
            await conn.unsubscribe_resource("demo://resource/static/document/features.md")
    assert steps
    assert len(recorded.sampled) == 1
    assert [type(p).__name__ for p in recorded.elicited] == ["ElicitRequestFormParams", "ElicitRequestURLParams"]
    assert isinstance(resource.contents[0], types.TextResourceContents)
    assert "Lisbon" in str(prompt.messages[0].content)
    assert completion.completion.values


async def test_server_filesystem_lists_and_reads(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("hello from a file\n")
    with anyio.fail_after(FAIL_AFTER_S):
        async with Connection(stdio_peer("fs", "filesystem", str(tmp_path)), Settings()) as conn:
            listing = _text(await conn.call_tool("list_directory", {"path": str(tmp_path)}))
            content = _text(await conn.call_tool("read_text_file", {"path": str(tmp_path / "note.txt")}))
    assert "note.txt" in listing
    assert "hello from a file" in content


async def test_server_memory_keeps_a_graph(tmp_path: Path) -> None:
    entity = {"name": "mcpmux", "entityType": "project", "observations": ["a host"]}
    with anyio.fail_after(FAIL_AFTER_S):
        async with Connection(stdio_peer("memory", "memory", str(tmp_path / "memory.jsonl")), Settings()) as conn:
            await conn.call_tool("create_entities", {"entities": [entity]})
            graph = _text(await conn.call_tool("read_graph", {}))
    assert "mcpmux" in graph


async def test_mcp_server_time_tells_the_time() -> None:
    with anyio.fail_after(FAIL_AFTER_S):
        async with Connection(stdio_peer("time", "time"), Settings()) as conn:
            assert conn.info.server_info is not None
            now = _text(await conn.call_tool("get_current_time", {"timezone": "UTC"}))
    assert "UTC" in now


async def test_mcp_server_git_reports_status(git_repo: Path) -> None:
    with anyio.fail_after(FAIL_AFTER_S):
        async with Connection(stdio_peer("git", "git", str(git_repo)), Settings()) as conn:
            status = _text(await conn.call_tool("git_status", {"repo_path": str(git_repo)}))
            log = _text(await conn.call_tool("git_log", {"repo_path": str(git_repo)}))
    assert "main" in status
    assert "Initial commit" in log
