"""The conformance suite's client under test: acts out ``MCP_CONFORMANCE_SCENARIO`` through ``Connection``.

Run by ``conformance client --command "<python> tests/conformance/client.py"``, which appends the
mock server's URL and sets the scenario (and, for some, ``MCP_CONFORMANCE_CONTEXT``). Exit 0 when
the scenario was acted out, 1 with the error on stderr otherwise.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from typing import Any

import anyio
import httpx2
import mcp_types as types

from mcpmux.config.models import OAuthConfig, Settings, StreamableHttpServerConfig
from mcpmux.connection import ClientCallbacks, Connection, raise_for_tool_error
from mcpmux.errors import MCPMuxError

# Generous: with every scenario starting at once on 2 cores, a login (discovery, registration,
# authorization, token) inside the connect takes tens of seconds.
CONNECT_TIMEOUT_MS = 90_000
CALL_TIMEOUT_MS = 90_000

# A tool per scenario and its arguments; a scenario not listed lists tools and calls none.
SCENARIO_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
    "sse-retry": ("test_reconnection", {}),
}


async def accept_with_defaults(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept a form with every field at its schema default (SEP-1034); accept a URL outright."""
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    properties: dict[str, Any] = params.requested_schema.get("properties", {})
    content = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
    return types.ElicitResult(action="accept", content=content)


async def canned_sampling(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """Answer a sampling request without a model (the suite checks the exchange, not the text)."""
    text = types.TextContent(type="text", text="This is a test response from the conformance client.")
    return types.CreateMessageResult(role="assistant", content=text, model="conformance-client")


# The client's Client ID Metadata Document URL (the suite's mock authorization servers accept it).
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def oauth_config(scenario: str) -> OAuthConfig | None:
    """The ``auth`` block the scenario's server needs: credentials from ``MCP_CONFORMANCE_CONTEXT``."""
    if not scenario.startswith("auth/"):
        return None
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    client_id, secret = context.get("client_id"), context.get("client_secret")
    if scenario.startswith("auth/client-credentials"):
        key, algorithm = context.get("private_key_pem"), context.get("signing_algorithm", "ES256")
        return OAuthConfig(
            grant="client_credentials",
            client_id=client_id,
            client_secret=secret,
            private_key=key,
            signing_algorithm=algorithm,
        )
    return OAuthConfig(client_id=client_id, client_secret=secret, client_metadata_url=CIMD_URL)


async def headless_browser(url: str) -> None:
    """The suite's authorization servers approve at once: follow their redirect to our loopback."""
    async with httpx2.AsyncClient(timeout=CALL_TIMEOUT_MS / 1000) as http:
        response = await http.get(url)
        for _ in range(5):
            location = response.headers.get("location")
            if not response.is_redirect or location is None:
                raise RuntimeError(f"the authorization endpoint answered {response.status_code} without a redirect")
            response = await http.get(location)
            if location.startswith("http://127.0.0.1"):
                return


async def act(scenario: str, url: str) -> None:
    """Connect to ``url``, list the tools, call the scenario's one; log in whenever the server asks."""
    from mcpmux.auth.attach import enable_interactive_login

    enable_interactive_login(headless_browser)
    server = StreamableHttpServerConfig(
        name="conformance",
        url=url,
        connect_timeout_ms=CONNECT_TIMEOUT_MS,
        timeout_ms=CALL_TIMEOUT_MS,
        auth=oauth_config(scenario),
    )
    await session(server, scenario)


async def session(server: StreamableHttpServerConfig, scenario: str) -> None:
    callbacks = ClientCallbacks(elicitation=accept_with_defaults, sampling=canned_sampling)
    async with Connection(server, Settings(), callbacks=callbacks) as conn:
        tools = {tool.name for tool in await conn.list_tools()}
        call = SCENARIO_CALLS.get(scenario)
        if call is not None and call[0] in tools:
            result = await conn.call_tool(*call)
            raise_for_tool_error(server.name, call[0], result)
            print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
        elif scenario.startswith("auth/") and tools:
            await conn.call_tool(sorted(tools)[0], {})  # a call under the token (step-up scenarios check it)


def main() -> int:
    """Act out the scenario; the exit code tells the suite whether the client got through."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    # Every scenario is its own machine: its logins never meet another scenario's.
    os.environ["MCPMUX_DATA_DIR"] = tempfile.mkdtemp(prefix="mcpmux-conformance-")
    os.environ["MCPMUX_TOKEN_STORE"] = "file"
    try:
        anyio.run(act, scenario, sys.argv[-1])
    except MCPMuxError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
