"""The server fixtures of the conformance suite's server scenarios, written from their descriptions.

``python conformance_fixture.py stdio`` or ``python conformance_fixture.py http PORT``. Left out:
logging (the SDK's ``MCPServer`` serves no ``logging/setLevel``), resource subscriptions (no
``resources/subscribe`` either), the SEP-1034/1330 elicitation schemas and SSE polling.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.server.mcpserver.utilities.types import Audio, Image

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=")

server: MCPServer[Any] = MCPServer("conformance-fixture")


@server.tool(description="Returns simple text")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@server.tool(description="Returns an image")
def test_image_content() -> Image:
    return Image(data=PNG, format="png")


@server.tool(description="Returns audio")
def test_audio_content() -> Audio:
    return Audio(data=WAV, format="wav")


@server.tool(description="Returns an embedded resource")
def test_embedded_resource() -> types.EmbeddedResource:
    contents = types.TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return types.EmbeddedResource(type="resource", resource=contents)


@server.tool(description="Returns text, an image and a resource")
def test_multiple_content_types() -> types.CallToolResult:
    contents = types.TextResourceContents(
        uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
    )
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Multiple content types test:"),
            types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
            types.EmbeddedResource(type="resource", resource=contents),
        ]
    )


@server.tool(description="Logs three messages")
async def test_tool_with_logging(ctx: Context) -> str:
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
        await anyio.sleep(0.05)
    return "Logging completed"


@server.tool(description="Always fails")
def test_error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool(description="Reports progress")
async def test_tool_with_progress(ctx: Context) -> str:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100)
        await anyio.sleep(0.05)
    return "Progress completed"


@server.tool(description="Asks the client's model")
async def test_sampling(prompt: str, ctx: Context) -> str:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=[message], max_tokens=100))
    result = await ctx.session.send_request(request, types.CreateMessageResult)
    text = result.content.text if isinstance(result.content, types.TextContent) else str(result.content)
    return f"LLM response: {text}"


@server.tool(description="Asks the user")
async def test_elicitation(message: str, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    params = types.ElicitRequestFormParams(message=message, requested_schema=schema)
    result = await ctx.session.send_request(types.ElicitRequest(params=params), types.ElicitResult)
    return f"User response: action={result.action}, content={json.dumps(result.content)}"


@server.resource("test://static-text", name="static-text", description="Static text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", description="Static binary", mime_type="image/png")
def static_binary() -> bytes:
    return PNG


@server.resource("test://template/{id}/data", name="template", description="Template", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


@server.prompt(description="A simple prompt")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt with an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    contents = types.TextResourceContents(
        uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
    )
    return [
        UserMessage(content=types.EmbeddedResource(type="resource", resource=contents)),
        UserMessage(content="Please process the embedded resource above."),
    ]


@server.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[Message]:
    image = types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")
    return [UserMessage(content=image), UserMessage(content="Please analyze the image above.")]


@server.completion()
async def complete(ref: Any, argument: types.CompletionArgument, context: Any) -> types.Completion:
    return types.Completion(values=[v for v in ("paris", "park", "party") if v.startswith(argument.value)])


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
