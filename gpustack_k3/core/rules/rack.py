"""Rack-scale rules (topology family): NVLink domain, placement in racks, the NIXL port range, the router target.

Each check reads a :class:`gpustack_k3.core.topology.Topology` built from a document (the ``check-pd`` command
lines carry no placement: these rules skip them) and the same :class:`gpustack_k3.core.rack.RackLayout` the
Kubernetes renderer renders from (docs/design/004-rack-scale.md).

None of these is CEL: they read the GPU type's catalog entry (NVLink domain) or compare roles.
"""
from __future__ import annotations

from collections.abc import Iterator

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.api.v1alpha1.spec import Routing
from gpustack_k3.core.rack import RackLayout, RoleShape, rack_layout, subgroup_fits
from gpustack_k3.core.rules.registry import rule
from gpustack_k3.core.topology import Topology

BOTH = (ENGINE_VLLM, ENGINE_SGLANG)
VLLM = (ENGINE_VLLM,)
NO_CEL = ("reads the GPU type's catalog entry (its NVLink domain) and every role's shape; the CRD's per-object CEL "
          "has neither")
DESIGN = "docs/design/004-rack-scale.md"


def _layout(t: Topology) -> RackLayout | None:
    if t.source != "document" or not t.roles:
        return None
    first = t.roles[0].resolved
    shapes = [RoleShape(r.name, r.instances, r.pods, r.gpus_per_pod or 1) for r in t.roles]
    return rack_layout(first.spec.placement, first.hardware, shapes)


def _has_roles(t: Topology) -> bool:
    return t.source == "document" and any(not r.prefix == "spec" for r in t.roles)


@rule("rack-nvlink-deployment-wide", checked_by="product", family="topology", severity="error", engines=BOTH,
      field="spec.roles[].placement.nvlink",
      title="NVLink domain and rack placement are set for the whole deployment",
      why="One ComputeDomain serves every pod of the deployment (a node joins one domain at a time, and prefill and "
          "decode exchange KV over NVLink only inside one), and colocation places all roles together: a role "
          "cannot choose differently.",
      fix="Set placement.nvlink and placement.rack in spec.placement, not in a role.",
      source=f"{DESIGN} (1. Multi-node NVLink)", no_cel=NO_CEL)
def check_rack_nvlink_deployment_wide(t: Topology) -> Iterator[tuple[str, str]]:
    if not _has_roles(t):
        return
    for f in ("nvlink", "rack"):
        values = [(r.name, getattr(r.resolved.spec.placement, f)) for r in t.roles]
        if len({repr(v) for _, v in values}) > 1:
            said = ", ".join(f"{n}: {v if v is not None else 'unset'}" for n, v in values)
            yield f"spec.roles[].placement.{f}", f"roles disagree on placement.{f} ({said})"


@rule("rack-nvlink-opt-out", checked_by="product", family="topology", severity="warning", engines=BOTH, field="spec.placement.nvlink",
      title="Pods spanning an NVLink rack without a ComputeDomain use the NIC between nodes",
      why="On GB200/GB300 NVL72 a pod reaches another tray's GPUs over NVLink only inside an IMEX domain, which the "
          "NVIDIA DRA driver hands out as a ComputeDomain; without it wide-EP all-to-all and NIXL KV transfer between "
          "trays fall back to RDMA or TCP.",
      fix="Drop placement.nvlink (or set computeDomain) and install the NVIDIA DRA driver for GPUs (ComputeDomains).",
      source=f"{DESIGN} (1. Multi-node NVLink)")
def check_rack_nvlink_opt_out(t: Topology) -> Iterator[tuple[str, str]]:
    lay = _layout(t)
    if lay is None or not _has_roles(t):
        return
    if lay.domain is not None and lay.spans_nodes and not lay.compute_domain:
        yield "spec.placement.nvlink", ("nvlink none: pods on different trays of the NVLink rack talk over the NIC "
                                        "(no ComputeDomain is rendered)")


@rule("rack-nvlink-unsupported", checked_by="product", family="topology", severity="error", engines=BOTH, field="spec.placement.nvlink",
      title="A ComputeDomain needs a GPU type with a multi-node NVLink domain",
      why="IMEX domains exist only on multi-node NVLink systems (GB200/GB300 NVL72); on other GPU types the DRA "
          "driver's ComputeDomain channel cannot be prepared and the pods would never start.",
      fix="Remove placement.nvlink, or use a GPU type whose catalog entry has an nvlink_domain (e.g. gb300).",
      source="gpustack_k3/catalog/data/hardware.yaml (nvlink_domain)", no_cel=NO_CEL)
def check_rack_nvlink_unsupported(t: Topology) -> Iterator[tuple[str, str]]:
    lay = _layout(t)
    if lay is None or not _has_roles(t):
        return
    if lay.nvlink == "computeDomain" and lay.domain is None:
        gpu = t.roles[0].resolved.spec.hardware.gpuType
        yield "spec.placement.nvlink", f"computeDomain on {gpu}: the catalog has no NVLink domain for this GPU type"


@rule("rack-fit", checked_by="product", family="topology", severity="error", engines=BOTH, field="spec.placement.rack",
      title="The roles' groups must fit the NVLink domains (racks) the spec names",
      why="colocate puts every pod of the deployment into one NVLink domain (required pod affinity on the domain "
          "label); exclusive gives each LWS group a domain of its own and keeps every other group out of it (LWS pod "
          "webhook: required anti-affinity to every pod with a group key, leaderworkerset pkg/webhooks/"
          "pod_webhook.go:184-227@v0.10.0). A layout that needs more domains than it has stays Pending.",
      fix="With colocate keep the deployment within one domain's GPUs; with exclusive raise placement.rack.racks to "
          "the number of groups or use colocate.",
      source=f"{DESIGN} (3. Placement)", no_cel=NO_CEL)
def check_rack_fit(t: Topology) -> Iterator[tuple[str, str]]:
    lay = _layout(t)
    if lay is None or not _has_roles(t) or lay.policy == "none":
        return
    if not lay.topology_key:
        yield ("spec.placement.rack.policy", f"rack policy {lay.policy}: no NVLink-domain label to place by (the GPU "
               "type has none in the catalog)", "set spec.placement.rack.topologyKey to the node label naming the "
               "NVLink domain, or drop spec.placement.rack.policy")
        return
    if lay.domain is None:
        return
    if lay.policy == "colocate" and lay.gpus > lay.domain.gpus:
        yield "spec.placement.rack.policy", (f"colocate: the deployment's {lay.gpus} GPUs exceed one NVLink domain "
                                             f"({lay.domain.gpus} GPUs)")
    if lay.policy == "exclusive" and lay.groups > lay.racks:
        yield "spec.placement.rack.racks", (f"exclusive: {lay.groups} groups need {lay.groups} NVLink domains, the "
                                            f"spec names {lay.racks}")


@rule("rack-group-spans-domains", checked_by="product", family="topology", severity="warning", engines=BOTH, field="spec.roles[].podsPerInstance",
      title="A group larger than one NVLink domain is split into subgroups, one per domain",
      why="A DP/EP group with more GPUs than an NVLink domain holds cannot stay on NVLink: the renderer sets an LWS "
          "subGroupPolicy of the pods one domain holds with subgroup-exclusive topology on the domain label, and the "
          "EP all-to-all between subgroups goes over RDMA. LWS needs the group size (or size - 1) divisible by the "
          "subgroup size (leaderworkerset_types.go:218-224@v0.10.0).",
      fix="Keep a group within one domain (fewer pods per instance), or make podsPerInstance a multiple of the pods "
          "one domain holds.",
      source=f"{DESIGN} (3. Placement)")
def check_rack_group_spans_domains(t: Topology) -> Iterator[tuple[str, str] | tuple[str, str, str]]:
    lay = _layout(t)
    if lay is None or lay.domain is None or not _has_roles(t):
        return
    for r in t.roles:
        gpp = r.gpus_per_pod or 1
        if gpp > lay.domain.gpus:
            yield (r.field("gpusPerPod"), f"role {r.name}: {gpp} GPUs per pod exceed the NVLink domain "
                   f"({lay.domain.gpus})", "Use at most the domain's GPUs per pod.")
        sub = lay.subgroups.get(r.name)
        if sub is None:
            continue
        if not subgroup_fits(r.pods, sub):
            yield (r.field("podsPerInstance"), f"role {r.name}: {r.pods} pods per instance cannot form subgroups of "
                   f"{sub} (one NVLink domain each)", f"Use a multiple of {sub} (or one more) pods per instance.")
        else:
            yield r.field("podsPerInstance"), (f"role {r.name}: a group of {r.pods * gpp} GPUs spans "
                                               f"{-(-r.pods // sub)} NVLink domains (subgroups of {sub} pods)")


@rule("rack-nixl-port-range", checked_by="runtime-only",
       fails_at="engine start: the NIXL side channel of a DP rank cannot bind a port above 65535",
       family="topology", severity="error", engines=VLLM, field="spec.disaggregation.sideChannelPort",
      title="The NIXL side-channel ports (base + DP rank) must stay inside the port space",
      why="From vLLM 0.28 one NIXL handshake listener per engine serves every TP rank on "
          "VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index (= the global DP rank), so an instance of DP ranks "
          "uses base .. base + DP - 1 on its pods; a rank whose port passes 65535 cannot bind and its KV transfers "
          "fail.",
      fix="Lower spec.disaggregation.sideChannelPort so that base + DP - 1 <= 65535.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py:76-80@0.33.0; "
             "config/parallel.py:1048@0.33.0", no_cel=NO_CEL)
def check_rack_nixl_port_range(t: Topology) -> Iterator[tuple[str, str]]:
    for r in t.roles:
        if not r.kv_transfer:
            continue
        base = r.side_channel_base
        if base + r.dp - 1 > 65535:
            yield ("spec.disaggregation.sideChannelPort" if t.source == "document"
                   else r.field("env.VLLM_NIXL_SIDE_CHANNEL_PORT")), (
                f"{r.name}: DP {r.dp} from base {base} reaches port {base + r.dp - 1}")


ROUTER_SOURCE = ("vllm-router 0.1.17 src/config/validation.rs (ConfigError::IncompatibleConfig \"Power-of-two policy for "
                 "decode requires at least 2 decode workers\", likewise prefill: in the wheel's vllm_router_rs.abi3.so); "
                 "sglang-router 0.3.2 the same check (sglang_router_rs.abi3.so)")


@rule("router-power-of-two-one-instance", checked_by="product", family="topology", severity="error", engines=BOTH,
      field="spec.routing.decodePolicy",
      title="power_of_two routing needs at least two instances of the role",
      why="The P/D router rendered in front of prefill/decode roles (vllm-router for vLLM, sglang-router for SGLang) "
          "gets one --prefill/--decode URL per instance and validates its configuration at start: power_of_two with "
          "fewer than 2 workers of that kind is an IncompatibleConfig and the router exits before serving, so the "
          "router pod crash-loops while every engine is healthy (seen live with vllm-router 0.1.17 on a 1P1D "
          "pair, tests/engine/test_pd_cpu.py). Left out, decodePolicy is power_of_two only with 2 or more decode "
          "instances (Routing.decode_policy_for).",
      fix="Set spec.routing.decodePolicy (or prefillPolicy) to round_robin or cache_aware for a role with one "
          "instance, or run at least two instances of it.",
      source=ROUTER_SOURCE, no_cel=NO_CEL)
def check_router_power_of_two_one_instance(t: Topology) -> Iterator[tuple[str, str]]:
    if not _has_roles(t) or t.disaggregation is None:
        return
    routing = t.roles[0].resolved.spec.routing or Routing()   # left out: the schema's default policies
    if routing.target == "inferencePool":
        return
    for kind, field in (("prefill", "prefillPolicy"), ("decode", "decodePolicy")):
        count = sum(r.instances for r in t.of_kind(kind))
        policy = routing.prefillPolicy if kind == "prefill" else routing.decode_policy_for(count)
        if policy == "power_of_two" and 0 < count < 2:
            yield (f"spec.routing.{field}",
                   f"{field} power_of_two with {count} {kind} instance: the router refuses it at start "
                   f"(\"Power-of-two policy for {kind} requires at least 2 {kind} workers\")")


@rule("rack-routing-target", checked_by="product", family="topology", severity="error", engines=BOTH, field="spec.routing.target",
      title="The routing target must be able to route this topology",
      why="The Gateway API Inference Extension v1.6.0 endpoint picker (lwepp) picks one endpoint per request and has "
          "no prefill/decode scheduling, so an InferencePool in front of P/D roles would send requests to prefill "
          "or decode alone; the vLLM router's P/D mode needs a prefill and a decode role and serves vLLM only.",
      fix="With prefill/decode roles use routing.target vllm-router (engine vllm); without them drop "
          "routing.target or use inferencePool.",
      source="gateway-api-inference-extension pkg/lwepp/server/options.go:60-71@v1.6.0; "
             f"{DESIGN} (4. Routing)", no_cel=NO_CEL)
def check_rack_routing_target(t: Topology) -> Iterator[tuple[str, str]]:
    if not _has_roles(t):
        return
    routing = t.roles[0].resolved.spec.routing
    target = routing.target if routing is not None else None
    pd = t.disaggregation is not None and bool(t.of_kind("prefill")) and bool(t.of_kind("decode"))
    if target == "inferencePool" and pd:
        yield "spec.routing.target", "inferencePool with prefill/decode roles: the v1.6.0 picker has no P/D"
    if target == "vllm-router" and not pd:
        yield "spec.routing.target", "vllm-router without prefill and decode roles (its P/D mode is what we render)"
    if target == "vllm-router" and t.engine != ENGINE_VLLM:
        yield "spec.routing.target", f"vllm-router in front of {t.engine}"


@rule("rack-topology-key-unused", checked_by="product", family="topology", severity="warning", engines=BOTH,
      field="spec.placement.rack.topologyKey",
      title="A rack topology key that no placement uses",
      why="The NVLink-domain label places pods only through a rack policy (colocate: pod affinity on it; exclusive: "
          "the LWS exclusive-topology annotation) or through the subgroups of a group larger than one domain; with "
          "policy none and no such group nothing rendered carries it, so the key would be ignored without a word.",
      fix="Set spec.placement.rack.policy to colocate or exclusive to place by this label, or drop "
          "spec.placement.rack.topologyKey.",
      source=f"{DESIGN} (3. Placement); gpustack_k3/render/computedomain.py (where the key is rendered)")
def check_rack_topology_key_unused(t: Topology) -> Iterator[tuple[str, str]]:
    lay = _layout(t)
    if lay is None or not _has_roles(t):
        return
    rack = t.roles[0].resolved.spec.placement.rack
    if rack is None or not rack.topologyKey:
        return
    if lay.policy == "none" and not lay.subgroups:
        yield "spec.placement.rack.topologyKey", (
            f"topologyKey {rack.topologyKey}: rack policy none and no group spans an NVLink domain, so no object "
            "places pods by it")
