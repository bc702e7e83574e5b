"""``mcpmux call``, ``read`` and ``tools`` through a running daemon, the light way (:mod:`mcpmux.attach.thin`).

A one-shot command of a warm server then imports neither the SDK nor the manager, the guard or
the state store: the daemon's guard does the policy, validation, approvals and audit (its rows
name this process). Each function returns ``None`` when the command must take its ordinary path:
the daemon is off or not running (``auto``), the server is not one the daemon serves or has a
``prefix`` of its own (the daemon's guard knows it by name: this command's guard applies), an option
the light path does not carry (``--timeout``, ``--no-validate``, ``--no-cache``), or anything
the daemon refused before the server saw the request (the ordinary path then reports it exactly).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcpmux.cli.output import command_config, redact_logs, state
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    from mcpmux.config.models import Config, ServerConfig

__all__ = ["thin_call", "thin_read", "thin_tools"]

logger = logging.getLogger(__name__)

REPLY_MARGIN_S = 30.0
"""How much longer than the server's own timeout the client waits (the daemon's guard times out first)."""


def _server(config: Config, name: str) -> ServerConfig | None:
    from mcpmux.attach.attach import daemon_mode, servable
    from mcpmux.config.effective import with_effective_sandbox

    if daemon_mode(config, state().daemon) == "off":
        return None
    server = next((s for s in config.enabled_servers if s.name == name), None)
    if server is None or not servable(server):
        return None
    if server.namespace not in ("", server.name):
        # The daemon's instance has no prefix: its guard matches the global rules' `SERVER:TOOL`
        # under the server's name only, so a rule written with this prefix would not hold there.
        return None
    # As the manager hands it to its connection factory: the same entry, so the same warm instance.
    return with_effective_sandbox(server, config.security)


def thin_call(canonical: str, arguments: JSONObject, *, yes: bool) -> JSONObject | None:
    """The wire result of ``tools/call`` through the daemon, or ``None`` (take the ordinary path).

    Raises:
        MCPMuxError: the call was made and failed (:class:`~mcpmux.errors.RemoteError`, a lost daemon,
            or the person declined an approval).
    """
    namespace, sep, bare = canonical.partition(":")
    params: JSONObject = {"name": bare, "arguments": arguments}
    key = _inputs_key()
    if sep and key is not None:
        kept, result = _known(key, namespace, "tools/call", params, canonical, yes)
        if kept:
            return result
    config = command_config()
    owners = [s for s in config.enabled_servers if sep and s.namespace == namespace]
    if len(owners) != 1 or (server := _server(config, owners[0].name)) is None:
        return None
    return _through_daemon(config, server, "tools/call", params, canonical, yes, key)


def thin_read(server_name: str, uri: str) -> JSONObject | None:
    """The wire result of ``resources/read`` through the daemon, or ``None`` (take the ordinary path)."""
    params: JSONObject = {"uri": uri}
    key = _inputs_key()
    if key is not None:
        kept, result = _known(key, server_name, "resources/read", params, "", False)
        if kept:
            return result
    config = command_config()
    server = _server(config, server_name)
    if server is None:
        return None
    return _through_daemon(config, server, "resources/read", params, "", False, key)


def thin_tools(target: str) -> list[Any] | None:
    """The tools of SERVER (or of the one server owning SERVER:TOOL) as the daemon's guard lists them,
    under this configuration's names; ``None``: take the ordinary path."""
    from mcpmux.attach.thin import NotThin, list_tools

    config = command_config()
    name = target
    if ":" in target:
        namespace = target.partition(":")[0]
        owners = [s for s in config.enabled_servers if s.namespace == namespace]
        if len(owners) != 1:
            return None
        name = owners[0].name
    server = _server(config, name)
    if server is None:
        return None
    state().secrets = config.secret_values
    redact_logs(config.secret_values)
    timeout_s = max(server.effective_timeout_s(config.settings), server.effective_connect_timeout_s(config.settings))
    try:
        return list(list_tools(config, server, timeout_s=timeout_s + REPLY_MARGIN_S))
    except NotThin as exc:
        logger.info("server %r: %s; taking the ordinary path", server.name, exc)
        return None


def _inputs_key() -> str | None:
    """The digest of this command's configuration inputs (:mod:`mcpmux.daemon.known`), unless the
    command line keeps it off the daemon or the load would read what the digest cannot cover."""
    from mcpmux.daemon.known import config_key

    options = state()
    if options.daemon == "off":
        return None
    return config_key(options.config_path, options.daemon)


def _known(
    key: str, name: str, method: str, params: JSONObject, canonical: str, yes: bool
) -> tuple[bool, JSONObject | None]:
    """Through the daemon's kept attach of these inputs, no configuration loaded here: (kept, result).

    Not kept when the daemon keeps none (or its instance is not warm): the command loads its
    configuration. A result of ``None``: the ordinary path answers, as for :func:`_through_daemon`.
    """
    from mcpmux.attach.thin import NotThin, ThinSession

    session = ThinSession.known(key, name)
    try:
        session.__enter__()
    except NotThin as exc:
        logger.info("server %r: %s; loading the configuration", name, exc)
        return False, None
    try:
        secrets = frozenset(str(v) for v in session.meta.get("secrets", ()))
        state().secrets = secrets
        redact_logs(secrets)
        return True, _exchange(session, name, method, params, canonical, yes, secrets)
    finally:
        session.close()


def _through_daemon(
    config: Config,
    server: ServerConfig,
    method: str,
    params: JSONObject,
    canonical: str,
    yes: bool,
    key: str | None = None,
) -> JSONObject | None:
    from mcpmux.attach.thin import NotThin, ThinSession

    state().secrets = config.secret_values
    redact_logs(config.secret_values)
    timeout_s = max(server.effective_timeout_s(config.settings), server.effective_connect_timeout_s(config.settings))
    timeout_s += REPLY_MARGIN_S
    known = None
    if key is not None and _keepable(config, key):
        meta = {
            "timeout_s": timeout_s,
            "max_message_bytes": config.settings.max_message_bytes,
            "secrets": sorted(config.secret_values),
        }
        known = (key, meta)
    session = ThinSession.attached(config, server, timeout_s=timeout_s, known=known)
    try:
        session.__enter__()
    except NotThin as exc:
        logger.info("server %r: %s; taking the ordinary path", server.name, exc)
        return None
    try:
        return _exchange(session, server.name, method, params, canonical, yes, config.secret_values)
    finally:
        session.close()


def _keepable(config: Config, key: str) -> bool:
    """Whether the daemon may keep this attach under ``key``: the inputs did not change while the
    configuration loaded, and no source registry (a database the digest does not read) exists."""
    from mcpmux.config.paths import configured_url
    from mcpmux.daemon.known import config_key
    from mcpmux.sources.merge import registry_exists

    options = state()
    if registry_exists(configured_url(config.storage.url)):
        return False
    return config_key(options.config_path, options.daemon) == key


def _exchange(
    session: Any, name: str, method: str, params: JSONObject, canonical: str, yes: bool, secrets: frozenset[str]
) -> JSONObject | None:
    """The request on an attached session; ``None``: the ordinary path answers (nothing ran)."""
    from mcpmux.attach.thin import NotThin
    from mcpmux.cli import render
    from mcpmux.errors import MCPMuxError

    try:
        if method == "tools/call" and params["name"] not in session.tool_names():
            return None  # the ordinary path names the closest tools
        approve = _approver(canonical, name, str(params.get("name", "")), yes)
        result: JSONObject = session.call(method, params, on_progress=render.print_progress, approve=approve)
        return result
    except NotThin as exc:
        logger.info("server %r: %s; taking the ordinary path", name, exc)
        return None
    except MCPMuxError as exc:
        from mcpmux.config.display import redact

        exc.args = tuple(redact(str(a), secrets) for a in exc.args)
        raise


def _approver(canonical: str, server: str, tool: str, yes: bool) -> Any:
    """The answer to an approval the daemon's guard asks: ``--yes``, else the terminal, else "no"."""

    def approve(question: Mapping[str, Any]) -> str:
        reason = str(question.get("reason") or "approval required")
        if yes:
            sys.stderr.write(f"mcpmux: {canonical} approved by --yes ({reason})\n")
            return "yes"
        from mcpmux.cli.approval import terminal_approver
        from mcpmux.cli.running import run as run_to_end
        from mcpmux.errors import ApprovalDenied
        from mcpmux.policy.approval import Answer, ApprovalRequest

        approver = terminal_approver()
        if approver is None:
            return "no"  # the guard refuses; the ordinary path then says why, with its hint
        request = ApprovalRequest(canonical, server, tool, dict(question["arguments"]), reason, face="cli")
        answer = run_to_end(approver, request)
        if answer is Answer.NO:
            raise ApprovalDenied(canonical, "declined")
        return answer.value

    return approve
