"""Debian's nginx in front of test replicas, configured from the shipped ``deploy/nginx.conf``.

:func:`start_nginx` renders the real file with :func:`render_config`: the server lines between its
``# upstreams: begin`` / ``# upstreams: end`` markers become ``127.0.0.1:PORT`` lines, its one
``listen`` line listens on a free loopback port, and temp and log paths move under a scratch
directory. Every other directive (round-robin, buffering, timeouts, retries, headers) is the one
shipped, so a test through this nginx proves the deployed configuration.

    with start_nginx([port_a, port_b], tmp_path) as (port, process):
        httpx.get(f"http://127.0.0.1:{port}/healthz")

nginx comes from Debian (``scripts/install-peers`` installs it when missing, as root).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil

from tests.peers.fixtures import free_port, stop_process_group

__all__ = ["NGINX_CONF", "NginxNotInstalledError", "nginx_binary", "render_config", "start_nginx"]

NGINX_CONF = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"
START_TIMEOUT_S = 30.0
_PORT_ATTEMPTS = 5
_POLL_INTERVAL_S = 0.05
_BEGIN = "# upstreams: begin"
_END = "# upstreams: end"
_LISTEN = re.compile(r"^(\s*)listen\s+8080;\s*$", re.MULTILINE)
_HTTP = re.compile(r"^http\s*\{\s*$", re.MULTILINE)
_TEMP_DIRECTIVES = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


class NginxNotInstalledError(RuntimeError):
    """nginx is not on this machine: run scripts/install-peers (as root it installs Debian's nginx)."""


def nginx_binary() -> str:
    """The nginx executable (``/usr/sbin`` is searched too: it is off PATH for most users).

    Raises:
        NginxNotInstalledError: none found.
    """
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise NginxNotInstalledError("nginx not found: run scripts/install-peers (as root: apt-get install nginx)")
    return found


def render_config(upstream_ports: Sequence[int], listen_port: int, scratch: Path, source: Path = NGINX_CONF) -> str:
    """``source`` with loopback upstreams, a loopback ``listen`` and every path under ``scratch``.

    Raises:
        ValueError: ``source`` lacks the upstream markers or has not exactly one ``listen 8080;``.
    """
    if not upstream_ports:
        raise ValueError("start nginx with at least one upstream port")
    text = source.read_text()
    begin, end = text.find(_BEGIN), text.find(_END)
    if begin < 0 or end < begin:
        raise ValueError(f"{source}: the '{_BEGIN}' and '{_END}' markers are missing or out of order")
    indent = text[text.rfind("\n", 0, begin) + 1 : begin]
    servers = "".join(f"{indent}server 127.0.0.1:{port} max_fails=1 fail_timeout=5s;\n" for port in upstream_ports)
    text = text[: begin + len(_BEGIN)] + "\n" + servers + indent + text[end:]
    text, listens = _LISTEN.subn(rf"\1listen 127.0.0.1:{listen_port};", text)
    if listens != 1:
        raise ValueError(f"{source}: expected exactly one 'listen 8080;' line, found {listens}")
    paths = "".join(f"    {name}_temp_path {scratch / (name + '_temp')};\n" for name in _TEMP_DIRECTIVES)
    text, https = _HTTP.subn(lambda match: f"{match.group(0)}\n{paths}", text, count=1)
    if https != 1:
        raise ValueError(f"{source}: no 'http {{' block")
    return text


def _argv(conf: Path, scratch: Path) -> list[str]:
    # The master's own settings: in the foreground, its pid file here; as root the workers stay
    # root too (the default worker user, nobody, cannot enter pytest's private tmp directory).
    globals_ = f"daemon off; pid {scratch / 'nginx.pid'};" + (" user root;" if os.geteuid() == 0 else "")
    return [nginx_binary(), "-p", str(scratch), "-c", str(conf), "-e", str(scratch / "error.log"), "-g", globals_]


def _listens(pid: int, port: int) -> bool:
    try:
        process = psutil.Process(pid)
        for proc in (process, *process.children(recursive=True)):
            for conn in proc.net_connections("tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port:
                    return True
    except psutil.Error:
        return False
    return False


def _log_tail(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def _launch(upstream_ports: Sequence[int], scratch: Path) -> tuple[int, subprocess.Popen[bytes]]:
    deadline = time.monotonic() + START_TIMEOUT_S
    log = scratch / "nginx.log"
    for _attempt in range(_PORT_ATTEMPTS):
        port = free_port()
        conf = scratch / "nginx.conf"
        conf.write_text(render_config(upstream_ports, port, scratch))
        with log.open("ab") as out:
            process = subprocess.Popen(
                _argv(conf, scratch), stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        try:
            while process.poll() is None and not _listens(process.pid, port):
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"nginx did not listen on 127.0.0.1:{port} in {START_TIMEOUT_S} s")
                time.sleep(_POLL_INTERVAL_S)
        except BaseException:
            stop_process_group(process)
            raise
        if process.poll() is None:
            return port, process
        stop_process_group(process)
        if "Address already in use" not in _log_tail(log):
            break  # not a lost race for the port: a real failure
    raise RuntimeError(f"nginx exited with code {process.returncode}:\n{_log_tail(log)}")


@contextlib.contextmanager
def start_nginx(upstream_ports: Sequence[int], tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """Run nginx with ``deploy/nginx.conf`` round-robin over ``upstream_ports`` on 127.0.0.1.

    Yields ``(port, process)``: the port it listens on (127.0.0.1) and its master process (in its
    own process group). Its access and error log go to ``tmp_path/nginx/nginx.log``. On exit the
    group (master and workers) is stopped and reaped.

    Raises:
        NginxNotInstalledError: no nginx here.
        TimeoutError: it did not listen within 30 s.
        RuntimeError: it exited at start (the message holds its log: a bad config says why).
    """
    scratch = tmp_path / "nginx"
    scratch.mkdir(parents=True, exist_ok=True)
    port, process = _launch(upstream_ports, scratch)
    try:
        yield port, process
    finally:
        stop_process_group(process)
