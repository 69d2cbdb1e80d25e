"""The ``K3Deployment`` CustomResourceDefinition, generated from ``DeploymentSpec`` and the catalog.

``crd_manifest()`` is pure (model + catalog in, dict out); ``crd_yaml()`` adds the generated-file
header. ``gpustack-k3 crd`` prints it; the chart's ``crds/`` copy and ``manifests/install.yaml``
are regenerated from it by ``gpustack-k3 manifests`` and drift-checked by the tests.
"""
from __future__ import annotations

import copy
from typing import Any

from gpustack_k3.api.spec import API_GROUP, DNS_LABEL, KIND, DeploymentSpec, Metadata
from gpustack_k3.crd.cel import CEL_STRING_MAX_LENGTH, Generated, generate, metadata_name_rule
from gpustack_k3.crd.schema import structural_from_model

VERSION = "v1alpha1"
PLURAL = "k3deployments"
SINGULAR = "k3deployment"
SHORT_NAMES = ["k3dep"]
CATEGORIES = ["gpustack"]
CRD_NAME = f"{PLURAL}.{API_GROUP}"
REGENERATE = "gpustack-k3 manifests"     # the command that rewrites every generated file

HEADER = (f"# GENERATED FILE - do not edit. Source: gpustack_k3/api/spec.py (schema) and gpustack_k3/catalog/data\n"
          f"# (CEL rules). Regenerate with `{REGENERATE}`; `gpustack-k3 crd` prints it.\n")


def _status_schema() -> dict[str, Any]:
    """What the operator writes (gpustack_k3/operator/decide.py); open where its shape may grow."""
    nstr = {"type": "string", "nullable": True}
    nnum = {"type": "number", "nullable": True}
    condition = {
        "type": "object",
        "description": "metav1.Condition: Valid, Rendered, Scheduled, Ready, Warm.",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "maxLength": 1024},
            "message": {"type": "string", "maxLength": 32768},
        },
    }
    return {
        "type": "object",
        "description": "Observed state, written by the operator through the status subresource.",
        "properties": {
            "phase": {"type": "string", "description": "Pending, Invalid, Deploying, Starting, Ready, Warm, Degraded or Failed."},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "conditions": {"type": "array", "items": condition,
                           "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
            "coldStart": {
                "type": "object",
                "description": ("Cold-start progress from the engine log (gpustack-k3 coldstart): attempt, "
                                "compileCacheWarm, phases, current, totalSeconds, failedPhase, reason."),
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "attempt": {"type": "integer"},
                    "compileCacheWarm": {"type": "boolean", "nullable": True,
                                         "description": "True when compiled graphs were loaded from the cache."},
                    "current": nstr,
                    "failedPhase": nstr,
                    "reason": nstr,
                    "pod": nstr,
                    "engine": nstr,
                    "totalSeconds": {**nnum, "description": "Seconds from container start to the engine serving."},
                    "phases": {"type": "array", "items": {
                        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"name": {"type": "string"}, "start": nstr, "end": nstr, "seconds": nnum}}},
                    "warmup": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                               "description": ("The post-Ready warm-up (spec.startup.warmup) sent with the probe's "
                                               "code: ok, seconds, completed, errors, ttftMsP50, ttftMsMax, "
                                               "tpotMsP50, reason.")},
                },
            },
            "plan": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                     "description": "Memory/KV plan summary (gpustack-k3 plan)."},
            "warnings": {"type": "array", "items": {"type": "string"}},
            "endpoint": {"type": "string", "description": "In-cluster URL of the OpenAI-compatible API."},
        },
    }


def _bound_strings(schema: dict[str, Any], paths: set[str]) -> None:
    """Give every string a CEL rule reads a maxLength (API server CEL cost estimate)."""
    for path in paths:
        node = schema
        for part in path.split("."):
            node = (node.get("properties") or {}).get(part)
            if node is None:
                break
        if node is not None and node.get("type") == "string" and "maxLength" not in node:
            node["maxLength"] = CEL_STRING_MAX_LENGTH


def spec_schema(gen: Generated | None = None) -> dict[str, Any]:
    """The structural schema of ``spec`` with its CEL rules."""
    from gpustack_k3.catalog import load_catalog

    schema = structural_from_model(DeploymentSpec)
    if gen is None:
        gen = generate(load_catalog(), DeploymentSpec, schema)
    _bound_strings(schema, gen.refs)
    schema["description"] = ("Deployment of one model on one engine; unset fields take the engine version's "
                             "defaults (gpustack-k3 explain). Generated from gpustack_k3.api.spec.DeploymentSpec.")
    schema["x-kubernetes-validations"] = [r.validation() for r in gen.rules if r.scope == "spec"]
    return schema


def name_rule():
    md = Metadata.model_fields["name"]
    max_len = next(m.max_length for m in md.metadata if hasattr(m, "max_length") and m.max_length)
    return metadata_name_rule(DNS_LABEL, max_len)


def crd_manifest() -> dict[str, Any]:
    schema = {
        "type": "object",
        "description": "Kimi-K3 (or another catalog model) served by vLLM or SGLang, validated against the rule catalog.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema(),
            "status": _status_schema(),
        },
        "x-kubernetes-validations": [name_rule().validation()],
    }
    columns = [
        {"name": "Engine", "type": "string", "jsonPath": ".spec.engine.name"},
        {"name": "Version", "type": "string", "jsonPath": ".spec.engine.version", "priority": 1},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "ColdStart", "type": "number", "jsonPath": ".status.coldStart.totalSeconds",
         "description": "Cold-start seconds (container start to serving)"},
        {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "labels": {"app.kubernetes.io/name": "gpustack-k3",
                                                  "app.kubernetes.io/component": "crd"}},
        "spec": {
            "group": API_GROUP,
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": SINGULAR,
                      "shortNames": list(SHORT_NAMES), "categories": list(CATEGORIES)},
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
            }],
        },
    }


def dump_yaml(obj: Any) -> str:
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(d: yaml.SafeDumper, s: str):  # long CEL rules as folded-free literal blocks stay readable
        return d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)

    _Dumper.add_representer(str, _str)
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=100000, allow_unicode=True)


def crd_yaml() -> str:
    return HEADER + dump_yaml(crd_manifest())


def spec_jsonschema(*, closed: bool) -> dict[str, Any]:
    """``spec`` as JSON Schema draft-07 (``jsonschema`` in tests, the chart's values schema)."""
    from gpustack_k3.crd.schema import to_jsonschema

    return to_jsonschema(copy.deepcopy(spec_schema()), closed=closed)
