"""The conformance suite's client under test: acts out ``MCP_CONFORMANCE_SCENARIO`` through ``Connection``.

Run by ``conformance client --command "<python> tests/conformance/client.py"``, which appends the
mock server's URL and sets the scenario (and, for some, ``MCP_CONFORMANCE_CONTEXT``). Suite 0.2 also
sets ``MCP_CONFORMANCE_PROTOCOL_VERSION``, the era its mock server speaks: the connection is pinned to
it (``protocol:`` of the server's config), 2026-07-28 and later stateless, earlier ones the handshake.
Exit 0 when the scenario was acted out, 1 with the error on stderr otherwise.

Each scenario is acted out the way a user of mcpmux would drive it, through ``Connection``: list the
tools, then call what the scenario's server checks (the harness's own tool calls where it gives
them, every surfaced tool where it checks which ones are called, a schema echoed back verbatim).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types

from mcpmux.config.models import (
    IdentityProviderConfig,
    OAuthConfig,
    ProtocolChoice,
    Settings,
    StreamableHttpServerConfig,
)
from mcpmux.connection import ClientCallbacks, Connection, raise_for_tool_error
from mcpmux.errors import MCPMuxError, SkillRejected

# Generous: with every scenario starting at once on 2 cores, a login (discovery, registration,
# authorization, token) inside the connect takes tens of seconds.
CONNECT_TIMEOUT_MS = 240_000
CALL_TIMEOUT_MS = 120_000

# The tools a scenario's server checks and their arguments, called in order (when listed); a scenario
# not here lists the tools and, under auth, calls the first one.
SCENARIO_CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "request-metadata": [("add_numbers", {"a": 5, "b": 3})],
    "http-standard-headers": [("add_numbers", {"a": 5, "b": 3})],
    "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
    "sse-retry": [("test_reconnection", {})],
    # SEP-2322: input_required rounds, a call in between without state, a result with no resultType.
    "sep-2322-client-request-state": [
        ("test_mrtr_echo_state", {}),
        ("test_mrtr_unrelated", {}),
        ("test_mrtr_no_state", {}),
        ("test_mrtr_no_result_type", {}),
    ],
}
# Scenarios whose server checks which of its tools are called: call every tool the client surfaced.
CALL_EVERY_TOOL = {"http-invalid-tool-headers"}
# Scenarios where the user loads the listed skill (the others only list: a host reads no skill file
# before a skill is loaded, which sep-2640-client-no-prefetch checks).
LOADS_SKILLS = "sep-2640-client-verify-"
# json-schema-2020-12-preservation: echo the focal tool's inputSchema back as the client holds it.
ECHO_TOOL, FOCAL_TOOL = "json_schema_echo", "json_schema_2020_12_tool"


async def accept_with_defaults(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept a form with every field at its schema default (SEP-1034), booleans without one true
    (SEP-2322's confirmation); accept a URL outright."""
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    properties: dict[str, Any] = params.requested_schema.get("properties", {})
    content = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
    content |= {n: True for n, spec in properties.items() if n not in content and spec.get("type") == "boolean"}
    return types.ElicitResult(action="accept", content=content)


async def no_roots(server: str) -> types.ListRootsResult:
    """Declare the roots capability (request-metadata checks every capability is stamped) with none."""
    return types.ListRootsResult(roots=[])


def protocol_choice() -> ProtocolChoice:
    """The era the harness's mock server speaks (``MCP_CONFORMANCE_PROTOCOL_VERSION``), else ``auto``."""
    asked = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    if not asked:
        return "auto"
    return "2026-07-28" if asked >= "2026-07-28" else "2025-11-25"


def stub_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy ``schema``'s required properties with the simplest value of each type."""
    simplest: dict[str, Any] = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": []}
    properties: dict[str, Any] = schema.get("properties", {})
    return {name: simplest.get(properties.get(name, {}).get("type"), "x") for name in schema.get("required", [])}


def harness_calls() -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the harness asks for in ``MCP_CONFORMANCE_CONTEXT`` (``toolCalls``), verbatim."""
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    return [(call["name"], call.get("arguments") or {}) for call in context.get("toolCalls", [])]


async def canned_sampling(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """Answer a sampling request without a model (the suite checks the exchange, not the text)."""
    text = types.TextContent(type="text", text="This is a test response from the conformance client.")
    return types.CreateMessageResult(role="assistant", content=text, model="conformance-client")


# The client's Client ID Metadata Document URL (the suite's mock authorization servers accept it).
CIMD_URL = "https://conformance-test.local/client-metadata.json"


ENTERPRISE_SCENARIOS = ("auth/enterprise-managed-authorization", "auth/cross-app-access-complete-flow")


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
    if scenario == "auth/wif-jwt-bearer":
        # The workload's token, as a workload identity provider would project it into a file.
        token_file = Path(os.environ["MCPMUX_DATA_DIR"]) / "workload-token.jwt"
        # MCPMUX_CONFORMANCE_ASSERTION picks another of the harness's tokens (attack tests: an
        # assertion for another audience, an expired one).
        token_file.write_text(context[os.environ.get("MCPMUX_CONFORMANCE_ASSERTION", "valid_jwt")])
        return OAuthConfig(grant="jwt_bearer", client_id=client_id, assertion_file=str(token_file))
    if scenario in ENTERPRISE_SCENARIOS:
        # SEP-990: the person's ID token from the enterprise sign-in, exchanged at the IdP for an ID-JAG.
        id_token_file = Path(os.environ["MCPMUX_DATA_DIR"]) / "idp-id-token.jwt"
        id_token_file.write_text(context["idp_id_token"])
        idp = IdentityProviderConfig(token_endpoint=context["idp_token_endpoint"], client_id=context["idp_client_id"])
        return OAuthConfig(
            grant="jwt_bearer",
            client_id=client_id,
            client_secret=secret,
            assertion_file=str(id_token_file),
            identity_provider=idp,
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
        protocol=protocol_choice(),
        # The harness's replayed calls carry nulls on purpose (an omitted Mcp-Param header is checked).
        validate_arguments=scenario != "http-custom-headers",
        auth=oauth_config(scenario),
    )
    await session(server, scenario)


async def session(server: StreamableHttpServerConfig, scenario: str) -> None:
    callbacks = ClientCallbacks(elicitation=accept_with_defaults, sampling=canned_sampling, roots=no_roots)
    async with Connection(server, Settings(), callbacks=callbacks) as conn:
        tools = {tool.name: tool for tool in await conn.list_tools()}
        if scenario in CALL_EVERY_TOOL:
            calls = [(name, stub_arguments(tool.input_schema)) for name, tool in tools.items()]
        elif FOCAL_TOOL in tools and ECHO_TOOL in tools:
            calls = [(ECHO_TOOL, {"schema": tools[FOCAL_TOOL].input_schema})]
        else:
            calls = harness_calls() or SCENARIO_CALLS.get(scenario, [])
        calls = [(name, arguments) for name, arguments in calls if name in tools]
        if not calls and scenario.startswith("auth/") and tools:
            calls = [(sorted(tools)[0], {})]  # a call under the token (step-up scenarios check it)
        for name, arguments in calls:
            result = await conn.call_tool(name, arguments)
            if not scenario.startswith("auth/"):
                raise_for_tool_error(server.name, name, result)
            print(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
        await use_skills(conn, scenario)


async def use_skills(conn: Connection, scenario: str) -> None:
    """List the server's skills, as a host does on connecting; load them where the scenario has the
    user pick one (``verify-*``: a tampered skill must be refused before anything more of it is read)."""
    listed = await conn.list_skills()
    for entry in listed:
        print(f"skill {entry.name}: {entry.description}")
        if scenario.startswith(LOADS_SKILLS):
            try:
                loaded = await conn.load_skill(entry)
            except SkillRejected as exc:
                print(f"refused: {exc}")
            else:
                print(f"loaded {entry.name}: {len(loaded.files) + 1} files verified")


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
