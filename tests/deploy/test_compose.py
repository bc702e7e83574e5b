"""deploy/compose.yaml: the Compose Specification's schema and dclint's rules, and what the stack needs."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from mcpmux.config import load_config
from tests.deploy.files import DEPLOY, compose, nginx_upstream_hosts, run, validator

pytestmark = pytest.mark.subprocess

REPLICAS = ("mcpmux-1", "mcpmux-2", "mcpmux-3")
# Style-only rules (key and service order); every rule about meaning stays on.
STYLE_RULES = ("service-keys-order", "services-alphabetical-order", "top-level-properties-order")


def dclint(path: Path) -> tuple[int, str]:
    result = run([validator("dclint"), path, "--max-warnings", "0", "--color", "false", "--disable-rule", *STYLE_RULES])
    return result.returncode, result.stdout + result.stderr


def test_dclint_validates_it_against_the_compose_schema_without_a_warning() -> None:
    code, output = dclint(DEPLOY / "compose.yaml")
    assert code == 0, output


def test_dclint_refuses_a_key_the_compose_schema_does_not_know(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text((DEPLOY / "compose.yaml").read_text().replace("    shm_size: 256m\n", "    shm_sise: 256m\n"))
    code, output = dclint(broken)
    assert code != 0
    assert "invalid-schema" in output


def test_postgres_is_checked_for_health_and_keeps_its_data_in_a_volume() -> None:
    postgres = compose()["services"]["postgres"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert any(
        v.endswith(":/var/lib/postgresql/data") and v.split(":")[0] in compose()["volumes"] for v in postgres["volumes"]
    )
    assert re.match(r"postgres:\d+\.\d+-", postgres["image"])


def test_three_replicas_each_name_and_advertise_themselves_by_service_name() -> None:
    services = compose()["services"]
    for name in REPLICAS:
        env = services[name]["environment"]
        assert env["MCPMUX_REPLICA_ID"] == name
        assert env["MCPMUX_ADVERTISE"] == f"http://{name}:8080"
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert services[name]["depends_on"]["token-init"]["condition"] == "service_completed_successfully"
        assert "/etc/mcpmux/mcpmux.yaml:ro" in " ".join(services[name]["volumes"])
        assert services[name]["read_only"] is True


def test_nginx_balances_over_exactly_the_replicas_of_the_compose_file() -> None:
    services = compose()["services"]
    assert nginx_upstream_hosts() == [f"{name}:8080" for name in REPLICAS]
    nginx = services["nginx"]
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in nginx["volumes"]
    assert {name: dep["condition"] for name, dep in nginx["depends_on"].items()} == dict.fromkeys(
        REPLICAS, "service_healthy"
    )


def test_no_password_is_written_in_the_file() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    assert "POSTGRES_PASSWORD:" not in text
    assert not re.search(r"postgresql(\+\w+)?://[^@\s]*:[^@\s]*@", text), "a database URL with a password"
    stack = compose()
    assert stack["services"]["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"
    for name in REPLICAS:
        assert stack["services"][name]["environment"]["MCPMUX_DB_FILE"] == "/run/secrets/mcpmux_db_url"
        assert stack["services"][name]["environment"]["MCPMUX_SECRET_KEY_FILE"] == "/run/secrets/mcpmux_secret_key"
    files = {s["file"] for s in stack["secrets"].values()}
    assert files == {"./secrets/postgres_password", "./secrets/mcpmux_db_url", "./secrets/mcpmux_secret_key"}
    assert "deploy/secrets/" in (DEPLOY.parent / ".gitignore").read_text().splitlines()


def test_make_secrets_writes_one_password_into_both_files_and_never_overwrites(tmp_path: Path) -> None:
    folder = tmp_path / "deploy"
    folder.mkdir()
    script = folder / "make-secrets.sh"
    script.write_bytes((DEPLOY / "make-secrets.sh").read_bytes())
    first = run(["sh", script])
    assert first.returncode == 0, first.stderr
    password = (folder / "secrets" / "postgres_password").read_text()
    assert re.fullmatch(r"[0-9a-f]{48}", password)
    url = (folder / "secrets" / "mcpmux_db_url").read_text()
    assert url == f"postgresql+psycopg://mcpmux:{password}@postgres:5432/mcpmux"
    assert (folder / "secrets").stat().st_mode & 0o777 == 0o700
    assert password not in first.stderr + first.stdout
    # The sealing key every replica shares: what mcpmux accepts as MCPMUX_SECRET_KEY.
    key = (folder / "secrets" / "mcpmux_secret_key").read_text()
    assert len(base64.urlsafe_b64decode(key)) == 32
    again = run(["sh", script])
    assert again.returncode == 1 and "exists already" in again.stderr
    assert (folder / "secrets" / "postgres_password").read_text() == password


def test_the_mounted_config_is_valid_for_mcpmux() -> None:
    config = load_config(DEPLOY / "mcpmux.yaml")
    assert [server.name for server in config.servers] == ["everything"]
