"""``mcpmux api`` alone: a REST call that needs approval waits for a person at its console (real processes).

A token with ``execute`` (not ``admin``) calls ``POST /api/tools/execute`` on a tool that needs
approval; the call is held in the console's queue, shown with its caller, tool, redacted arguments
and rule; a person signed in with an admin token approves it in a real browser (Playwright driving
Debian's chromium) and the waiting REST caller gets its result, or denies it (raw HTTP) and the
caller gets a 403; no answer within ``gateway_approvers.console_timeout_s`` denies. Without the
console (``--no-ui``) such a call is refused at once, as before.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.console.serving import create_tokens, write_console_config
from tests.gateway.serving import MCPMUX, isolated_env
from tests.peers.fixtures import stop_process_group

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.network]

START_TIMEOUT_S = 30.0
WAIT_S = 60.0
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CALL = {"tool_id": "everything:get-sum", "arguments": {"a": 2, "b": 3, "api_key": "sk-secret-value"}}


@contextmanager
def api(root: Path, *args: str, **security: object) -> Iterator[tuple[str, dict[str, str]]]:
    """``mcpmux api`` fronting server-everything with get-sum needing approval; its base URL and tokens."""
    config = write_console_config(root, ("everything",), require_approval=["everything:get-sum"], **security)
    tokens = create_tokens(root, config)
    stderr = root / "api.stderr"
    with stderr.open("wb") as log:
        process = subprocess.Popen(
            [MCPMUX, "--config", str(config), "api", "--http", "127.0.0.1:0", *args],
            env=isolated_env(root), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (found := re.search(r"serving (http://[^/\s]+)/api", stderr.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        _wait_connected(found.group(1), tokens["reader"])
        yield found.group(1), tokens
    finally:
        stop_process_group(process)


def _wait_connected(base: str, token: str) -> None:
    """The API connects its servers in the background: a call before that finds no tool (503)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    with httpx.Client(base_url=base, timeout=WAIT_S, headers={"Authorization": f"Bearer {token}"}) as client:
        while (states := {s["name"]: s["state"] for s in client.get("/api/servers").json()}) != {
            "everything": "connected"
        }:
            assert time.monotonic() < deadline, states
            time.sleep(0.1)


def _rest_call(base: str, token: str, out: list[httpx.Response | BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, timeout=WAIT_S * 3) as client:
                out.append(client.post("/api/tools/execute", json=CALL, headers=headers))
        except BaseException as exc:  # reported by the test, which joins the thread
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextmanager
def signed_in(base: str, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=WAIT_S) as client:
        login = client.post("/ui/login", data={"secret": token}, headers={"Origin": base})
        assert login.status_code == 303
        yield client


def _held(client: httpx.Client) -> tuple[str, str]:
    deadline = time.monotonic() + WAIT_S
    while True:
        html = client.get("/ui/approvals").text
        found = re.search(r'data-held="([^"]+)"', html)
        if found:
            return found.group(1), html
        assert time.monotonic() < deadline, "the REST call was never held for a person"
        time.sleep(0.1)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/install-peers)")
def test_a_waiting_rest_caller_gets_its_result_when_a_person_approves_in_a_browser(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    with api(tmp_path) as (base, tokens), playwright.sync_playwright() as p:
        out: list[httpx.Response | BaseException] = []
        thread = _rest_call(base, tokens["agent"], out)
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            tab = browser.new_page()
            tab.set_default_timeout(WAIT_S * 1000)
            tab.goto(base + "/ui/")
            tab.get_by_label("Gateway token").fill(tokens["admin"])
            tab.get_by_role("button", name="Sign in").click()
            tab.wait_for_url("**/ui/servers")
            tab.goto(base + "/ui/approvals")
            held = tab.locator("article.held")
            playwright.expect(held).to_contain_text("token:agent")  # live: the page learns it by events
            playwright.expect(held).to_contain_text("everything:get-sum")
            assert "sk-secret-value" not in tab.content()  # redacted as the audit log redacts
            held.get_by_role("button", name="Approve once").click()
            thread.join(WAIT_S)
            playwright.expect(tab.locator("article.held")).to_have_count(0)
        finally:
            browser.close()
    assert out and isinstance(out[0], httpx.Response), out
    assert out[0].status_code == 200, out[0].text
    body = out[0].json()
    assert body["success"] and "5" in str(body["content"])


def test_a_denied_rest_call_gets_a_403_and_the_queue_is_empty_again(tmp_path: Path) -> None:
    with api(tmp_path) as (base, tokens), signed_in(base, tokens["admin"]) as console:
        out: list[httpx.Response | BaseException] = []
        thread = _rest_call(base, tokens["agent"], out)
        held, html = _held(console)
        assert "token:agent" in html and "sk-secret-value" not in html
        csrf = re.search(r'name="csrf" value="([^"]+)"', html)
        assert csrf is not None
        answered = console.post(
            f"/ui/approvals/{held}", data={"csrf": csrf.group(1), "decision": "no"}, headers={"Origin": base}
        )
        assert answered.status_code == 303
        thread.join(WAIT_S)
        assert 'data-held="' not in console.get("/ui/approvals").text
    assert out and isinstance(out[0], httpx.Response), out
    assert out[0].status_code == 403 and out[0].json()["title"] == "ApprovalDenied", out[0].text


def test_a_rest_caller_cannot_approve_its_own_call(tmp_path: Path) -> None:
    with api(tmp_path) as (base, tokens):
        out: list[httpx.Response | BaseException] = []
        thread = _rest_call(base, tokens["agent"], out)
        with signed_in(base, tokens["agent"]) as own:  # the caller's own (execute) token, in the console
            held, html = _held(own)
            csrf = re.search(r'name="csrf" value="([^"]+)"', html)
            assert csrf is not None
            tried = own.post(
                f"/ui/approvals/{held}", data={"csrf": csrf.group(1), "decision": "yes"}, headers={"Origin": base}
            )
            assert tried.status_code == 403  # answering needs admin
        with signed_in(base, tokens["admin"]) as console:
            _, html = _held(console)  # still waiting
            csrf = re.search(r'name="csrf" value="([^"]+)"', html)
            assert csrf is not None
            console.post(f"/ui/approvals/{held}", data={"csrf": csrf.group(1), "decision": "no"},
                         headers={"Origin": base})  # fmt: skip
        thread.join(WAIT_S)
    assert isinstance(out[0], httpx.Response) and out[0].status_code == 403


def test_no_answer_in_time_denies_the_rest_call(tmp_path: Path) -> None:
    with api(tmp_path, gateway_approvers={"console_timeout_s": 1}) as (base, tokens):
        headers = {"Authorization": f"Bearer {tokens['agent']}"}
        with httpx.Client(base_url=base, timeout=WAIT_S) as client:
            response = client.post("/api/tools/execute", json=CALL, headers=headers)
    assert response.status_code == 403 and response.json()["title"] == "ApprovalDenied", response.text


def test_without_the_console_the_rest_call_is_refused_at_once(tmp_path: Path) -> None:
    with api(tmp_path, "--no-ui") as (base, tokens):
        headers = {"Authorization": f"Bearer {tokens['agent']}"}
        with httpx.Client(base_url=base, timeout=WAIT_S) as client:
            response = client.post("/api/tools/execute", json=CALL, headers=headers)
    assert response.status_code == 403 and "no one can be asked" in response.json()["detail"], response.text


def test_a_rest_caller_that_disconnects_withdraws_its_waiting_call(tmp_path: Path) -> None:
    """Issue 43 item 5: the held call stayed in the queue after its caller left, approvable for nobody."""
    import json
    import socket
    from urllib.parse import urlsplit

    with api(tmp_path) as (base, tokens), signed_in(base, tokens["admin"]) as console:
        where = urlsplit(base)
        body = json.dumps(CALL).encode()
        head = (
            f"POST /api/tools/execute HTTP/1.1\r\nHost: {where.netloc}\r\nAuthorization: Bearer {tokens['agent']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        caller = socket.create_connection((where.hostname, where.port), timeout=WAIT_S)
        try:
            caller.sendall(head.encode() + body)
            held, html = _held(console)  # the call waits for a person
        finally:
            caller.close()  # and its caller goes away
        deadline = time.monotonic() + WAIT_S
        while f'data-held="{held}"' in (html := console.get("/ui/approvals").text):
            assert time.monotonic() < deadline, "the call of a caller that left stayed in the queue"
            time.sleep(0.1)
        csrf = re.search(r'name="csrf" value="([^"]+)"', html)
        assert csrf is not None
        late = console.post(f"/ui/approvals/{held}", data={"csrf": csrf.group(1), "decision": "yes"},
                            headers={"Origin": base})  # fmt: skip
        assert late.status_code == 400 and "no held call named" in late.text, late.text  # nothing to approve
        admin = {"Authorization": f"Bearer {tokens['admin']}"}
        audit = console.get("/api/audit", params={"limit": 5}, headers=admin).json()
        assert not any(row.get("outcome") == "ok" for row in audit), audit  # the tool never ran
