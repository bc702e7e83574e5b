"""A real ``mcpmux serve --http`` with the console, tokens of each scope, and a signed-in HTTP client."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.gateway.serving import Serving, mcpmux, serve
from tests.peers.fixtures import stdio_command

HOSTILE = str(Path(__file__).with_name("hostile_server.py"))
CHANGING = str(Path(__file__).parents[1] / "fixtures" / "changing_server.py")
TIMEOUT_S = 30.0


@dataclass
class Console:
    """The serving process, its base URL and one token per scope set."""

    serving: Serving
    tokens: dict[str, str]

    @property
    def base(self) -> str:
        return self.serving.base

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, follow_redirects=False, timeout=TIMEOUT_S)

    @contextmanager
    def signed_in(self, token: str) -> Iterator[httpx.Client]:
        """A client with a console session for ``token`` (the name of one of :attr:`tokens`)."""
        with self.client() as client:
            response = client.post("/ui/login", data={"secret": self.tokens[token]}, headers={"Origin": self.base})
            assert response.status_code == 303 and response.headers["location"] == "/ui/servers", response.text
            yield client

    def csrf(self, client: httpx.Client, path: str = "/ui/servers") -> str:
        match = re.search(r'name="csrf" value="([^"]+)"', client.get(path).text)
        assert match, f"no CSRF token on {path}"
        return match.group(1)


def write_console_config(root: Path, servers: Sequence[str] = ("everything",), *, variant: str = "base",
                         options: Mapping[str, Mapping[str, object]] | None = None,
                         **security: object) -> Path:  # fmt: skip
    """Peers by name, plus ``hostile`` and ``changing`` (our fixtures) when named; ``options`` per server."""
    entries: list[dict[str, object]] = []
    for name in servers:
        if name == "hostile":
            entries.append({"name": name, "type": "stdio", "command": sys.executable, "args": [HOSTILE]})
        elif name == "changing":
            entries.append({"name": name, "type": "stdio", "command": sys.executable, "args": [CHANGING],
                            "env": {"TOOLS_VARIANT": variant}})  # fmt: skip
        else:
            command, args = stdio_command(name)
            entries.append({"name": name, "type": "stdio", "command": command, "args": args})
    for entry in entries:
        entry.update((options or {}).get(str(entry["name"]), {}))
    path = root / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": entries, "security": {"pinning": "off", **security}}}))
    return path


TOKENS = {"admin": ("read", "execute", "admin"), "reader": ("read",), "agent": ("read", "execute")}


def create_tokens(root: Path, config: Path) -> dict[str, str]:
    """One token per entry of :data:`TOKENS`."""
    made = {}
    for name, scopes in TOKENS.items():
        args = [a for scope in scopes for a in ("--scope", scope)]
        done = mcpmux(root, config, "token", "create", name, *args)
        assert done.returncode == 0, done.stderr
        made[name] = done.stdout.strip()
    return made


@contextmanager
def console(root: Path, config: Path, *args: str, tokens: bool = True, real_process: bool = False) -> Iterator[Console]:
    made = create_tokens(root, config) if tokens else {}
    with serve(root, config, "--http", "127.0.0.1:0", *args, real_process=real_process) as serving:
        yield Console(serving, made)
