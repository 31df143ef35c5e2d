"""The Kubernetes manifests (deploy/kubernetes/), checked as strictly as a machine without an API server
allows: every overlay rendered by `kubectl kustomize`; every built-in object against Kubernetes' own
schemas with kubernetes-validate in strict mode (no unknown field anywhere); every KServe and KEDA object
against the vendored CRD schemas, made strict as the API server is (tests/deploy/kube_schemas.py); a
deliberate typo in each kind rejected; the cross-field rules that only an API server or an admission
webhook would check (KEDA's replica bounds and fallback, the PodDisruptionBudget's either-or, the HPA's
bounds, KServe's KEDA rules); and what ties the objects to each other and to the service: one autoscaling
query and threshold everywhere, selectors that select the pods, probes on routes the app serves, settings
that exist, a grace period that covers the drain.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import yaml

from app.core.config import Settings
from tests.deploy import kube_schemas
from tests.deploy.manifests import KUBERNETES_DIR, OVERLAYS, Doc, find, prometheus_trigger, render

NAMESPACE = "rsa"
# What each overlay holds, and which autoscaler drives the workload.
KINDS = {
    "cpu": ["Deployment", "Namespace", "PodDisruptionBudget", "ScaledObject", "Service"],
    "gpu": [
        "Deployment",
        "Namespace",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "ScaledObject",
        "Service",
    ],
    "gpu-hpa": [
        "Deployment",
        "HorizontalPodAutoscaler",
        "Namespace",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "Service",
    ],
    "kserve": [
        "InferenceService",
        "Namespace",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "ServingRuntime",
    ],
}
GPU_OVERLAYS = ("gpu", "gpu-hpa", "kserve")
ADAPTER_VALUES = KUBERNETES_DIR / "prometheus-adapter" / "values.yaml"
IMAGE_UID = 1000  # the Dockerfile's USER


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Doc]]:
    return {overlay: render(overlay) for overlay in OVERLAYS}


def test_every_overlay_renders_what_it_should(rendered: dict[str, list[Doc]]) -> None:
    assert {o: sorted(d["kind"] for d in docs) for o, docs in rendered.items()} == KINDS
    for docs in rendered.values():
        assert {d["metadata"].get("namespace", NAMESPACE) for d in docs} == {NAMESPACE}
        assert find(docs, "Namespace")["metadata"]["name"] == NAMESPACE


def test_shared_applies_alone_into_the_namespace(rendered: dict[str, list[Doc]]) -> None:
    """README: `kubectl apply -k deploy/kubernetes/shared` first, to fill the claim before any pod runs."""
    shared = render("shared", folder=".")
    assert sorted(d["kind"] for d in shared) == ["Namespace", "PersistentVolumeClaim"]
    claim = find(shared, "PersistentVolumeClaim")
    assert claim["metadata"]["namespace"] == NAMESPACE
    assert (
        claim
        == find(rendered["gpu"], "PersistentVolumeClaim")
        == find(rendered["kserve"], "PersistentVolumeClaim")
    )


def _objects() -> Iterator[Any]:
    for overlay in KINDS:
        for kind in KINDS[overlay]:
            yield pytest.param(overlay, kind, id=f"{overlay}/{kind}")


@pytest.mark.parametrize(("overlay", "kind"), list(_objects()))
def test_object_is_valid_against_its_schema(rendered: dict[str, list[Doc]], overlay: str, kind: str) -> None:
    assert kube_schemas.errors(find(rendered[overlay], kind)) == []


# -- a deliberate typo in each kind ----------------------------------------------------------------

# (overlay, kind, path to a key, the key misspelled): each a mistake an editor could make.
TYPOS = [
    ("gpu", "Namespace", ["metadata", "labels"], "lables"),
    ("gpu", "PersistentVolumeClaim", ["spec", "accessModes"], "accesModes"),
    ("gpu", "Deployment", ["spec", "template", "spec", "containers", 0, "readinessProbe"], "readinesProbe"),
    ("gpu", "Service", ["spec", "ports", 0, "targetPort"], "tragetPort"),
    ("gpu", "PodDisruptionBudget", ["spec", "maxUnavailable"], "maxUnavailble"),
    (
        "gpu-hpa",
        "HorizontalPodAutoscaler",
        ["spec", "metrics", 0, "external", "target", "averageValue"],
        "avrageValue",
    ),
    ("gpu", "ScaledObject", ["spec", "minReplicaCount"], "minReplicas"),  # the HPA's name for it
    ("gpu", "ScaledObject", ["spec", "advanced", "horizontalPodAutoscalerConfig", "behavior"], "behaviour"),
    ("kserve", "ServingRuntime", ["spec", "containers", 0, "livenessProbe", "httpGet", "path"], "pth"),
    ("kserve", "InferenceService", ["spec", "predictor", "autoScaling"], "autoscaling"),
    ("kserve", "InferenceService", ["metadata", "annotations"], "anotations"),  # ObjectMeta of a CRD kind
]


def misspell(doc: Doc, path: list[str | int], typo: str) -> Doc:
    broken = copy.deepcopy(doc)
    parent: Any = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[typo] = parent.pop(path[-1])
    return broken


@pytest.mark.parametrize(
    ("overlay", "kind", "path", "typo"), [pytest.param(*t, id=f"{t[1]}.{t[3]}") for t in TYPOS]
)
def test_a_typo_is_rejected(
    rendered: dict[str, list[Doc]], overlay: str, kind: str, path: list[str | int], typo: str
) -> None:
    doc = find(rendered[overlay], kind)
    problems = kube_schemas.errors(misspell(doc, path, typo))
    assert problems and all(f"'{typo}' was unexpected" in p for p in problems), problems


def test_every_kind_has_a_typo_test() -> None:
    assert {kind for _, kind, _, _ in TYPOS} == {k for kinds in KINDS.values() for k in kinds}


def test_keda_metadata_values_must_be_strings(rendered: dict[str, list[Doc]]) -> None:
    """KEDA's CRD types trigger metadata as a map of strings: an unquoted 0.5 is refused."""
    so = copy.deepcopy(find(rendered["gpu"], "ScaledObject"))
    so["spec"]["triggers"][0]["metadata"]["threshold"] = 0.5
    assert kube_schemas.errors(so) == ["spec.triggers.0.metadata.threshold: 0.5 is not of type 'string'"]


# -- the vendored CRD schemas ----------------------------------------------------------------------


def test_vendored_crd_schemas_say_where_they_come_from() -> None:
    crds = kube_schemas.vendored_crds()
    assert sorted(crds) == [
        ("keda.sh/v1alpha1", "ScaledObject"),
        ("serving.kserve.io/v1alpha1", "ServingRuntime"),
        ("serving.kserve.io/v1beta1", "InferenceService"),
    ]
    readme = (kube_schemas.SCHEMA_DIR / "README.md").read_text(encoding="utf-8")
    for crd in crds.values():
        source = crd.source
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), source
        for value in source.values():
            assert value in readme, f"{crd.path.name}: {value} not in schemas/README.md"
        owner = source["repository"].split("/")[0]
        licence = kube_schemas.SCHEMA_DIR / f"LICENSE.{ {'kedacore': 'keda'}.get(owner, owner) }"
        head = " ".join(licence.read_text(encoding="utf-8").split()[:5])
        assert head == "Apache License Version 2.0, January", licence
    # Nothing else in the folder: the vendored files, their licences, the README.
    names = {p.name for p in kube_schemas.SCHEMA_DIR.iterdir()}
    assert names == {c.path.name for c in crds.values()} | {"README.md", "LICENSE.kserve", "LICENSE.keda"}


def test_strictness_stops_where_the_crd_keeps_unknown_fields() -> None:
    """InferenceService's `status` keeps unknown fields (x-kubernetes-preserve-unknown-fields): anything
    goes there, while `spec` and the maps it declares keep their own rules."""
    isvc = kube_schemas.vendored_crds()[("serving.kserve.io/v1beta1", "InferenceService")]
    assert isvc.schema["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True
    validator = isvc.validator()
    base = {
        "apiVersion": isvc.api_version,
        "kind": isvc.kind,
        "metadata": {"name": "x"},
        "spec": {"predictor": {}},
    }
    assert list(validator.iter_errors({**base, "status": {"anything": {"at": "all"}}})) == []
    assert list(validator.iter_errors({**base, "spec": {"predictor": {"labels": {"any-key": "v"}}}})) == []
    assert list(validator.iter_errors({**base, "spec": {"predictor": {"nonsense": 1}}}))
    duplicate_env = {"model": {"modelFormat": {"name": "m"}, "env": [{"name": "A"}, {"name": "A"}]}}
    [error] = validator.iter_errors({**base, "spec": {"predictor": duplicate_env}})
    assert "duplicate entry" in error.message  # x-kubernetes-list-type: map, keyed by name


# -- cross-field rules an API server or a webhook would check -------------------------------------

KEDA_DEFAULT_MAX_REPLICAS = 100  # the CEL rule's and keda's GetHPAMaxReplicas' default
# The Prometheus scaler's metadata names (keda v2.20.2, pkg/scalers/prometheus_scaler.go, `keda:"name=..."`
# tags, plus authentication's authModes): KEDA ignores any other key, so a misspelt optional one would be
# silently without effect.
PROMETHEUS_SCALER_KEYS = {
    "serverAddress",
    "query",
    "queryParameters",
    "threshold",
    "activationThreshold",
    "namespace",
    "customHeaders",
    "ignoreNullValues",
    "unsafeSsl",
    "awsRegion",
    "timeout",
    "identityOwner",
    "authModes",
}
PROMETHEUS_SCALER_REQUIRED = {"serverAddress", "query", "threshold"}


def scaled_object_errors(so: Doc) -> list[str]:
    """KEDA's rules beyond the schema: the CRD's CEL rule and the admission webhook's (keda v2.20.2,
    apis/keda/v1alpha1/scaledobject_types.go: CheckReplicaCountBoundsAreValid, CheckFallbackValid), and
    the Prometheus trigger's metadata as the scaler parses it."""
    spec, problems = so["spec"], []
    lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", KEDA_DEFAULT_MAX_REPLICAS)
    if lo > hi:
        problems.append(f"minReplicaCount {lo} > maxReplicaCount {hi}")
    if "idleReplicaCount" in spec and spec["idleReplicaCount"] >= lo:
        problems.append("idleReplicaCount must be below minReplicaCount")
    if "fallback" in spec and all(t["type"] in ("cpu", "memory") for t in spec["triggers"]):
        problems.append("a fallback needs a trigger other than cpu or memory")
    for t in spec["triggers"]:
        if t["type"] != "prometheus":
            continue
        keys = set(t["metadata"])
        problems += [
            f"unknown Prometheus scaler metadata {k!r}" for k in sorted(keys - PROMETHEUS_SCALER_KEYS)
        ]
        problems += [
            f"missing Prometheus scaler metadata {k!r}" for k in sorted(PROMETHEUS_SCALER_REQUIRED - keys)
        ]
        if t.get("metricType", "AverageValue") != "AverageValue" and "fallback" in spec:
            problems.append("a fallback needs an AverageValue trigger")
        for key in ("threshold", "activationThreshold"):
            if key in t["metadata"] and not math.isfinite(float(t["metadata"][key])):
                problems.append(f"{key} is not a number")
    return problems


def test_keda_crd_still_carries_the_replica_rule_checked_here() -> None:
    so = kube_schemas.vendored_crds()[("keda.sh/v1alpha1", "ScaledObject")]
    [rule] = so.schema["properties"]["spec"]["x-kubernetes-validations"]
    assert rule["rule"] == (
        "!has(self.minReplicaCount) || self.minReplicaCount <= "
        f"(has(self.maxReplicaCount) ? self.maxReplicaCount : {KEDA_DEFAULT_MAX_REPLICAS})"
    )


@pytest.mark.parametrize("overlay", ["gpu", "cpu"])
def test_scaled_object_rules(rendered: dict[str, list[Doc]], overlay: str) -> None:
    so = find(rendered[overlay], "ScaledObject")
    assert scaled_object_errors(so) == []
    inverted = copy.deepcopy(so)
    inverted["spec"]["minReplicaCount"] = inverted["spec"]["maxReplicaCount"] + 1
    assert scaled_object_errors(inverted) == ["minReplicaCount 9 > maxReplicaCount 8"]
    no_max = copy.deepcopy(so)
    del no_max["spec"]["maxReplicaCount"]
    no_max["spec"]["minReplicaCount"] = KEDA_DEFAULT_MAX_REPLICAS + 1
    assert scaled_object_errors(no_max) == ["minReplicaCount 101 > maxReplicaCount 100"]
    misspelt = copy.deepcopy(so)
    misspelt["spec"]["triggers"][0]["metadata"]["treshold"] = misspelt["spec"]["triggers"][0]["metadata"].pop(
        "threshold"
    )
    assert scaled_object_errors(misspelt) == [
        "unknown Prometheus scaler metadata 'treshold'",
        "missing Prometheus scaler metadata 'threshold'",
    ]


def pdb_errors(pdb: Doc) -> list[str]:
    """policy/v1 validation: minAvailable and maxUnavailable are exclusive; each an integer >= 0 or a
    percentage."""
    spec, problems = pdb["spec"], []
    if "minAvailable" in spec and "maxUnavailable" in spec:
        problems.append("minAvailable and maxUnavailable cannot be both set")
    for key in ("minAvailable", "maxUnavailable"):
        value = spec.get(key)
        negative = isinstance(value, int) and value < 0
        if negative or (isinstance(value, str) and not re.fullmatch(r"\d+%", value)):
            problems.append(f"{key} {value!r} is neither an integer >= 0 nor a percentage")
    return problems


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pod_disruption_budget_rules(rendered: dict[str, list[Doc]], overlay: str) -> None:
    pdb = find(rendered[overlay], "PodDisruptionBudget")
    assert pdb_errors(pdb) == []
    both = copy.deepcopy(pdb)
    both["spec"]["minAvailable"] = 1
    assert pdb_errors(both) == ["minAvailable and maxUnavailable cannot be both set"]


def test_hpa_bounds(rendered: dict[str, list[Doc]]) -> None:
    spec = find(rendered["gpu-hpa"], "HorizontalPodAutoscaler")["spec"]
    assert 1 <= spec["minReplicas"] <= spec["maxReplicas"]


def inference_service_errors(isvc: Doc) -> list[str]:
    """KServe's webhook rules for what this InferenceService uses (v0.20.0,
    pkg/apis/serving/v1beta1/inference_service_validation.go and component.go): the autoscaler class,
    the replica bounds, and, in Standard mode with KEDA, each External metric's query and target."""
    annotations, predictor, problems = isvc["metadata"].get("annotations", {}), isvc["spec"]["predictor"], []
    autoscaler = annotations.get("serving.kserve.io/autoscalerClass")
    if autoscaler not in (None, "hpa", "external", "keda", "none"):
        problems.append(f"[{autoscaler}] is not a supported autoscaler class type")
    lo, hi = predictor.get("minReplicas", 1), predictor.get("maxReplicas", 0)
    if lo < 0 or hi < 0 or (hi != 0 and lo > hi):
        problems.append(f"minReplicas {lo} / maxReplicas {hi}")
    if annotations.get("serving.kserve.io/deploymentMode") == "Standard" and autoscaler == "keda":
        if "scaleMetric" in predictor:
            problems.append("ScaleMetric is not supported for KEDA")
        for metric in predictor.get("autoScaling", {}).get("metrics", []):
            if metric["type"] != "External":
                continue
            external = metric.get("external", {})
            if not external.get("metric", {}).get("query"):
                problems.append("the query should not be empty")
            if external.get("target", {}).get("value") is None:
                problems.append("the target threshold value should not be empty")
    return problems


def test_inference_service_rules(rendered: dict[str, list[Doc]]) -> None:
    isvc = find(rendered["kserve"], "InferenceService")
    annotations = isvc["metadata"]["annotations"]
    assert annotations["serving.kserve.io/deploymentMode"] == "Standard"
    assert annotations["serving.kserve.io/autoscalerClass"] == "keda"
    assert inference_service_errors(isvc) == []
    broken = copy.deepcopy(isvc)
    broken["spec"]["predictor"]["minReplicas"] = 9
    del broken["spec"]["predictor"]["autoScaling"]["metrics"][0]["external"]["target"]["value"]
    assert inference_service_errors(broken) == [
        "minReplicas 9 / maxReplicas 8",
        "the target threshold value should not be empty",
    ]


def test_kserve_runtime_serves_the_inference_service(rendered: dict[str, list[Doc]]) -> None:
    docs = rendered["kserve"]
    runtime, model = (
        find(docs, "ServingRuntime"),
        find(docs, "InferenceService")["spec"]["predictor"]["model"],
    )
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"] in [
        {k: f[k] for k in ("name", "version")} for f in runtime["spec"]["supportedModelFormats"]
    ]
    assert model["protocolVersion"] in runtime["spec"]["protocolVersions"]
    assert {"v2", "grpc-v2"} <= set(runtime["spec"]["protocolVersions"])
    assert re.fullmatch(r"(pvc|s3|gs|https?)://\S+", model["storageUri"])
    pvc = model["storageUri"].removeprefix("pvc://").split("/")[0]
    assert find(docs, "PersistentVolumeClaim")["metadata"]["name"] == pvc
    [container] = runtime["spec"]["containers"]
    assert container["name"] == "kserve-container" and container["ports"][0]["containerPort"] == 8080
    assert "grpc" in container["ports"][1]["name"]  # KServe gives a port named *grpc* the h2c app protocol
    assert runtime["spec"]["annotations"]["prometheus.kserve.io/port"] == "8080"


# -- one query, one threshold ----------------------------------------------------------------------


def quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity ("500m", "2", "1Gi") as a number."""
    suffixes = {
        "m": Decimal("0.001"),
        "": Decimal(1),
        "k": Decimal(1000),
        "M": Decimal(10**6),
        "Ki": Decimal(1024),
    }
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(value))
    assert match and match[2] in suffixes, value
    return Decimal(match[1]) * suffixes[match[2]]


def adapter_query(namespace: str) -> tuple[str, str]:
    """(metric name, query) of prometheus-adapter's external rule for an HPA in `namespace` with no
    selector: <<.Series>> is the series' name, <<.LabelMatchers>> the namespace matcher."""
    [rule] = yaml.safe_load(ADAPTER_VALUES.read_text(encoding="utf-8"))["rules"]["external"]
    series = re.fullmatch(r"(\w+)\{.*\}", rule["seriesQuery"])
    assert series is not None and rule["resources"]["overrides"]["namespace"] == {"resource": "namespace"}
    assert re.fullmatch(rule["name"]["matches"], series[1])
    query = rule["metricsQuery"].replace("<<.Series>>", series[1])
    return rule["name"]["as"], query.replace("<<.LabelMatchers>>", f'namespace="{namespace}"')


def test_one_query_and_one_threshold_everywhere(rendered: dict[str, list[Doc]]) -> None:
    keda = prometheus_trigger(find(rendered["gpu"], "ScaledObject"))
    assert prometheus_trigger(find(rendered["cpu"], "ScaledObject")) == keda
    isvc = find(rendered["kserve"], "InferenceService")["spec"]["predictor"]
    [external] = [m["external"] for m in isvc["autoScaling"]["metrics"]]
    assert external["metric"] == {
        "backend": "prometheus",
        "serverAddress": keda["serverAddress"],
        "query": keda["query"],
    }
    assert quantity(external["target"]["value"]) == Decimal(keda["threshold"])
    hpa = find(rendered["gpu-hpa"], "HorizontalPodAutoscaler")["spec"]
    [metric] = [m["external"] for m in hpa["metrics"]]
    assert metric["target"]["type"] == "AverageValue"  # desired = ceil(value / averageValue), as KEDA's
    assert quantity(metric["target"]["averageValue"]) == Decimal(keda["threshold"])
    assert adapter_query(NAMESPACE) == (metric["metric"]["name"], keda["query"])
    # Same bounds and behaviour for the three autoscalers.
    so = find(rendered["gpu"], "ScaledObject")["spec"]
    assert (so["minReplicaCount"], so["maxReplicaCount"]) == (hpa["minReplicas"], hpa["maxReplicas"])
    assert (isvc["minReplicas"], isvc["maxReplicas"]) == (hpa["minReplicas"], hpa["maxReplicas"])
    behavior = so["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior == hpa["behavior"] == isvc["autoScaling"]["behavior"]


def test_the_query_selects_this_namespace_and_these_pods(rendered: dict[str, list[Doc]]) -> None:
    """The pods' names as Kubernetes makes them: <Deployment>-<hash>-<id>, and KServe's predictor
    Deployment is <InferenceService>-predictor; nothing else in the namespace matches."""
    query = prometheus_trigger(find(rendered["gpu"], "ScaledObject"))["query"]
    matchers = dict(re.findall(r'(\w+)=~?"([^"]*)"', query))
    assert matchers["namespace"] == NAMESPACE
    assert query.startswith("sum(rsa_backlog_seconds{")
    pod = re.compile(matchers["pod"])
    deployment = find(rendered["gpu"], "Deployment")["metadata"]["name"]
    predictor = find(rendered["kserve"], "InferenceService")["metadata"]["name"] + "-predictor"
    for name in (deployment, predictor):
        assert pod.fullmatch(f"{name}-7d9f8c6b5-x2x4q")
    assert not pod.fullmatch("prometheus-server-7d9f8c6b5-x2x4q")


def test_one_autoscaler_per_workload(rendered: dict[str, list[Doc]]) -> None:
    for docs in rendered.values():
        autoscalers = [d for d in docs if d["kind"] in ("ScaledObject", "HorizontalPodAutoscaler")]
        assert len(autoscalers) <= 1
        for a in autoscalers:
            target = a["spec"]["scaleTargetRef"]
            assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
            assert find(docs, "Deployment")["metadata"]["name"] == target["name"]
            assert "replicas" not in find(docs, "Deployment")["spec"]  # the autoscaler owns the count


# -- the pods and the service ----------------------------------------------------------------------


def pod_specs(docs: list[Doc]) -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, str]]]:
    """(pod-level spec, container, pod annotations) of the overlay's serving container; for KServe the
    runtime's container with the InferenceService's predictor settings, as KServe merges them."""
    for d in docs:
        if d["kind"] == "Deployment":
            template = d["spec"]["template"]
            yield (
                template["spec"],
                template["spec"]["containers"][0],
                template["metadata"].get("annotations", {}),
            )
        elif d["kind"] == "ServingRuntime":
            predictor = find(docs, "InferenceService")["spec"]["predictor"]
            container = copy.deepcopy(d["spec"]["containers"][0])
            for key, value in predictor["model"].get("resources", {}).items():
                container.setdefault("resources", {}).setdefault(key, {}).update(value)
            yield predictor, container, d["spec"]["annotations"]


def settings_of(container: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The service's settings from the container's environment (a resourceFieldRef as its request)."""
    for name in list(os.environ):
        if name.startswith("RSA_") or name == "STORAGE_URI":
            monkeypatch.delenv(name)
    known = {f"RSA_{name.upper()}" for name in Settings.model_fields if name != "storage_uri"} | {
        "STORAGE_URI"
    }
    for env in container.get("env", []):
        assert env["name"] in known, f"{env['name']} is no setting of the service (app/core/config.py)"
        if "value" in env:
            value = env["value"]
        else:
            ref = env["valueFrom"]["resourceFieldRef"]
            assert ref["containerName"] == container["name"] and ref["resource"] == "requests.cpu"
            value = str(
                math.ceil(quantity(container["resources"]["requests"]["cpu"]) / quantity(ref["divisor"]))
            )
        monkeypatch.setenv(env["name"], value)
    return Settings()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pod_runs_the_service_as_it_expects(
    rendered: dict[str, list[Doc]], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.main import create_app

    routes = create_app().openapi()["paths"]
    [(pod, container, annotations)] = list(pod_specs(rendered[overlay]))
    settings = settings_of(container, monkeypatch)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    http, grpc = settings.port, settings.grpc_port
    assert set(ports.values()) == {http, grpc} and settings.host == "0.0.0.0"
    assert any("grpc" in name and port == grpc for name, port in ports.items())
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = container[kind]["httpGet"]
        assert ports.get(probe["port"], probe["port"]) == http, kind
        assert "get" in routes[probe["path"]], kind
    assert container["readinessProbe"]["httpGet"]["path"] in ("/readyz", "/v2/health/ready")
    assert container["livenessProbe"]["httpGet"]["path"] in ("/healthz", "/v2/health/live")
    # Out of rotation (readiness failed) before the drain delay ends and the server stops accepting.
    readiness = container["readinessProbe"]
    assert readiness["periodSeconds"] * readiness["failureThreshold"] < settings.drain_delay_s
    # The kubelet's SIGKILL comes after everything the service may still do after SIGTERM.
    assert pod["terminationGracePeriodSeconds"] >= settings.drain_delay_s + settings.graceful_shutdown_s + 5
    # Scraped where the metrics are.
    assert annotations["prometheus.io/scrape"] == "true" and int(annotations["prometheus.io/port"]) == http
    assert "get" in routes[annotations["prometheus.io/path"]]
    # Non-root (the image's uid), read-only root, nothing to escalate; a tmpfs for /tmp.
    security = {**pod.get("securityContext", {}), **container["securityContext"]}
    assert security["runAsNonRoot"] is True and security["runAsUser"] == IMAGE_UID
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert (
        security["capabilities"]["drop"] == ["ALL"] and security["seccompProfile"]["type"] == "RuntimeDefault"
    )
    assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}
    # ONNX Runtime's threads follow the CPU request; memory is bounded.
    assert settings.intra_op_threads == math.ceil(quantity(container["resources"]["requests"]["cpu"]))
    assert container["resources"]["limits"]["memory"] == container["resources"]["requests"]["memory"]
    gpus = container["resources"]["limits"].get("nvidia.com/gpu")
    tolerations = pod.get("tolerations", [])
    if overlay in GPU_OVERLAYS:
        assert int(gpus) == 1 and settings.device == "cuda"
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    else:
        assert gpus is None and tolerations == [] and settings.device == "cpu"
    # Spread over nodes and zones, without blocking scheduling.
    spread = pod["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert {c["whenUnsatisfiable"] for c in spread} == {"ScheduleAnyway"}


@pytest.mark.parametrize("overlay", ["gpu", "gpu-hpa", "cpu"])
def test_service_and_budget_select_the_pods(rendered: dict[str, list[Doc]], overlay: str) -> None:
    docs = rendered[overlay]
    deployment = find(docs, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    service, pdb = find(docs, "Service")["spec"], find(docs, "PodDisruptionBudget")["spec"]
    assert service["selector"].items() <= labels.items()
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    for constraint in deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]:
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
    container_ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["name"] for p in service["ports"]} == {"http", "grpc", "metrics"}
    assert {p["targetPort"] for p in service["ports"]} <= container_ports
    grpc = next(p for p in service["ports"] if p["name"] == "grpc")
    assert grpc["appProtocol"] == "kubernetes.io/h2c"
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["name"]: m for m in deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert mounts.keys() == volumes.keys()
    if overlay != "cpu":  # the model volume; the cpu overlay serves the model in the image
        mount = {"name": "models", "mountPath": "/models", "subPath": "model_repository", "readOnly": True}
        assert mounts["models"] == mount
        claim = volumes["models"]["persistentVolumeClaim"]["claimName"]
        assert find(docs, "PersistentVolumeClaim")["metadata"]["name"] == claim
        # The folder KServe's storageUri names on the same claim.
        uri = find(rendered["kserve"], "InferenceService")["spec"]["predictor"]["model"]["storageUri"]
        assert uri == f"pvc://{claim}/{mount['subPath']}"


def test_the_kserve_budget_selects_the_predictor_pods(rendered: dict[str, list[Doc]]) -> None:
    docs = rendered["kserve"]
    isvc = find(docs, "InferenceService")["metadata"]["name"]
    # KServe labels every predictor pod with serving.kserve.io/inferenceservice: <name>.
    kserve_labels = {"serving.kserve.io/inferenceservice": isvc}
    assert find(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == kserve_labels
    for constraint in find(docs, "InferenceService")["spec"]["predictor"]["topologySpreadConstraints"]:
        assert constraint["labelSelector"]["matchLabels"] == kserve_labels
