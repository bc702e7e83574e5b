"""``mcpmux connect SERVER|--all``: stdin/stdout joined to the daemon, byte for byte.

The shim attaches (``mcpmux/attach`` for one shareable stdio server: the daemon's warm instance of
it; ``mcpmux/attach-all`` for ``--all``, and for one HTTP or ``per-call`` server alone: the daemon
serves that configuration as one MCP server for this connection, :mod:`.session`), then replaces
itself with the standard-library :mod:`.relay` (``exec``: the same process, the host sees no
change), which copies bytes both ways. The host's ``initialize`` reaches the daemon's gateway,
which names the host in its audit rows.

When no daemon runs, the shim starts one (``on`` and ``auto``). Without a daemon (``off``, none
could be started, or it will not serve this) the shim serves itself under ``auto`` through the
same gateway code and guard: the host gets the same answers. Under ``on`` that is exit 3. When
the daemon goes away mid-session the relay exits 3 with one line on stderr; the host restarts it
as it would a server.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from pathlib import Path

from mcpmux.attach.attach import (
    ATTACH,
    ATTACH_ALL,
    MAX_ATTACH_BYTES,
    Attach,
    AttachAll,
    daemon_mode,
    origin_of,
    request_line,
    servable,
)
from mcpmux.attach.paths import check_owned, socket_path
from mcpmux.config.models import Config, DaemonMode, ServerConfig
from mcpmux.errors import EXIT_OK, DaemonUnavailable
from mcpmux.types.json_shapes import JSONObject

__all__ = ["ANSWERS", "REPLY_TIMEOUT_S", "attach_socket", "connect", "relay_command"]

logger = logging.getLogger(__name__)

REPLY_TIMEOUT_S = 60.0  # the first attach of a server waits for it to start (npx can take seconds)
ANSWERS = ("elicitation", "sampling")
"""What a host behind ``connect`` may be asked: the bytes reach it, so the instance may ask it."""


def connect(config: Config, server: ServerConfig | None, override: str | None = None) -> int:
    """Serve ``server`` (``None``: every server) on stdio through the daemon, or here; the exit code.

    Through the daemon this never returns: the process becomes the relay.

    Raises:
        DaemonUnavailable: (``on``) the daemon cannot be started, reached, or will not serve it.
    """
    mode = daemon_mode(config, override)
    if mode != "off":
        if server is None or servable(server):
            attached = _attach(config, server, mode)
        else:  # an HTTP server (the daemon holds its connection and token) or a per-call one: a session of its own
            attached = _attach(_alone(config, server), None, mode)
        if attached is not None:
            _become_relay(attached)
    return _serve_here(config, server)


def _alone(config: Config, server: ServerConfig) -> Config:
    """``config`` with ``server`` alone, under its bare names (what ``connect SERVER`` serves)."""
    security = config.security.for_bare_names(server.name, server.namespace)
    return config.model_copy(update={"servers": (server.model_copy(update={"prefix": ""}),), "security": security})


def _attach(config: Config, server: ServerConfig | None, mode: DaemonMode) -> socket.socket | None:
    """The attached socket, or ``None`` (``auto``) to serve here.

    When no daemon runs, ``connect`` starts one under ``on`` and under ``auto`` too: a host session
    lives long and every other session of the host shares what it starts, so the daemon pays at
    once (one-shot commands do not start one under ``auto``: :class:`~mcpmux.attach.client.DaemonClient`).
    A socket that is not this user's alone, or a daemon that refused, is never replaced.
    """
    params = _params(config, server)
    try:
        try:
            return attach_socket(ATTACH if server is not None else ATTACH_ALL, params)
        except DaemonUnavailable as exc:
            if not isinstance(exc.__cause__, FileNotFoundError | ConnectionRefusedError):
                raise
        import anyio

        from mcpmux.attach.client import start_daemon

        anyio.run(start_daemon)
        return attach_socket(ATTACH if server is not None else ATTACH_ALL, params)
    except DaemonUnavailable as exc:
        if mode == "on":
            raise DaemonUnavailable(exc.socket, str(exc.reason), server=server.name if server else "daemon") from exc
        logger.info("connect: not through the daemon (%s); serving here", exc.reason)
        return None


def _params(config: Config, server: ServerConfig | None) -> JSONObject:
    if server is None:
        return AttachAll(origin_of(config), config, client="connect").params()
    from mcpmux.config.effective import with_effective_sandbox

    # As the daemon's manager hands it on: the same entry, so the same warm instance as `mcpmux call`.
    entry = with_effective_sandbox(server, config.security)
    # The instance's guard is the only one between the host and the server: rules written with the
    # server's own prefix must hold under its bare names too (when they add nothing, the rules and so
    # the instance stay those of `mcpmux call`).
    security = config.security.for_bare_names(server.name, server.namespace)
    return Attach(origin_of(config), entry, config.settings, security, "connect", ANSWERS).params()


def attach_socket(
    method: str, params: JSONObject, path: Path | None = None, *, timeout_s: float = REPLY_TIMEOUT_S
) -> socket.socket:
    """A blocking socket attached with ``method`` (its answer read, nothing past it).

    Raises:
        DaemonUnavailable: no daemon, not this user's, no answer in time, or it refused (its reason).
    """
    where = path or socket_path()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        check_owned(where)
        sock.settimeout(timeout_s)
        sock.connect(str(where))
        sock.sendall(request_line(method, params))
        reply = json.loads(_line(sock))
    except FileNotFoundError as exc:
        sock.close()
        raise DaemonUnavailable(where, "no daemon is running") from exc
    except TimeoutError as exc:
        sock.close()
        raise DaemonUnavailable(where, f"no answer to {method} within {timeout_s:g} s") from exc
    except (OSError, ValueError) as exc:
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise DaemonUnavailable(where, f"{method}: {reason}") from exc
    except BaseException:
        sock.close()
        raise
    if not isinstance(reply, dict) or "error" in reply:
        sock.close()
        error = reply.get("error", reply) if isinstance(reply, dict) else reply
        message = error.get("message", error) if isinstance(error, dict) else error
        raise DaemonUnavailable(where, f"the daemon refused {method}: {message}")
    sock.settimeout(None)
    return sock


def _line(sock: socket.socket) -> bytes:
    """The answer line, read a byte at a time: what follows it belongs to the relay."""
    line = bytearray()
    while not line.endswith(b"\n"):
        if len(line) > MAX_ATTACH_BYTES:
            raise ValueError(f"an answer longer than {MAX_ATTACH_BYTES} bytes")
        byte = sock.recv(1)
        if not byte:
            raise ConnectionResetError("the daemon closed the connection before it answered")
        line += byte
    return bytes(line)


def relay_command(fd: int) -> list[str]:
    """The relay's command line (``-P``: a module in the working directory never shadows mcpmux)."""
    return [sys.executable, "-P", "-m", "mcpmux.daemon.relay", str(fd)]


def _become_relay(sock: socket.socket) -> None:
    fd = sock.detach()
    os.set_inheritable(fd, True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    command = relay_command(fd)
    os.execv(command[0], command)


def _serve_here(config: Config, server: ServerConfig | None) -> int:
    import anyio

    from mcpmux.serve.run import ServeOptions, serve

    if server is None:
        anyio.run(lambda: serve(config, ServeOptions(stdio=True)))
        return EXIT_OK
    alone = _alone(config, server)
    anyio.run(lambda: serve(alone, ServeOptions(stdio=True), announce=lambda _line: None))
    return EXIT_OK
