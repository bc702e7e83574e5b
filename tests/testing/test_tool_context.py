"""Mock tools that talk back (``ctx``): progress and questions to the client, in both eras, on HTTP and in memory.

Over Streamable HTTP a handshake-era mock used to answer in JSON, which has no room for a call's
progress or its requests to the client: the SDK refused sampling ("no back-channel").
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcpmux.testing import MockServer, ToolContext

pytestmark = [pytest.mark.anyio, pytest.mark.network]

DEADLINE_S = 60


async def review(text: str, ctx: ToolContext) -> Any:
    await ctx.report_progress(1, 2, "reading")
    message = types.SamplingMessage(role="user", content=types.TextContent(text=text))
    request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=[message], max_tokens=5))
    answer = await ctx.ask("llm", request, types.CreateMessageResult)
    if isinstance(answer, types.InputRequiredResult):
        return answer
    assert isinstance(answer.content, types.TextContent)
    return f"{'stateless' if ctx.stateless else 'session'}: {answer.content.text}"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("transport", ["memory", "http"])
async def test_a_tool_reports_progress_and_asks_the_client_in_either_era(transport: str, mode: Any) -> None:
    seen: list[float] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="fine"), model="m")

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    mock = MockServer("reviewer").tool("review", review)
    with anyio.fail_after(DEADLINE_S):
        async with (
            mock.serve(transport) as served,  # type: ignore[arg-type]
            served.sdk_transport() as (read, write),
            Client(_Streams(read, write), mode=mode, sampling_callback=sampling) as client,  # type: ignore[arg-type]
        ):
            result = await client.call_tool("review", {"text": "x"}, progress_callback=on_progress)
    era = "stateless" if mode == "2026-07-28" else "session"
    assert [b.text for b in result.content if isinstance(b, types.TextContent)] == [f"{era}: fine"]
    assert 1 in seen


class _Streams:
    def __init__(self, read: object, write: object) -> None:
        self.pair = (read, write)

    async def __aenter__(self) -> tuple[object, object]:
        return self.pair

    async def __aexit__(self, *exc: object) -> None:
        return None


async def test_list_changed_after_reaches_a_stateless_era_client_through_its_listen_stream() -> None:
    mock = MockServer("grows").tool("ping", result="pong").list_changed_after(1).era("2026-07-28")
    with anyio.fail_after(DEADLINE_S):
        async with (
            mock.serve("memory") as served,
            served.sdk_transport() as (read, write),
            Client(_Streams(read, write), mode="2026-07-28") as client,  # type: ignore[arg-type]
            client.listen(tools_list_changed=True) as events,
        ):
            await client.call_tool("ping", {})
            async for _event in events:
                break
            assert "added_after_1" in {t.name for t in (await client.list_tools()).tools}
