"""Hostile OpenAPI documents and hostile arguments: an OpenAPI source reads untrusted documents
(anyone's URL, a repository's file) and sends requests built from a model's arguments.

Each attack is bounded in time (``fail_after``) and checked for its effect, not only its message:
nothing is fetched from an external ``$ref``, nothing reaches a private address the document chose,
no argument climbs out of its path segment or replaces the source's credentials.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from mcpmux import Manager
from mcpmux.config.models import OpenAPIServerConfig
from mcpmux.errors import SpecError
from mcpmux.servers.openapi import convert, fetch_spec, parse_spec, read_spec_file
from mcpmux.servers.openapi.document import MAX_SPEC_BYTES
from mcpmux.servers.openapi.execute import HttpTarget, OpenAPIExecutor, is_public_address

pytestmark = pytest.mark.anyio

_HEADER = {"openapi": "3.0.3", "info": {"title": "hostile", "version": "1"}}


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _document(paths: dict[str, Any], **extra: Any) -> str:
    return json.dumps({**_HEADER, "paths": paths, **extra})


class _Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts (and answers nothing)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    probe = _Listener()
    try:
        yield probe
    finally:
        probe.close()


# --- the document -------------------------------------------------------------------------


def test_a_file_that_is_not_openapi_is_refused() -> None:
    for text in ("mcp:\n  servers: []\n", "<html><body>hello</body></html>", "[1, 2]", "openapi: 4.0.0\npaths: {}\n"):
        with pytest.raises(SpecError) as caught:
            parse_spec(text, "x.yaml")
        assert "x.yaml" in str(caught.value)


@pytest.mark.timeout(60)
def test_a_huge_document_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(MAX_SPEC_BYTES + 1024 * 1024)  # sparse: costs no disk
    with pytest.raises(SpecError, match="larger than"):
        read_spec_file(big)


def test_a_device_or_fifo_is_not_read(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not a regular file"):
        read_spec_file(Path("/dev/zero"))


@pytest.mark.timeout(60)
class _Trickler:
    """An HTTP server on 127.0.0.1 that answers 200 and then sends its body one byte every 50 ms."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/spec.json"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
            while not self._stop.wait(0.05):
                try:
                    conn.sendall(b" ")
                except OSError:  # the client gave up: what this attack wants to see
                    return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sock.close()


async def test_a_server_trickling_its_document_is_cut_off_by_the_fetch_deadline() -> None:
    # Each read gets a byte well inside its 5 s timeout; only the whole fetch's deadline ends it.
    trickler = _Trickler()
    try:
        with anyio.fail_after(60), pytest.raises(SpecError, match=r"took longer than 1 s; is the server trickling"):
            await fetch_spec(trickler.url, timeout_s=5.0, deadline_s=1.0)
    finally:
        trickler.close()


def test_a_yaml_alias_bomb_is_refused_quickly() -> None:
    lines = ["openapi: 3.0.0", "info: {title: t, version: '1'}", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 12):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines.append("paths: {}")
    with pytest.raises(SpecError, match=r"more than .* values"):
        parse_spec("\n".join(lines), "bomb.yaml")


@pytest.mark.timeout(60)
def test_a_document_with_5000_operations_is_refused() -> None:
    paths = {f"/r{i}": {"get": {"operationId": f"op{i}"}} for i in range(5000)}
    with pytest.raises(SpecError, match="5000 operations, more than 2000"):
        convert(parse_spec(_document(paths), "many.json"))


@pytest.mark.timeout(60)
def test_ref_cycles_in_schemas_are_cut_and_in_parameters_refused() -> None:
    schemas = {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}},
        "Self": {"$ref": "#/components/schemas/Self"},
    }
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}
    paths = {
        "/a": {"post": {"operationId": "a", "requestBody": body}},
        "/s": {
            "post": {
                "operationId": "s",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Self"}}}},
            }
        },
    }
    ops = convert(parse_spec(_document(paths, components={"schemas": schemas}), "cycle.json"))
    a = ops[0].input_schema["properties"]["b"]["properties"]["a"]
    assert "recursive: A" in a["description"]
    looping = {"/p": {"get": {"parameters": [{"$ref": "#/components/parameters/P"}]}}}
    parameters = {"P": {"$ref": "#/components/parameters/Q"}, "Q": {"$ref": "#/components/parameters/P"}}
    with pytest.raises(SpecError, match="refers to itself"):
        convert(parse_spec(_document(looping, components={"parameters": parameters}), "loop.json"))


@pytest.mark.timeout(60)
def test_exponentially_shared_schemas_stay_bounded() -> None:
    # L0 -> two L1 -> four L2 ... : 2**40 nodes if inlined naively.
    schemas = {
        f"L{i}": {
            "type": "object",
            "properties": {
                "x": {"$ref": f"#/components/schemas/L{i + 1}"},
                "y": {"$ref": f"#/components/schemas/L{i + 1}"},
            },
        }
        for i in range(40)
    }
    schemas["L40"] = {"type": "string"}
    paths = {
        f"/e{i}": {
            "put": {"requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}}
        }
        for i in range(50)
    }
    ops = convert(parse_spec(_document(paths, components={"schemas": schemas}), "exp.json"))
    sizes = [len(json.dumps(op.input_schema)) for op in ops]
    assert len(ops) == 50
    assert max(sizes) < 500_000


@pytest.mark.parametrize(
    "ref", ["file:///etc/passwd", "other.yaml#/Pet", "#/components/schemas/Missing", "http://127.0.0.1:{port}/x.json"]
)
def test_external_and_dangling_refs_are_refused_and_nothing_is_fetched(ref: str, listener: _Listener) -> None:
    ref = ref.format(port=listener.port)
    paths = {"/a": {"get": {"parameters": [{"name": "q", "in": "query", "schema": {"$ref": ref}}]}}}
    with pytest.raises(SpecError, match=r"external \$ref|points at nothing"):
        convert(parse_spec(_document(paths), "refs.json"))
    assert listener.accepted == 0


async def test_a_bad_document_fails_its_server_and_nothing_else(tmp_path: Path, httpbin: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      parameters: [{$ref: 'http://x/y'}]\n"
    )
    servers = [
        OpenAPIServerConfig(name="bad", spec=str(bad), base_url=httpbin),
        OpenAPIServerConfig(name="good", spec=f"{httpbin}/spec.json", base_url=httpbin, include_operations=["get_get"]),
    ]
    with anyio.fail_after(60):
        async with Manager(servers, catalog=False) as manager:
            states = {s.name: s for s in manager.status()}
            result = await manager.call_tool("good:get_get", {})
    assert states["bad"].state == "failed" and "external $ref" in (states["bad"].reason or "")
    assert not result.is_error


# --- where requests go (SSRF) -------------------------------------------------------------


def test_private_and_metadata_addresses_are_not_public() -> None:
    for address in (
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "0.0.0.0",
        "::ffff:127.0.0.1",
        "fd00::1",
        "100.64.0.1",
    ):
        assert not is_public_address(address), address
    assert is_public_address("93.184.215.14")


def _spec_with_server(tmp_path: Path, server_url: str) -> Path:
    spec = tmp_path / "ssrf.json"
    paths = {"/get": {"get": {"operationId": "probe"}}}
    spec.write_text(_document(paths, servers=[{"url": server_url}]))
    return spec


@pytest.mark.parametrize("host", ["127.0.0.1", "169.254.169.254", "localhost", "[::1]", "10.0.0.7"])
async def test_a_document_cannot_point_requests_at_a_private_address(
    tmp_path: Path, host: str, listener: _Listener
) -> None:
    port = listener.port if host in ("127.0.0.1", "localhost") else 80
    spec = _spec_with_server(tmp_path, f"http://{host}:{port}/")
    with anyio.fail_after(60):
        async with Manager([OpenAPIServerConfig(name="ssrf", spec=str(spec))], catalog=False) as manager:
            result = await manager.call_tool("ssrf:probe", {})
    assert result.is_error
    assert "non-public address" in _text(result) and "base_url" in _text(result)
    assert listener.accepted == 0


async def test_a_rebinding_name_cannot_steer_the_connection_after_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check sees a public address; a second resolution (httpx's own, at connect time) would see
    # 127.0.0.1. The request must go to the address that was checked, under the host's name.
    answers = iter(["93.184.215.14", "127.0.0.1"])
    resolved: list[str] = []

    async def rebinding(host: str, port: int, **_: Any) -> list[Any]:
        address = next(answers)
        resolved.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(anyio, "getaddrinfo", rebinding)
    sent: list[httpx.Request] = []

    def service(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"ok": True})

    document = parse_spec(_document({"/get": {"get": {"operationId": "probe"}}}), "rebind.json")
    (operation,) = convert(document)
    target = HttpTarget(base_url="https://rebind.example:8443/")
    async with httpx.AsyncClient(transport=httpx.MockTransport(service)) as client:
        with anyio.fail_after(30):
            result = await OpenAPIExecutor("rebind", target, client, 1 << 20).call(operation, {})
    assert not result.is_error, _text(result)
    assert resolved == ["93.184.215.14"]  # resolved once, by the check
    (request,) = sent
    assert request.url.host == "93.184.215.14" and request.url.port == 8443
    assert request.headers["host"] == "rebind.example:8443"
    assert request.extensions["sni_hostname"] == "rebind.example"  # TLS still checks the host's certificate


async def test_the_user_may_allow_private_addresses_or_name_the_base_url(tmp_path: Path, httpbin: str) -> None:
    spec = _spec_with_server(tmp_path, httpbin)
    allowed = OpenAPIServerConfig(name="allowed", spec=str(spec), allow_private_network=True)
    named = OpenAPIServerConfig(name="named", spec=str(spec), base_url=httpbin)
    with anyio.fail_after(60):
        async with Manager([allowed, named], catalog=False) as manager:
            first = await manager.call_tool("allowed:probe", {})
            second = await manager.call_tool("named:probe", {})
    assert not first.is_error, _text(first)
    assert not second.is_error, _text(second)


async def test_a_document_fetched_from_a_host_may_call_that_host(httpbin: str) -> None:
    # httpbin's document names no usable server here: a relative one resolves against where it was fetched.
    async with Manager(
        [OpenAPIServerConfig(name="hb", spec=f"{httpbin}/spec.json", base_url=httpbin)], catalog=False
    ) as manager:
        assert any(t.tool == "get_get" for t in manager.tools("hb"))


async def test_an_argument_cannot_climb_out_of_its_path_segment_or_change_the_host(httpbin: str) -> None:
    server = OpenAPIServerConfig(name="hb", spec=f"{httpbin}/spec.json", base_url=httpbin)
    with anyio.fail_after(60):
        async with Manager([server], catalog=False) as manager:
            climbs = await manager.call_tool("hb:get_anything_anything", {"anything": "../get"})
            dots = await manager.call_tool("hb:get_anything_anything", {"anything": ".."})
            host = await manager.call_tool("hb:get_anything_anything", {"anything": "//169.254.169.254/x"})
            at = await manager.call_tool("hb:get_anything_anything", {"anything": "@169.254.169.254"})
    for result in (climbs, dots, at):
        assert not result.is_error, _text(result)
        # /anything/... echoes the method; /get (where "../get" would land) does not.
        assert result.structured_content is not None and result.structured_content["method"] == "GET"
        assert result.structured_content["url"].startswith(f"{httpbin}/anything/")
    # werkzeug answers the encoded '//' with a redirect on its own host: the answer, not followed.
    assert host.structured_content is not None
    assert host.structured_content["location"].startswith(f"{httpbin}/anything/")


async def test_arguments_cannot_replace_the_sources_credentials_or_inject_headers(tmp_path: Path, httpbin: str) -> None:
    spec = tmp_path / "auth.json"
    params = [
        {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
        {"name": "X-Note", "in": "header", "schema": {"type": "string"}},
    ]
    spec.write_text(_document({"/headers": {"get": {"operationId": "headers", "parameters": params}}}))
    auth = {"type": "bearer", "token": "source-token"}
    server = OpenAPIServerConfig(name="hb", spec=str(spec), base_url=httpbin, auth=auth)
    with anyio.fail_after(60):
        async with Manager([server], catalog=False) as manager:
            (tool,) = manager.tools("hb")
            assert set(tool.input_schema["properties"]) == {"X-Note"}
            replaced = await manager.call_tool("hb:headers", {"Authorization": "Bearer attacker"})
            injected = await manager.call_tool("hb:headers", {"X-Note": "a\r\nAuthorization: Bearer attacker"})
            fine = await manager.call_tool("hb:headers", {"X-Note": "hello"})
    assert replaced.is_error and "unknown argument(s): Authorization" in _text(replaced)
    assert injected.is_error
    assert fine.structured_content is not None
    assert fine.structured_content["headers"]["Authorization"] == "Bearer source-token"
    assert fine.structured_content["headers"]["X-Note"] == "hello"


async def test_an_oversized_answer_is_refused_with_bounded_reading(httpbin: str) -> None:
    server = OpenAPIServerConfig(name="hb", spec=f"{httpbin}/spec.json", base_url=httpbin, max_response_bytes=4096)
    with anyio.fail_after(60):
        async with Manager([server], catalog=False) as manager:
            result = await manager.call_tool("hb:get_bytes_n", {"n": 90000})
    assert result.is_error and "larger than 4096 bytes" in _text(result)


async def test_a_secret_never_appears_in_an_error(httpbin: str) -> None:
    auth = {"type": "api_key", "in": "query", "name": "key", "value": "very-secret-key"}
    server = OpenAPIServerConfig(name="hb", spec=f"{httpbin}/spec.json", base_url=httpbin, auth=auth)
    with anyio.fail_after(60):
        async with Manager([server], catalog=False) as manager:
            result = await manager.call_tool("hb:get_status_codes", {"codes": "500"})
    assert result.is_error
    assert "very-secret-key" not in _text(result)
