"""Hostile requests against enabling and disabling servers at run time (console and REST API, raw HTTP).

A real ``mcpmux serve --http`` fronting server-everything. Only an ``admin`` may switch a server,
in the console with its session, this host's Origin and the session's CSRF token, in the API with
an admin bearer token; unknown or hostile server names and actions change nothing and are not
reflected as markup; disabling twice is harmless; a storm of concurrent enables and disables ends
in a working server with exactly one child process.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.console.serving import Console, console, write_console_config
from tests.gateway.serving import mcpmux

pytestmark = [pytest.mark.xdist_group(__name__), pytest.mark.subprocess, pytest.mark.network]

WAIT_S = 60.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("switch-attacks")
    config = write_console_config(root, ("everything",))
    with console(root, config, real_process=True) as running:  # _children() looks at its process tree
        yield running


def _state(served: Console) -> str:
    with served.client() as client:
        headers = {"Authorization": f"Bearer {served.tokens['reader']}"}
        rows = client.get("/api/servers", headers=headers).json()
    return str(next(r["state"] for r in rows if r["name"] == "everything"))


def _api(served: Console, token: str | None, path: str, **headers: str) -> httpx.Response:
    if token is not None:
        headers["Authorization"] = f"Bearer {served.tokens[token]}"
    with served.client() as client:
        return client.post(path, headers=headers)


def _audit(served: Console) -> list[dict[str, object]]:
    home = Path(served.serving.env["HOME"])
    done = mcpmux(home, home / "mcpmux.json", "audit", "--json", "--limit", "500")
    return list(json.loads(done.stdout))


def _state_becomes(served: Console, name: str, state: str) -> bool:
    """Whether ``GET /api/servers`` shows ``name`` in ``state`` within ``WAIT_S``."""
    headers = {"Authorization": f"Bearer {served.tokens['admin']}"}
    deadline = time.monotonic() + WAIT_S
    with served.client() as client:
        while time.monotonic() < deadline:
            servers = client.get("/api/servers", headers=headers).json()
            if any(s["name"] == name and s["state"] == state for s in servers):
                return True
            time.sleep(0.1)
    return False


def _children(served: Console, command_part: str) -> list[psutil.Process]:
    return [
        p for p in psutil.Process(served.serving.process.pid).children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE and command_part in " ".join(p.cmdline())
    ]  # fmt: skip


@pytest.mark.slow
def test_a_read_or_execute_token_cannot_switch_a_server_in_the_console(served: Console) -> None:
    for token in ("reader", "agent"):
        with served.signed_in(token) as client:
            csrf = served.csrf(client)
            for action in ("disable", "enable"):
                response = client.post(
                    f"/ui/servers/everything/{action}", data={"csrf": csrf}, headers={"Origin": served.base}
                )
                assert response.status_code == 403, (token, action)
    assert _state(served) == "connected"
    assert not [r for r in _audit(served) if r["tool"] in ("mcpmux/disable", "mcpmux/enable")]


def test_a_read_or_execute_token_or_none_cannot_switch_a_server_through_the_api(served: Console) -> None:
    for token in ("reader", "agent"):
        response = _api(served, token, "/api/servers/everything/disable")
        assert response.status_code == 403 and "admin" in response.json()["detail"], token
    assert _api(served, None, "/api/servers/everything/disable").status_code == 401  # tokens exist: one is needed
    bogus = _api(served, None, "/api/servers/everything/disable", Authorization="Bearer mcpmux_forged")
    assert bogus.status_code == 401
    assert _state(served) == "connected"


def test_a_cross_site_request_cannot_switch_a_server(served: Console) -> None:
    with served.signed_in("admin") as client:
        csrf = served.csrf(client)
        path = "/ui/servers/everything/disable"
        for data, headers in (({}, {"Origin": served.base}), ({"csrf": "forged"}, {"Origin": served.base}),
                              ({"csrf": csrf}, {"Origin": "http://evil.example"}), ({"csrf": csrf}, {}),
                              ({"csrf": csrf}, {"Origin": "null"})):  # fmt: skip
            assert client.post(path, data=data, headers=headers).status_code == 403, (data, headers)
    # The API takes no cookie; a page elsewhere holding a stolen admin token is still refused by Origin.
    assert _api(served, "admin", "/api/servers/everything/disable", Origin="http://evil.example").status_code == 403
    assert _state(served) == "connected"


@pytest.mark.parametrize(
    "name", ["nope", "<script>alert(1)</script>", "..%2F..%2Fetc", "everything%00", "e" * 300, "EVERYTHING"]
)
def test_an_unknown_or_hostile_server_name_changes_nothing_and_is_not_reflected_as_markup(
    served: Console, name: str
) -> None:
    with served.signed_in("admin") as client:
        csrf = served.csrf(client)
        response = client.post(f"/ui/servers/{name}/disable", data={"csrf": csrf}, headers={"Origin": served.base})
        assert response.status_code in (400, 404), response.status_code
        assert "<script>alert(1)</script>" not in response.text
    api = _api(served, "admin", f"/api/servers/{name}/disable")
    assert api.status_code in (404, 422), api.text
    assert "<script>" not in api.headers.get("content-type", "")
    assert _state(served) == "connected"


def test_an_unknown_action_is_refused(served: Console) -> None:
    with served.signed_in("admin") as client:
        csrf = served.csrf(client)
        response = client.post("/ui/servers/everything/delete", data={"csrf": csrf}, headers={"Origin": served.base})
        assert response.status_code == 400 and "enable or disable" in response.text
    assert _api(served, "admin", "/api/servers/everything/delete").status_code == 422
    assert _state(served) == "connected"


def test_disabling_twice_is_harmless_and_enabling_brings_one_child_back(served: Console) -> None:
    for _ in range(2):
        response = _api(served, "admin", "/api/servers/everything/disable")
        assert response.status_code == 200 and response.json()["state"] == "disabled"
    assert _children(served, "server-everything") == []
    for _ in range(2):
        response = _api(served, "admin", "/api/servers/everything/enable")
        assert response.status_code == 200 and response.json()["state"] == "connected"
    assert len(_children(served, "server-everything")) >= 1


@pytest.mark.slow
def test_a_storm_of_concurrent_enables_and_disables_ends_working_with_one_child(served: Console) -> None:
    actions = ["disable", "enable"] * 10
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda a: _api(served, "admin", f"/api/servers/everything/{a}"), actions))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200]
    final = _api(served, "admin", "/api/servers/everything/enable")
    assert final.status_code == 200 and final.json()["state"] in {"starting", "connected"}, final.text
    # Enabling an enabled server returns at once: the storm's last start may still be connecting.
    assert _state_becomes(served, "everything", "connected"), final.text
    headers = {"Authorization": f"Bearer {served.tokens['admin']}"}
    with served.client() as client:
        call = client.post(
            "/api/tools/execute", json={"tool_id": "everything:echo", "arguments": {"message": "after"}},
            headers=headers,
        )  # fmt: skip
    assert call.status_code == 200 and "after" in call.text
    # Every child started during the storm was stopped and reaped: one server-everything runs now.
    roots = [p for p in _children(served, "server-everything") if p.parent() is not None
             and "server-everything" not in " ".join(p.parent().cmdline())]  # fmt: skip
    assert len(roots) == 1, [p.cmdline() for p in roots]
    assert re.search(r"mcpmux/disable", json.dumps(_audit(served)))
