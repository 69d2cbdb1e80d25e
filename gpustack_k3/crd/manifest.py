"""The ``K3Deployment`` CustomResourceDefinition, generated from ``DeploymentSpec`` and the catalog.

``crd_manifest()`` is pure (model + catalog in, dict out); ``crd_yaml()`` adds the generated-file
header. ``gpustack-k3 crd`` prints it; the chart's ``crds/`` copy and ``manifests/install.yaml``
are regenerated from it by ``gpustack-k3 manifests`` and drift-checked by the tests.
"""
from __future__ import annotations

import copy
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.spec import DNS_LABEL, DeploymentSpec, Metadata
from gpustack_k3.api.v1alpha1.status import K3DeploymentStatus
from gpustack_k3.catalog import load_catalog
from gpustack_k3.crd.cel import (
    CEL_STRING_MAX_LENGTH,
    Generated,
    generate,
    metadata_name_rule,
)
from gpustack_k3.crd.schema import structural_from_model, to_jsonschema

REGENERATE = "python3 tools/generate.py"     # the command that rewrites every generated file of the repository

HEADER = (f"# GENERATED FILE - do not edit. Source: gpustack_k3/api/v1alpha1 (schema, status, names), gpustack_k3/core/rules\n"
          f"# and gpustack_k3/catalog/data (CEL rules). Regenerate with `{REGENERATE}`; `gpustack-k3 crd` prints it.\n")


def status_schema() -> dict[str, Any]:
    """The structural schema of ``status``, generated from ``K3DeploymentStatus``."""
    schema = structural_from_model(K3DeploymentStatus)
    schema["description"] = ("Observed state, written by the operator through the status subresource. "
                             "Generated from gpustack_k3.api.v1alpha1.status.K3DeploymentStatus.")
    return schema


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
    schema = structural_from_model(DeploymentSpec)
    if gen is None:
        gen = generate(load_catalog(), DeploymentSpec, schema)
    _bound_strings(schema, gen.refs)
    schema["description"] = ("Deployment of one model on one engine; unset fields take the engine version's "
                             "defaults (gpustack-k3 explain). Generated from gpustack_k3.api.v1alpha1.spec.DeploymentSpec.")
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
            "status": status_schema(),
        },
        "x-kubernetes-validations": [name_rule().validation()],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": api.CRD_NAME, "labels": {api.LABEL_APP_NAME: api.PRODUCT,
                                                      api.LABEL_APP_COMPONENT: "crd"}},
        "spec": {
            "group": api.GROUP,
            "names": {"kind": api.KIND, "listKind": api.LIST_KIND, "plural": api.PLURAL, "singular": api.SINGULAR,
                      "shortNames": list(api.SHORT_NAMES), "categories": list(api.CATEGORIES)},
            "scope": api.SCOPE,
            "versions": [{
                "name": api.VERSION, "served": True, "storage": True,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [dict(c) for c in api.PRINTER_COLUMNS],
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
    return to_jsonschema(copy.deepcopy(spec_schema()), closed=closed)
