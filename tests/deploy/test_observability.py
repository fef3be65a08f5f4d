"""Prometheus scrapes the gateway's /metrics; Grafana gets Prometheus and the dashboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.files import DEPLOY, served_get_routes, yaml_documents
from tests.deploy.test_compose import bind_sources, service

PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
PROVISIONING = DEPLOY / "grafana" / "provisioning"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "comfy-gateway.json"


def scrape_job() -> dict[str, Any]:
    (config,) = yaml_documents(PROMETHEUS)
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "comfy-gateway"]
    return dict(job)


def datasource() -> dict[str, Any]:
    (doc,) = yaml_documents(PROVISIONING / "datasources" / "prometheus.yaml")
    (source,) = doc["datasources"]
    return dict(source)


def test_prometheus_scrapes_the_gateway_metrics_route_with_the_token() -> None:
    job = scrape_job()
    assert job["metrics_path"] in served_get_routes()
    (target,) = job["static_configs"][0]["targets"]
    port = service("gateway")["ports"][0].split(":")[-1]
    assert target == f"gateway:{port}"
    secret = Path(job["authorization"]["credentials_file"]).name
    assert secret in service("prometheus")["secrets"]


def test_prometheus_reads_this_config() -> None:
    mounted = bind_sources("prometheus")["/etc/prometheus/prometheus.yml"]
    assert (DEPLOY / mounted).resolve() == PROMETHEUS
    assert "--config.file=/etc/prometheus/prometheus.yml" in service("prometheus")["command"]


def test_grafana_provisions_prometheus_and_the_dashboard_folder() -> None:
    mounts = bind_sources("grafana")
    assert (DEPLOY / mounts["/etc/grafana/provisioning"]).resolve() == PROVISIONING
    prometheus_port = service("prometheus")["ports"][0].split(":")[-1]
    assert datasource()["url"] == f"http://prometheus:{prometheus_port}"
    (doc,) = yaml_documents(PROVISIONING / "dashboards" / "comfy-gateway.yaml")
    (provider,) = doc["providers"]
    folder = provider["options"]["path"]
    assert (DEPLOY / mounts[folder]).resolve() == DASHBOARD.parent


def test_the_dashboard_uses_the_provisioned_datasource() -> None:
    if not DASHBOARD.exists():
        pytest.skip(f"{DASHBOARD.relative_to(DEPLOY.parent)} is not in this tree")
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {
        v["name"]
        for v in dashboard.get("templating", {}).get("list", [])
        if v.get("type") == "datasource" and v.get("query") == "prometheus"
    }
    uids = {datasource()["uid"], *(f"${{{name}}}" for name in variables)}
    # File provisioning fills no `__inputs` (`${DS_PROMETHEUS}` of an exported dashboard):
    # a panel must name the provisioned uid, or a datasource variable of the dashboard.
    for user in _datasource_users(dashboard):
        source = user.get("datasource")
        if isinstance(source, dict) and source.get("type") == "prometheus":
            assert source.get("uid") in uids, user.get("title") or user.get("name")


def _datasource_users(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Panels (in rows too), their queries and the query variables."""
    panels = list(dashboard.get("panels", []))
    for row in list(panels):
        panels += row.get("panels", [])
    queries = [target for panel in panels for target in panel.get("targets", [])]
    variables = dashboard.get("templating", {}).get("list", [])
    return [*panels, *queries, *variables]
