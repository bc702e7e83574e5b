"""``mcpmux sources`` as the installed console script, and registered sources used by the other commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gateway.serving import mcpmux
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

SECRET = "cli-secret-value-42"


def _config(root: Path) -> Path:
    path = root / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": [], "security": {"pinning": "off"}}}))
    return path


def test_an_openapi_source_registered_from_the_cli_is_callable_by_every_command(tmp_path: Path, httpbin: str) -> None:
    config = _config(tmp_path)
    added = mcpmux(
        tmp_path, config, "sources", "add", "hb", "--openapi", f"{httpbin}/spec.json", "--base-url", httpbin, "--json"
    )
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["source_type"] == "openapi"
    synced = mcpmux(tmp_path, config, "sources", "sync", "hb", "--json", timeout_s=120)
    assert synced.returncode == 0, synced.stderr
    answer = json.loads(synced.stdout)
    assert answer["tools_discovered"] == 78
    assert {t["execution_mode"] for t in answer["tools"]} == {"sync_http"}
    called = mcpmux(tmp_path, config, "call", "hb:get_get", "--json", timeout_s=120)
    assert called.returncode == 0, called.stderr
    removed = mcpmux(tmp_path, config, "sources", "remove", "hb")
    assert removed.returncode == 0, removed.stderr
    gone = mcpmux(tmp_path, config, "call", "hb:get_get")
    assert gone.returncode == 2  # unknown server now


def test_a_manifest_needs_its_required_secret_which_is_then_masked(tmp_path: Path) -> None:
    config = _config(tmp_path)
    command, args = stdio_command("time")
    manifest = {
        "name": "io.example/time",
        "packages": [
            {
                "registryType": "pypi",
                "identifier": command,
                "runtimeHint": "env",
                "packageArguments": [{"type": "positional", "value": a} for a in args],
                "environmentVariables": [{"name": "TIME_KEY", "isRequired": True, "isSecret": True}],
            }
        ],
    }
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "server.json").write_text(json.dumps(manifest))
    refused = mcpmux(tmp_path, config, "sources", "add", "time", "--manifest", str(tmp_path / "plugin"))
    assert refused.returncode == 2
    assert "TIME_KEY" in refused.stderr
    assert json.loads(mcpmux(tmp_path, config, "sources", "list", "--json").stdout) == []
    added = mcpmux(
        tmp_path, config, "sources", "add", "time", "--manifest", str(tmp_path / "plugin"), "-e", f"TIME_KEY={SECRET}"
    )
    assert added.returncode == 0, added.stderr
    listed = mcpmux(tmp_path, config, "sources", "list", "--json")
    assert SECRET not in listed.stdout
    assert json.loads(listed.stdout)[0]["environment"] == {"TIME_KEY": "********"}
    called = mcpmux(tmp_path, config, "call", "time:get_current_time", '{"timezone": "UTC"}', timeout_s=120)
    assert called.returncode == 0, called.stderr
    assert SECRET not in called.stdout + called.stderr
