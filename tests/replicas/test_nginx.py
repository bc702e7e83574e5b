"""The nginx helper, and so the shipped deploy/nginx.conf, against two tiny HTTP servers on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.replicas.nginx import NGINX_CONF, render_config, start_nginx
from tests.replicas.upstreams import Upstream, running_upstream

pytestmark = [pytest.mark.subprocess, pytest.mark.network]

TIMEOUT = httpx.Timeout(30.0)


@pytest.fixture
def upstreams(tmp_path: Path) -> Iterator[tuple[Upstream, Upstream]]:
    with running_upstream("a", tmp_path) as a, running_upstream("b", tmp_path) as b:
        yield a, b


def test_requests_alternate_between_upstreams_without_affinity(
    upstreams: tuple[Upstream, Upstream], tmp_path: Path
) -> None:
    with (
        start_nginx([u.port for u in upstreams], tmp_path) as (port, _process),
        httpx.Client(timeout=TIMEOUT) as client,
    ):
        # One client connection, one session id: still spread over both (no affinity of any kind).
        names = [client.get(f"http://127.0.0.1:{port}/mcp", headers={"Mcp-Session-Id": "s-1"}).text for _ in range(6)]
    assert names in (["a", "b"] * 3, ["b", "a"] * 3)


def test_headers_mcp_needs_pass_through_unchanged(upstreams: tuple[Upstream, Upstream], tmp_path: Path) -> None:
    sent = {
        "authorization": "Bearer t0k",
        "mcp-session-id": "abc-123",
        "mcp-protocol-version": "2025-11-25",
        "last-event-id": "7",
        "origin": "http://localhost:8080",
    }
    with start_nginx([upstreams[0].port], tmp_path) as (port, _process):
        response = httpx.get(f"http://127.0.0.1:{port}/headers", headers=sent, timeout=TIMEOUT)
    received = response.json()
    assert {name: received.get(name) for name in sent} == sent
    assert received["host"] == f"127.0.0.1:{port}"  # the client's Host, port included
    assert received["x-forwarded-for"] == "127.0.0.1"
    assert received.get("connection", "") == ""  # HTTP/1.1 keepalive to the upstream, not "close"


def test_an_event_stream_reaches_the_client_before_it_ends(
    upstreams: tuple[Upstream, Upstream], tmp_path: Path
) -> None:
    with (
        start_nginx([u.port for u in upstreams], tmp_path) as (port, _process),
        httpx.stream("GET", f"http://127.0.0.1:{port}/sse", timeout=TIMEOUT) as response,
    ):
        lines = response.iter_lines()
        # The upstream writes the second event only once released: buffering would hold the first.
        assert next(lines) == "data: first"
        owner = next(u for u in upstreams if u.name == response.headers["X-Upstream"])
        httpx.get(f"http://127.0.0.1:{owner.port}/release", timeout=TIMEOUT)
        assert [line for line in lines if line] == ["data: second"]


def test_a_dead_upstream_is_skipped_for_get_and_post_never_sent_to_it(
    upstreams: tuple[Upstream, Upstream], tmp_path: Path
) -> None:
    a, b = upstreams
    with (
        start_nginx([a.port, b.port], tmp_path) as (port, _process),
        httpx.Client(timeout=TIMEOUT) as client,
    ):
        a.kill()
        # Connection refused: nothing reached a, so GET and POST alike go to b.
        answers = [client.request(method, f"http://127.0.0.1:{port}/mcp").text for method in ("GET", "POST") * 3]
    assert answers == ["b"] * 6
    assert b.executions() == ["GET /mcp", "POST /mcp"] * 3


def test_a_post_whose_upstream_died_after_receiving_it_is_not_run_again(
    upstreams: tuple[Upstream, Upstream], tmp_path: Path
) -> None:
    a, b = upstreams
    with start_nginx([a.port, b.port], tmp_path) as (port, _process):
        response = httpx.post(f"http://127.0.0.1:{port}/die", content=b"{}", timeout=TIMEOUT)
    # The first upstream took the POST and died: it may have run, so nginx must not try the other.
    assert response.status_code == 502
    assert sorted(a.executions() + b.executions()) == ["POST /die"]


def test_a_get_whose_upstream_died_is_retried_on_the_next(upstreams: tuple[Upstream, Upstream], tmp_path: Path) -> None:
    a, b = upstreams
    with start_nginx([a.port, b.port], tmp_path) as (port, _process):
        response = httpx.get(f"http://127.0.0.1:{port}/die", timeout=TIMEOUT)
    # Both died on it (each received it once); the GET was tried on each, then nginx gave up.
    assert response.status_code == 502
    assert a.executions() == b.executions() == ["GET /die"]


def test_the_rendered_config_keeps_every_shipped_directive_but_addresses_and_paths(tmp_path: Path) -> None:
    shipped = NGINX_CONF.read_text()
    rendered = render_config([7001, 7002], 7000, tmp_path)
    kept = [line for line in shipped.splitlines() if "mcpmux-" not in line and "listen 8080" not in line]
    assert all(line in rendered.splitlines() for line in kept)
    assert "server 127.0.0.1:7001 max_fails=1 fail_timeout=5s;" in rendered
    assert "listen 127.0.0.1:7000;" in rendered
    assert f"proxy_temp_path {tmp_path / 'proxy_temp'};" in rendered


def test_a_config_without_the_markers_is_refused_with_the_reason(tmp_path: Path) -> None:
    broken = tmp_path / "nginx.conf"
    broken.write_text(NGINX_CONF.read_text().replace("# upstreams: end", ""))
    with pytest.raises(ValueError, match="markers are missing"):
        render_config([7001], 7000, tmp_path, source=broken)
