"""The Grafana dashboard imports cleanly and asks only for metrics the gateway exposes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics.scraped import _Computed, gpu_families, redis_families
from gateway.redis_keeper import RedisHealth
from tests.integration.conftest import gateway_settings, running_gateway
from tests.unit.gateway.metrics.test_scraped import SNAPSHOT

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "dashboards" / "comfy-gateway.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def expressions(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left once strings, label matchers,
    ranges, grouping clauses and function names are taken out."""
    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without)\s*\([^)]*\)", "", text)
    text = re.sub(r"label_values\((\w+),\s*\w+\)", r"\1", text)
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*(?!\s*\()\b", text))
    return {name for name in names if not re.fullmatch(r"\d.*|e", name)}


def sample_names(text: str) -> set[str]:
    """Every series name the exposition can carry, whether or not it has samples yet."""
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in SUFFIXES.get(family.type, ("",))
    }


async def exposed_names(redis_url: str, tmp_path: Path) -> set[str]:
    """A real scrape of a gateway, plus the families it shows only with NVML or an embedded
    Redis (neither is here)."""
    settings = gateway_settings(redis_url, tmp_path)
    async with running_gateway(settings, [], None) as url, httpx.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    health = RedisHealth("ready", 0, None)
    extra = _text([*gpu_families(SNAPSHOT), *redis_families(lambda: health)])
    return sample_names(text) | sample_names(extra)


def _text(families: list[Any]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Computed(families))
    return generate_latest(registry).decode()


def test_the_dashboard_is_importable_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "comfy-gateway"
    assert dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_the_metric_names_parse_out_of_promql() -> None:
    expr = (
        "histogram_quantile(0.95, sum by (le, group) (rate(comfy_gateway_job_seconds_bucket"
        '{worker=~"$worker"}[$__rate_interval]))) / max(comfy_gateway_jobs{state="pending"})'
    )
    assert metric_names(expr) == {"comfy_gateway_job_seconds_bucket", "comfy_gateway_jobs"}


async def test_every_query_of_the_dashboard_reads_metrics_the_gateway_exposes(
    redis_url: str, tmp_path: Path
) -> None:
    exposed = await exposed_names(redis_url, tmp_path)
    dashboard = json.loads(DASHBOARD.read_text())
    used: set[str] = set()
    for expr in expressions(dashboard):
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exposed, f"{sorted(names - exposed)} in {expr!r} are not exposed"
        used |= names
    assert "comfy_gateway_phase_seconds_bucket" in used
    assert "comfy_gateway_gpu_memory_used_bytes" in used
