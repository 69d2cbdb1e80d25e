"""Run the spec and args rules over a resolved document. Pure: spec + catalog in, findings out."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, Role
from gpustack_k3.core.findings import Finding, sort_findings
from gpustack_k3.core.plan import Plan, PlanUnavailable, plan
from gpustack_k3.core.resolve import Resolved, resolve
from gpustack_k3.core.rules.registry import RULES, of_family
from gpustack_k3.core.topology import Topology, document_topology, role_views

CATALOG_RULE = "unknown-catalog-entry"
_UNSET = object()


class Ctx:
    """Per-validation memo: the plan is computed once and shared by every rule that needs it.

    Only a planner *input* error (``PlanUnavailable``: the catalog has no figures for this combination) is
    caught; it leaves ``plan`` None and ``plan_error`` set, which rule ``plan-unavailable`` reports. Anything
    else the planner raises is a bug and propagates: swallowing it would silently switch off every memory rule.
    """

    def __init__(self, r: Resolved, plan: Plan | None = None, argv_refusals: Sequence[Any] | None = None) -> None:
        """``plan``: one the caller already computed for ``r`` (then it is not computed again).
        ``argv_refusals``: when the document was read from an engine command line (check-args, check-pd, plan
        --engine), what the engine version's parser refuses in it (core.argv ``Refusal``s; rule argv-refused reports
        them); given (even empty), the document is a command line's, not one a user wrote (``from_argv``): a spelling
        of a CLI option is read as typed there, while a document must name the catalog's keys as the CRD does."""
        self.r = r
        self._plan: object = plan if plan is not None else _UNSET
        self.plan_error: str | None = None
        self.from_argv = argv_refusals is not None
        self.argv_refusals = list(argv_refusals or ())

    @property
    def plan(self) -> Plan | None:
        if self._plan is _UNSET:
            try:
                self._plan = plan(self.r)
            except PlanUnavailable as exc:
                self._plan, self.plan_error = None, str(exc)
        return self._plan  # type: ignore[return-value]


def validate_resolved(r: Resolved, *, strict: bool = False, ctx: Ctx | None = None) -> list[Finding]:
    """Findings for a resolved spec. Pass ``ctx`` to keep the plan the rules computed (build_launch does)."""
    ctx = ctx or Ctx(r)
    catalog = RULES[CATALOG_RULE]
    findings = list(catalog.findings(catalog.check(r, ctx)))
    if findings:   # nothing else can be checked without the catalog entries
        return findings
    engine, version = r.engine.engine, r.version.key
    for rule in of_family("spec", "args"):
        if rule.id == CATALOG_RULE or not rule.applies(engine, r.version.traits):
            continue
        findings.extend(rule.findings(rule.check(r, ctx), strict=strict, engine=engine, version=version))
    return sort_findings(findings)


# a role's own fields (api/v1alpha1/spec.py Role): a finding of one of them points at the role, any other at the
# shared field the role inherits (a role has no spec.roles[i].engine or .model); hardware.gpuCount is the role's
# gpusPerPod (core/topology.py effective_document)
_ROLE_FIELDS = frozenset(Role.model_fields)


def in_role(f: Finding, prefix: str) -> Finding:
    """A finding of a role's effective document, pointed at the role where the role has the field (spec.memory ->
    spec.roles[i].memory, spec.hardware.gpuCount -> spec.roles[i].gpusPerPod); a shared field stays shared. A side of
    a command-line pair (``prefill``/``decode``, check-pd) owns every field of its line."""
    if prefix == "spec" or not f.field.startswith("spec."):
        return f
    rest = f.field[len("spec."):]
    if not prefix.startswith("spec.roles["):     # a side of a command-line pair (check-pd: prefill/decode): all its own
        return f.replace(field=prefix + f.field[len("spec"):])
    if rest == "hardware.gpuCount":
        return f.replace(field=f"{prefix}.gpusPerPod")
    if re.split(r"[.\[]", rest, maxsplit=1)[0] not in _ROLE_FIELDS:
        return f
    return f.replace(field=prefix + f.field[len("spec"):])


def validate_topology(t: Topology, *, strict: bool = False) -> list[Finding]:
    """The topology family over every role (rules apply by the first role's engine version: roles share it)."""
    r = t.roles[0].resolved
    if r.version is None:
        return []
    engine, version = r.engine.engine, r.version.key
    out: list[Finding] = []
    for rule in of_family("topology"):
        if rule.applies(engine, r.version.traits):
            out.extend(rule.findings(rule.check(t), strict=strict, engine=engine, version=version))
    return sort_findings(out)


def validate(doc: DeploymentDocument, *, strict: bool = False, arch: Any = None) -> list[Finding]:
    """Every role's effective document through the spec and args rules (findings pointed at the role), then the
    topology rules across the roles. A roleless document is its own serve role. ``arch``: the model's architecture
    figures from its config.json (core.model_config.ModelArch), when the caller read one."""
    findings: list[Finding] = []
    views = role_views(doc)
    resolved = [resolve(view.document, arch=arch) for view in views]
    for view, r in zip(views, resolved):
        findings.extend(in_role(f, view.field_prefix) for f in validate_resolved(r, strict=strict))
    if any(f.rule == CATALOG_RULE for f in findings):
        return sort_findings(findings)
    findings.extend(validate_topology(document_topology(doc, views, resolved), strict=strict))
    return sort_findings(_dedupe(findings))


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for f in findings:
        key = (f.rule, f.field, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
