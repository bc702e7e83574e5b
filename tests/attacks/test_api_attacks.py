"""Attacks on the REST API: callers without the right token or scope, web pages (Origin, Host),
oversized bodies, a network caller making the host start a program, hostile documents and
manifests (each a 4xx problem, nothing half-registered), and secrets that must never come back."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mcpmux.api.serve import build_api
from mcpmux.config.models import Config, OpenAPIServerConfig, SecurityConfig
from mcpmux.policy import StateStore
from mcpmux.sources import SourceRegistry
from mcpmux.sources.models import SourceSpec
from mcpmux.web.tokens import TokenStore
from tests.peers.fixtures import free_port, http_thread
from tests.sources.conftest import KEY

SECRET = "never-show-this-secret-77"


@contextmanager
def api(tmp_path: Path, *, config: Config | None = None) -> Iterator[tuple[TestClient, StateStore]]:
    registry = SourceRegistry(f"sqlite:///{tmp_path / 'sources.db'}", key=KEY)
    store = StateStore(tmp_path / "state.db")
    app = build_api(config or Config(security=SecurityConfig(pinning="off")), registry, store=store)
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            yield client, store
    finally:
        registry.close()
        store.close()


def _openapi(tmp_path: Path, paths: dict[str, object], **extra: object) -> str:
    spec = tmp_path / f"spec{len(list(tmp_path.glob('spec*')))}.json"
    spec.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}))
    return f"file://{spec}"


def _is_problem(answer: Any, status: int) -> bool:
    """``answer`` is an RFC 9457 problem document with ``status`` (the API's one error shape)."""
    if answer.status_code != status or answer.headers["content-type"] != "application/problem+json":
        return False
    body = answer.json()
    return body["status"] == status and bool(body["title"]) and bool(body["detail"])


def _registered(client: TestClient) -> list[str]:
    return [s["name"] for s in client.get("/api/sources").json() if not s["read_only"]]


def test_once_a_token_exists_every_request_needs_one_and_its_scope(tmp_path: Path) -> None:
    with api(tmp_path) as (client, store):
        tokens = TokenStore(store)
        reader = tokens.create("reader", scopes=("read",))
        runner = tokens.create("runner", scopes=("read", "execute"))
        admin = tokens.create("boss", scopes=("read", "execute", "admin"))
        missing = client.get("/api/sources")
        assert _is_problem(missing, 401) and missing.headers["www-authenticate"].startswith("Bearer")
        assert _is_problem(client.get("/api/sources", headers={"Authorization": "Bearer mcpmux_forged"}), 401)
        as_reader = {"Authorization": f"Bearer {reader}"}
        assert client.get("/api/sources", headers=as_reader).status_code == 200
        body = {"tool_id": "x:y", "arguments": {}}
        refused = client.post("/api/tools/execute", json=body, headers=as_reader)
        assert refused.status_code == 403 and "execute" in refused.json()["detail"]
        source = {"name": "remote", "source_type": "mcp", "url": "http://127.0.0.1:9/mcp"}
        for who in (reader, runner):
            answer = client.post("/api/sources", json=source, headers={"Authorization": f"Bearer {who}"})
            assert answer.status_code == 403
        assert (
            client.post("/api/tools/execute", json=body, headers={"Authorization": f"Bearer {runner}"}).status_code
            == 404
        )
        tokens.revoke("boss")
        assert client.get("/api/sources", headers={"Authorization": f"Bearer {admin}"}).status_code == 401


def test_a_web_page_cannot_use_the_api(tmp_path: Path) -> None:
    with api(tmp_path) as (client, _):
        foreign = client.post(
            "/api/sources",
            json={"name": "x", "source_type": "mcp", "url": "http://127.0.0.1:9/mcp"},
            headers={"Origin": "http://evil.example"},
        )
        assert _is_problem(foreign, 403)
        rebound = client.get("/api/sources", headers={"Host": "evil.example"})
        assert _is_problem(rebound, 421)
        assert _registered(client) == []


def test_an_oversized_body_is_refused(tmp_path: Path) -> None:
    with api(tmp_path) as (client, _):
        huge = {"tool_id": "a:b", "arguments": {"x": "y" * (5 * 1024 * 1024)}}
        assert _is_problem(client.post("/api/tools/execute", json=huge), 413)


def test_a_network_caller_cannot_make_the_host_start_a_program(tmp_path: Path) -> None:
    manifest = {"name": "evil", "packages": [{"registryType": "npm", "identifier": "evil-package"}]}
    attempts = [
        {"name": "evil", "source_type": "mcp", "mcp_config": {"command": "sh", "args": ["-c", "touch /tmp/pwned"]}},
        {"name": "evil", "source_type": "mcp", "mcp_config": {"type": "stdio", "command": "sh"}},
        {"name": "evil", "source_type": "mcp", "mcp_config": {"manifest": manifest}},
        {"name": "evil", "source_type": "mcp", "url": f"file://{tmp_path}"},
    ]
    with api(tmp_path) as (client, _):
        for body in attempts:
            answer = client.post("/api/sources", json=body)
            assert answer.status_code == 403, (body, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
        assert _registered(client) == []


@pytest.mark.parametrize(
    "case",
    [
        "not_openapi",
        "five_thousand_operations",
        "ref_cycle",
        "external_ref",
        "unreachable_spec",
        "unreachable_base_url",
        "bad_name",
        "unknown_field",
    ],
)
def test_hostile_or_broken_input_is_a_4xx_problem_and_registers_nothing(tmp_path: Path, case: str) -> None:
    body: dict[str, object] = {"name": "api", "source_type": "openapi"}
    if case == "not_openapi":
        (tmp_path / "page.json").write_text('{"hello": "world"}')
        body["url"] = f"file://{tmp_path / 'page.json'}"
    elif case == "five_thousand_operations":
        body["url"] = _openapi(tmp_path, {f"/r{i}": {"get": {}} for i in range(5000)})
    elif case == "ref_cycle":
        params = {"P": {"$ref": "#/components/parameters/Q"}, "Q": {"$ref": "#/components/parameters/P"}}
        paths = {"/p": {"get": {"parameters": [{"$ref": "#/components/parameters/P"}]}}}
        body["url"] = _openapi(tmp_path, paths, components={"parameters": params})
    elif case == "external_ref":
        body["url"] = _openapi(tmp_path, {"/p": {"get": {"parameters": [{"$ref": "file:///etc/passwd"}]}}})
    elif case == "unreachable_spec":
        body["url"] = "http://127.0.0.1:9/openapi.json"
    elif case == "unreachable_base_url":
        body["url"] = _openapi(tmp_path, {"/p": {"get": {"operationId": "p"}}})
        body["openapi_config"] = {"base_url": f"http://127.0.0.1:{free_port()}/v1"}
    elif case == "bad_name":
        body = {"name": "../../etc", "source_type": "mcp", "url": "http://127.0.0.1:9/mcp"}
    else:
        body = {"name": "api", "source_type": "mcp", "url": "http://127.0.0.1:9/mcp", "evil": True}
    with api(tmp_path) as (client, _):
        answer = client.post("/api/sources", json=body)
        assert 400 <= answer.status_code < 500, answer.text
        problem = answer.json()
        assert answer.headers["content-type"] == "application/problem+json"
        assert {"type", "title", "status", "detail"} <= set(problem)
        assert _registered(client) == []
    if case == "unreachable_base_url":
        assert answer.status_code == 422 and "unreachable" in problem["detail"], problem


def test_secrets_never_come_back_and_configured_servers_are_read_only(tmp_path: Path) -> None:
    spec = _openapi(tmp_path, {"/x": {"get": {"operationId": "x"}}})
    configured = OpenAPIServerConfig(name="fromfile", spec=spec.removeprefix("file://"), base_url="http://127.0.0.1:9")
    config = Config(servers=(configured,), security=SecurityConfig(pinning="off"))
    service = socket.create_server(("127.0.0.1", 0))  # a base URL that accepts connections
    body = {
        "name": "api",
        "source_type": "openapi",
        "url": spec,
        "openapi_config": {
            "base_url": f"http://127.0.0.1:{service.getsockname()[1]}",
            "auth": {"type": "api_key", "in": "header", "name": "K", "value": SECRET},
        },
    }
    with service, api(tmp_path, config=config) as (client, _):
        created = client.post("/api/sources", json=body)
        assert created.status_code == 201, created.text
        for path in ("/api/sources", "/api/sources/api", "/api/tools", "/api/servers", "/api/audit"):
            assert SECRET not in client.get(path).text, path
        patched = client.patch("/api/sources/api", json={"description": "d"})
        assert patched.status_code == 200 and SECRET not in patched.text
        assert client.delete("/api/sources/fromfile").status_code == 409
        assert client.post("/api/sources/fromfile/sync").status_code == 409
        listed = {s["name"]: s for s in client.get("/api/sources").json()}
        assert listed["fromfile"]["read_only"] is True
        taken = client.post("/api/sources", json={**body, "name": "fromfile"})
        assert taken.status_code == 409


@pytest.mark.parametrize(
    "body",
    [
        {"name": "meta", "source_type": "openapi", "url": "http://169.254.169.254/openapi.json"},
        {"name": "local", "source_type": "openapi", "url": "http://127.0.0.1:9/spec.json"},
        {"name": "inner", "source_type": "mcp", "url": "http://10.0.0.5/mcp"},
        {
            "name": "viabase",
            "source_type": "openapi",
            "url": "https://api.example.invalid/x.json",
            "openapi_config": {"allow_private_network": True},
        },
    ],
)
def test_a_token_holder_cannot_point_the_host_at_its_own_network(tmp_path: Path, body: dict[str, object]) -> None:
    with api(tmp_path) as (client, store):
        admin = TokenStore(store).create("boss", scopes=("read", "execute", "admin"))
        headers = {"Authorization": f"Bearer {admin}"}
        answer = client.post("/api/sources", json=body, headers=headers)
        assert answer.status_code == 403, answer.text
        assert [s["name"] for s in client.get("/api/sources", headers=headers).json() if not s["read_only"]] == []


def test_a_token_holder_cannot_aim_an_openapi_base_url_inward(tmp_path: Path) -> None:
    spec = "https://93.184.216.34/openapi.json"  # public (a host path is refused first: see below); never fetched
    with api(tmp_path) as (client, store):
        admin = TokenStore(store).create("boss", scopes=("read", "execute", "admin"))
        body = {
            "name": "a",
            "source_type": "openapi",
            "url": spec,
            "openapi_config": {"base_url": "http://169.254.169.254/"},
        }
        answer = client.post("/api/sources", json=body, headers={"Authorization": f"Bearer {admin}"})
        assert answer.status_code == 403 and "non-public" in answer.json()["detail"]


PUBLIC = "93.184.216.34"  # a public address literal: resolves without a network


@pytest.mark.parametrize(
    "body",
    [
        {"name": "ws", "source_type": "mcp", "mcp_config": {"type": "websocket", "url": "ws://127.0.0.1:9/mcp"}},
        {"name": "wss", "source_type": "mcp", "mcp_config": {"type": "websocket", "url": "wss://169.254.169.254/"}},
        {"name": "tcp", "source_type": "mcp", "mcp_config": {"type": "tcp", "url": "tcp://127.0.0.1:9"}},
        {"name": "tcpurl", "source_type": "mcp", "url": "tcp://10.1.2.3:7000"},
        {"name": "wsurl", "source_type": "mcp", "url": "ws://[::1]:9/"},
        {"name": "viavar", "source_type": "mcp", "environment": {"H": "127.0.0.1:9"},
         "mcp_config": {"type": "http", "url": "http://${H:-" + PUBLIC + "}/mcp"}},
    ],
)  # fmt: skip
def test_a_token_holder_cannot_reach_the_hosts_network_over_websocket_tcp_or_a_variable(
    tmp_path: Path, body: dict[str, object]
) -> None:
    """Issue 43 item 6: only http(s) URLs were checked, as written; ws://, tcp:// and ${VAR} reached loopback."""
    with api(tmp_path) as (client, store):
        admin = TokenStore(store).create("boss", scopes=("read", "execute", "admin"))
        headers = {"Authorization": f"Bearer {admin}"}
        answer = client.post("/api/sources", json=body, headers=headers)
        assert _is_problem(answer, 403) and "non-public address" in answer.json()["detail"], answer.text
        assert [s["name"] for s in client.get("/api/sources", headers=headers).json() if not s["read_only"]] == []


@pytest.mark.parametrize(
    "auth",
    [
        {"grant": "jwt_bearer", "assertion_file": "/etc/shadow", "client_id": "workload"},
        {"grant": "jwt_bearer", "assertion_env": "AWS_SECRET_ACCESS_KEY", "client_id": "workload"},
        {"allow_private_addresses": True},
    ],
)
def test_a_token_holder_cannot_set_auth_that_reads_host_secrets(tmp_path: Path, auth: dict[str, object]) -> None:
    """Issue 43 item 9: assertion_file, assertion_env and allow_private_addresses are the local user's."""
    body = {"name": "remote", "source_type": "mcp",
            "mcp_config": {"type": "http", "url": f"https://{PUBLIC}/mcp", "auth": auth}}  # fmt: skip
    with api(tmp_path) as (client, store):
        admin = TokenStore(store).create("boss", scopes=("read", "execute", "admin"))
        headers = {"Authorization": f"Bearer {admin}"}
        answer = client.post("/api/sources", json=body, headers=headers)
        assert _is_problem(answer, 403) and "local user" in answer.json()["detail"], answer.text
        assert [s["name"] for s in client.get("/api/sources", headers=headers).json() if not s["read_only"]] == []


def test_a_token_holder_cannot_change_a_process_sources_environment_or_repoint_a_url(tmp_path: Path) -> None:
    """Issue 43 items 6 and 9: a PATCH of variable values restarted a local process with LD_PRELOAD,
    and could turn a registered URL inward; the local user (no token) still may."""
    registry = SourceRegistry(f"sqlite:///{tmp_path / 'sources.db'}", key=KEY)  # as `mcpmux sources add` does
    try:
        registry.add(SourceSpec(name="proc", source_type="mcp", config={"command": "true", "env": {"X": "${X}"}},
                                environment={"X": "1"}))  # fmt: skip
    finally:
        registry.close()
    remote = {"name": "remote", "source_type": "mcp", "environment": {"H": PUBLIC},
              "mcp_config": {"type": "websocket", "url": "ws://${H}/mcp"}}  # fmt: skip
    with api(tmp_path) as (client, store):
        assert client.post("/api/sources", json=remote).status_code == 201  # the local user, before any token
        admin = TokenStore(store).create("boss", scopes=("read", "execute", "admin"))
        headers = {"Authorization": f"Bearer {admin}"}
        preload = client.patch(
            "/api/sources/proc", json={"environment": {"LD_PRELOAD": "/tmp/evil.so"}}, headers=headers
        )
        assert _is_problem(preload, 403) and "only the local user" in preload.json()["detail"], preload.text
        inward = client.patch("/api/sources/remote", json={"environment": {"H": "127.0.0.1:9"}}, headers=headers)
        assert _is_problem(inward, 403) and "non-public address" in inward.json()["detail"], inward.text
        fine = client.patch("/api/sources/remote", json={"environment": {"H": "93.184.216.35"}}, headers=headers)
        assert fine.status_code == 200, fine.text


def test_a_token_holder_cannot_read_a_host_file_as_an_openapi_document(tmp_path: Path) -> None:
    """Issue 43 item 8: a network caller registered file:// and bare-path documents, read on the host."""
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": SECRET, "version": "1"}, "paths": {}}))
    with api(tmp_path) as (client, store):
        admin = TokenStore(store).create("boss", scopes=("read", "execute", "admin"))
        headers = {"Authorization": f"Bearer {admin}"}
        for url in (f"file://{secret}", str(secret)):
            answer = client.post("/api/sources", json={"name": "peek", "source_type": "openapi", "url": url},
                                 headers=headers)  # fmt: skip
            assert _is_problem(answer, 403) and "only the local user" in answer.json()["detail"], answer.text
            assert SECRET not in answer.text
        assert [s["name"] for s in client.get("/api/sources", headers=headers).json() if not s["read_only"]] == []


def test_a_fifo_named_as_a_document_is_refused_without_blocking(tmp_path: Path) -> None:
    """Issue 43 item 8: reading a FIFO blocked the thread until a writer came (42 froze the API's workers)."""
    import os
    import threading

    from mcpmux.errors import SpecError
    from mcpmux.servers.openapi.document import read_spec_file

    fifo = tmp_path / "spec.json"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_spec_file(fifo)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # blocked in open(): a writer end releases it, then the test fails
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=30)
        pytest.fail("reading a FIFO as a document blocked its thread")
    assert len(outcome) == 1 and isinstance(outcome[0], SpecError), outcome
    assert "not a regular file" in str(outcome[0])
    with pytest.raises(SpecError, match="not a regular file"):
        read_spec_file(tmp_path)  # a directory
    with pytest.raises(SpecError, match="not a regular file"):
        read_spec_file(Path("/dev/zero"))  # a device that never ends


BODY = "internal-page-body-5521"


@contextmanager
def _answers_500_with_a_body() -> Iterator[str]:
    """A loopback HTTP service whose every answer is a 500 with a private-looking body."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            payload = f"<html>{BODY}</html>".encode()
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, format: str, *args: object) -> None:
            return

    with http_thread(Handler) as port:
        yield f"http://127.0.0.1:{port}/mcp"


def test_a_read_token_sees_a_servers_failure_but_not_the_body_its_upstream_answered(tmp_path: Path) -> None:
    """Issue 43 item 6: a loopback service's answer body reached a read token through /api/servers."""
    from mcpmux.config.models import StreamableHttpServerConfig

    with _answers_500_with_a_body() as url:
        inner = StreamableHttpServerConfig(name="inner", url=url, retry_attempts=0)
        config = Config(servers=(inner,), security=SecurityConfig(pinning="off"))
        with api(tmp_path, config=config) as (client, store):
            tokens = TokenStore(store)
            reader = {"Authorization": f"Bearer {tokens.create('viewer', scopes=('read',))}"}
            admin = {"Authorization": f"Bearer {tokens.create('boss', scopes=('admin',))}"}
            seen = {s["name"]: s for s in client.get("/api/servers", headers=reader).json()}
            for _ in range(200):  # the first connect fails within moments; bounded
                if seen["inner"]["state"] == "failed":
                    break
                time.sleep(0.05)
                seen = {s["name"]: s for s in client.get("/api/servers", headers=reader).json()}
            assert seen["inner"]["state"] == "failed", seen
            assert "HTTP 500 from" in seen["inner"]["reason"] and BODY not in seen["inner"]["reason"], seen
            assert "shown with the admin scope" in seen["inner"]["reason"]
            full = {s["name"]: s for s in client.get("/api/servers", headers=admin).json()}
            assert BODY in full["inner"]["reason"]
