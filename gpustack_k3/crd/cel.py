"""CEL ``x-kubernetes-validations`` assembled from the rule registry, so the API server refuses what
``gpustack_k3.core.rules.validate`` refuses, with no operator running.

Each hard error of the spec and args families carries its CEL translation (``cel=`` / ``cel_rules=``) or the
written reason it has none (``no_cel=``) in its one definition (``gpustack_k3/core/rules``). Applicability,
defaults and value lists come from the catalog data (``when`` traits -> version lists, version ``defaults``,
``kv_cache_dtypes``, ``dspark_dcp_backends``, model ``max_context``, hardware ``gpus_per_node``), so adding a
version or a model to the catalog changes the generated rules. Rules are attached to ``spec`` (``self`` = spec)
except the root rule on ``metadata.name``. Single-field ranges are bounds of the spec model (minimum/maximum in
the structural schema), not CEL.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpustack_k3.catalog.loader import Catalog
from gpustack_k3.core.rules import Rule
from gpustack_k3.core.rules.cel import Builder, CelRule, conj, lit
from gpustack_k3.core.rules.registry import of_family

__all__ = ["CEL_STRING_MAX_LENGTH", "NOT_IN_CEL", "Builder", "CelRule", "Generated", "generate", "metadata_name_rule"]

# Strings a CEL rule reads get this maxLength in the CRD (when the model sets none) so that the API
# server's static cost estimate stays bounded; far above any real value.
CEL_STRING_MAX_LENGTH = 4096

# Hard errors of the spec the API server cannot refuse, and why (each is still enforced by the operator's
# validation, which marks the resource Invalid with the same finding). Derived from the registry.
NOT_IN_CEL: dict[str, str] = {r.id: r.no_cel for r in of_family("spec", "args") if r.hard and r.no_cel}


def _spec_field_path(schema: dict[str, Any], dotted: str) -> str | None:
    """The longest prefix of ``spec.a.b.c`` that is a declared property, as ``.a.b``."""
    parts = dotted.split(".")
    if parts[0] != "spec":
        return None
    node, out = schema, []
    for part in parts[1:]:
        props = node.get("properties") or {}
        if part not in props:
            break
        node = props[part]
        out.append(part)
    return "." + ".".join(out) if out else None


def _message(entry: Rule, field_name: str) -> str:
    return f"{field_name}: {entry.title}. Fix: {entry.fix} [rule {entry.id}]"


def _per_engine(bad: dict[str, str]) -> str:
    parts = [f"(self.engine.name == {lit(e)} && {expr})" for e, expr in bad.items()]
    return "!(" + " || ".join(parts) + ")"


@dataclass
class Generated:
    rules: list[CelRule]
    refs: set[str]                # spec paths the rules read (they get a maxLength when strings)


def generate(cat: Catalog, spec_model: type, spec_schema: dict[str, Any]) -> Generated:
    builders = {e: Builder(cat, spec_model, e) for e in cat.engines}
    rules: list[CelRule] = []
    for entry in of_family("spec", "args"):
        if entry.severity != "error" or entry.no_cel:
            continue
        if entry.cel_rules is not None:
            rules += entry.cel_rules(cat, builders, spec_model, entry)
            continue
        bad = {}
        for e in entry.engines:
            b = builders[e]
            vers = b.versions_where(entry)
            c = entry.cel(b)
            if c is None or not vers:
                continue
            bad[e] = conj(b.known(), b.version_in(vers), c)
        if not bad:
            continue
        rules.append(CelRule(entry.id, _per_engine(bad), _message(entry, entry.field),
                             _spec_field_path(spec_schema, entry.field)))
    # The spec rules read one engine on one node: a document with roles is checked per role (each role's
    # effective document) by the CLI and the operator, which CEL over the shared fields cannot express.
    for r in rules:
        r.expression = f"({ROLES_PRESENT}) || ({r.expression})"
    refs = set().union(*(b.refs for b in builders.values()))
    return Generated(rules, refs)


ROLES_PRESENT = "has(self.roles) && size(self.roles) > 0"


def metadata_name_rule(pattern: str, max_length: int) -> CelRule:
    """Root rule: the resource name becomes a label value and a DNS name of the rendered objects."""
    return CelRule(
        "metadata-name",
        f"size(self.metadata.name) <= {max_length} && self.metadata.name.matches({lit(pattern)})",
        f"metadata.name: must be a DNS label of at most {max_length} characters (lower-case letters, digits, '-'). "
        "Fix: rename the resource, e.g. kimi-k3-vllm",
        None, scope="root")
