"""deploy/nginx.conf: `nginx -t` by Debian's nginx on the shipped file, and the settings MCP needs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.deploy.files import DEPLOY, run
from tests.replicas.nginx import nginx_binary, render_config

pytestmark = pytest.mark.subprocess

CONF = DEPLOY / "nginx.conf"


def directives(name: str) -> list[str]:
    """Every value of directive ``name`` in the shipped file (comments left out)."""
    text = re.sub(r"#[^\n]*", "", CONF.read_text())
    return [m.group(1).strip() for m in re.finditer(rf"(?<![\w-]){name}\s+([^;{{]*);", text)]


def mapped() -> str:
    """The shipped file with only the three replica names mapped to loopback (nginx -t resolves them)."""
    return re.sub(r"\bmcpmux-\d+:8080", "127.0.0.1:8080", CONF.read_text())


def nginx_test(conf: Path, scratch: Path) -> tuple[int, str]:
    globals_ = f"pid {scratch / 'nginx.pid'};" + (" user root;" if os.geteuid() == 0 else "")
    result = run([nginx_binary(), "-t", "-p", scratch, "-c", conf, "-e", scratch / "error.log", "-g", globals_])
    return result.returncode, result.stderr


def test_nginx_accepts_the_shipped_file_with_the_replica_names_mapped_to_loopback(tmp_path: Path) -> None:
    conf = tmp_path / "nginx.conf"
    conf.write_text(mapped())
    code, output = nginx_test(conf, tmp_path)
    assert code == 0, output
    assert "test is successful" in output


def test_nginx_accepts_the_config_the_replica_tests_run(tmp_path: Path) -> None:
    rendered = tmp_path / "nginx.conf"
    rendered.write_text(render_config([18081, 18082, 18083], 18080, tmp_path))
    code, output = nginx_test(rendered, tmp_path)
    assert code == 0, output


def test_nginx_refuses_a_broken_file_so_the_check_means_something(tmp_path: Path) -> None:
    broken = tmp_path / "nginx.conf"
    broken.write_text(mapped().replace("proxy_buffering off;", "proxy_buffering of;"))
    code, output = nginx_test(broken, tmp_path)
    assert code != 0
    assert "proxy_buffering" in output


def test_round_robin_without_any_affinity() -> None:
    text = re.sub(r"#[^\n]*", "", CONF.read_text())
    for affinity in ("ip_hash", "hash", "sticky", "least_conn", "random"):
        assert not re.search(rf"(?<![\w-]){affinity}\b", text), f"{affinity} would pin or skew clients"
    assert directives("keepalive") == ["64"]
    assert directives("zone") == ["mcpmux_upstreams 64k"]


def test_event_streams_pass_unbuffered_over_keepalive_http_1_1() -> None:
    assert directives("proxy_http_version") == ["1.1"]
    assert directives("proxy_buffering") == ["off"]
    assert directives("proxy_cache") == ["off"]
    assert directives("gzip") == ["off"]
    assert directives("proxy_read_timeout") == ["1h"]
    assert "Connection $connection_upgrade" in directives("proxy_set_header")


def test_nothing_strips_or_overrides_the_headers_mcp_needs() -> None:
    overridden = {value.split()[0].lower() for value in directives("proxy_set_header")}
    assert not overridden & {"authorization", "mcp-session-id", "mcp-protocol-version", "last-event-id", "origin"}
    assert not directives("proxy_hide_header") and not directives("underscores_in_headers")
    assert directives("proxy_pass_request_headers") in ([], ["on"])


def test_a_non_idempotent_request_is_never_passed_to_a_second_replica_once_sent() -> None:
    [next_upstream] = directives("proxy_next_upstream")
    assert "non_idempotent" not in next_upstream.split()
    assert {"error", "timeout"} <= set(next_upstream.split())
    assert directives("proxy_next_upstream_tries") == ["3"]
