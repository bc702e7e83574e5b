"""A low-level SDK server for wire tests: paged lists, a hanging tool, server-to-client requests."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

PAGE_SIZE = 2
TOOL_COUNT = 5
BEHAVIOURS = ("hang", "reject", "sample", "elicit_form", "elicit_url", "roots", "notify")
"""Tools listed after ``t0``..``t4`` that do something."""


class Recorder:
    """What the server saw: cancelled handlers and the answers to its own requests."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.answers: dict[str, Any] = {}
        self.hanging = anyio.Event()


def _page(items: list[Any], params: types.PaginatedRequestParams | None) -> tuple[list[Any], str | None]:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE_SIZE
    return items[start:end], (str(end) if end < len(items) else None)


def paged_server(recorder: Recorder) -> Server[Any]:
    """Five tools and resources over three pages each, plus tools that exercise the back-channel."""
    names = [f"t{i}" for i in range(TOOL_COUNT)] + list(BEHAVIOURS)
    tools = [types.Tool(name=name, input_schema={"type": "object"}) for name in names]
    resources = [types.Resource(uri=f"r://{i}", name=f"r{i}") for i in range(TOOL_COUNT)]
    templates = [types.ResourceTemplate(uri_template=f"r://{i}/{{x}}", name=f"rt{i}") for i in range(TOOL_COUNT)]
    prompts = [types.Prompt(name=f"p{i}") for i in range(TOOL_COUNT)]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        page, cursor = _page(tools, params)
        return types.ListToolsResult(tools=page, next_cursor=cursor)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        page, cursor = _page(resources, params)
        return types.ListResourcesResult(resources=page, next_cursor=cursor)

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        page, cursor = _page(templates, params)
        return types.ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        page, cursor = _page(prompts, params)
        return types.ListPromptsResult(prompts=page, next_cursor=cursor)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name == "ask":
            return _ask(params)
        text = await _run_tool(ctx, params, recorder)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server(
        "paged",
        version="1",
        on_list_tools=list_tools,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_list_prompts=list_prompts,
        on_call_tool=call_tool,
    )


def _ask(params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
    """The 2026 way to ask the user: answer ``input_required``, get the answer with the retry."""
    answer = (params.input_responses or {}).get("who")
    if not isinstance(answer, types.ElicitResult) or params.request_state != "asked":
        schema: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}
        question = types.ElicitRequest(params=types.ElicitRequestFormParams(message="Who?", requested_schema=schema))
        return types.InputRequiredResult(input_requests={"who": question}, request_state="asked")
    name = (answer.content or {}).get("name")
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"hello {name}")])


async def _run_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, recorder: Recorder) -> str:
    session = ctx.session
    match params.name:
        case "hang":
            try:
                recorder.hanging.set()
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                recorder.cancelled.append(str(ctx.request_id))
                raise
        case "reject":
            raise MCPError(code=types.INVALID_PARAMS, message="bad argument", data={"field": "x"})
        case "sample":
            message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="2+2?"))
            result = await session.create_message([message], max_tokens=5, related_request_id=ctx.request_id)
            recorder.answers["sample"] = result
        case "elicit_form":
            schema: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}
            recorder.answers["elicit_form"] = await session.elicit_form(
                "Your name?", schema, related_request_id=ctx.request_id
            )
        case "elicit_url":
            recorder.answers["elicit_url"] = await session.elicit_url(
                "Sign in", "https://example.invalid/login", "e-1", related_request_id=ctx.request_id
            )
        case "roots":
            recorder.answers["roots"] = await session.list_roots()
        case "notify":
            await session.send_log_message(
                "warning", "disk almost full", logger="fs", related_request_id=ctx.request_id
            )
            await session.send_tool_list_changed()
            await session.send_resource_list_changed()
            await session.send_prompt_list_changed()
            await session.send_resource_updated("r://1")
    return params.name
