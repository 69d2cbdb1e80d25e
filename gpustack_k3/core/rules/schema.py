"""The schema family: a document the spec model itself refuses (types, enums, ranges and formats declared on the
fields of ``api/v1alpha1/spec.py``). The CLI reports it as unusable input (exit 2, naming the field); the operator,
which must report every resource it reads, reports it as findings of rule ``spec.schema``."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.core.findings import Finding
from gpustack_k3.core.rules.registry import RULES, rule


def field_path(loc: Sequence[Any]) -> str:
    """A pydantic error location as a dotted document path (``spec.extraArgs[2]``)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@rule("spec.schema", family="schema", severity="error", engines=[ENGINE_VLLM, ENGINE_SGLANG], field="spec",
      title="The document does not match the K3Deployment schema",
      why="A field has the wrong type, a value outside its range or format, or the field does not exist; nothing "
          "else can be checked until the document parses.",
      fix="Correct the field as the message says (`gpustack-k3 crd` prints the schema with every bound).",
      source="gpustack_k3/api/v1alpha1/spec.py (DeploymentDocument: field types, bounds and formats)",
      no_cel="it is the CRD's structural OpenAPI schema itself (types, enums, minimum/maximum, patterns), which the "
             "API server enforces before any CEL rule")
def check_spec_schema(doc: Any):
    try:
        DeploymentDocument.model_validate(doc)
    except ValidationError as e:
        for err in e.errors():
            yield field_path(err.get("loc") or ()) or "spec", err.get("msg", "invalid")


def schema_findings(doc: Any) -> list[Finding]:
    """The ``spec.schema`` findings of a raw document (empty when the document parses)."""
    r = RULES["spec.schema"]
    return list(r.findings(r.check(doc)))
