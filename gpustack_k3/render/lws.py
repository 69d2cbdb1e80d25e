"""Kubernetes target for a topology (a document with ``spec.roles``): one LeaderWorkerSet per role.

Rendered only from :class:`gpustack_k3.core.launch_types.TopologyLaunch` (docs/design/002-topologies.md):

* **LeaderWorkerSet** ``<name>-<role>`` (``leaderworkerset.x-k8s.io/v1``, LWS v0.10.0): ``replicas`` = the role's
  instances, ``leaderWorkerTemplate.size`` = its pods per instance, the worker template, and a leader template
  only when the leader's pod differs (LWS defaults the leader to the worker template,
  ``leaderworkerset_types.go:145-156@v0.10.0``).
  - ``restartPolicy: RecreateGroupAfterStart`` (``leaderworkerset_types.go:334-340``): a DP/EP group cannot
    survive the loss of one member (its NCCL/EP communicators die with it), so the group is recreated, but only
    once every pod of the group has started: the default ``RecreateGroupOnPodRestart`` recreates the group on any
    container restart while a member is still pulling or loading, which loops a group whose pods start at
    different times (lws#725).
  - ``startupPolicy: LeaderCreated`` (``:353-361``): the workers are created with the leader. With
    ``LeaderReady`` they would wait for a Ready leader, and the leader's engines never get Ready: they cannot
    finish EP/NCCL initialisation without the workers (a deadlock).
* **Per-pod arguments** (``RoleLaunch.per_pod``: the DP start rank, the leader's address) are known only where
  a pod starts. The argv stays a list: the container runs ``/bin/sh -c 'exec "$0" "$@" --flag "$((...))"'``
  followed by the engine's own argv as separate arguments, so the shell only appends the computed flags
  (``LWS_WORKER_INDEX``, ``LWS_LEADER_ADDRESS`` and ``LWS_GROUP_SIZE`` are set by LWS in every container:
  ``pkg/utils/pod/pod_utils.go:132-178@v0.10.0``). The script is generated from the launch with every flag
  quoted and is tested by running it under ``/bin/sh`` with a fake engine.
* **Env**: the launch spec's (NIXL/UCX/NCCL included), the downward API for ``RoleLaunch.env_from_pod``
  (``VLLM_NIXL_SIDE_CHANNEL_HOST`` = ``status.podIP``: the NIXL side channel must listen on the pod IP).
* **Probes** per role from the role's own startup budget (a prefill role loads and captures graphs at its own
  pace). Headless workers (``loadBalancing: internal``, pods 1..) serve no HTTP: they carry no probes (a
  probe there would only fail; Dynamo's operator does the same for multi-node vLLM workers). The group's
  readiness is the leader's.
* **Services**: ``<name>-<role>-api`` in front of a role's API servers (the leaders; every pod with hybrid or
  external load balancing). The LWS controller creates its own headless Service named like the LWS for the
  pods' DNS names, hence the suffix. ``<name>`` is the deployment's endpoint: with P/D the router, else every
  API server of every role.
* **Routing** from the ecosystem, never a proxy of ours (``render/router.py``): for vLLM P/D the vLLM project's
  router in front of one Service per instance, or (``spec.routing.target: inferencePool``) an InferencePool with
  its endpoint picker.
* **Rack scale** (``render/computedomain.py``, docs/design/004-rack-scale.md): one ComputeDomain per deployment on
  NVLink-rack hardware, its channel claimed by every pod; RDMA resources (UCX env comes with the launch spec); colocation affinity or LWS
  exclusive topology, and a subgroup policy for groups larger than an NVLink domain.
* **Option** ``form="disaggregatedset"``: one ``DisaggregatedSet`` (``disaggregatedset.x-k8s.io/v1``, LWS >= 0.10)
  whose roles are the same LWS specs (``disaggregatedset_types.go:75-111``; 2-10 roles).
"""
from __future__ import annotations

import copy
import re
import shlex
from typing import TYPE_CHECKING, Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import build_topology_launch
from gpustack_k3.core.rack import RackLayout, document_layout, rack_layout
from gpustack_k3.core.topology import effective_document
from gpustack_k3.render import computedomain as cd
from gpustack_k3.render import kubernetes as k8s
from gpustack_k3.render import router as routing
from gpustack_k3.core.k8s_names import derived_name
from gpustack_k3.render.templates import RenderError

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.launch_topology_types import RoleLaunch, TopologyLaunch
    from gpustack_k3.core.launch_types import LaunchSpec

FORMS = ("leaderworkerset", "disaggregatedset")
SHELL = "/bin/sh"
_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*$")


def _leader_endpoint(role: RoleLaunch, arg: Any) -> str:
    port = getattr(arg, "port", None)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise RenderError(f"{role.field_prefix}.{arg.field}", f"per-pod argument {arg.flag} has no port ({port!r})",
                          "a leader_endpoint argument names the port after the leader's address")
    return f'"${{{api.LWS_ENV_LEADER_ADDRESS}}}:{port}"'


# RoleLaunch.per_pod sources -> the shell expression of the value (always double-quoted: one argv element)
PER_POD_SOURCES = {
    "start_rank": lambda role, arg: f'"$(({api.LWS_ENV_WORKER_INDEX} * {int(role.dp_local)}))"',
    "leader_address": lambda role, arg: f'"${api.LWS_ENV_LEADER_ADDRESS}"',
    "group_size": lambda role, arg: f'"${api.LWS_ENV_GROUP_SIZE}"',
    "worker_index": lambda role, arg: f'"${api.LWS_ENV_WORKER_INDEX}"',      # SGLang --node-rank
    "leader_endpoint": _leader_endpoint,                                     # SGLang --dist-init-addr host:port
}
DS_MIN_ROLES, DS_MAX_ROLES = 2, 10          # disaggregatedset_types.go:108-109@v0.10.0


def entrypoint(role: RoleLaunch, launch: LaunchSpec, *, leader: bool = False) -> tuple[list[str], list[str]]:
    """(command, args) of a role's engine container: the launch's argv as is, or, with per-pod arguments, a
    quoted ``/bin/sh -c`` script that appends them and execs the argv (passed as ``$0 "$@"``, never re-split).
    The leader (pod 0) skips arguments meant for the workers only (``PerPodArg.on == "workers"``: a start rank on
    an internally balancing leader would switch it to hybrid LB)."""
    per_pod = [a for a in role.per_pod if not (leader and a.on == "workers")]
    if not per_pod:
        return list(launch.command), launch.args
    parts = ['exec "$0" "$@"']
    for a in per_pod:
        if not _FLAG.match(a.flag):
            raise RenderError(f"{role.field_prefix}.{a.field}", f"per-pod argument {a.flag!r} is not a --flag")
        value = PER_POD_SOURCES.get(a.source)
        if value is None:
            raise RenderError(f"{role.field_prefix}.{a.field}", f"unknown per-pod source {a.source!r}",
                              f"one of: {', '.join(PER_POD_SOURCES)}")
        parts.append(f"{shlex.quote(a.flag)} {value(role, a)}")
    return [SHELL, "-c", " ".join(parts)], [*launch.command, *launch.args]


def role_labels(topo: TopologyLaunch, role: RoleLaunch, launch: LaunchSpec) -> dict[str, str]:
    return {**k8s.labels(launch), api.LABEL_DEPLOYMENT: topo.name, api.LABEL_ROLE: role.role,
            api.LABEL_ROLE_KIND: role.kind}


def _serves_api(role: RoleLaunch, leader: bool) -> bool:
    return leader or role.load_balancing != "internal"


def _pod_template(topo: TopologyLaunch, role: RoleLaunch, launch: LaunchSpec, doc: DeploymentDocument | None,
                  ns: str, *, leader: bool, layout: RackLayout | None = None) -> tuple[dict, dict, list[dict]]:
    """(pod template, workload annotations, claim templates) of the leader or the workers of a role: the
    single-node pod (security, resources, volumes, placement) with the topology's command, env and probes."""
    kind = k8s.workload_kind(launch)
    wl = k8s._workload(launch, doc, ns, kind, False, place=role_placement(doc, role))
    tpl = wl["spec"]["template"]
    labels = role_labels(topo, role, launch)
    if _serves_api(role, leader):
        labels[api.LABEL_API_SERVER] = "true"
    tpl["metadata"]["labels"] = labels
    (c,) = tpl["spec"]["containers"]
    c["command"], c["args"] = entrypoint(role, launch, leader=leader)
    c["env"] += [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": path}}}
                 for k, path in sorted(role.env_from_pod.items())]
    if not _serves_api(role, leader):
        for p in ("startupProbe", "readinessProbe", "livenessProbe"):
            c.pop(p)
    if layout is not None:
        cd.patch_pod(tpl, topo.name, layout, doc)
    return tpl, wl["metadata"]["annotations"], wl["spec"].get("volumeClaimTemplates") or []


def role_placement(doc: DeploymentDocument | None, role: RoleLaunch) -> Any:
    """The role's placement: the shared ``spec.placement`` with the role's ``placement`` merged over it field by field
    (core/topology.py ``effective_document``, the same merge every other section gets). The NVLink domain and the rack
    policy are the deployment's (one ComputeDomain for all roles: docs/design/004-rack-scale.md), so a role that sets
    them differently from ``spec.placement`` is refused here, naming the field, rather than ignored (rule
    rack-nvlink-deployment-wide refuses roles that disagree with each other)."""
    if doc is None:
        return None
    spec_role = next((r for r in doc.spec.roles if r.name == role.role), None)
    if spec_role is None or spec_role.placement is None:
        return doc.spec.placement
    merged = effective_document(doc, spec_role).spec.placement
    shared = document_layout(doc)
    mine = rack_layout(merged, load_catalog().hardware.get(doc.spec.hardware.gpuType), shared.roles)
    for name in ("nvlink", "rack"):
        if name in spec_role.placement.model_fields_set and (
                (mine.compute_domain, mine.policy, mine.topology_key, mine.racks)
                != (shared.compute_domain, shared.policy, shared.topology_key, shared.racks)):
            raise RenderError(f"{role.field_prefix}.placement.{name}",
                              "the NVLink domain and rack policy are the deployment's, not a role's (one "
                              "ComputeDomain serves every role)", f"set spec.placement.{name} instead")
    return merged


def lws_spec(topo: TopologyLaunch, role: RoleLaunch, doc: DeploymentDocument | None, ns: str,
             layout: RackLayout | None = None) -> tuple[dict, dict]:
    """(LeaderWorkerSet spec, annotations) of one role."""
    leader, annotations, claims = _pod_template(topo, role, role.leader, doc, ns, leader=True, layout=layout)
    lwt: dict[str, Any] = {"size": role.pods_per_instance,
                           "restartPolicy": api.LWS_RESTART_RECREATE_AFTER_START}
    if layout is not None:
        extra, subgroup = cd.lws_placement(layout, role.role, role.pods_per_instance)
        annotations = {**annotations, **extra}
        if subgroup is not None:
            lwt["subGroupPolicy"] = subgroup
    if role.pods_per_instance > 1:
        worker, _, _ = _pod_template(topo, role, role.worker or role.leader, doc, ns, leader=False, layout=layout)
        if worker != leader:
            lwt["leaderTemplate"] = leader
        lwt["workerTemplate"] = worker
    else:
        lwt["workerTemplate"] = leader    # size 1: the leader is the whole group, built from this template
    if claims:
        lwt["volumeClaimTemplates"] = claims
        lwt["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
    spec = {"replicas": role.instances, "startupPolicy": api.LWS_STARTUP_LEADER_CREATED,
            "leaderWorkerTemplate": lwt,
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 1,
                                                                                       "maxSurge": 0}}}
    return spec, annotations


def _service(name: str, ns: str, labels: dict[str, str], selector: dict[str, str], port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"type": "ClusterIP", "selector": selector,
                     "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}]}}


def role_service_name(topo: TopologyLaunch, role: RoleLaunch) -> str:
    return derived_name(role.leader.name, "-api")


def _role_service(topo: TopologyLaunch, role: RoleLaunch, ns: str) -> dict:
    launch = role.leader
    selector = {**k8s.selector_labels(launch), api.LABEL_API_SERVER: "true"}
    return _service(role_service_name(topo, role), ns, role_labels(topo, role, launch), selector, launch.port)


def _topology_labels(topo: TopologyLaunch, component: str) -> dict[str, str]:
    first = topo.roles[0].leader
    return {api.LABEL_APP_NAME: "kimi-k3", api.LABEL_APP_INSTANCE: topo.name, api.LABEL_APP_COMPONENT: component,
            api.LABEL_APP_PART_OF: api.PRODUCT, api.LABEL_APP_MANAGED_BY: api.PRODUCT,
            api.LABEL_APP_VERSION: first.engine_version, api.LABEL_ENGINE: first.engine,
            api.LABEL_DEPLOYMENT: topo.name}


def render_topology(topo: TopologyLaunch, doc: DeploymentDocument | None = None, *, namespace: str | None = None,
                    form: str = "leaderworkerset", router_image: str | None = None) -> list[dict]:
    """The objects of a topology in apply order: the ComputeDomain (NVLink rack), Services, the router (P/D) or
    InferencePool, then the LWS objects (or the DisaggregatedSet). This function does not validate them;
    :func:`render_document` does (:func:`validate_topology_objects`)."""
    if form not in FORMS:
        raise RenderError("--lws-form", f"unknown form {form!r}", f"one of: {', '.join(FORMS)}")
    ns = namespace or (doc.metadata.namespace if doc is not None else None) or k8s.DEFAULT_NAMESPACE
    if doc is not None and doc.spec.serving.networkPolicy:
        # the single-node policy admits only the engine port; a topology's pods also talk to each other (NCCL, the
        # NIXL side channel per DP rank, the router): refused rather than rendered half-open or silently dropped
        raise RenderError("spec.serving.networkPolicy", "no NetworkPolicy is rendered for a topology: its pods "
                          "exchange NCCL and NIXL traffic on ports the engine-port policy would close",
                          "set spec.serving.networkPolicy to false and admit the traffic with the platform's policies")
    layout = document_layout(doc) if doc is not None and doc.spec.roles else None
    objs: list[dict] = []
    if layout is not None and layout.compute_domain:
        objs.append(cd.compute_domain(topo.name, ns, _topology_labels(topo, "nvlink-domain")))
    objs += [_role_service(topo, r, ns) for r in topo.roles]
    front = routing.front(topo, doc, ns, _topology_labels(topo, "router"), router_image=router_image)
    if front is not None:
        objs += front
    else:
        first = topo.roles[0].leader
        objs.append(_service(topo.name, ns, _topology_labels(topo, "inference-engine"),
                             {api.LABEL_DEPLOYMENT: topo.name, api.LABEL_API_SERVER: "true"}, first.port))
    sets = []
    for r in topo.roles:
        spec, annotations = lws_spec(topo, r, doc, ns, layout)
        sets.append((r, spec, annotations))
    if form == "leaderworkerset":
        objs += [{"apiVersion": api.LWS_API_VERSION, "kind": api.LWS_KIND,
                  "metadata": {"name": r.leader.name, "namespace": ns, "labels": role_labels(topo, r, r.leader),
                               "annotations": annotations},
                  "spec": spec} for r, spec, annotations in sets]
    else:
        if not DS_MIN_ROLES <= len(sets) <= DS_MAX_ROLES:
            raise RenderError("spec.roles", f"a DisaggregatedSet holds {DS_MIN_ROLES}-{DS_MAX_ROLES} roles, the "
                              f"document has {len(sets)}", "render the leaderworkerset form")
        objs.append({"apiVersion": api.DS_API_VERSION, "kind": api.DS_KIND,
                     "metadata": {"name": topo.name, "namespace": ns, "labels": _topology_labels(topo, "inference-engine"),
                                  "annotations": {k: v for k, v in sets[0][2].items() if k not in _LWS_PLACEMENT}},
                     "spec": {"roles": [{"name": r.role, "metadata": _ds_role_metadata(topo, r, a),
                                         "spec": spec} for r, spec, a in sets]}})
    _check_consistency(topo, objs)
    k8s.carry_metadata(objs, doc)
    k8s.check_names(objs)
    return objs


_LWS_PLACEMENT = (api.LWS_ANNOTATION_EXCLUSIVE_TOPOLOGY, api.LWS_ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY)


def _ds_role_metadata(topo: TopologyLaunch, role: RoleLaunch, annotations: dict[str, str]) -> dict:
    """A DisaggregatedSet role's metadata: its labels and the LWS placement annotations of the LWS it becomes."""
    md: dict[str, Any] = {"labels": role_labels(topo, role, role.leader)}
    placement = {k: v for k, v in annotations.items() if k in _LWS_PLACEMENT}
    if placement:
        md["annotations"] = placement
    return md


def render_document(doc: DeploymentDocument, *, namespace: str | None = None, form: str = "leaderworkerset",
                    router_image: str | None = None, strict: bool = False, validate: bool = True,
                    topo: TopologyLaunch | None = None) -> list[dict]:
    """The Kubernetes objects of a document with ``spec.roles`` (``Refused`` on error findings; RenderError when
    an object fails its schema): the entry point of the CLI and the operator."""
    if topo is None:
        topo, _findings, _plans = build_topology_launch(doc, strict=strict)
    objs = render_topology(topo, doc, namespace=namespace, form=form, router_image=router_image)
    if validate:
        problems = validate_topology_objects(objs)
        if problems:
            raise RenderError("target kubernetes", "schema validation failed: " + "; ".join(problems),
                              "a template produced an invalid object; please report")
    return objs


def lws_objects(objs: list[dict]) -> list[tuple[str, dict]]:
    """(role, LWS spec) of every LeaderWorkerSet, also those inside a DisaggregatedSet."""
    out = []
    for o in objs:
        if o["kind"] == api.LWS_KIND:
            out.append((o["metadata"]["labels"][api.LABEL_ROLE], o["spec"]))
        elif o["kind"] == api.DS_KIND:
            out += [(r["name"], r["spec"]) for r in o["spec"]["roles"]]
    return out


def pod_templates(spec: dict) -> list[tuple[str, dict]]:
    lwt = spec["leaderWorkerTemplate"]
    return [(k, lwt[k]) for k in ("leaderTemplate", "workerTemplate") if k in lwt]


def _check_consistency(topo: TopologyLaunch, objs: list[dict]) -> None:
    """What no schema sees: every role's pods run that role's launch (argv, env, startup budget)."""
    specs = dict(lws_objects(objs))
    for role in topo.roles:
        spec = specs.get(role.role)
        if spec is None:
            raise RenderError("kubernetes", f"no LeaderWorkerSet rendered for role {role.role!r}")
        lwt = spec["leaderWorkerTemplate"]
        if spec["replicas"] != role.instances or lwt["size"] != role.pods_per_instance:
            raise RenderError(f"{role.field_prefix}", "LeaderWorkerSet replicas/size differ from the role")
        leader = (lwt.get("leaderTemplate") or lwt["workerTemplate"])["spec"]["containers"][0]
        launch = role.leader
        shell = leader["command"][:2] == [SHELL, "-c"]
        argv = leader["args"] if shell else [*leader["command"], *leader["args"]]
        if argv != launch.argv:
            raise RenderError(f"{role.field_prefix}", "the leader's argv differs from the role's launch spec")
        plain = {e["name"]: e["value"] for e in leader["env"] if "value" in e}
        if any(plain.get(k) != v for k, v in launch.env.items()):
            raise RenderError(f"{role.field_prefix}.env", "the leader's env differs from the role's launch spec")
        probe = leader["startupProbe"]
        if probe["periodSeconds"] * probe["failureThreshold"] < launch.startup_budget_s:
            raise RenderError(f"{role.field_prefix}", f"startupProbe shorter than the role's budget "
                              f"{launch.startup_budget_s}s")


def validate_topology_objects(objs: list[dict], version: str = k8s.K8S_VERSION) -> list[str]:
    """Schema problems: built-in objects with kubernetes-validate (strict); every pod template inside an LWS
    (or a DisaggregatedSet) as the official ``PodTemplate`` of the same Kubernetes version. The LWS and DS fields
    themselves are checked in the tests against a transcription of the v0.10.0 CRD (tests/support/lws_schema.py),
    and against the upstream CRD files by tools/check_lws_crds.py: no package ships the LWS CRDs
    (docs/design/002-topologies.md, "Validation")."""
    builtin = [o for o in objs if o["kind"] not in (api.LWS_KIND, api.DS_KIND, api.COMPUTE_DOMAIN_KIND,
                                                    api.INFERENCE_POOL_KIND)]
    problems = k8s.validate_objects(builtin, version)
    wrapped, dra = [], []
    for role, spec in lws_objects(objs):
        for which, tpl in pod_templates(spec):
            t = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{role}-{which}"},
                 "template": copy.deepcopy(tpl)}
            # a pod claiming a ComputeDomain channel needs DRA: the driver supports Kubernetes >= 1.32
            # (NVIDIA/k8s-dra-driver-gpu README.md:8@v25.12.0), where resourceClaimTemplateName is a pod field
            (dra if tpl["spec"].get("resourceClaims") else wrapped).append(t)
    problems += k8s.validate_objects(wrapped, version)
    if dra:
        problems += k8s.validate_objects(dra, max(version, DRA_K8S_VERSION, key=_minor))
    return problems


DRA_K8S_VERSION = "1.32"


def _minor(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))
