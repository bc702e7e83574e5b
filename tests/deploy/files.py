"""The deployment files under test, their validators (installed by scripts/install-peers) and their YAML."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.peers.fixtures import _stamp_matches

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
ENTRYPOINT = DEPLOY / "docker-entrypoint.sh"
PEERS = ROOT / "tests" / "peers"
TOOL_TIMEOUT_S = 120.0
_VENV_TOOLS = ("kubernetes-validate", "kubectl", "hadolint", "python")


def validator(name: str) -> Path:
    """A validator installed by scripts/install-peers; a clear failure (never a skip) when missing or stale.

    Raises:
        AssertionError: not installed, or installed from other pins than today's.
    """
    if name in _VENV_TOOLS:
        folder, path = PEERS / ".venv-deploy", PEERS / ".venv-deploy" / "bin" / name
        stamped = _stamp_matches(folder / ".install-peers.stamp", "pip", PEERS / "deploy" / "requirements.txt")
    else:
        folder, path = PEERS / "deploy" / "node_modules", PEERS / "deploy" / "node_modules" / ".bin" / name
        inputs = (PEERS / "deploy" / "package.json", PEERS / "deploy" / "package-lock.json")
        stamped = _stamp_matches(folder / ".install-peers.stamp", "npm", *inputs)
    assert path.is_file() and stamped, f"{path} is missing or stale: run scripts/install-peers (deployment validators)"
    return path


def run(argv: Sequence[str | Path], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` to completion (bounded), with its output captured as text."""
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, env=env, check=False
    )


def load_yaml(path: Path) -> Any:
    """One YAML document (merge keys resolved)."""
    return YAML(typ="safe").load(path.read_text())


def load_all(text: str) -> list[dict[str, Any]]:
    """Every document of a YAML stream."""
    return [doc for doc in YAML(typ="safe").load_all(text) if doc]


def compose() -> dict[str, Any]:
    """deploy/compose.yaml as data."""
    loaded: dict[str, Any] = load_yaml(DEPLOY / "compose.yaml")
    return loaded


def rendered_kubernetes() -> list[dict[str, Any]]:
    """deploy/kubernetes rendered by kustomize (kubectl kustomize, offline)."""
    result = run([validator("kubectl"), "kustomize", KUBERNETES])
    assert result.returncode == 0, f"kubectl kustomize failed:\n{result.stderr}"
    return load_all(result.stdout)


def nginx_upstream_hosts() -> list[str]:
    """The ``server HOST:PORT`` lines of deploy/nginx.conf's upstream block."""
    text = (DEPLOY / "nginx.conf").read_text()
    block = text[text.index("# upstreams: begin") : text.index("# upstreams: end")]
    return re.findall(r"^\s*server\s+(\S+?)(?:\s|;)", block, re.MULTILINE)


def entrypoint_env(extra: Mapping[str, str], fake_bin: Path) -> dict[str, str]:
    """A minimal environment for the entrypoint with ``fake_bin`` first on PATH."""
    return {"PATH": f"{fake_bin}:{os.environ['PATH']}", "HOME": str(fake_bin), "HOSTNAME": "pod-7f9c", **extra}


def fake_mcpmux(directory: Path) -> Path:
    """An ``mcpmux`` for a PATH that records its arguments (one per line) in ``directory/argv``.

    It also records the environment it got (``env -0`` output) in ``directory/env``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "mcpmux"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {directory / 'argv'}\nenv -0 > {directory / 'env'}\n")
    script.chmod(0o755)
    return directory / "argv"


def recorded_env(argv_file: Path) -> dict[str, str]:
    """The environment the fake ``mcpmux`` saw."""
    pairs = (argv_file.parent / "env").read_bytes().decode().split("\0")
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)
