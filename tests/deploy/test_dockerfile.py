"""deploy/Dockerfile: hadolint clean, and parsed by BuildKit's own parser to hold the image's rules."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.files import DEPLOY, ROOT, run, validator

pytestmark = pytest.mark.subprocess

DOCKERFILE = DEPLOY / "Dockerfile"
_PARSE = (
    "import dockerfile, json, sys\n"
    "print(json.dumps([[c.cmd, list(c.flags), list(c.value)] for c in dockerfile.parse_file(sys.argv[1])]))"
)
# A tag that names a release: a version number, never `latest` or a bare major.
_PINNED = re.compile(r"^[a-z0-9./-]+:\d+\.\d+\.\d+[a-z0-9.-]*(@sha256:[0-9a-f]{64})?$")
BUILD_TOOLS = ("gcc", "g++", "make", "build-essential", "python3-dev", "libpq-dev", "git", "curl", "wget")


@dataclass
class Instruction:
    cmd: str
    flags: list[str]
    value: list[str]


def instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    result = run([validator("python"), "-c", _PARSE, path])
    assert result.returncode == 0, result.stderr
    return [Instruction(cmd, flags, value) for cmd, flags, value in json.loads(result.stdout)]


def stages(parsed: list[Instruction]) -> dict[str, list[Instruction]]:
    named: dict[str, list[Instruction]] = {}
    current: list[Instruction] = []
    for ins in parsed:
        if ins.cmd == "FROM":
            current = named.setdefault(ins.value[-1], [])
        current.append(ins)
    return named


def base_images(parsed: list[Instruction]) -> list[str]:
    args = dict(a.value[0].split("=", 1) for a in parsed if a.cmd == "ARG" and "=" in a.value[0])
    return [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], i.value[0]) for i in parsed if i.cmd == "FROM"]


def test_hadolint_finds_nothing_at_any_level() -> None:
    result = run([validator("hadolint"), "--failure-threshold", "style", DOCKERFILE])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_is_really_checking_a_file_with_mistakes(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\n")
    result = run([validator("hadolint"), "--failure-threshold", "style", bad])
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # `latest`


def test_the_image_is_built_in_stages_from_pinned_bases() -> None:
    parsed = instructions()
    assert list(stages(parsed)) == ["node", "builder", "runtime"]
    for image in base_images(parsed):
        assert _PINNED.match(image), f"base image {image!r} is not pinned to a release"
    python_bases = [image for image in base_images(parsed) if image.startswith("python:")]
    assert len(set(python_bases)) == 1, "builder and runtime must share one Python image (the venv moves between them)"
    assert all(image.endswith("-bookworm") or "-bookworm-" in image for image in base_images(parsed))


def test_node_20_comes_from_the_pinned_node_image() -> None:
    node = next(image for image in base_images(instructions()) if image.startswith("node:"))
    assert node.startswith("node:20.")
    runtime = stages(instructions())["runtime"]
    copied = [ins.value[0] for ins in runtime if ins.cmd == "COPY" and "--from=node" in ins.flags]
    assert copied == ["/usr/local/bin/node", "/usr/local/lib/node_modules/npm"]


def test_the_runtime_stage_has_no_build_tools_and_takes_only_the_venv_from_the_builder() -> None:
    runtime = stages(instructions())["runtime"]
    commands = " ".join(" ".join(i.value) for i in runtime if i.cmd == "RUN")
    installed = re.findall(r"apt-get install[^&]*", commands)
    assert installed, "the runtime installs tini with apt-get"
    for tool in BUILD_TOOLS:
        assert not re.search(rf"(?<![\w-]){re.escape(tool)}(?![\w-])", " ".join(installed)), tool
    assert "pip install" not in commands and "pip wheel" not in commands
    assert "rm -rf /var/lib/apt/lists/*" in commands
    from_builder = [ins.value for ins in runtime if ins.cmd == "COPY" and "--from=builder" in ins.flags]
    assert from_builder == [["/opt/mcpmux", "/opt/mcpmux"]]


def test_it_runs_as_a_fixed_non_root_user() -> None:
    runtime = stages(instructions())["runtime"]
    users = [ins.value[0] for ins in runtime if ins.cmd == "USER"]
    assert users == ["10001:10001"]
    creates = " ".join(" ".join(i.value) for i in runtime if i.cmd == "RUN")
    assert "--uid 10001" in creates and "--gid 10001" in creates
    # Nothing runs as root after the switch.
    after = runtime[[i.cmd for i in runtime].index("USER") :]
    assert not [i for i in after if i.cmd == "RUN"]


def test_it_exposes_8080_checks_healthz_and_runs_under_tini() -> None:
    runtime = {ins.cmd: ins for ins in stages(instructions())["runtime"]}
    assert runtime["EXPOSE"].value == ["8080"]
    assert runtime["HEALTHCHECK"].value == ["CMD", "mcpmux-entrypoint", "healthcheck"]
    assert runtime["ENTRYPOINT"].value == ["/usr/bin/tini", "--", "mcpmux-entrypoint"]
    assert "healthz" in (DEPLOY / "docker-entrypoint.sh").read_text()
    assert runtime["STOPSIGNAL"].value == ["SIGTERM"]


def test_the_build_context_holds_only_what_the_image_needs() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("**") :][:1] == ["**"], "ignore everything first, then allow"
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert allowed == {"pyproject.toml", "README.md", "src", "deploy/docker-entrypoint.sh"}
    copies = [ins for ins in instructions() if ins.cmd == "COPY" and not any("--from" in f for f in ins.flags)]
    for source in (source for ins in copies for source in ins.value[:-1]):
        assert source.rstrip("/") in allowed, f"COPY {source}: the build context leaves it out"
