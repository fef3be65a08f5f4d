"""deploy/k8s: valid against the Kubernetes schemas, and consistent with the gateway it runs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gateway.api.auth import OPEN_PATHS
from gateway.settings import resolve_workers
from tests.deploy.files import (
    FARM_TOML,
    K8S,
    k8s_documents,
    k8s_object,
    served_get_routes,
    settings_from,
    stop_budget_s,
    unknown_settings,
)

K8S_VERSION = kubernetes_validate.latest_version()
VAR_REF = re.compile(r"\$\((\w+)\)")
OBJECTS = list(k8s_documents())


def gateway_pod() -> dict[str, Any]:
    return dict(k8s_object("DaemonSet", "comfy-gateway")["spec"]["template"])


def spec_of(kind: str, name: str) -> dict[str, Any]:
    return dict(k8s_object(kind, name)["spec"])


def gateway_container() -> dict[str, Any]:
    (container,) = gateway_pod()["spec"]["containers"]
    return dict(container)


@pytest.mark.parametrize(
    "doc", [doc for _, doc in OBJECTS], ids=[f"{p.name}:{d['kind']}" for p, d in OBJECTS]
)
def test_every_object_is_valid_against_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    # strict: an unknown or misplaced field is an error, not silently dropped by the API server
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_misplaced_field_is_caught_by_that_validation() -> None:
    broken = gateway_pod()
    broken["spec"]["containers"][0]["readinessprobe"] = {"httpGet": {"path": "/readyz"}}
    daemonset = {**k8s_object("DaemonSet", "comfy-gateway")}
    daemonset["spec"] = {**daemonset["spec"], "template": broken}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, K8S_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest_and_renders() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl to render the kustomization")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(K8S)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    assert len(docs) == len(OBJECTS)
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_probes_use_open_routes_the_gateway_serves() -> None:
    container = gateway_container()
    probes = {
        kind: container[kind]["httpGet"]["path"]
        for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes["readinessProbe"] == "/readyz"  # fails while draining: traffic moves away
    assert probes["livenessProbe"] == "/healthz"  # stays up while draining: no restart mid-drain
    for path in probes.values():
        assert path in served_get_routes()
        assert path in OPEN_PATHS, f"{path} needs the token, which a probe does not send"
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert all(container[kind]["httpGet"]["port"] in ports for kind in probes)


def test_the_farm_config_map_is_the_farm_file_and_loads(tmp_path: Path) -> None:
    text = k8s_object("ConfigMap", "comfy-gateway-farm")["data"]["farm.toml"]
    assert text == FARM_TOML.read_text()
    settings_from(text, tmp_path)
    mounts = {m["name"]: m["mountPath"] for m in gateway_container()["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in gateway_container()["env"]}
    assert env["COMFY_GATEWAY_CONFIG"] == f"{mounts['farm']}/farm.toml"


def test_the_grace_period_outlasts_the_gateway_drain(tmp_path: Path) -> None:
    text = k8s_object("ConfigMap", "comfy-gateway-farm")["data"]["farm.toml"]
    budget_s = stop_budget_s(settings_from(text, tmp_path))
    assert gateway_pod()["spec"]["terminationGracePeriodSeconds"] > budget_s


def test_the_environment_names_real_settings_and_existing_secret_keys() -> None:
    secret = k8s_object("Secret", "comfy-gateway")
    for kind, name in (("DaemonSet", "comfy-gateway"), ("StatefulSet", "comfy-gateway-redis")):
        (container,) = k8s_object(kind, name)["spec"]["template"]["spec"]["containers"]
        names = [e["name"] for e in container["env"]]
        assert unknown_settings(names) == []
        for entry in container["env"]:
            ref = entry.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None:
                assert ref["name"] == secret["metadata"]["name"]
                assert ref["key"] in secret["stringData"]
    env = {e["name"] for e in gateway_container()["env"]}
    assert {"COMFY_GATEWAY_AUTH_TOKEN", "COMFY_GATEWAY_REDIS_URL"} <= env


def pod_environment(node: str) -> dict[str, str]:
    """The gateway container's plain variables as the kubelet expands them on `node` (the
    Secret's values are not known here: references to them stay as written)."""
    values = {"NODE_NAME": node}
    for entry in gateway_container()["env"]:
        if "value" in entry:
            values[entry["name"]] = VAR_REF.sub(
                lambda m: values.get(m.group(1), m.group(0)), entry["value"]
            )
    return values


def test_each_node_names_one_worker_per_gpu_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpus = int(gateway_container()["resources"]["limits"]["nvidia.com/gpu"])
    text = k8s_object("ConfigMap", "comfy-gateway-farm")["data"]["farm.toml"]
    names = []
    for node in ("gpu-node-a", "ip-10-0-3-7.ec2.internal"):
        env = pod_environment(node)
        monkeypatch.setenv("COMFY_GATEWAY_WORKERS", env["COMFY_GATEWAY_WORKERS"])
        monkeypatch.setenv("COMFY_GATEWAY_COMFYUI", "/comfyui")  # the image's
        workers = resolve_workers(settings_from(text, tmp_path), visible_gpus=(0,))
        assert [w.gpu for w in workers] == list(range(gpus))
        assert all(w.comfyui == Path("/comfyui") for w in workers)
        names += [w.name for w in workers]
    assert len(set(names)) == len(names) == 2 * gpus


def test_the_gateway_runs_on_gpu_nodes_with_gpus_and_without_root() -> None:
    pod = gateway_pod()["spec"]
    container = gateway_container()
    assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert pod["nodeSelector"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_every_mount_names_a_volume_of_its_pod() -> None:
    for _, doc in OBJECTS:
        if doc["kind"] not in ("DaemonSet", "StatefulSet"):
            continue
        spec = doc["spec"]["template"]["spec"]
        volumes = {v["name"] for v in spec.get("volumes", [])}
        volumes |= {c["metadata"]["name"] for c in doc["spec"].get("volumeClaimTemplates", [])}
        for container in spec["containers"] + spec.get("initContainers", []):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes, f"{doc['kind']}: {mount['name']}"


def test_selectors_select_the_pods_they_mean() -> None:
    gateway = gateway_pod()["metadata"]["labels"]
    redis = k8s_object("StatefulSet", "comfy-gateway-redis")["spec"]["template"]["metadata"]
    budget = k8s_object("PodDisruptionBudget", "comfy-gateway")["spec"]["selector"]
    policy = k8s_object("NetworkPolicy", "comfy-gateway-redis")["spec"]
    selects = [
        (spec_of("Service", "comfy-gateway")["selector"], gateway),
        (budget["matchLabels"], gateway),
        (spec_of("Service", "comfy-gateway-redis")["selector"], redis["labels"]),
        (policy["podSelector"]["matchLabels"], redis["labels"]),
        (policy["ingress"][0]["from"][0]["podSelector"]["matchLabels"], gateway),
    ]
    for selector, labels in selects:
        assert selector.items() <= labels.items()


def test_redis_keeps_its_aof_on_a_volume_and_never_evicts() -> None:
    redis = k8s_object("StatefulSet", "comfy-gateway-redis")
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    option = {args[i]: args[i + 1] for i in range(0, len(args) - 1, 2)}
    assert option["--appendonly"] == "yes"
    assert option["--maxmemory-policy"] == "noeviction"
    (mount,) = container["volumeMounts"]
    assert mount["mountPath"] == "/data"
    assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == mount["name"]
    env = {e["name"]: e.get("value") for e in gateway_container()["env"]}
    url = env["COMFY_GATEWAY_REDIS_URL"]
    service = k8s_object("Service", "comfy-gateway-redis")
    assert f"{redis['metadata']['name']}-0.{service['metadata']['name']}:6379" in url
