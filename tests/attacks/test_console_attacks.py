"""Hostile requests against the web console of a real ``mcpmux serve --http``, with raw HTTP.

No page, action or event stream without a session; no state change without this host's Origin
and the session's CSRF token; a ``read`` token only looks; markup in a tool's description or
result is shown as text; the cookie is HttpOnly, SameSite=Strict and scoped to ``/ui``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.serving import Console, console, write_console_config
from tests.gateway.serving import mcpmux

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.subprocess, pytest.mark.network]

PAGES = ["/ui/servers", "/ui/servers/everything", "/ui/tools", "/ui/tools/everything:echo", "/ui/resources",
         "/ui/prompts", "/ui/approvals", "/ui/audit", "/ui/audit/export.csv", "/ui/audit/export.json",
         "/ui/sources"]  # fmt: skip
ACTIONS = ["/ui/servers/everything/restart", "/ui/servers/everything/refresh", "/ui/tools/everything:echo/call",
           "/ui/resources/read", "/ui/prompts/render", "/ui/approvals/pins", "/ui/approvals/someid",
           "/ui/sources/sync", "/ui/logout"]  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("console-attacks")
    config = write_console_config(root, ("everything", "hostile"))
    with console(root, config) as running:
        yield running


@pytest.mark.slow
def test_no_page_without_a_session_only_the_sign_in_page(served: Console) -> None:
    with served.client() as client:
        for path in PAGES:
            response = client.get(path)
            assert response.status_code == 303, path
            assert response.headers["location"] == "/ui/login"
        assert client.get("/ui/login").status_code == 200
        assert client.get("/ui/events").status_code == 401


def test_no_action_without_a_session(served: Console) -> None:
    with served.client() as client:
        for path in ACTIONS:
            response = client.post(path, data={"csrf": "x"}, headers={"Origin": served.base})
            assert response.status_code == 401, path


def test_a_forged_or_stolen_looking_cookie_is_no_session(served: Console) -> None:
    with served.client() as client:
        client.cookies.set("mcpmux_console", "A" * 43, path="/ui")
        assert client.get("/ui/servers").status_code == 303


def test_an_unknown_token_gets_no_session_and_no_cookie(served: Console) -> None:
    with served.client() as client:
        response = client.post("/ui/login", data={"secret": "mcpmux_not-a-token"}, headers={"Origin": served.base})
        assert response.status_code == 303 and "error" in response.headers["location"]
        assert "set-cookie" not in response.headers


def test_the_session_cookie_is_httponly_samesite_strict_and_scoped_to_the_console(served: Console) -> None:
    with served.client() as client:
        response = client.post("/ui/login", data={"secret": served.tokens["admin"]}, headers={"Origin": served.base})
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
    assert served.tokens["admin"].lower() not in cookie  # the session id, never the token


def test_pages_carry_a_strict_content_security_policy(served: Console) -> None:
    with served.signed_in("admin") as client:
        response = client.get("/ui/tools")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"


def test_a_state_change_without_the_csrf_token_is_refused(served: Console) -> None:
    with served.signed_in("admin") as client:
        for data in ({}, {"csrf": "wrong"}, {"csrf": ""}):
            response = client.post("/ui/servers/everything/refresh", data=data, headers={"Origin": served.base})
            assert response.status_code == 403, data
            assert "CSRF" in response.text


def test_a_cross_origin_post_is_refused_even_with_the_csrf_token(served: Console) -> None:
    with served.signed_in("admin") as client:
        csrf = served.csrf(client)
        port = served.base.rsplit(":", 1)[1]
        other_loopback_site = f"http://localhost:{int(port) + 1}"  # allowed by the gateway's Origin rule, not here
        for headers in ({"Origin": other_loopback_site}, {"Origin": "null"}, {}, {"Referer": "http://localhost:1/x"}):
            response = client.post("/ui/servers/everything/refresh", data={"csrf": csrf}, headers=headers)
            assert response.status_code == 403, headers
        response = client.post(
            "/ui/servers/everything/refresh", data={"csrf": csrf}, headers={"Origin": "http://evil.example"}
        )
        assert response.status_code == 403
        # The control: the same request from the console's own page goes through.
        response = client.post("/ui/servers/everything/refresh", data={"csrf": csrf}, headers={"Origin": served.base})
        assert response.status_code == 303


def test_a_cross_origin_sign_in_is_refused(served: Console) -> None:
    with served.client() as client:
        response = client.post(
            "/ui/login", data={"secret": served.tokens["admin"]}, headers={"Origin": "http://localhost:1"}
        )
        assert response.status_code == 403 and "set-cookie" not in response.headers


def test_a_read_token_sees_but_cannot_act(served: Console) -> None:
    with served.signed_in("reader") as client:
        assert client.get("/ui/tools/everything:echo").status_code == 200
        assert "Try it" not in client.get("/ui/tools/everything:echo").text
        csrf = served.csrf(client)
        for path, data in (("/ui/tools/everything:echo/call", {"arg.message": "hi"}),
                           ("/ui/servers/everything/restart", {}), ("/ui/approvals/x", {"decision": "yes"}),
                           ("/ui/approvals/pins", {"server": "everything"})):  # fmt: skip
            response = client.post(path, data={"csrf": csrf, **data}, headers={"Origin": served.base})
            assert response.status_code == 403, path
    audit = mcpmux(
        Path(served.serving.env["HOME"]), Path(served.serving.env["HOME"]) / "mcpmux.json", "audit", "--json"
    )
    assert "console:token:reader" not in audit.stdout  # nothing reached the guard


def test_markup_in_a_tool_description_renders_as_text(served: Console) -> None:
    with served.signed_in("admin") as client:
        for path in ("/ui/tools", "/ui/tools/hostile:markup_tool", "/ui/tools?q=echo+text"):
            html = client.get(path).text
            assert "<script>document.title" not in html, path
            assert "<img src=x" not in html, path
            assert "&lt;script&gt;" in html, path


def test_markup_in_a_tool_result_renders_as_text_and_svg_is_not_shown_as_an_image(served: Console) -> None:
    with served.signed_in("admin") as client:
        csrf = served.csrf(client, "/ui/tools/hostile:markup_tool")
        response = client.post("/ui/tools/hostile:markup_tool/call", data={"csrf": csrf, "arg.text": "<b>x</b>"},
                               headers={"Origin": served.base})  # fmt: skip
    assert response.status_code == 200
    assert "<script>document.title" not in response.text and "<b>x</b>" not in response.text
    assert "&lt;b&gt;x&lt;/b&gt;" in response.text
    assert "data:image/svg" not in response.text and "not shown" in response.text


@pytest.mark.slow
def test_a_revoked_token_ends_its_session(tmp_path: Path) -> None:
    config = write_console_config(tmp_path, ("everything",))
    with console(tmp_path, config) as running, running.signed_in("agent") as client:
        assert client.get("/ui/servers").status_code == 200
        assert mcpmux(tmp_path, config, "token", "revoke", "agent").returncode == 0
        assert client.get("/ui/servers").status_code == 303


@pytest.mark.slow
def test_without_tokens_the_console_wants_the_key_printed_at_start(tmp_path: Path) -> None:
    config = write_console_config(tmp_path, ("everything",))
    with console(tmp_path, config, tokens=False) as running, running.client() as client:
        response = client.post("/ui/login", data={"secret": "guess"}, headers={"Origin": running.base})
        assert "set-cookie" not in response.headers
        key = running.serving.log().split("console key ", 1)[1].split()[0]
        response = client.post("/ui/login", data={"secret": key}, headers={"Origin": running.base})
        assert response.status_code == 303 and "set-cookie" in response.headers
        assert client.get("/ui/servers").status_code == 200


@pytest.mark.slow
def test_no_ui_serves_no_console(tmp_path: Path) -> None:
    config = write_console_config(tmp_path, ("everything",))
    with console(tmp_path, config, "--no-ui") as running, running.client() as client:
        assert client.get("/ui/login").status_code in (401, 404)
        assert "console key" not in running.serving.log()
