"""A real OAuth world on 127.0.0.1: oidc-provider in front of an MCP server that checks its tokens.

:func:`oauth_world` starts both (the authorization server from npm, the resource server from
``resource_server.py``); :func:`scripted_browser` plays the person: it follows the authorization
URL's redirects with an HTTP client, signs in and consents on oidc-provider's own pages, and lands on
mcpmux's loopback redirect like a browser would.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

import httpx2
import pytest

from tests.peers.fixtures import PeersNotInstalledError, free_port, peers_dir, run_listening

__all__ = ["OAuthWorld", "oauth_world", "scripted_browser"]

HERE = Path(__file__).resolve().parent
MAX_REDIRECTS = 20


def _installed(relative: str) -> Path:
    # Not through the peers' stamp check: a branch that adds a peer (this one added oidc-provider)
    # runs against a tree stamped for the lock without it; the file itself is what the tests need.
    path = peers_dir() / "node_modules" / relative
    if not path.is_file():
        raise PeersNotInstalledError(f"{path} is missing: run scripts/install-peers")
    return path


@dataclass
class OAuthWorld:
    issuer: str
    mcp_url: str
    visited: list[str] = field(default_factory=list)

    def as_stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.issuer}/test/stats", timeout=10) as answer:
            stats: dict[str, int] = json.load(answer)
        return stats

    def rs_stats(self) -> dict[str, int]:
        url = self.mcp_url.removesuffix("/mcp")
        with urllib.request.urlopen(f"{url}/test/stats", timeout=10) as answer:
            stats: dict[str, int] = json.load(answer)
        return stats


@contextlib.contextmanager
def oauth_world(
    mode: str = "normal", access_ttl_s: int = 300, also_for: tuple[str, ...] = (), *, opaque: bool = False
) -> Iterator[OAuthWorld]:
    """Run the authorization server and the MCP resource server; yield where they are.

    ``also_for``: more resource URLs the authorization server issues tokens for (a gateway under test).
    ``opaque``: access tokens are opaque (introspected) instead of JWTs (the resource server then
    accepts none of them: for tests of the gateway as a resource server).
    """
    try:
        provider, node = _installed("oidc-provider/lib/index.js").parents[1], _installed("node/bin/node")
    except PeersNotInstalledError as exc:
        pytest.fail(str(exc), pytrace=False)
    rs_port = free_port()
    mcp_url = f"http://127.0.0.1:{rs_port}/mcp"
    resources = ",".join((mcp_url, *also_for))
    as_argv = [str(node), str(HERE / "oidc_server.mjs"), str(provider), resources, str(access_ttl_s)]
    as_argv += ["opaque"] if opaque else []
    with run_listening(as_argv) as as_port:
        issuer = f"http://127.0.0.1:{as_port}"
        rs_argv = [sys.executable, str(HERE / "resource_server.py"), issuer, mode]
        with run_listening(rs_argv, port=rs_port):
            yield OAuthWorld(issuer, mcp_url)


_FORM = re.compile(r'<form[^>]*action="([^"]+)"[^>]*method="post"', re.IGNORECASE)
_INPUT = re.compile(r"<input([^>]*)>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def _fields(page: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for attributes in _INPUT.findall(page):
        found = dict(_ATTRIBUTE.findall(attributes))
        if "name" in found:
            values[found["name"]] = html.unescape(found.get("value", ""))
    if values.get("prompt") == "login":
        values.update(login="alice", password="any")
    return values


async def scripted_browser(url: str, world: OAuthWorld | None = None, *, land: bool = True) -> str:
    """Be the person: open ``url``, sign in as alice, consent, follow every redirect to the loopback one.

    Returns the loopback redirect's URL; with ``land=False`` it is not visited (a browser on another
    machine, whose address the person copies).
    """
    if world is not None:
        world.visited.append(url)
    async with httpx2.AsyncClient(timeout=30.0, follow_redirects=False) as browser:
        response = await browser.get(url)
        for _ in range(MAX_REDIRECTS):
            if response.is_redirect:
                target = urljoin(str(response.url), response.headers["location"])
                if target.startswith("http://127.0.0.1") and "/callback?" in target:
                    if land:
                        await browser.get(target)  # the loopback redirect: mcpmux takes it from here
                    return target
                response = await browser.get(target)
                continue
            form = _FORM.search(response.text)
            if form is None:
                raise AssertionError(
                    f"the authorization server showed no form at {response.url}: {response.text[:500]}"
                )
            action = urljoin(str(response.url), html.unescape(form.group(1)))
            response = await browser.post(action, data=_fields(response.text))
        raise AssertionError("too many redirects in the scripted login")
