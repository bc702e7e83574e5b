"""deploy/kubernetes: rendered by kustomize, valid against the Kubernetes API schemas, and what replicas need."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.files import DEPLOY, KUBERNETES, load_all, load_yaml, rendered_kubernetes, run, validator

pytestmark = pytest.mark.subprocess

# The newest API the validator knows, and the oldest still supported upstream that the manifests target.
VERSIONS = ("1.37.0", "1.31.0")
DRAIN_S = 20


def kind(name: str) -> dict[str, Any]:
    found = [doc for doc in rendered_kubernetes() if doc["kind"] == name]
    assert len(found) == 1, f"expected one {name}, found {len(found)}"
    return found[0]


def container() -> dict[str, Any]:
    containers: list[dict[str, Any]] = kind("Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def validate(path: Path, version: str) -> tuple[int, str]:
    result = run([validator("kubernetes-validate"), "--strict", "-k", version, path])
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_resource_is_valid_against_the_api_schema(tmp_path: Path, version: str) -> None:
    result = run([validator("kubectl"), "kustomize", KUBERNETES])
    assert result.returncode == 0, result.stderr
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(result.stdout)
    code, output = validate(rendered, version)
    assert code == 0, output
    assert output.count("passed for resource") == len(load_all(result.stdout)) == 10


def test_the_validator_refuses_a_misspelt_field(tmp_path: Path) -> None:
    rendered = run([validator("kubectl"), "kustomize", KUBERNETES]).stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text(rendered.replace("readinessProbe:", "readinesProbe:"))
    code, output = validate(broken, VERSIONS[0])
    assert code != 0
    assert "readinesProbe" in output


def test_the_kustomization_lists_every_manifest_in_the_folder() -> None:
    listed = load_yaml(KUBERNETES / "kustomization.yaml")["resources"]
    present = sorted(p.name for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present


def test_three_replicas_probed_on_healthz_with_a_host_they_accept() -> None:
    assert kind("Deployment")["spec"]["replicas"] == 3
    main = container()
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = main[probe]["httpGet"]
        assert get["path"] == "/healthz" and get["port"] == "http"
        assert get["httpHeaders"] == [{"name": "Host", "value": "localhost"}]
    assert main["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_each_pod_advertises_its_own_ip_and_names_itself() -> None:
    env = {e["name"]: e for e in container()["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["MCPMUX_ADVERTISE"]["value"] == "http://$(POD_IP):8080"
    assert env["MCPMUX_REPLICA_ID"]["value"] == "$(POD_NAME)"
    names = [e["name"] for e in container()["env"]]
    assert names.index("POD_IP") < names.index("MCPMUX_ADVERTISE")  # $(VAR) sees only earlier entries
    assert env["MCPMUX_DB"]["valueFrom"]["secretKeyRef"] == {"name": "mcpmux-db", "key": "url"}


def test_pods_run_restricted_with_a_read_only_root_and_bounded_resources() -> None:
    pod = kind("Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    security = container()["securityContext"]
    assert security == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    mounts = {m["mountPath"] for m in container()["volumeMounts"]}
    assert {"/home/mcpmux", "/tmp", "/etc/mcpmux"} <= mounts
    resources = container()["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and {"cpu", "memory"} <= set(resources["limits"])
    assert kind("Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_termination_grace_outlasts_the_pre_stop_pause_and_the_drain() -> None:
    pod = kind("Deployment")["spec"]["template"]["spec"]
    args = container()["args"]
    drain = float(args[args.index("--drain-timeout") + 1])
    assert drain == DRAIN_S
    pause = int(container()["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] >= pause + drain + 10
    liveness = container()["livenessProbe"]
    assert liveness["periodSeconds"] * liveness["failureThreshold"] > pause + drain, "a draining pod must not be killed"


def test_the_service_has_no_affinity_and_the_budget_and_autoscaler_target_the_deployment() -> None:
    labels = kind("Deployment")["spec"]["selector"]["matchLabels"]
    service = kind("Service")["spec"]
    assert service["sessionAffinity"] == "None" and service["selector"] == labels
    assert kind("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == labels
    assert kind("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    hpa = kind("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mcpmux"}
    assert hpa["spec"]["minReplicas"] == 3
    [metric] = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert kind("NetworkPolicy")["spec"]["podSelector"]["matchLabels"] == labels


def test_the_config_map_is_deploy_mcpmux_yaml_and_the_secret_only_a_template() -> None:
    assert kind("ConfigMap")["data"]["mcpmux.yaml"] == (DEPLOY / "mcpmux.yaml").read_text()
    url = kind("Secret")["stringData"]["url"]
    assert re.fullmatch(r"postgresql\+psycopg://mcpmux:CHANGE-ME@[\w.-]+:5432/mcpmux", url)
    assert "CHANGE-ME" in (DEPLOY / "docker-entrypoint.sh").read_text()  # refused at start, see test_entrypoint


def test_the_ingress_makes_the_choices_of_nginx_conf() -> None:
    ingress = kind("Ingress")
    notes = ingress["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert notes[prefix + "load-balance"] == "round_robin"
    assert not [name for name in notes if "affinity" in name or "upstream-hash-by" in name]
    assert notes[prefix + "proxy-buffering"] == "off"
    assert int(notes[prefix + "proxy-read-timeout"]) >= 3600
    assert notes[prefix + "proxy-body-size"] == "4m"
    assert "non_idempotent" not in notes[prefix + "proxy-next-upstream"]
    conf = (DEPLOY / "nginx.conf").read_text()
    assert f"proxy_next_upstream {notes[prefix + 'proxy-next-upstream']};" in conf
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": kind("Service")["metadata"]["name"], "port": {"name": "http"}}
    hosts = next(e for e in container()["env"] if e["name"] == "MCPMUX_ALLOW_HOSTS")["value"].split()
    assert ingress["spec"]["rules"][0]["host"] in hosts  # the replicas accept the Host the ingress passes
