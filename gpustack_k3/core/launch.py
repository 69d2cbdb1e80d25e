"""Compute the LaunchSpec once from a valid spec. Every target projects it; none recomputes it."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.errors import Refused  # the spec's error findings: nothing may be rendered
from gpustack_k3.core.findings import Finding, has_errors
from gpustack_k3.core.flags import compact_json, render_args
from gpustack_k3.core.launch_topology_types import PerPodArg, RoleLaunch, TopologyLaunch
from gpustack_k3.core.launch_env import production_env
from gpustack_k3.core.launch_types import Arg, LaunchSpec, SecretEnv, Volume
from gpustack_k3.core.plan import Plan
from gpustack_k3.core.resolve import Resolved, resolve
from gpustack_k3.core.rules import Ctx, in_role, validate_resolved, validate_topology
from gpustack_k3.core.topology import TopoRole, document_topology, role_views

# docs/sources.md#cold-start: ~10.6 min container -> serving on the seed's vLLM run; the budget never goes below it.
SEED_COLD_START_S = 636
BUDGET_MARGIN = 1.5
GRAPH_CAPTURE_S = {ENGINE_VLLM: 90, ENGINE_SGLANG: 330}   # docs/sources.md#cold-start: 85-88 s (vLLM), ~5.5 min (SGLang)
COMPILE_S = 120                                  # docs/sources.md#cold-start: JIT units + profile/warm-up, rounded up


def startup_budget_s(r: Resolved, p: Plan | None) -> int:
    """Weights / assumed bandwidth + compile + graph capture, x margin; never below the seed's cold start + margin."""
    if r.spec.startup.budgetSeconds:
        return r.spec.startup.budgetSeconds
    total_gib = (r.model.weight_bytes_total_gib or 0.0) if r.model else 0.0
    load = total_gib / r.spec.startup.storageBandwidthGiBps
    graphs = 0 if r.spec.vllm.enforceEager else GRAPH_CAPTURE_S.get(r.engine.engine, 90)
    derived = (load + COMPILE_S + graphs) * BUDGET_MARGIN
    floor = SEED_COLD_START_S * BUDGET_MARGIN if r.spec.model.name == "kimi-k3" else 120
    return int(math.ceil(max(derived, floor) / 30.0) * 30)


def build_launch(doc: DeploymentDocument, *, strict: bool = False, arch: Any = None
                 ) -> tuple[LaunchSpec, list[Finding], Plan | None]:
    """``arch``: the model's config.json figures (core.model_config.ModelArch) where the caller read one: it decides
    over a catalog entry of the same name (limits, the plan), as for validate and check-args."""
    return launch_of(resolve(doc, arch=arch), strict=strict)


def launch_of(r: Resolved, *, strict: bool = False) -> tuple[LaunchSpec, list[Finding], Plan | None]:
    """:func:`build_launch` of a document resolved already (``r.doc``)."""
    doc = r.doc
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


def build_topology_launch(doc: DeploymentDocument, *, strict: bool = False, arch: Any = None
                          ) -> tuple[TopologyLaunch, list[Finding], dict[str, Plan | None]]:
    """Every role's launch (a roleless document: one serve role whose leader is exactly :func:`build_launch`'s
    spec). Findings of a role's effective document carry the role's field prefix; the topology rules run across
    the roles; refused when any finding is an error."""
    roles: list[RoleLaunch] = []
    findings: list[Finding] = []
    plans: dict[str, Plan | None] = {}
    refused: list[Finding] = []
    launches: dict[str, LaunchSpec] = {}
    views = role_views(doc)
    resolved = [resolve(view.document, arch=arch) for view in views]
    for view, r in zip(views, resolved):
        try:
            launch, fs, plan = launch_of(r, strict=strict)
        except Refused as exc:
            refused.extend(in_role(f, view.field_prefix) for f in exc.findings)
            continue
        findings.extend(in_role(f, view.field_prefix) for f in fs)
        plans[view.role.name] = plan
        launches[view.role.name] = launch
    if refused:
        raise Refused([*refused, *findings])
    topo = document_topology(doc, views, resolved)
    findings.extend(validate_topology(topo, strict=strict))
    if has_errors(findings):
        raise Refused(findings)
    for view, t in zip(views, topo.roles):
        roles.append(role_launch(t, launches[view.role.name], doc.spec.disaggregation, doc.spec.network))
    connector = ""
    if doc.spec.disaggregation and doc.spec.roles:   # vLLM: the KV connector; SGLang: the transfer backend
        connector = next((t.transfer_backend for t in topo.roles if t.transfer_backend), None) \
            or doc.spec.disaggregation.connector
    return TopologyLaunch(doc.metadata.name, roles, connector), findings, plans


# spec.network.ucx -> UCX's own variables, which NIXL's UCX backend reads (every pod of a topology)
UCX_ENV = {"transports": "UCX_TLS", "netDevices": "UCX_NET_DEVICES"}


def network_env(network) -> dict[str, str]:
    """The environment ``spec.network`` sets in every engine of a topology (``spec.network.ucx``; it wins over a
    ``spec.env`` entry of the same name)."""
    ucx = network.ucx if network is not None else None
    return {var: getattr(ucx, f) for f, var in UCX_ENV.items() if ucx is not None and getattr(ucx, f)}


def role_launch(t: TopoRole, launch: LaunchSpec, disaggregation, network=None) -> RoleLaunch:
    """One role's leader and worker launch specs: the single-engine arguments plus the role's topology flags
    (engine catalog ``topology`` section), per-pod arguments, the P/D env and ``spec.network``'s env."""
    topo = t.resolved.engine.topology
    leader_extra: list[Arg] = []
    worker_extra: list[Arg] = []
    per_pod: list[PerPodArg] = []
    env_from_pod: dict[str, str] = {}
    env = dict(launch.env)
    if topo and t.resolved.engine.engine == ENGINE_VLLM:
        common: list[Arg] = []
        if t.pods > 1 and launch.arg("parallel.dpLocal") is None:
            common.append(Arg("parallel.dpLocal", [t.resolved.engine.flag_of("parallel.dpLocal"), str(t.dp_local)]))
        if t.hybrid_lb:
            common.append(Arg("loadBalancing", [topo["hybrid_lb_flag"]]))
        elif t.external_lb:
            common.append(Arg("loadBalancing", [topo["external_lb_flag"]]))
        if t.pods > 1:
            common.append(Arg("podsPerInstance", [topo["rpc_port_flag"], str(topo["rpc_port"])]))
            per_pod.append(PerPodArg(topo["address_flag"], "leader_address", "podsPerInstance"))
            if t.external_lb:
                per_pod.append(PerPodArg(topo["rank_flag"], "start_rank", "parallel.dpLocal"))
            else:
                per_pod.append(PerPodArg(topo["start_rank_flag"], "start_rank", "parallel.dpLocal",
                                         on="all" if t.hybrid_lb else "workers"))
        if t.kv_transfer is not None:
            common.append(Arg("disaggregation", [topo["kv_transfer_flag"], compact_json(t.kv_transfer)]))
            env[topo["side_channel_port_env"]] = str(disaggregation.sideChannelPort)
            env_from_pod[topo["side_channel_host_env"]] = "status.podIP"
        leader_extra = list(common)
        if t.api_server_count is not None:
            leader_extra.append(Arg("apiServerCount", [topo["api_server_count_flag"], str(t.api_server_count)]))
        worker_extra = list(common)
        if t.headless:
            worker_extra.append(Arg("loadBalancing", [topo["headless_flag"]]))
    ports: dict[str, int] = {}
    if topo and t.resolved.engine.engine == ENGINE_SGLANG:
        leader_extra, per_pod, ports = sglang_role_args(t, topo)
        worker_extra = list(leader_extra)
    env.update(network_env(network))
    env = dict(sorted(env.items()))
    leader = _with_args(launch, leader_extra, env)
    worker = _with_args(launch, worker_extra, env) if t.pods > 1 else None
    return RoleLaunch(
        role=t.name, kind=t.kind, field_prefix=t.prefix, instances=t.instances, pods_per_instance=t.pods,
        gpus_per_pod=t.gpus_per_pod or launch.gpu_count, dp=t.dp, dp_local=t.dp_local or t.dp,
        load_balancing="hybrid" if t.hybrid_lb else "external" if t.external_lb else "internal",
        leader=leader, worker=worker, per_pod=per_pod, env_from_pod=env_from_pod, ports=ports)


def sglang_role_args(t: TopoRole, topo: dict) -> tuple[list[Arg], list[PerPodArg], dict[str, int]]:
    """An SGLang role's topology arguments (sglang.yaml ``topology``; docs/design/007-sglang-topologies.md): the
    P/D mode, transfer backend, bootstrap port and IB device of a prefill/decode role, and for an instance of
    several pods (whose ``--nnodes`` the effective document carries) per pod ``--node-rank`` (the pod's worker
    index) and ``--dist-init-addr`` (the leader's address and ``dist_init_port``). DP attention and EP are spec
    fields of the flag table (rendered with the single-engine arguments)."""
    args: list[Arg] = []
    per_pod: list[PerPodArg] = []
    ports: dict[str, int] = {}
    if t.pd_mode is not None:
        args.append(Arg("disaggregation", [topo["disaggregation_mode_flag"], t.pd_mode]))
        args.append(Arg("disaggregation.transferBackend", [topo["transfer_backend_flag"], str(t.transfer_backend)]))
        args.append(Arg("disaggregation.bootstrapPort", [topo["bootstrap_port_flag"], str(t.bootstrap_port)]))
        if t.ib_device:
            args.append(Arg("disaggregation.ibDevice", [topo["ib_device_flag"], t.ib_device]))
        if t.pd_mode == "prefill":
            ports["bootstrap"] = int(t.bootstrap_port or topo["bootstrap_port"])
    if t.pods > 1:   # --nnodes is in the role's effective document already (core.topology.effective_document)
        per_pod.append(PerPodArg(topo["node_rank_flag"], "worker_index", "podsPerInstance"))
        per_pod.append(PerPodArg(topo["dist_init_addr_flag"], "leader_endpoint", "podsPerInstance",
                                 port=int(topo["dist_init_port"])))
    return args, per_pod, ports


def _with_args(launch: LaunchSpec, extra: list[Arg], env: dict[str, str]) -> LaunchSpec:
    """``launch`` with ``extra`` inserted before the user's own extraArgs (which stay last)."""
    if not extra and env == launch.env:
        return launch
    args = list(launch.arguments)
    at = next((i for i, a in enumerate(args) if a.field == "extraArgs"), len(args))
    return dataclasses.replace(launch, arguments=[*args[:at], *extra, *args[at:]], env=env)
