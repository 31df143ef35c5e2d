"""Schemas for the Kubernetes manifests of deploy/kubernetes/, as strict as this machine allows without an
API server: built-in kinds through kubernetes-validate's strict schemas, the CRD kinds (KServe's
InferenceService and ServingRuntime, KEDA's ScaledObject) through their CRDs' own openAPIV3Schema,
vendored verbatim in deploy/kubernetes/schemas/ and made strict here.

The strictness rule for a CRD schema is the API server's: a field the schema does not declare is pruned
from a structural schema (and with kubectl's default `--validate=strict`, server-side field validation
turns that into an error), except below `x-kubernetes-preserve-unknown-fields: true`. So every object
node that lists `properties` and says nothing of other fields gets `additionalProperties: false`; a node
that keeps unknown fields, or declares `additionalProperties` itself (a map), is left as it is. The root
`metadata`, which a CRD leaves as a bare `type: object`, is checked against Kubernetes' own ObjectMeta
(strict), as the API server does. `x-kubernetes-list-type` is enforced too: items of a `set` are
unique, items of a `map` unique by their `x-kubernetes-list-map-keys`. CEL rules
(`x-kubernetes-validations`) are not evaluated here; the tests check the one the vendored CRDs carry.

Regenerate a vendored schema from an upstream CRD file (see deploy/kubernetes/schemas/README.md):

    python -m tests.deploy.kube_schemas CRD.yaml --repository kserve/kserve --ref v0.20.0 \\
        --commit <sha> --path config/crd/full/serving.kserve.io_inferenceservices.yaml
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "deploy" / "kubernetes" / "schemas"
# The Kubernetes versions every built-in object is checked against: kubectl's here (1.32) and the newest
# that kubernetes-validate ships schemas for.
KUBERNETES_VERSIONS = ("1.32", "1.37")
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def _definitions(version: str) -> dict[str, Any]:
    """kubernetes-validate's strict definitions file of a version (JSON Schema 2020-12, with ObjectMeta)."""
    [full] = {v for v in kubernetes_validate.utils.all_versions() if v.startswith(f"{version}.")}
    return dict(schema_contents(f"kubernetes-json-schema/v{full}-local-strict/_definitions.json", version))


def strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a CRD's openAPIV3Schema that refuses unknown fields where the API server would."""
    out = copy.deepcopy(dict(schema))

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            keeps_unknown = node.get("x-kubernetes-preserve-unknown-fields") is True
            if "properties" in node and "additionalProperties" not in node and not keeps_unknown:
                node["additionalProperties"] = False
            for key, child in node.items():
                if key == "properties":
                    for prop in child.values():
                        visit(prop)
                elif key != "enum" and key != "default":
                    visit(child)
        elif isinstance(node, list):
            for child in node:
                visit(child)

    visit(out)
    return out


def _list_type(validator: Any, list_type: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    """`x-kubernetes-list-type` as the API server enforces it: set items unique, map items unique by key."""
    if not isinstance(instance, list):
        return
    if list_type == "set":
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                yield jsonschema.ValidationError(f"duplicate item {item!r} in a list-type set")
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen_keys: set[tuple[str, ...]] = set()
        for item in instance:
            if isinstance(item, dict):
                key = tuple(json.dumps(item.get(k)) for k in keys)
                if key in seen_keys:
                    yield jsonschema.ValidationError(
                        f"duplicate entry {dict(zip(keys, key, strict=True))} in a list-type map"
                    )
                seen_keys.add(key)


CrdValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"x-kubernetes-list-type": _list_type}
)


class VendoredCrd:
    """One vendored CRD version: its group/version/kind, where it came from, and its schema."""

    def __init__(self, path: Path) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        self.path = path
        self.api_version: str = data["apiVersion"]
        self.kind: str = data["kind"]
        self.source: dict[str, str] = data["source"]
        self.schema: dict[str, Any] = data["openAPIV3Schema"]

    def validator(self, version: str = KUBERNETES_VERSIONS[-1]) -> Any:
        schema = strict(self.schema)
        definitions = _definitions(version)
        schema["properties"]["metadata"] = {"$ref": f"{definitions['$id']}#/$defs/{OBJECT_META}"}
        # The object is exactly this kind of this group version.
        schema["properties"]["apiVersion"] = {"const": self.api_version}
        schema["properties"]["kind"] = {"const": self.kind}
        schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
        registry: Registry[Any] = Resource.from_contents(definitions) @ Registry()
        return CrdValidator(schema, registry=registry)


@cache
def vendored_crds() -> dict[tuple[str, str], VendoredCrd]:
    """(apiVersion, kind) -> the vendored CRD schema."""
    crds = [VendoredCrd(p) for p in sorted(SCHEMA_DIR.glob("*.json"))]
    return {(c.api_version, c.kind): c for c in crds}


@cache
def _crd_validator(api_version: str, kind: str) -> Any:
    return vendored_crds()[(api_version, kind)].validator()


def errors(doc: Mapping[str, Any]) -> list[str]:
    """Every schema error of one object (empty: valid): a vendored CRD's strict schema for the CRD kinds,
    kubernetes-validate's strict schema of every version in KUBERNETES_VERSIONS for the others."""
    key = (doc.get("apiVersion", ""), doc.get("kind", ""))
    if key in vendored_crds():
        found = sorted(_crd_validator(*key).iter_errors(doc), key=lambda e: list(e.absolute_path))
        return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found]
    problems = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(dict(doc), version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(map(str, e.path)) or "<root>"
            problems.append(f"Kubernetes {version}: {path}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            problems.append(f"Kubernetes {version}: {e.message} (and no vendored CRD schema)")
    return problems


# -- vendoring -------------------------------------------------------------------------------------


def extract(crd: Mapping[str, Any], source: dict[str, str]) -> list[dict[str, Any]]:
    """The served versions of a CRD, each as the vendored file holds it."""
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    return [
        {
            "apiVersion": f"{group}/{v['name']}",
            "kind": kind,
            "source": source,
            "openAPIV3Schema": v["schema"]["openAPIV3Schema"],
        }
        for v in crd["spec"]["versions"]
        if v.get("served")
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.deploy.kube_schemas", description=extract.__doc__)
    ap.add_argument("crd", type=Path, help="an upstream CustomResourceDefinition YAML file")
    ap.add_argument("--repository", required=True, help="owner/name on GitHub")
    ap.add_argument("--ref", required=True, help="the release tag")
    ap.add_argument("--commit", required=True, help="the tag's commit")
    ap.add_argument("--path", required=True, help="the file's path in the repository")
    args = ap.parse_args(argv)
    crd = yaml.load(
        args.crd.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    )
    source = {"repository": args.repository, "ref": args.ref, "commit": args.commit, "path": args.path}
    for entry in extract(crd, source):
        group, version = entry["apiVersion"].split("/")
        out = SCHEMA_DIR / f"{group}_{version}_{entry['kind'].lower()}.json"
        out.write_text(json.dumps(entry, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"{out.relative_to(ROOT)}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
