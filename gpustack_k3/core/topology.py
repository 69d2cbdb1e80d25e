"""Roles: how a document with ``spec.roles`` becomes one effective single-engine document per role.

A document without roles is one implicit ``serve`` role whose effective document is the document itself (so
every single-node document renders byte for byte as before). With roles, each role's sections override the
shared ones field by field (a field the role leaves unset inherits), ``hardware.gpuCount`` becomes the role's
``gpusPerPod`` and ``metadata.name`` ``<name>-<role>``; every single-engine rule, the planner and the flag table
then apply per role unchanged, and findings carry the role's field path. Topology rules (DP layout, load
balancing, P/D compatibility) look across the views (docs/design/002-topologies.md).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from pydantic import BaseModel

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, Role
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.flags import extra_flags
from gpustack_k3.core.resolve import resolve

# Role sections that override the shared section of the same name field by field
MERGED_SECTIONS = ("parallel", "memory", "scheduling", "vllm", "sglang", "placement")


class RoleView:
    """One role of a document and its effective single-engine document (plain: docs/architecture.md, Start-up)."""

    __slots__ = ("index", "role", "document")

    def __init__(self, index: int | None, role: Role, document: DeploymentDocument) -> None:
        self.index = index            # position in spec.roles; None: the implicit serve role of a roleless document
        self.role = role
        self.document = document

    def __repr__(self) -> str:
        return f"RoleView({self.index!r}, {self.role!r}, {self.document!r})"

    @property
    def field_prefix(self) -> str:
        """Where the role's own fields are: ``spec.roles[i]`` (``spec`` for the implicit role)."""
        return "spec" if self.index is None else f"spec.roles[{self.index}]"

    @property
    def pods(self) -> int:
        """Pods of one instance (LWS size)."""
        return self.role.podsPerInstance

    @property
    def dp(self) -> int:
        return self.document.spec.parallel.dp or 1

    @property
    def dp_local(self) -> int:
        """DP ranks per pod: the role's dpLocal, else DP spread evenly over the pods (DP = pods x dpLocal)."""
        p = self.document.spec.parallel
        if p.dpLocal is not None:
            return p.dpLocal
        return max(1, self.dp // self.pods)

    @property
    def gpus(self) -> int:
        """GPUs of the whole role: instances x pods x GPUs per pod."""
        return self.role.instances * self.role.podsPerInstance * self.role.gpusPerPod


def _merge(base: BaseModel, over: BaseModel | None) -> BaseModel:
    if over is None:
        return base
    update: dict[str, Any] = {k: getattr(over, k) for k in over.model_fields_set}
    return base.model_copy(update=update)


def effective_document(doc: DeploymentDocument, role: Role) -> DeploymentDocument:
    """The single-engine document one role runs (not re-validated: its parts are validated models)."""
    spec = doc.spec
    update: dict[str, Any] = {name: _merge(getattr(spec, name), getattr(role, name)) for name in MERGED_SECTIONS}
    update["hardware"] = spec.hardware.model_copy(update={"gpuCount": role.gpusPerPod})
    update["env"] = {**spec.env, **role.env}
    update["extraArgs"] = [*_multi_node_args(doc, role), *spec.extraArgs, *role.extraArgs]
    update["roles"] = []
    # every role serves the deployment's model name (a P/D router sends one name to both roles)
    update["model"] = spec.model.model_copy(update={"servedModelName": spec.model.servedModelName or doc.metadata.name})
    return doc.model_copy(update={
        "spec": spec.model_copy(update=update),
        "metadata": doc.metadata.model_copy(update={"name": f"{doc.metadata.name}-{role.name}"}),
    })


def _multi_node_args(doc: DeploymentDocument, role: Role) -> list[str]:
    """What every pod of a multi-pod SGLang instance runs beyond its single-engine flags and before the per-pod ones:
    ``--nnodes <pods>`` (sglang.yaml ``topology``). It is part of the role's effective document, so the single-engine
    rules count the ranks of one pod as SGLang does (TP x PP over --nnodes); vLLM's multi-pod layout is spec fields
    (parallel.dpLocal) instead."""
    if role.podsPerInstance <= 1 or doc.spec.engine.name != ENGINE_SGLANG:
        return []
    flag = load_catalog().engine(ENGINE_SGLANG).topology.get("nnodes_flag")
    return [flag, str(role.podsPerInstance)] if flag else []


def implicit_role(doc: DeploymentDocument) -> Role:
    """The serve role a document without ``spec.roles`` describes: one instance, one pod, hardware.gpuCount GPUs."""
    return Role.model_construct(name="serve", role="serve", instances=1, podsPerInstance=1,
                                gpusPerPod=doc.spec.hardware.gpuCount, parallel=doc.spec.parallel,
                                loadBalancing="internal", apiServerCount=None, memory=None, scheduling=None,
                                vllm=None, sglang=None, env={}, extraArgs=[], placement=None)


def role_views(doc: DeploymentDocument) -> list[RoleView]:
    """Every role of the document with its effective document, in document order."""
    if not doc.spec.roles:
        return [RoleView(None, implicit_role(doc), doc)]
    return [RoleView(i, r, effective_document(doc, r)) for i, r in enumerate(doc.spec.roles)]


# ----------------------------------------------------------------------------- what the topology rules read

class TopoRole(NamedTuple):
    """One role as the topology rules see it: the role's resolved effective document plus the multi-pod launch
    facts of its pods. From a document the facts are what :func:`gpustack_k3.core.launch.build_topology_launch`
    emits; from ``check-pd`` they are what the command line says (so a contradiction can be seen at all).

    ``prefix`` is where findings about the role point (``spec.roles[1]``; ``prefill``/``decode`` for check-pd:
    ``prefill.parallel.dp``)."""
    name: str
    kind: str                     # prefill | decode | serve
    prefix: str
    instances: int
    pods: int                     # pods of one instance
    gpus_per_pod: int | None      # None: not stated (check-pd without --gpus-per-pod)
    resolved: Any                 # core.resolve.Resolved of the effective document
    dp_local: int | None          # None: not given (the engine then uses DP)
    hybrid_lb: bool = False
    external_lb: bool = False
    headless: bool = False        # some pod runs --headless
    api_server_count: int | None = None
    nnodes: int | None = None
    start_rank: int | None = None  # a literal start rank on the command line (check-pd); None: per pod
    kv_transfer: dict[str, Any] | None = None   # the --kv-transfer-config object
    env: dict[str, str] | None = None            # the engine env (side-channel host/port)
    side_channel_host_from_pod: bool = False     # VLLM_NIXL_SIDE_CHANNEL_HOST from the downward API (pod IP)
    extra_flags: dict[str, str | None] | None = None   # flags outside the flag table: --block-size, HMA switch
    rank_given: bool | None = None   # a command line gave --data-parallel-rank (check-pd/check-args); None: a document
    # SGLang P/D and multi-node facts (sglang.yaml `topology`; docs/design/007-sglang-topologies.md)
    pd_mode: str | None = None            # --disaggregation-mode prefill|decode (None: not disaggregated)
    transfer_backend: str | None = None   # --disaggregation-transfer-backend (the release default when not given)
    bootstrap_port: int | None = None     # --disaggregation-bootstrap-port (likewise)
    ib_device: str | None = None          # --disaggregation-ib-device

    def field(self, path: str) -> str:
        """``parallel.dp`` -> ``spec.roles[1].parallel.dp`` (or ``prefill.parallel.dp``)."""
        return f"{self.prefix}.{path}" if path else self.prefix

    @property
    def side_channel_base(self) -> int:
        """The NIXL side channel's base port (each DP rank listens on base + its global DP rank): the engine env's
        variable (catalog ``side_channel_port_env``), else the engine's default."""
        topo = self.resolved.engine.topology
        raw = (self.env or {}).get(topo["side_channel_port_env"])
        return int(raw) if raw and raw.isdigit() else int(topo["side_channel_port_default"])

    @property
    def doc_spec(self):
        return self.resolved.spec

    @property
    def tp(self) -> int:
        return self.resolved.tp

    @property
    def pp(self) -> int:
        return int(self.resolved.value("parallel.pp") or 1)

    @property
    def dp(self) -> int:
        return int(self.resolved.value("parallel.dp") or 1)

    @property
    def dcp(self) -> int:
        return self.resolved.dcp

    @property
    def ep(self) -> int:
        """The expert-parallel group: TP x DP ranks when expert parallelism is on (1 otherwise)."""
        return self.tp * self.dp if self.doc_spec.parallel.expertParallel else 1

    @property
    def eplb_on(self) -> bool:
        e = self.doc_spec.parallel.eplb
        return e is not None and e.enabled is not False


class Topology:
    """Every role of a deployment (or of a check-pd pair) and the shared P/D settings
    (plain: docs/architecture.md, Start-up)."""

    __slots__ = ("roles", "disaggregation", "source", "document")

    def __init__(self, roles: list[TopoRole], disaggregation: Any, source: str,
                 document: DeploymentDocument | None = None) -> None:
        self.roles = roles
        self.disaggregation = disaggregation   # api Disaggregation or None
        self.source = source                   # "document" | "argv"
        self.document = document               # the document as written (source "document"): its roles' own fields

    def __repr__(self) -> str:
        return f"Topology({self.roles!r}, {self.disaggregation!r}, {self.source!r})"

    @property
    def engine(self) -> str:
        return self.roles[0].resolved.engine.engine

    def of_kind(self, kind: str) -> list[TopoRole]:
        return [r for r in self.roles if r.kind == kind]

    def pairs(self) -> Iterator[tuple[TopoRole, TopoRole]]:
        """Every (prefill, decode) pair of roles: what the P/D rules compare."""
        for p in self.of_kind("prefill"):
            for d in self.of_kind("decode"):
                yield p, d


def multi_pod(doc: DeploymentDocument) -> bool:
    """Whether any role spans pods (or the document disaggregates): what single-pod targets cannot run."""
    return bool(doc.spec.roles) and (any(r.podsPerInstance > 1 for r in doc.spec.roles)
                                     or doc.spec.disaggregation is not None)


def flag_values(tokens: list[str], version: Any = None) -> dict[str, str | None]:
    """``{flag: value or None}`` of an extraArgs fragment, read as ``version``'s parser reads it
    (:func:`core.flags.extra_flags`)."""
    return {name: value for name, (_, value) in extra_flags(tokens, version).items()}


def kv_transfer_config(doc: DeploymentDocument, kind: str, kv_roles: dict[str, str]) -> dict[str, Any] | None:
    """The ``--kv-transfer-config`` object of a prefill or decode role (None for serve roles or without
    ``spec.disaggregation``): connector, kv_role, failure policy and the extra config."""
    d = doc.spec.disaggregation
    if d is None or kind not in kv_roles:
        return None
    cfg: dict[str, Any] = {"kv_connector": d.connector, "kv_role": kv_roles[kind]}
    if d.loadFailurePolicy is not None:
        cfg["kv_load_failure_policy"] = d.loadFailurePolicy
    extra = dict(d.extraConfig)
    if d.enforceHandshakeCompat is not None:
        extra["enforce_handshake_compat"] = d.enforceHandshakeCompat
    if extra:
        cfg["kv_connector_extra_config"] = extra
    return cfg


def sglang_facts(doc: DeploymentDocument, kind: str, pods: int, topo: dict[str, Any]) -> dict[str, Any]:
    """The SGLang P/D and multi-node facts of a role of a document, as the launch emits them (empty for vLLM: its
    catalog topology has no ``disaggregation_modes``). The transfer backend and bootstrap port are the spec's or
    the release's defaults (sglang.yaml ``topology``)."""
    if "disaggregation_modes" not in topo:
        return {}
    out: dict[str, Any] = {"nnodes": pods if pods > 1 else None}
    d = doc.spec.disaggregation
    if d is not None and doc.spec.roles and kind in topo["disaggregation_modes"]:
        out.update(pd_mode=topo["disaggregation_modes"][kind],
                   transfer_backend=d.transferBackend or topo["transfer_backend"],
                   bootstrap_port=d.bootstrapPort or topo["bootstrap_port"], ib_device=d.ibDevice)
    return out


def document_topology(doc: DeploymentDocument, views: list[RoleView] | None = None,
                      resolved: list[Any] | None = None) -> Topology:
    """The topology rules' view of a document: per role, the facts the launch builder emits (and only those).
    ``views``: the document's :func:`role_views` when the caller has them already; ``resolved``: each view's
    resolved effective document, likewise (both in view order)."""
    roles = []
    views = views if views is not None else role_views(doc)
    for i, view in enumerate(views):
        r = resolved[i] if resolved is not None else resolve(view.document)
        role = view.role
        topo = r.engine.topology
        pods, dp = view.pods, view.dp
        kv = kv_transfer_config(doc, role.role, topo.get("kv_roles", {})) if doc.spec.roles else None
        env = dict(view.document.spec.env)
        if kv is not None:
            env.setdefault(topo["side_channel_port_env"], str(doc.spec.disaggregation.sideChannelPort))
        roles.append(TopoRole(
            name=role.name, kind=role.role, prefix=view.field_prefix, instances=role.instances, pods=pods,
            gpus_per_pod=role.gpusPerPod, resolved=r, dp_local=view.dp_local,
            hybrid_lb=role.loadBalancing == "hybrid" and pods > 1 and dp > 1,
            external_lb=role.loadBalancing == "external" and dp > 1,
            headless=role.loadBalancing == "internal" and pods > 1,
            api_server_count=role.apiServerCount, kv_transfer=kv, env=env, side_channel_host_from_pod=kv is not None,
            extra_flags=flag_values(list(view.document.spec.extraArgs), r.version),
            **sglang_facts(doc, role.role, pods, topo)))
    return Topology(roles, doc.spec.disaggregation if doc.spec.roles else None, "document", doc)
