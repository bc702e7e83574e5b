"""The era matrix's upstream: one :class:`MockServer` per era, with a tool per feature.

Served as a child of ``mcpmux serve`` over stdio (``python -m mcpmux.testing --module
tests.gateway.era_upstream:legacy``) or, over Streamable HTTP, as a process of its own::

    python -m tests.gateway.era_upstream 2026-07-28     # prints "serving URL", serves until killed
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types

from mcpmux.testing import MockServer, ToolContext
from mcpmux.testing.mock import Era

NOTE_URI = "memo://note"
_cancelled = {"hang": 0}


async def slow(steps: int, ctx: ToolContext) -> str:
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done in {steps}"


async def hang(ctx: ToolContext) -> str:
    await ctx.report_progress(0, None, "hanging")  # tells the client the call reached the upstream
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        _cancelled["hang"] += 1
        raise
    return "unreachable"


def cancelled() -> str:
    return str(_cancelled["hang"])


def count(tool: str, ctx: ToolContext) -> str:
    return str(ctx.mock.count(tool))


async def sample(prompt: str, ctx: ToolContext) -> Any:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
    params = types.CreateMessageRequestParams(messages=[message], max_tokens=20)
    answer = await ctx.ask("llm", types.CreateMessageRequest(params=params), types.CreateMessageResult)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    content = answer.content
    return f"sampled: {content.text if isinstance(content, types.TextContent) else content}"


async def elicit(question: str, ctx: ToolContext) -> Any:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    params = types.ElicitRequestFormParams(message=question, requested_schema=schema)
    answer = await ctx.ask("form", types.ElicitRequest(params=params), types.ElicitResult)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return f"elicited: {answer.action} {(answer.content or {}).get('name')}"


async def add_tool(name: str, ctx: ToolContext) -> str:
    ctx.mock.tool(name, result=f"{name} is new", description="A tool added mid-session.")
    await ctx.send_tool_list_changed()
    return f"added {name}"


async def touch(ctx: ToolContext) -> str:
    await ctx.send_resource_updated(NOTE_URI)
    return f"touched {NOTE_URI}"


def build(era: Era) -> MockServer:
    """The upstream of one era, with a tool per feature of the matrix."""
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return (
        MockServer(f"up-{era}")
        .era(era)
        .tool("echo", lambda text: f"echo: {text}", schema=text)
        .tool("guarded", lambda text: f"guarded: {text}", schema=text)
        .tool("slow", slow, schema={"type": "object", "properties": {"steps": {"type": "integer"}}})
        .tool("hang", hang)
        .tool("cancelled", cancelled)
        .tool("count", count, schema={"type": "object", "properties": {"tool": {"type": "string"}}})
        .tool("sample", sample, schema={"type": "object", "properties": {"prompt": {"type": "string"}}})
        .tool("elicit", elicit, schema={"type": "object", "properties": {"question": {"type": "string"}}})
        .tool("add_tool", add_tool, schema={"type": "object", "properties": {"name": {"type": "string"}}})
        .tool("touch", touch)
        .resource(NOTE_URI, "a note", mime_type="text/plain")
    )


def legacy() -> MockServer:
    return build("2025-11-25")


def modern() -> MockServer:
    return build("2026-07-28")


async def _serve_http(era: str) -> None:
    mock = legacy() if era == "2025-11-25" else modern()
    async with mock.serve("http") as served:
        print(f"serving {served.url}", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(_serve_http, sys.argv[1])
