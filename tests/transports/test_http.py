"""SSE and Streamable HTTP through the SDK clients, against uvicorn on 127.0.0.1."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from mcpmux.config.models import Settings, SseServerConfig, StreamableHttpServerConfig
from mcpmux.connection import Connection
from mcpmux.errors import AuthRequired, ConnectFailed, HTTPStatusError
from mcpmux.transports import open_transport
from tests.peers.fixtures import free_port
from tests.transports.conftest import WAIT_S, echo_server, running_uvicorn, session_over

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.anyio, pytest.mark.network]


class Received:
    def __init__(self) -> None:
        self.errors: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(message)


def status_app(status: int) -> Starlette:
    async def answer(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"status {status} for {request.headers.get('authorization')}", status_code=status)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST", "DELETE"])])


async def test_a_call_round_trips_over_streamable_http() -> None:
    with anyio.fail_after(WAIT_S):
        async with running_uvicorn(echo_server().streamable_http_app()) as port:
            config = StreamableHttpServerConfig(name="web", url=f"http://127.0.0.1:{port}/mcp")
            async with session_over(config, Settings()) as (_streams, session):
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("echo", {"text": "over http"})
    assert [tool.name for tool in tools.tools] == ["echo"]
    assert result.content[0].text == "over http"  # type: ignore[union-attr]


async def test_a_call_round_trips_over_sse() -> None:
    with anyio.fail_after(WAIT_S):
        async with running_uvicorn(echo_server().sse_app()) as port:
            config = SseServerConfig(name="legacy", url=f"http://127.0.0.1:{port}/sse")
            async with session_over(config, Settings()) as (_streams, session):
                await session.initialize()
                result = await session.call_tool("echo", {"text": "over sse"})
    assert result.content[0].text == "over sse"  # type: ignore[union-attr]


@pytest.mark.parametrize(("status", "error"), [(401, AuthRequired), (404, HTTPStatusError), (500, HTTPStatusError)])
async def test_an_http_error_status_reaches_the_session_as_our_error(status: int, error: type[Exception]) -> None:
    received = Received()
    with anyio.fail_after(WAIT_S):
        async with running_uvicorn(status_app(status)) as port:
            url = f"http://127.0.0.1:{port}/mcp"
            config = StreamableHttpServerConfig(name="web", url=url, headers={"Authorization": "Bearer s3cret"})
            async with session_over(config, Settings(), message_handler=received) as (_streams, session):
                with pytest.raises(MCPError):
                    await session.initialize()
    assert len(received.errors) == 1
    mapped = received.errors[0]
    assert type(mapped) is error
    assert isinstance(mapped, HTTPStatusError)
    assert mapped.status == status
    assert mapped.url == url
    assert "Bearer s3cret" in mapped.body


@pytest.mark.parametrize(("status", "error"), [(401, AuthRequired), (403, AuthRequired), (404, HTTPStatusError)])
async def test_an_sse_stream_refused_with_a_status_raises_our_error(status: int, error: type[Exception]) -> None:
    with anyio.fail_after(WAIT_S):
        async with running_uvicorn(status_app(status)) as port:
            config = SseServerConfig(name="legacy", url=f"http://127.0.0.1:{port}/sse")
            with pytest.raises(HTTPStatusError) as caught:
                async with open_transport(config, Settings()):
                    pass
    assert type(caught.value) is error
    assert caught.value.status == status


async def test_a_refused_streamable_http_connection_ends_the_session_with_connect_failed() -> None:
    # Not raised out of the transport: that crashed the session's task group and its host.
    config = StreamableHttpServerConfig(name="web", url=f"http://127.0.0.1:{free_port()}/mcp")
    received = Received()
    with anyio.fail_after(WAIT_S):
        async with session_over(config, Settings(), message_handler=received) as (_streams, session):
            with pytest.raises(MCPError, match="Connection closed"):
                await session.initialize()
    assert [type(error) for error in received.errors] == [ConnectFailed]


async def test_a_refused_streamable_http_connection_fails_the_connection_with_connect_failed() -> None:
    config = StreamableHttpServerConfig(name="web", url=f"http://127.0.0.1:{free_port()}/mcp")
    with anyio.fail_after(WAIT_S), pytest.raises(ConnectFailed):
        async with Connection(config, Settings()):
            pass


async def test_a_refused_sse_connection_raises_connect_failed() -> None:
    config = SseServerConfig(name="legacy", url=f"http://127.0.0.1:{free_port()}/sse")
    with anyio.fail_after(WAIT_S), pytest.raises(ConnectFailed):
        async with open_transport(config, Settings()):
            pass


async def test_a_rejected_sse_post_is_reported_at_once() -> None:
    async def events(request: Request) -> StreamingResponse:
        async def stream() -> AsyncIterator[bytes]:
            yield b"event: endpoint\ndata: /messages?session_id=abc\n\n"
            await anyio.sleep(WAIT_S)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def reject(request: Request) -> PlainTextResponse:
        return PlainTextResponse("token expired", status_code=401)

    app = Starlette(routes=[Route("/sse", events), Route("/messages", reject, methods=["POST"])])
    errors: list[Exception] = []
    waiting = anyio.CancelScope()

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            errors.append(message)
            waiting.cancel()

    with anyio.fail_after(WAIT_S):
        async with running_uvicorn(app) as port:
            config = SseServerConfig(name="legacy", url=f"http://127.0.0.1:{port}/sse")
            with waiting:
                async with session_over(config, Settings(), message_handler=on_message) as (_streams, session):
                    await session.initialize()
    assert len(errors) == 1
    assert isinstance(errors[0], AuthRequired)
    assert "token expired" in errors[0].body


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (key file, certificate file)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = str(folder / "key.pem"), str(folder / "cert.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return key, cert


@pytest.mark.parametrize("verify", [True, False])
async def test_tls_verification_is_configurable_and_failure_is_connect_failed(
    certificate: tuple[str, str], verify: bool
) -> None:
    key, cert = certificate
    with anyio.fail_after(WAIT_S):
        async with running_uvicorn(echo_server().streamable_http_app(), ssl_keyfile=key, ssl_certfile=cert) as port:
            config = StreamableHttpServerConfig(name="tls", url=f"https://127.0.0.1:{port}/mcp", verify_tls=verify)
            if verify:
                with pytest.raises(ConnectFailed) as caught:
                    async with Connection(config, Settings()):
                        pass
                assert "TLS" in caught.value.reason
                assert "CERTIFICATE_VERIFY_FAILED" in caught.value.reason
            else:
                async with session_over(config, Settings()) as (_streams, session):
                    await session.initialize()
                    result = await session.call_tool("echo", {"text": "over tls"})
                assert result.content[0].text == "over tls"  # type: ignore[union-attr]
