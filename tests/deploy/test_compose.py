"""The compose stack, checked without a container engine: docker-compose.yml (+ the CPU override) against
the Compose Specification's JSON schema, the settings the service depends on, Prometheus' scrape file
(with promtool) and Grafana's provisioning and dashboard. The dashboard's queries themselves run against a
real Prometheus in test_prometheus.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.conftest import need_tool

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
COMPOSE_CPU = ROOT / "docker-compose.cpu.yml"
COMPOSE_SCHEMA = ROOT / "deploy" / "compose-spec.json"
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
PROMETHEUS_CONFIG = PROMETHEUS_DIR / "prometheus.yml"  # the file test_prometheus.py runs Prometheus with
GRAFANA_DIR = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "rsa.json"

GPU_DEVICE = {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}
# The service's own graceful shutdown (app/core/config.py, graceful_shutdown_s): compose must wait longer.
SERVICE_GRACEFUL_SHUTDOWN_S = 20.0


# -- loading compose files -------------------------------------------------------------------------


@dataclass(frozen=True)
class Reset:
    """A value tagged `!reset` in an override file: Compose removes the attribute from the base."""

    value: Any


class ComposeLoader(yaml.SafeLoader):
    """YAML as Compose reads it: the safe loader plus the `!reset` tag (Compose v2.24+)."""


def _construct_reset(loader: yaml.SafeLoader, node: yaml.Node) -> Reset:
    if isinstance(node, yaml.MappingNode):
        return Reset(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Reset(loader.construct_sequence(node, deep=True))
    return Reset(loader.construct_scalar(node))


ComposeLoader.add_constructor("!reset", _construct_reset)


def load_compose(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as f:
        return yaml.load(f, Loader=ComposeLoader)  # a SafeLoader subclass: no arbitrary objects


def untagged(doc: Any) -> Any:
    """The document with each `!reset` value in place of its tag: what the JSON schema sees."""
    if isinstance(doc, Reset):
        return untagged(doc.value)
    if isinstance(doc, dict):
        return {k: untagged(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [untagged(v) for v in doc]
    return doc


def merge(base: Any, override: Any, path: str = "") -> Any:
    """`docker compose -f base -f override`, for what our override uses: mappings merge key by key,
    scalars replace, `!reset` removes the attribute. Compose merges sequences by rules per attribute
    (ports, volumes, ... by key); the override has none, so meeting one is an error, not a guess."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            if isinstance(value, Reset):
                merged.pop(key, None)
            elif key in merged:
                merged[key] = merge(merged[key], value, f"{path}.{key}")
            else:
                merged[key] = untagged(value)
        return merged
    if isinstance(base, list) or isinstance(override, list):
        raise NotImplementedError(f"merging the sequence at {path or '.'}: not a case this test knows")
    return override


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose(COMPOSE)


@pytest.fixture(scope="module")
def compose_cpu(compose: dict[str, Any]) -> dict[str, Any]:
    return merge(compose, load_compose(COMPOSE_CPU))


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping, whichever of Compose's two forms it is written in."""
    env = service.get("environment", {})
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def bind_mounts(service: dict[str, Any]) -> dict[str, tuple[Path, str]]:
    """Container path -> (host path resolved from the compose file's folder, mode) of each bind mount."""
    mounts = {}
    for volume in service.get("volumes", []):
        assert isinstance(volume, str), f"short syntax expected, got {volume!r}"
        source, target, *mode = volume.split(":")
        if source.startswith((".", "/")):
            mounts[target] = ((ROOT / source).resolve(), mode[0] if mode else "rw")
    return mounts


def duration_s(value: str) -> float:
    """A Compose duration (`30s`, `1m30s`, `500ms`) in seconds."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)", value)
    assert parts and "".join(n + u for n, u in parts) == value, f"not a duration: {value!r}"
    return sum(float(n) * units[u] for n, u in parts)


# -- the compose files -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.cpu.yml", "merged CPU variant"])
def test_compose_files_follow_the_specification(name: str, compose_cpu: dict[str, Any]) -> None:
    schema = json.loads(COMPOSE_SCHEMA.read_text(encoding="utf-8"))
    doc = compose_cpu if name == "merged CPU variant" else untagged(load_compose(ROOT / name))
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    assert not errors, "\n".join(errors)


def test_the_schema_refuses_what_compose_refuses(compose: dict[str, Any]) -> None:
    """The validation above can fail: a misspelt attribute and a wrong type are both caught."""
    validator = jsonschema.Draft7Validator(json.loads(COMPOSE_SCHEMA.read_text(encoding="utf-8")))
    misspelt = json.loads(json.dumps(compose))
    misspelt["services"]["rsa"]["stop_grace_priod"] = "30s"
    wrong_type = json.loads(json.dumps(compose))
    wrong_type["services"]["rsa"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] = "gpu"
    assert list(validator.iter_errors(misspelt)) and list(validator.iter_errors(wrong_type))


def test_rsa_service_runs_on_the_gpu_read_only_and_stops_gracefully(compose: dict[str, Any]) -> None:
    rsa = compose["services"]["rsa"]
    assert rsa["build"] == "." and rsa["image"]
    assert rsa["deploy"]["resources"]["reservations"]["devices"] == [GPU_DEVICE]
    assert environment(rsa)["RSA_DEVICE"] in {"cuda", "auto"}
    # The image is read-only at run time; only /tmp (a tmpfs) is writable.
    assert rsa["read_only"] is True
    tmpfs = [rsa["tmpfs"]] if isinstance(rsa["tmpfs"], str) else rsa["tmpfs"]
    assert [t.split(":")[0] for t in tmpfs] == ["/tmp"]
    # Models: the repository's folder, read-only, where the service looks for them.
    models = environment(rsa).get("RSA_MODEL_REPOSITORY", "/models")
    assert bind_mounts(rsa)[models] == ((ROOT / "model_repository").resolve(), "ro")
    assert rsa["restart"] == "unless-stopped"
    assert duration_s(rsa["stop_grace_period"]) > SERVICE_GRACEFUL_SHUTDOWN_S
    port = environment(rsa).get("RSA_PORT", "8000")
    assert f"{port}:{port}" in rsa["ports"]
    grpc_port = environment(rsa)["RSA_GRPC_PORT"]  # OIP v2 gRPC, published like HTTP
    assert f"{grpc_port}:{grpc_port}" in rsa["ports"]
    assert environment(rsa).get("RSA_HOST", "0.0.0.0") == "0.0.0.0"  # reachable from the compose network


def test_rsa_healthcheck_is_the_images_readiness_probe(compose: dict[str, Any]) -> None:
    """Compose restates only the timings; with no `test`, Docker keeps the image's HEALTHCHECK command,
    so the image must have one, and it must probe readiness (/readyz), not mere liveness."""
    check = compose["services"]["rsa"]["healthcheck"]
    assert not check.get("disable", False)
    for key in ("interval", "timeout", "start_period"):
        assert duration_s(check[key]) > 0, key
    assert duration_s(check["timeout"]) < duration_s(check["interval"])
    assert check["retries"] >= 1
    if "test" in check:
        assert "/readyz" in json.dumps(check["test"])
    else:
        dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
        healthcheck = re.search(r"^HEALTHCHECK\b((?:[^\n]*\\\n)*[^\n]*)", dockerfile, flags=re.MULTILINE)
        assert healthcheck is not None, "the Dockerfile has no HEALTHCHECK for compose to inherit"
        assert "/readyz" in healthcheck.group(1)


def test_cpu_variant_drops_only_the_gpu(compose: dict[str, Any], compose_cpu: dict[str, Any]) -> None:
    gpu, cpu = compose["services"]["rsa"], compose_cpu["services"]["rsa"]
    assert "devices" not in cpu["deploy"]["resources"]["reservations"]
    assert environment(cpu)["RSA_DEVICE"] == "cpu"
    # Everything else is the GPU service's.
    expected = json.loads(json.dumps(gpu))
    del expected["deploy"]["resources"]["reservations"]["devices"]
    expected["environment"] = {**environment(gpu), "RSA_DEVICE": "cpu"}
    assert {**cpu, "environment": environment(cpu)} == expected
    assert {k: v for k, v in compose_cpu["services"].items() if k != "rsa"} == {
        k: v for k, v in compose["services"].items() if k != "rsa"
    }


def test_merge_applies_reset_and_refuses_unknown_sequences() -> None:
    base = {"a": {"b": [1], "c": 1}, "d": 2}
    assert merge(base, {"a": {"b": Reset([])}, "d": 3}) == {"a": {"c": 1}, "d": 3}
    with pytest.raises(NotImplementedError):
        merge(base, {"a": {"b": [2]}})


# -- Prometheus ------------------------------------------------------------------------------------


def test_prometheus_service_runs_the_tested_scrape_file(compose: dict[str, Any]) -> None:
    prometheus = compose["services"]["prometheus"]
    image, _, tag = prometheus["image"].partition(":")
    assert image == "prom/prometheus" and tag not in {"", "latest"}
    mounts = bind_mounts(prometheus)
    [target] = [t for t, (source, _) in mounts.items() if source == PROMETHEUS_DIR]
    assert mounts[target][1] == "ro"
    assert f"--config.file={target}/prometheus.yml" in prometheus["command"]
    assert PROMETHEUS_CONFIG.is_file()


def scrape_job() -> dict[str, Any]:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    [job] = config["scrape_configs"]
    return job


def test_compose_targets_file_names_the_rsa_service(compose: dict[str, Any]) -> None:
    """The scrape file brings no targets of its own; compose's targets file names the service."""
    job = scrape_job()
    assert "static_configs" not in job
    [sd] = job["file_sd_configs"]
    globs = sd["files"]
    # Relative, so that Prometheus resolves them next to whichever copy of the file it runs.
    assert globs and not any(g.startswith("/") for g in globs)
    files = sorted({f for g in globs for f in PROMETHEUS_DIR.glob(g)})
    assert [f.name for f in files] == ["rsa.yml"]
    groups = yaml.safe_load(files[0].read_text(encoding="utf-8"))
    port = environment(compose["services"]["rsa"]).get("RSA_PORT", "8000")
    assert [t for g in groups for t in g["targets"]] == [f"rsa:{port}"]
    assert job.get("metrics_path", "/metrics") == "/metrics"


def test_promtool_accepts_the_scrape_file() -> None:
    """promtool also reads the targets files the file_sd globs match."""
    promtool = need_tool("promtool")
    result = subprocess.run(
        [promtool, "check", "config", str(PROMETHEUS_CONFIG)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- Grafana ---------------------------------------------------------------------------------------


def provisioning_files() -> list[Path]:
    return sorted((GRAFANA_DIR / "provisioning").rglob("*.y*ml"))


def test_grafana_service_is_pinned_and_provisioned(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    image, _, tag = grafana["image"].partition(":")
    assert image == "grafana/grafana" and tag not in {"", "latest"}
    mounts = bind_mounts(grafana)
    assert mounts["/etc/grafana/provisioning"] == ((GRAFANA_DIR / "provisioning").resolve(), "ro")
    env = environment(grafana)
    # Either anonymous viewers or an admin password that the operator sets.
    assert env.get("GF_AUTH_ANONYMOUS_ENABLED") == "true" and env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert env["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD")


def test_every_provisioning_file_parses() -> None:
    files = provisioning_files()
    assert {f.parent.name for f in files} == {"datasources", "dashboards"}
    for f in files:
        doc = yaml.safe_load(f.read_text(encoding="utf-8"))
        assert doc["apiVersion"] == 1, f
        assert doc.get("datasources") or doc.get("providers"), f


def datasource() -> dict[str, Any]:
    [path] = (GRAFANA_DIR / "provisioning" / "datasources").glob("*.yml")
    [ds] = yaml.safe_load(path.read_text(encoding="utf-8"))["datasources"]
    return ds


def test_datasource_is_the_stacks_prometheus(compose: dict[str, Any]) -> None:
    ds = datasource()
    assert ds["type"] == "prometheus" and ds["isDefault"] is True
    assert "prometheus" in compose["services"] and ds["url"] == "http://prometheus:9090"
    # Grafana's $__rate_interval is built from this: it must be the real scrape interval.
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    interval = scrape_job().get("scrape_interval", config["global"]["scrape_interval"])
    assert ds["jsonData"]["timeInterval"] == interval


def test_dashboard_provider_reads_the_mounted_dashboards(compose: dict[str, Any]) -> None:
    [path] = (GRAFANA_DIR / "provisioning" / "dashboards").glob("*.yml")
    [provider] = yaml.safe_load(path.read_text(encoding="utf-8"))["providers"]
    assert provider["type"] == "file"
    folder = provider["options"]["path"]
    grafana = compose["services"]["grafana"]
    assert bind_mounts(grafana)[folder] == ((GRAFANA_DIR / "dashboards").resolve(), "ro")
    home = environment(grafana).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    assert home in {None, f"{folder}/{DASHBOARD.name}"}


# -- the dashboard ---------------------------------------------------------------------------------


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, the ones inside collapsed rows included; rows themselves hold no queries."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_queries(dashboard: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query on the dashboard, as Grafana would send them."""
    dashboard = dashboard if dashboard is not None else load_dashboard()
    return [(p["title"], t["expr"]) for p in panels(dashboard) for t in p.get("targets", [])]


def test_dashboard_panels_all_query_the_provisioned_prometheus() -> None:
    dashboard = load_dashboard()
    uid = datasource()["uid"]
    titles = [p["title"] for p in panels(dashboard)]
    assert len(titles) == len(set(titles)), "panel titles must be unique (tests report by title)"
    for panel in panels(dashboard):
        targets = panel.get("targets", [])
        assert targets and all(t.get("expr", "").strip() for t in targets), panel["title"]
        for ref in [panel.get("datasource"), *(t.get("datasource") for t in targets)]:
            assert ref is None or ref == {"type": "prometheus", "uid": uid}, panel["title"]
    every = [*dashboard["panels"], *(p for r in dashboard["panels"] for p in r.get("panels", []))]
    ids = [p["id"] for p in every]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_dashboard_uses_only_defined_variables() -> None:
    dashboard = load_dashboard()
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    used = {m for _, expr in dashboard_queries(dashboard) for m in re.findall(r"\$\{?(\w+)", expr)}
    builtin = {"__rate_interval", "__interval", "__range"}
    assert used - builtin <= defined and "model" in used
    for variable in dashboard["templating"]["list"]:
        assert variable["datasource"]["uid"] == datasource()["uid"]


def test_dashboard_covers_the_services_metrics() -> None:
    exprs = " ".join(expr for _, expr in dashboard_queries())
    for metric in (
        "rsa_requests_total",
        "rsa_request_duration_seconds_bucket",
        "rsa_request_rejections_total",
        "rsa_requests_in_flight",
        "rsa_event_loop_lag_seconds_bucket",
        "rsa_queue_wait_seconds_bucket",
        "rsa_session_run_seconds_bucket",
        "rsa_batch_rows_bucket",
        "rsa_batch_rows_sum",
        "rsa_rows_total",
        "rsa_queue_rows",
        "rsa_session_failures_total",
        "rsa_model_info",
        "rsa_model_load_state",
        "rsa_gpu_memory_used_bytes",
        "rsa_gpu_memory_total_bytes",
        "rsa_service_resident_memory_bytes",
        "rsa_process_resident_memory_bytes",
        "process_cpu_seconds_total",
    ):
        assert re.search(rf"\b{metric}\b", exprs), metric


def test_dashboard_panels_do_not_overlap() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in load_dashboard()["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]
