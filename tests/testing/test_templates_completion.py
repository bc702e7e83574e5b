"""Resource templates read by a handler, and completion, seen by mcpmux's Connection and the SDK's client."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from mcpmux.errors import ServerError, UsageError
from mcpmux.testing import MockServer

pytestmark = [pytest.mark.anyio, pytest.mark.network]

DEADLINE_S = 60


def notes() -> MockServer:
    async def blob(name: str) -> bytes:
        return name.encode()

    return (
        MockServer("notes")
        .resource_template("notes://{topic}/{day}", lambda topic, day: f"{topic} on {day}", mime_type="text/plain")
        .resource_template("files://{name}", blob, mime_type="application/octet-stream")
        .resource_template("listed://{only}")
        .prompt("review", "Review {code}", arguments=["code"])
        .completion(lambda ref, argument, value: [f"{argument}={value}1", f"{argument}={value}2"])
    )


@pytest.mark.parametrize("transport", ["memory", "tcp", "http"])
async def test_a_template_handler_reads_the_uris_it_matches(transport: str) -> None:
    with anyio.fail_after(DEADLINE_S):
        async with notes().serve(transport) as served, served.connection() as conn:  # type: ignore[arg-type]
            text = (await conn.read_resource("notes://rust/monday")).contents[0]
            blob = (await conn.read_resource("files://abc")).contents[0]
            with pytest.raises(ServerError, match="no resource"):
                await conn.read_resource("listed://x")
            with pytest.raises(ServerError, match="no resource"):
                await conn.read_resource("notes://too/many/parts")
    assert isinstance(text, types.TextResourceContents) and text.text == "rust on monday"
    assert isinstance(blob, types.BlobResourceContents) and blob.blob == "YWJj"


async def test_completion_answers_with_the_handlers_values_and_is_announced() -> None:
    with anyio.fail_after(DEADLINE_S):
        async with (
            notes().serve("memory") as served,
            served.sdk_transport() as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            completed = await session.complete(types.PromptReference(name="review"), {"name": "code", "value": "fn"})
        async with (
            MockServer("plain").serve("memory") as served,
            served.sdk_transport() as (read, write),
            ClientSession(read, write) as session,
        ):
            plain = await session.initialize()
    assert init.capabilities.completions is not None
    assert completed.completion.values == ["code=fn1", "code=fn2"]
    assert plain.capabilities.completions is None


def test_a_template_handler_cannot_cross_into_a_child() -> None:
    with pytest.raises(UsageError, match="Python handlers"):
        notes().to_spec()
