"""Compute the LaunchSpec once from a valid spec. Every target projects it; none recomputes it."""
from __future__ import annotations

import dataclasses
import math

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.core.findings import Finding, has_errors
from gpustack_k3.core.flags import render_args
from gpustack_k3.core.launch_types import LaunchSpec, RoleLaunch, SecretEnv, TopologyLaunch, Volume
from gpustack_k3.core.plan import Plan
from gpustack_k3.core.resolve import Resolved, resolve
from gpustack_k3.core.rules import Ctx, validate_resolved
from gpustack_k3.core.topology import role_views

# docs/sources.md#cold-start: ~10.6 min container -> serving on the seed's vLLM run; the budget never goes below it.
SEED_COLD_START_S = 636
BUDGET_MARGIN = 1.5
GRAPH_CAPTURE_S = {"vllm": 90, "sglang": 330}   # docs/sources.md#cold-start: 85-88 s (vLLM), ~5.5 min (SGLang)
COMPILE_S = 120                                  # docs/sources.md#cold-start: JIT units + profile/warm-up, rounded up


class Refused(Exception):
    """The spec has error findings; nothing may be rendered."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        super().__init__(f"{sum(f.severity == 'error' for f in findings)} error(s)")


def startup_budget_s(r: Resolved, p: Plan | None) -> int:
    """Weights / assumed bandwidth + compile + graph capture, x margin; never below the seed's cold start + margin."""
    if r.spec.startup.budgetSeconds:
        return r.spec.startup.budgetSeconds
    total_gib = r.model.weight_bytes_total_gib if r.model else 0.0
    load = total_gib / r.spec.startup.storageBandwidthGiBps
    graphs = 0 if r.spec.vllm.enforceEager else GRAPH_CAPTURE_S.get(r.engine.engine, 90)
    derived = (load + COMPILE_S + graphs) * BUDGET_MARGIN
    floor = SEED_COLD_START_S * BUDGET_MARGIN if r.spec.model.name == "kimi-k3" else 120
    return int(math.ceil(max(derived, floor) / 30.0) * 30)


def production_env(r: Resolved, budget_s: int) -> dict[str, str]:
    """What the launch spec adds to the spec's env (documented in README "Launch spec additions")."""
    env: dict[str, str] = {}
    cache = r.spec.storage.cachePath.rstrip("/")
    for var, sub in r.engine.cache_env.items():
        env[var] = f"{cache}/{sub}"
    if r.engine.engine == "vllm":
        env["VLLM_ENGINE_READY_TIMEOUT_S"] = str(budget_s)
    if r.engine.engine == "sglang" and r.dcp > 1 and r.spec.speculative.method == "dspark" \
            and r.trait("dspark_dcp_static_verify"):
        env["SGLANG_RAGGED_VERIFY_MODE"] = "static"   # overrides.py:356-362: the engine forces it; we say so
    return env


def build_launch(doc: DeploymentDocument, *, strict: bool = False) -> tuple[LaunchSpec, list[Finding], Plan | None]:
    r = resolve(doc)
    ctx = Ctx(r)
    findings = validate_resolved(r, strict=strict, ctx=ctx)
    if has_errors(findings):
        raise Refused(findings)
    p = ctx.plan   # computed once, for the rules; None when the catalog cannot plan this combination
    budget = startup_budget_s(r, p)
    env = production_env(r, budget)
    env.update(r.spec.env)          # the spec's explicit env wins (the seed's own READY_TIMEOUT stays 3600)
    st = r.spec.storage
    volumes = [
        Volume("model", r.model_path.rsplit("/", 1)[0] or "/models", st.model.kind, st.model.source or "", "model",
               read_only=True, size_gib=st.model.sizeGiB),
        Volume("compile-cache", st.cachePath, st.cache.kind, st.cache.source or "", "cache", size_gib=st.cache.sizeGiB),
        Volume("dshm", "/dev/shm", "emptyDir", "", "shm", size_gib=st.shmSizeGiB),
    ]
    launch = LaunchSpec(
        name=doc.metadata.name, engine=r.engine.engine, engine_version=r.version.key, image=r.image,
        command=list(r.command), arguments=render_args(r), env=dict(sorted(env.items())),
        secret_env=[SecretEnv(s.name, s.secretName, s.key) for s in r.spec.secretEnv],
        host=r.spec.serving.host or "0.0.0.0", port=r.port, health_path=r.engine.health_path,
        model_path=r.model_path, served_model_name=r.spec.model.servedModelName or doc.metadata.name,
        gpu_type=r.spec.hardware.gpuType, gpu_count=r.spec.hardware.gpuCount, gpu_resource=r.hardware.resource,
        shm_size_gib=st.shmSizeGiB, volumes=volumes, startup_budget_s=budget,
    )
    return launch, findings, p


def build_topology_launch(doc: DeploymentDocument, *, strict: bool = False
                          ) -> tuple[TopologyLaunch, list[Finding], dict[str, Plan | None]]:
    """Every role's launch (a roleless document: one serve role whose leader is :func:`build_launch`'s spec).
    Findings of a role's effective document carry the role's field prefix; refused when any role is."""
    roles: list[RoleLaunch] = []
    findings: list[Finding] = []
    plans: dict[str, Plan | None] = {}
    refused: list[Finding] = []
    for view in role_views(doc):
        try:
            launch, fs, plan = build_launch(view.document, strict=strict)
        except Refused as exc:
            refused.extend(_in_role(f, view.field_prefix) for f in exc.findings)
            continue
        findings.extend(_in_role(f, view.field_prefix) for f in fs)
        plans[view.role.name] = plan
        roles.append(RoleLaunch(
            role=view.role.name, kind=view.role.role, field_prefix=view.field_prefix,
            instances=view.role.instances, pods_per_instance=view.pods, gpus_per_pod=view.role.gpusPerPod,
            dp=view.dp, dp_local=view.dp_local, load_balancing=view.role.loadBalancing, leader=launch,
            worker=launch if view.pods > 1 else None, per_pod=[], env_from_pod={}))
    if refused:
        raise Refused([*refused, *findings])
    connector = doc.spec.disaggregation.connector if doc.spec.disaggregation and doc.spec.roles else ""
    return TopologyLaunch(doc.metadata.name, roles, connector), findings, plans


def _in_role(f: Finding, prefix: str) -> Finding:
    """A finding of a role's effective document, pointed at the role (spec.memory -> spec.roles[i].memory)."""
    if prefix == "spec" or not f.field.startswith("spec."):
        return f
    return dataclasses.replace(f, field=prefix + f.field[len("spec"):])
