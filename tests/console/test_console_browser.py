"""The console in a real headless browser (Playwright driving Debian's chromium) against a real gateway.

``mcpmux serve --http`` fronts server-everything and the changing fixture server (its definition
changed since it was pinned). A person signs in with a token, sees a server's state change when its
process is killed (live, without a reload), tries a tool through the generated form, approves a
call a separate SDK client is waiting on (the client gets its result) and denies another, approves
a changed pin, filters the audit log; axe-core finds no serious or critical violation on the main
pages; screenshots of the main pages go to docs/screenshots (with MCPMUX_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from tests.console.serving import Console, console, write_console_config
from tests.console.test_held_approvals import _call_get_sum
from tests.gateway.serving import mcpmux
from tests.peers.fixtures import peers_dir

playwright = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.xdist_group(__name__),
    pytest.mark.subprocess,
    pytest.mark.network,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/install-peers)"),
]

WAIT_MS = 30_000
# The screenshots in docs/ are rewritten only when asked (MCPMUX_UPDATE_SCREENSHOTS=1), so a test run leaves
# the tree clean; otherwise they are still taken, into a scratch directory.
SCREENSHOTS = (
    Path(__file__).parents[2] / "docs" / "screenshots"
    if os.environ.get("MCPMUX_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / "mcpmux-console-screenshots"
)
AXE = peers_dir() / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("browser")
    rules = {"pinning": "tofu", "require_approval": ["everything:get-sum"]}
    pinned = write_console_config(root, ("changing",), variant="base", **rules)
    assert mcpmux(root, pinned, "tools", "--json").returncode == 0  # first sight: pinned
    config = write_console_config(root, ("everything", "changing"), variant="description", **rules)
    with console(root, config) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: object, served: Console) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1100, "height": 760})  # type: ignore[attr-defined]
    try:
        tab = context.new_page()
        tab.set_default_timeout(WAIT_MS)
        _sign_in(tab, served, "admin")
        yield tab
    finally:
        context.close()


def _sign_in(tab: object, served: Console, token: str) -> None:
    tab.goto(served.base + "/ui/")  # type: ignore[attr-defined]
    tab.get_by_label("Gateway token").fill(served.tokens[token])  # type: ignore[attr-defined]
    tab.get_by_role("button", name="Sign in").click()  # type: ignore[attr-defined]
    tab.wait_for_url("**/ui/servers")  # type: ignore[attr-defined]


def _shot(tab: object, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / f"{name}.png"), type="png")  # type: ignore[attr-defined]


@pytest.mark.slow
def test_sign_in_shows_every_server_and_its_state(page: object) -> None:
    expect = playwright.expect
    expect(page.locator('tr[data-server="everything"] [data-state]')).to_have_text("connected")  # type: ignore[attr-defined]
    expect(page.locator('tr[data-server="changing"] [data-state]')).to_have_text("connected")  # type: ignore[attr-defined]
    _shot(page, "servers")


def test_a_killed_server_changes_state_on_the_open_page(page: object) -> None:
    row = page.locator('tr[data-server="everything"]')  # type: ignore[attr-defined]
    text = row.inner_text()
    pid = int(text.split("pid ", 1)[1].split()[0])
    os.kill(pid, signal.SIGKILL)
    # No reload: the page learns it by server-sent events (a new process, a new pid, one more restart).
    playwright.expect(row).not_to_contain_text(f"pid {pid}", timeout=WAIT_MS)
    playwright.expect(row.locator("[data-state]")).to_have_text("connected", timeout=WAIT_MS)


def test_a_tool_is_found_by_search_and_tried_through_its_form(page: object, served: Console) -> None:
    page.goto(served.base + "/ui/tools")  # type: ignore[attr-defined]
    page.get_by_label("Search tools").fill("echo message")  # type: ignore[attr-defined]
    page.get_by_role("button", name="Search").click()  # type: ignore[attr-defined]
    page.get_by_role("link", name="everything:echo").click()  # type: ignore[attr-defined]
    page.get_by_label("message").fill("hello from the browser")  # type: ignore[attr-defined]
    _shot(page, "tool")
    page.get_by_role("button", name="Call everything:echo").click()  # type: ignore[attr-defined]
    playwright.expect(page.locator("#result")).to_contain_text("hello from the browser")  # type: ignore[attr-defined]


def _client_call(served: Console, out: list[types.CallToolResult | BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            out.append(anyio.run(_call_get_sum, served, "agent"))
        except BaseException as exc:  # reported by the test, which joins the thread
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("decision", ["Approve once", "Deny"])
def test_a_waiting_sdk_client_gets_its_answer_from_the_console(page: object, served: Console, decision: str) -> None:
    page.goto(served.base + "/ui/approvals")  # type: ignore[attr-defined]
    out: list[types.CallToolResult | BaseException] = []
    thread = _client_call(served, out)
    held = page.locator("article.held")  # type: ignore[attr-defined]
    playwright.expect(held).to_contain_text("everything:get-sum", timeout=WAIT_MS)  # arrives live
    playwright.expect(held).to_contain_text("token:agent")
    if decision == "Approve once":
        _shot(page, "approvals")
    held.get_by_role("button", name=decision).click()
    thread.join(WAIT_MS / 1000)
    assert not thread.is_alive() and len(out) == 1
    result = out[0]
    assert isinstance(result, types.CallToolResult), result
    assert result.is_error is (decision == "Deny")
    playwright.expect(page.locator("article.held")).to_have_count(0)  # type: ignore[attr-defined]


def test_a_changed_pin_is_shown_as_a_diff_and_approved(page: object, served: Console) -> None:
    page.goto(served.base + "/ui/approvals")  # type: ignore[attr-defined]
    held = page.locator("article.pin-held", has_text="changing:read_notes")  # type: ignore[attr-defined]
    playwright.expect(held.locator("pre.diff")).to_contain_text("now with caching")
    held.get_by_role("button", name="Approve the new definition").click()
    playwright.expect(page.locator("article.pin-held", has_text="changing:read_notes")).to_have_count(0)  # type: ignore[attr-defined]
    page.goto(served.base + "/ui/tools/changing:read_notes")  # type: ignore[attr-defined]
    playwright.expect(page.locator(".pin").first).to_have_text("ok")  # type: ignore[attr-defined]


def test_the_audit_log_filters_by_tool(page: object, served: Console) -> None:
    page.goto(served.base + "/ui/audit")  # type: ignore[attr-defined]
    page.get_by_label("Tool").fill("echo")  # type: ignore[attr-defined]
    page.get_by_role("button", name="Filter").click()  # type: ignore[attr-defined]
    rows = page.locator("[data-region=audit] tbody tr")  # type: ignore[attr-defined]
    playwright.expect(rows.first).to_contain_text("everything:echo")
    assert all("everything:echo" in text for text in rows.all_inner_texts())
    _shot(page, "audit")


def test_a_server_is_disabled_and_enabled_again_from_its_page(page: object, served: Console) -> None:
    page.goto(served.base + "/ui/servers/everything")  # type: ignore[attr-defined]
    state = page.locator("[data-region=server] [data-state]")  # type: ignore[attr-defined]
    playwright.expect(state).to_have_text("connected")
    page.get_by_role("button", name="Disable").click()  # type: ignore[attr-defined]
    playwright.expect(state).to_have_text("disabled")
    region = page.locator("[data-region=server]")  # type: ignore[attr-defined]
    playwright.expect(region).to_contain_text("disabled at run time by console:token:admin")
    _shot(page, "server-disabled")
    page.goto(served.base + "/ui/tools")  # type: ignore[attr-defined]
    playwright.expect(page.get_by_role("link", name="everything:echo")).to_have_count(0)  # type: ignore[attr-defined]
    page.goto(served.base + "/ui/servers")  # type: ignore[attr-defined]
    playwright.expect(page.locator('tr[data-server="everything"] [data-state]')).to_have_text("disabled")  # type: ignore[attr-defined]
    page.get_by_role("link", name="everything").click()  # type: ignore[attr-defined]
    page.get_by_role("button", name="Enable").click()  # type: ignore[attr-defined]
    playwright.expect(state).to_have_text("connected")
    page.goto(served.base + "/ui/tools")  # type: ignore[attr-defined]
    playwright.expect(page.get_by_role("link", name="everything:echo")).to_have_count(1)  # type: ignore[attr-defined]


def test_a_phone_sized_screen_shows_the_servers(browser: object, served: Console) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)  # type: ignore[attr-defined]
    try:
        tab = context.new_page()
        tab.set_default_timeout(WAIT_MS)
        _sign_in(tab, served, "reader")
        playwright.expect(tab.get_by_role("link", name="everything")).to_be_visible()
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= 390 + 1  # no sideways scrolling of the page (tables scroll inside themselves)
        _shot(tab, "phone")
    finally:
        context.close()


AXE_PAGES = ["/ui/login", "/ui/servers", "/ui/servers/everything", "/ui/tools", "/ui/tools/everything:echo",
             "/ui/resources", "/ui/prompts", "/ui/approvals", "/ui/audit", "/ui/sources"]  # fmt: skip


@pytest.mark.slow
def test_axe_finds_no_serious_or_critical_violation(browser: object, served: Console) -> None:
    # axe is injected as a script: the page's own CSP (no inline script) would refuse it.
    context = browser.new_context(bypass_csp=True)  # type: ignore[attr-defined]
    try:
        tab = context.new_page()
        tab.set_default_timeout(WAIT_MS)
        found: dict[str, list[str]] = {}
        tab.goto(served.base + "/ui/login")
        for path in AXE_PAGES:
            if path != "/ui/login" and "/ui/login" in tab.url:
                _sign_in(tab, served, "admin")
            tab.goto(served.base + path)
            tab.add_script_tag(path=str(AXE))
            report = tab.evaluate("axe.run(document, {resultTypes: ['violations']})")
            bad = [f"{v['id']}: {v['help']}" for v in report["violations"] if v["impact"] in ("serious", "critical")]
            if bad:
                found[path] = bad
        assert not found, json.dumps(found, indent=2)
    finally:
        context.close()
