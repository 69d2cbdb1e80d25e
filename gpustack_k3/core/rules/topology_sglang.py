"""The topology family on SGLang: P/D pairs, DP attention + EP and multi-node instances, from SGLang's own code.

Each check reads a :class:`gpustack_k3.core.topology.Topology` (a document's roles, or check-pd's two command lines)
and yields ``(field, message)``. The SGLang layout of a role is read from its resolved effective document (the flag
table's fields: ``parallel.tp/pp/dp/dcp/ep``, ``sglang.attnDpSize/moeA2aBackend/enableDpLmHead``), its P/D facts
(``TopoRole.pd_mode``, ``transfer_backend``, ...) and the flags a command line gave outside the flag table
(``--page-size``, ``--disaggregation-decode-allocation-policy``, the deprecated ``--enable-dp-attention``).

Two kinds of rule (docs/design/007-sglang-topologies.md):

- ``checked_by="oracle"``: what one server's start-up refuses (``ServerArgs.resolve_once`` and its arg_groups
  hooks); tools/engine_oracle judges such a line with the release's own code (tests/engine_oracle/
  test_sglang_topology.py).
- ``checked_by="runtime-only"``: what the decode compares with its prefill only when it first asks the prefill's
  bootstrap server (``CommonKVReceiver.try_ensure_parallel_info``, disaggregation/common/conn.py) or what fails
  when the pods form their group; ``fails_at`` says when.
"""
from __future__ import annotations

from collections.abc import Iterator

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.registry import rule
from gpustack_k3.core.rules.topology import PD_KINDS, document_pd_roles
from gpustack_k3.core.topology import Topology, TopoRole
from gpustack_k3.core.rules.envs import env_value
from gpustack_k3.core.rules.sglang import speculative_algorithm

SGL = (ENGINE_SGLANG,)
NO_CEL = ("compares the two roles of a P/D pair or reads a role's effective values (role sections merged over the "
          "shared spec); the CRD's per-object CEL cannot compute either")


# ------------------------------------------------------------------ a role's SGLang layout

def _flags(r: TopoRole) -> dict[str, str | None]:
    return r.extra_flags or {}


def _topo(r: TopoRole) -> dict:
    return r.resolved.engine.topology


def _int(v) -> int | None:
    try:
        return int(str(v))
    except (TypeError, ValueError):
        return None


def _deprecated_dp_attention(r: TopoRole) -> bool:
    flag = _topo(r).get("deprecated_dp_attention_flag")
    return bool(flag) and flag in _flags(r)


def attn_dp(r: TopoRole) -> int:
    """--attn-dp-size in effect: the deprecated `--dp-size N --enable-dp-attention` becomes N when --attn-dp-size is
    1 (arg_groups/parallel_hook.py:39-61@0.5.23)."""
    n = int(r.resolved.value("sglang.attnDpSize") or 1)
    if n == 1 and _deprecated_dp_attention(r):
        return r.dp
    return n


def dp_replicas(r: TopoRole) -> int:
    """--dp-size in effect (data-parallel replicas of the whole model): 1 after the deprecated DP-attention form."""
    if _deprecated_dp_attention(r) and int(r.resolved.value("sglang.attnDpSize") or 1) == 1:
        return 1
    return r.dp


def attn_tp(r: TopoRole) -> int:
    """The attention TP width: tp_size / (attn_dp_size x attn_cp_size) (runtime_context.attn_tp_size_of@0.5.23)."""
    cp = _int(_flags(r).get("--attn-cp-size")) or 1
    return max(1, r.tp // max(1, attn_dp(r) * cp))


def a2a(r: TopoRole) -> str:
    return str(r.resolved.value("sglang.moeA2aBackend") or "none")


def _truthy_flag(r: TopoRole, flag: str) -> bool:
    """A store_true flag of the role's extraArgs (given bare, or with a true value)."""
    flags = _flags(r)
    return flag in flags and str(flags[flag] or "true").lower() in ("true", "1", "yes", "y")


def a2a_after_overrides(r: TopoRole) -> str:
    """The MoE A2A backend after the resolution pipeline's _a2a_backend_overrides: --enable-waterfill turns any
    backend but deepep and megamoe into deepep (arg_groups/overrides.py:1596-1607@0.5.23, :1548-1559@0.5.22)."""
    got = a2a(r)
    if _truthy_flag(r, "--enable-waterfill") and got not in ("deepep", "megamoe"):
        return "deepep"
    return got


def _pd_pairs(t: Topology) -> Iterator[tuple[TopoRole, TopoRole]]:
    """Pairs where both sides run in P/D mode (a side without it is sglang-pd-roles' finding)."""
    for p, d in t.pairs():
        if p.pd_mode == "prefill" and d.pd_mode == "decode":
            yield p, d


def _mla(r: TopoRole) -> bool | None:
    """Whether the model's KV pool is MLA (None: not known)."""
    arch = r.resolved.model_arch     # the model's config.json, else the catalog entry's (one reader)
    if arch is not None and getattr(arch, "kv_lora_rank", None) is not None:
        return bool(arch.mla)
    m = r.resolved.model
    if m is not None and m.hybrid_mamba:
        return True   # hybrid MLA + Mamba-style state (catalog: hybrid_mamba)
    return None


def _model(r: TopoRole) -> str:
    s = r.doc_spec.model
    return s.path or s.name


# ------------------------------------------------------------------ engine support

@rule("sglang-topology-version-unverified", checked_by="product", family="topology", severity="error", engines=SGL,
      field="spec.engine.version",
      title="SGLang P/D and multi-node flags were not verified for this engine version",
      why="The P/D flags (--disaggregation-mode, -transfer-backend, -bootstrap-port, -ib-device) and the multi-node "
          "flags (--nnodes, --node-rank, --dist-init-addr) were read in the wheels of the versions marked topology: "
          "true; on another build (the kimi-k3 image has no public wheel) a flag may be missing or mean something "
          "else, and the pods would not find each other.",
      fix="Use engine version 0.5.23 (or 0.5.22) for SGLang roles that span pods or disaggregate.",
      source="gpustack_k3/catalog/data/engines/sglang.yaml (trait topology; "
             "srt/arg_groups/fields/disagg.py:55-87@0.5.23, srt/arg_groups/fields/parallel.py:32-44@0.5.23)",
      no_cel=NO_CEL)
def check_sglang_topology_version_unverified(t: Topology):
    r = t.roles[0].resolved
    if r.trait("topology") is True or t.source == "argv":
        return   # a command line is read by its release's parser: nothing of ours is rendered from it
    if any(x.pods > 1 for x in t.roles) or t.disaggregation is not None:
        yield "spec.engine.version", (f"SGLang {r.version.key}: the P/D and multi-node flags were not read for this "
                                      "version (catalog trait topology)")


# ------------------------------------------------------------------ prefill/decode

@rule("sglang-pd-roles", checked_by="runtime-only",
      fails_at="first request: the router hands a request to a server not in that P/D mode (it never gets or sends KV)",
      family="topology", severity="error", engines=SGL, field="spec.disaggregation",
      title="SGLang P/D needs a prefill server and a decode server, each in its --disaggregation-mode",
      why="The P/D router sends a request to a prefill server (--disaggregation-mode prefill, which runs the bootstrap "
          "server) and to a decode server (--disaggregation-mode decode) that fetches the KV from it; a side in another "
          "mode (null runs the whole request, the opposite mode waits for the wrong peer) starts fine and fails on "
          "the first request. A serve role beside P/D roles gets requests the P/D router does not know about.",
      fix="Give the document one prefill and one decode role and spec.disaggregation (check-pd: "
          "--disaggregation-mode prefill on the prefill line, decode on the decode line); move serve roles to their "
          "own deployment.",
      source="sglang srt/arg_groups/fields/disagg.py:55-58@0.5.23 (disaggregation_mode); "
             "sglang srt/arg_groups/pd_disaggregation_hook.py:23-196@0.5.23", no_cel=NO_CEL)
def check_sglang_pd_roles(t: Topology):
    if t.source == "document":
        yield from document_pd_roles(t)
        return
    if len(t.roles) < 2:
        return   # check-args: one line plays the role its --disaggregation-mode says
    for r in t.roles:
        if r.kind in PD_KINDS and r.pd_mode != r.kind:
            yield r.field(""), (f"{r.name}: --disaggregation-mode {r.pd_mode or 'null'} on the {r.kind} side "
                                f"(expected {r.kind})")


@rule("sglang-pd-transfer-backend", checked_by="runtime-only",
      fails_at="first request: the decode's receiver cannot talk to the prefill's sender (each backend its own protocol)",
      family="topology", severity="error", engines=SGL, field="spec.disaggregation.transferBackend",
      title="Prefill and decode must use the same KV transfer backend",
      why="Each transfer backend brings its own KV manager, sender, receiver and bootstrap protocol "
          "(get_kv_class); a prefill on mooncake and a decode on nixl never complete a transfer. SGLang does not "
          "compare the two at start-up.",
      fix="Give both sides the same --disaggregation-transfer-backend (a document sets it once: "
          "spec.disaggregation.transferBackend).",
      source="sglang srt/disaggregation/utils.py:698-780@0.5.23 (get_kv_class per backend)",
      sources={"sglang 0.5.22": "sglang srt/disaggregation/utils.py:685-727@0.5.22"}, no_cel=NO_CEL)
def check_sglang_pd_transfer_backend(t: Topology):
    for p, d in _pd_pairs(t):
        if p.transfer_backend != d.transfer_backend:
            yield d.field(""), (f"transfer backend: prefill {p.transfer_backend} != decode {d.transfer_backend}")


@rule("sglang-pd-page-size", checked_by="runtime-only",
      fails_at="first request: the decode's bootstrap handshake (try_ensure_parallel_info) raises 'Page size mismatch'",
      family="topology", severity="error", engines=SGL, field="spec.roles[].extraArgs",
      title="Prefill and decode must use the same --page-size",
      why="The decode fetches the prefill's parallel info from its bootstrap server and raises when the page sizes "
          "differ: KV pages are copied page for page.",
      fix="Give both sides the same --page-size (or leave it unset on both).",
      source="sglang srt/disaggregation/common/conn.py:1320-1325@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/disaggregation/common/conn.py:1184-1190@0.5.22"}, no_cel=NO_CEL)
def check_sglang_pd_page_size(t: Topology):
    for p, d in _pd_pairs(t):
        flag = _topo(p).get("page_size_flag", "--page-size")
        a, b = _flags(p).get(flag), _flags(d).get(flag)
        if a is not None and b is not None and _int(a) != _int(b):
            yield d.field("extraArgs"), f"--page-size: prefill {a} != decode {b}"


@rule("sglang-pd-page-size-undecided", checked_by="runtime-only",
      fails_at="first request, if the side left at its default resolves to another page size ('Page size mismatch')",
      family="topology", severity="warning", engines=SGL, field="spec.roles[].extraArgs",
      title="--page-size given on one side of a P/D pair only",
      why="The other side takes the page size its attention backend resolves at start-up; the pair matches only if "
          "that default equals the explicit value, which is decided inside the engine.",
      fix="Give the same --page-size on both sides (or on neither).",
      source="sglang srt/disaggregation/common/conn.py:1320-1325@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/disaggregation/common/conn.py:1184-1190@0.5.22"})
def check_sglang_pd_page_size_undecided(t: Topology):
    for p, d in _pd_pairs(t):
        flag = _topo(p).get("page_size_flag", "--page-size")
        a, b = _flags(p).get(flag), _flags(d).get(flag)
        if (a is None) != (b is None):
            yield d.field("extraArgs"), f"--page-size: prefill {a or 'default'}, decode {b or 'default'}"


@rule("sglang-pd-kv-dtype", checked_by="runtime-only",
      fails_at="first request: the decode's bootstrap handshake (try_ensure_parallel_info) raises 'KV cache dtype mismatch'",
      family="topology", severity="error", engines=SGL, field="spec.roles[].memory.kvCacheDtype",
      title="Prefill and decode must use the same KV cache dtype",
      why="The decode compares the prefill's kv_cache_dtype with its own at the first bootstrap and raises when they "
          "differ: the KV bytes would be read in the wrong format.",
      fix="Set the same memory.kvCacheDtype (--kv-cache-dtype) on both sides.",
      source="sglang srt/disaggregation/common/conn.py:1327-1335@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/disaggregation/common/conn.py:1192-1200@0.5.22"}, no_cel=NO_CEL)
def check_sglang_pd_kv_dtype(t: Topology):
    for p, d in _pd_pairs(t):
        a, b = str(p.resolved.value("memory.kvCacheDtype") or "auto"), str(d.resolved.value("memory.kvCacheDtype") or "auto")
        if a != b:
            yield d.field("memory.kvCacheDtype"), f"KV cache dtype: prefill {a} != decode {b}"


@rule("sglang-pd-allocation-policy", checked_by="runtime-only",
      fails_at="every request: the decode records 'Disaggregation decode allocation policy mismatch' and fails it",
      family="topology", severity="error", engines=SGL, field="spec.roles[].extraArgs",
      title="Prefill and decode must use the same decode allocation policy",
      why="The decode compares the prefill's --disaggregation-decode-allocation-policy with its own for every "
          "request and fails the request when they differ.",
      fix="Set --disaggregation-decode-allocation-policy identically on both roles (or on neither: early).",
      source="sglang srt/disaggregation/common/conn.py:2527-2535@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/disaggregation/common/conn.py:2213-2219@0.5.22"}, no_cel=NO_CEL)
def check_sglang_pd_allocation_policy(t: Topology):
    for p, d in _pd_pairs(t):
        flag = _topo(p).get("allocation_policy_flag", "--disaggregation-decode-allocation-policy")
        a, b = _flags(p).get(flag) or "early", _flags(d).get(flag) or "early"
        if a != b:
            yield d.field("extraArgs"), f"decode allocation policy: prefill {a} != decode {b}"


@rule("sglang-pd-model", checked_by="runtime-only",
      fails_at="never detected: the decode continues from another model's KV (wrong output)",
      family="topology", severity="error", engines=SGL, field="spec.model.path",
      title="Prefill and decode must serve the same model",
      why="SGLang's bootstrap compares page size, KV dtype and layout, not the model: a decode of another model with "
          "the same KV geometry decodes from KV it did not compute.",
      fix="Give both command lines the same --model-path (a document shares spec.model across roles).",
      source="sglang srt/disaggregation/common/conn.py:1293-1430@0.5.23 (what try_ensure_parallel_info compares)",
      no_cel=NO_CEL)
def check_sglang_pd_model(t: Topology):
    for p, d in _pd_pairs(t):
        if _model(p) != _model(d):
            yield d.field("model.path"), f"model: prefill {_model(p)} != decode {_model(d)}"


@rule("sglang-pd-dspark-layout", checked_by="runtime-only",
      fails_at="first request: the decode's bootstrap handshake raises 'DeepSeek-V4.1 DSpark PD layout mismatch' "
               "(or 'requires the same TP size')",
      family="topology", severity="error", engines=SGL, field="spec.speculative",
      title="DeepSeek-V4.1 P/D with DSPARK: both sides DSpark with the same draft tokens and attention TP",
      why="For models whose KV has an MLA compression ratio 2 (DeepSeek-V4.1) the prefill ships the draft's KV too: "
          "the decode compares the DSpark transfer layout (speculative_num_draft_tokens, target/draft KV layers) and "
          "the attention TP width, and raises on any difference.",
      fix="Run DSPARK on both sides with the same --speculative-num-draft-tokens, and the same attention TP "
          "(tp / attn-dp-size) on both.",
      source="sglang srt/disaggregation/common/conn.py:1358-1390@0.5.23; "
             "sglang srt/disaggregation/utils.py:1894-1914@0.5.23 (get_dsv41_spec_layout)",
      sources={"sglang 0.5.22": "sglang srt/disaggregation/common/conn.py:1205-1232@0.5.22"}, no_cel=NO_CEL)
def check_sglang_pd_dspark_layout(t: Topology):
    for p, d in _pd_pairs(t):
        models = _topo(p).get("dspark_layout_models", [])
        m = p.resolved.model
        if m is None or p.doc_spec.model.name not in models:
            continue
        sp, sd = p.doc_spec.speculative, d.doc_spec.speculative
        dp_, dd = sp.method == "dspark", sd.method == "dspark"
        if not (dp_ or dd):
            continue
        if dp_ != dd:
            yield d.field("speculative"), f"DSPARK on the {'prefill' if dp_ else 'decode'} side only"
            continue
        if sp.numTokens != sd.numTokens:
            yield d.field("speculative.numTokens"), f"draft tokens: prefill {sp.numTokens} != decode {sd.numTokens}"
        if attn_tp(p) != attn_tp(d):
            yield d.field("parallel.tp"), f"attention TP: prefill {attn_tp(p)} != decode {attn_tp(d)}"


@rule("sglang-pd-decode-dcp", checked_by="runtime-only",
      fails_at="first request: the decode's bootstrap handshake raises 'PD decode DCP requires ...'",
      family="topology", severity="error", engines=SGL, field="spec.roles[].parallel.dcp",
      title="A decode with DCP needs an MLA KV pool and a prefill without attention CP or KV sharding",
      why="The decode relayouts the prefill's KV over its DCP ranks: it raises at the first bootstrap when the model's "
          "KV pool is not MLA (or hybrid MLA), when the prefill runs attention context parallelism, or when the "
          "prefill shards its KV cache (--enable-kv-cache-sharding).",
      fix="Use DCP on the decode only for MLA models, with a prefill at --attn-cp-size 1 and without "
          "--enable-kv-cache-sharding (or set the decode's parallel.dcp 1).",
      source="sglang srt/disaggregation/common/conn.py:1411-1425@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/disaggregation/common/conn.py:1253-1262@0.5.22"}, no_cel=NO_CEL)
def check_sglang_pd_decode_dcp(t: Topology):
    for p, d in _pd_pairs(t):
        if d.dcp <= 1:
            continue
        if _mla(d) is False:
            yield d.field("parallel.dcp"), f"decode DCP {d.dcp} on a model whose KV pool is not MLA"
        cp = _int(_flags(p).get("--attn-cp-size")) or 1
        if cp != 1:
            yield d.field("parallel.dcp"), f"decode DCP {d.dcp} with prefill --attn-cp-size {cp}"
        if "--enable-kv-cache-sharding" in _flags(p) and d.resolved.trait("pd_dcp_refuses_kv_sharding"):
            yield d.field("parallel.dcp"), f"decode DCP {d.dcp} with a prefill that shards its KV cache"


@rule("sglang-pd-prefill-dcp", checked_by="runtime-only",
      fails_at="start-up warning only; a differing DCP layout is not supported at the KV transfer",
      family="topology", severity="warning", engines=SGL, field="spec.roles[].parallel.dcp",
      title="DCP on an SGLang prefill needs the decode's DCP layout",
      why="SGLang supports DCP on a P/D prefill only when prefill and decode use the same DCP layout, and warns that "
          "it usually adds communication without making prefill faster.",
      fix="Set the prefill's parallel.dcp to the decode's (or to 1).",
      source="sglang srt/arg_groups/pd_disaggregation_hook.py:57-62@0.5.23")
def check_sglang_pd_prefill_dcp(t: Topology):
    for p, d in _pd_pairs(t):
        if p.dcp > 1 and p.dcp != d.dcp:
            yield p.field("parallel.dcp"), f"prefill DCP {p.dcp} != decode DCP {d.dcp}"


@rule("sglang-pd-prefill-fake-backend", checked_by="oracle", family="topology", severity="error", engines=SGL,
      field="spec.disaggregation.transferBackend",
      title="A prefill server cannot use the fake transfer backend",
      why="The fake backend moves no KV (synthetic decode benchmarks); SGLang refuses it on a prefill server at "
          "start-up.",
      fix="Use nixl or mooncake on the prefill side.",
      source="sglang srt/arg_groups/pd_disaggregation_hook.py:145-148@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/arg_groups/pd_disaggregation_hook.py:152-155@0.5.22"}, no_cel=NO_CEL)
def check_sglang_pd_prefill_fake_backend(t: Topology):
    for r in t.roles:
        if r.pd_mode == "prefill" and r.transfer_backend == "fake":
            yield r.field(""), f"{r.name}: --disaggregation-transfer-backend fake on a prefill server"


@rule("sglang-bootstrap-port", checked_by="runtime-only",
      fails_at="start-up: the prefill's bootstrap server or HTTP server fails to bind",
      family="topology", severity="error", engines=SGL, field="spec.disaggregation.bootstrapPort",
      title="The bootstrap port must differ from the server's other ports",
      why="A prefill server listens on --disaggregation-bootstrap-port beside its HTTP port (and, multi-node, the "
          "ports derived from --dist-init-addr); a port used twice fails to bind.",
      fix="Move spec.disaggregation.bootstrapPort (--disaggregation-bootstrap-port) clear of the serving port and "
          "the dist-init port range.",
      source="sglang srt/managers/disagg_service.py:28-40@0.5.23 (a prefill starts the bootstrap server on that port); "
             "sglang srt/server_args.py:826-845@0.5.23 (ports derived from --dist-init-addr)",
      no_cel=NO_CEL)
def check_sglang_bootstrap_port(t: Topology):
    for r in t.roles:
        if r.pd_mode != "prefill" or r.bootstrap_port is None:
            continue
        if r.bootstrap_port == r.resolved.port:
            yield (r.field("") if t.source == "argv" else "spec.disaggregation.bootstrapPort"), (
                f"{r.name}: bootstrap port {r.bootstrap_port} is the HTTP port")
        base = _topo(r).get("dist_init_port")
        if r.pods > 1 and base is not None and base <= r.bootstrap_port <= base + 16:
            yield "spec.disaggregation.bootstrapPort", (
                f"{r.name}: bootstrap port {r.bootstrap_port} inside the dist-init port range {base}..{base + 16}")


@rule("sglang-replayssm-spec-on-pd-prefill", checked_by="oracle", family="topology", severity="error", engines=SGL,
      field="spec.roles[].sglang.linearReplayssmSpec", title="ReplaySSM spec verify is refused on a P/D prefill server",
      why="SGLang raises '--enable-linear-replayssm-spec is not supported on a PD prefill server': the ring is "
          "spec-verify-only scratch and a prefill server never runs speculative verify.",
      fix="Set sglang.linearReplayssmSpec on the decode role only (not in the shared spec.sglang); check-args/check-pd: "
          "drop --enable-linear-replayssm-spec from the --disaggregation-mode prefill line.",
      source="sglang arg_groups/attention_hook.py:493-498@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/attention_hook.py:492-497@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/attention_hook.py:493-498@0.5.23"}, no_cel=NO_CEL)
def check_sglang_replayssm_spec_on_pd_prefill(t: Topology):
    for r in t.roles:
        if r.kind == "prefill" and r.doc_spec.sglang.linearReplayssmSpec:
            yield r.field("sglang.linearReplayssmSpec"), f"{r.name}: --enable-linear-replayssm-spec on a prefill server"


# ------------------------------------------------------------------ DP attention, EP, PP, multi-node

@rule("sglang-attn-dp-divides-tp", checked_by="oracle", family="topology", severity="error", engines=SGL,
      field="spec.roles[].sglang.attnDpSize",
      title="--attn-dp-size must divide --tp-size",
      why="DP attention splits the TP group into attn-dp-size attention groups of tp/attn-dp-size ranks each; SGLang "
          "asserts that the division is exact at start-up.",
      fix="Pick sglang.attnDpSize among the divisors of parallel.tp (DEP: equal to TP).",
      source="sglang srt/arg_groups/parallel_hook.py:326@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/arg_groups/parallel_hook.py:314@0.5.22"}, no_cel=NO_CEL)
def check_sglang_attn_dp_divides_tp(t: Topology):
    for r in t.roles:
        n = attn_dp(r)
        if n > 1 and r.tp % n:
            yield r.field("sglang.attnDpSize"), f"{r.name}: attention DP {n} does not divide TP {r.tp}"


@rule("sglang-attn-dp-with-replicas", checked_by="oracle", family="topology", severity="error", engines=SGL,
      field="spec.roles[].parallel.dp",
      title="DP attention cannot be combined with data-parallel replicas",
      why="SGLang refuses --dp-size > 1 (replicas of the whole model) together with --attn-dp-size > 1.",
      fix="Use either sglang.attnDpSize (DP attention inside one TP group) or parallel.dp (replicas), not both; "
          "for more replicas add instances.",
      source="sglang srt/arg_groups/parallel_hook.py:287-292@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/arg_groups/parallel_hook.py:281-287@0.5.22"}, no_cel=NO_CEL)
def check_sglang_attn_dp_with_replicas(t: Topology):
    for r in t.roles:
        if attn_dp(r) > 1 and dp_replicas(r) > 1:
            yield r.field("parallel.dp"), f"{r.name}: DP {dp_replicas(r)} replicas with attention DP {attn_dp(r)}"


@rule("sglang-dspark-attn-dp", checked_by="oracle", family="topology", severity="error", engines=SGL,
      field="spec.roles[].sglang",
      title="DSPARK with DP attention needs --enable-dp-lm-head and a TP, megamoe or mori MoE",
      why="SGLang refuses DSpark with attention DP unless the LM head is vocabulary-parallel inside the attention TP "
          "group (--enable-dp-lm-head), and accepts only the moe_a2a_backends none (built-in TP MoE), megamoe and "
          "mori with it (not deepep, which --enable-waterfill switches any other backend to).",
      fix="Set sglang.enableDpLmHead true and sglang.moeA2aBackend none, megamoe or mori on roles with DSPARK and "
          "sglang.attnDpSize > 1 (or drop DP attention there).",
      source="sglang srt/arg_groups/speculative_hook.py:674-683@0.5.23, srt/arg_groups/moe_hook.py:461-468@0.5.23, "
             "srt/arg_groups/overrides.py:1596-1607@0.5.23 (--enable-waterfill: deepep)",
      sources={"sglang 0.5.22": "sglang srt/arg_groups/speculative_hook.py:613-622@0.5.22, "
                                "srt/arg_groups/moe_hook.py:397-405@0.5.22, srt/arg_groups/overrides.py:1548-1559@0.5.22 "
                                "(--enable-waterfill: deepep)"}, no_cel=NO_CEL)
def check_sglang_dspark_attn_dp(t: Topology):
    for r in t.roles:
        if r.doc_spec.speculative.method != "dspark" or attn_dp(r) <= 1:
            continue
        if not r.resolved.value("sglang.enableDpLmHead"):
            yield r.field("sglang.enableDpLmHead"), f"{r.name}: DSPARK with attention DP {attn_dp(r)} needs --enable-dp-lm-head"
        # ascend_tp is resolved to none before this check (moe_hook.py:461-468@0.5.23, 397-405@0.5.22)
        # the backend after the pipeline's overrides (--enable-waterfill makes it deepep: held-out seed 64283, 0.5.22)
        got = a2a_after_overrides(r)
        if got not in ("none", "megamoe", "mori", "ascend_tp"):
            how = "" if got == a2a(r) else " (--enable-waterfill turns the backend into deepep)"
            yield r.field("sglang.moeA2aBackend"), (f"{r.name}: DSPARK with attention DP and --moe-a2a-backend "
                                                    f"{got}{how} (none, megamoe or mori)")


@rule("sglang-dspark-pp-prefill", checked_by="oracle", family="topology", severity="error", engines=SGL,
      field="spec.roles[].parallel.pp",
      title="DSPARK with pipeline parallelism runs only on a P/D prefill server",
      why="SGLang refuses DSpark with --pp-size > 1 unless the server is a P/D prefill: decode and aggregated "
          "serving need pp_size 1.",
      fix="Use parallel.pp 1 on decode and serve roles with DSPARK (PP only on the prefill role).",
      source="sglang srt/arg_groups/speculative_hook.py:713-718@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/arg_groups/speculative_hook.py:652-657@0.5.22"}, no_cel=NO_CEL)
def check_sglang_dspark_pp_prefill(t: Topology):
    for r in t.roles:
        if r.doc_spec.speculative.method == "dspark" and r.pp > 1 and r.pd_mode != "prefill":
            yield r.field("parallel.pp"), f"{r.name}: DSPARK with PP {r.pp} on a {r.pd_mode or 'non-disaggregated'} server"


@rule("sglang-nnodes-gpus", checked_by="runtime-only",
      fails_at="start-up: a node gets more TP ranks than GPUs, or the group waits for ranks that never start",
      family="topology", severity="error", engines=SGL, field="spec.roles[].gpusPerPod",
      title="A multi-node SGLang instance spreads TP x PP x DP ranks evenly over its pods",
      why="With --nnodes N every node runs tp_size / (N / pp_size) TP ranks on its own GPUs: the pods of an instance "
          "must together hold exactly TP x PP x DP GPUs, the same number each.",
      fix="Set gpusPerPod x podsPerInstance = parallel.tp x parallel.pp x parallel.dp (TP counts every GPU of the "
          "instance on SGLang: DEP32 over 8 trays is tp 32, attnDpSize 32, ep 32, 8 pods of 4 GPUs).",
      source="sglang srt/managers/data_parallel_controller.py:694-703@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/managers/data_parallel_controller.py:640-649@0.5.22"}, no_cel=NO_CEL)
def check_sglang_nnodes_gpus(t: Topology):
    for r in t.roles:
        n = r.nnodes or r.pods
        if n <= 1 or r.gpus_per_pod is None:
            continue
        world = r.tp * r.pp * dp_replicas(r)
        if world != n * r.gpus_per_pod:
            yield r.field("gpusPerPod"), (f"{r.name}: {n} pods x {r.gpus_per_pod} GPUs = {n * r.gpus_per_pod}, but "
                                          f"TP {r.tp} x PP {r.pp} x DP {dp_replicas(r)} = {world} ranks")


@rule("sglang-ep-size", checked_by="product", family="topology", severity="info", engines=SGL,
      field="spec.roles[].parallel.ep",
      title="The expert-parallel group on SGLang is --ep-size ranks of the TP group",
      why="SGLang shards the routed experts over --ep-size ranks (moe_ep_size); with DP attention and DeepEP the "
          "usual layout is ep = tp = attn-dp-size (wide EP). Each rank holds experts / EP of them; the planner sizes "
          "the weights per GPU that way.",
      fix="Nothing to fix; size the instance so experts / EP leaves room for the KV cache (gpustack-k3 plan).",
      source="sglang srt/runtime_context.py:159-217@0.5.23 (parallel_widths_of, moe_ep_size_of)")
def check_sglang_ep_size(t: Topology):
    for r in t.roles:
        ep = int(r.resolved.value("parallel.ep") or 1)
        if ep > 1:
            m = r.resolved.model
            experts = getattr(m, "routed_experts", None) if m else None
            per = f"; {experts} routed experts -> {experts / ep:g} per rank" if experts else ""
            yield r.field("parallel.ep"), (f"role {r.name}: EP {ep} of TP {r.tp}, attention DP {attn_dp(r)}, "
                                           f"MoE all-to-all {a2a(r)}{per}")


def _deepep_mode(r: TopoRole) -> str | None:
    return r.doc_spec.sglang.deepepMode if r.doc_spec.sglang is not None else None


@rule("sglang-deepep-mode-ignored", checked_by="product", family="topology", severity="warning", engines=SGL,
      field="spec.roles[].sglang.deepepMode",
      title="--deepep-mode without the DeepEP (or Mori) all-to-all has no effect",
      why="SGLang reads --deepep-mode only when --moe-a2a-backend is deepep or mori; with another backend the mode is "
          "silently ignored, so the dispatch mode you chose is not the one that runs.",
      fix="Set sglang.moeA2aBackend deepep (or mori), or drop sglang.deepepMode.",
      source="sglang srt/arg_groups/fields/exec_.py:898-901@0.5.23; sglang srt/arg_groups/moe_hook.py:362-390@0.5.23")
def check_sglang_deepep_mode_ignored(t: Topology):
    for r in t.roles:
        mode = _deepep_mode(r)
        if mode not in (None, "auto") and a2a(r) not in ("deepep", "mori"):
            yield r.field("sglang.deepepMode"), f"{r.name}: --deepep-mode {mode} with --moe-a2a-backend {a2a(r)}"


@rule("sglang-deepep-normal-no-graphs", checked_by="runtime-only",
      fails_at="start-up: logs 'Cuda graph is disabled because deepep_mode=normal' and decodes without CUDA graphs "
               "(does not fail)",
      family="topology", severity="warning", engines=SGL, field="spec.roles[].sglang.deepepMode",
      title="DeepEP normal mode switches decode CUDA graphs off",
      why="With --moe-a2a-backend deepep and --deepep-mode normal SGLang disables the decode CUDA graphs: every decode "
          "step runs eagerly, which costs latency on a decode role.",
      fix="Use deepepMode auto (low_latency for decode batches, normal for prefill) or low_latency on decode roles.",
      source="sglang srt/arg_groups/moe_hook.py:383-390@0.5.23")
def check_sglang_deepep_normal_no_graphs(t: Topology):
    for r in t.roles:
        if a2a(r) == "deepep" and _deepep_mode(r) == "normal" and r.kind != "prefill" and r.pd_mode != "prefill":
            yield r.field("sglang.deepepMode"), f"{r.name}: DeepEP normal mode: no decode CUDA graphs"


@rule("sglang-ep-divides-tp", checked_by="runtime-only",
      fails_at="distributed init: the expert-parallel groups leave TP ranks in no group (config time accepts it)",
      family="topology", severity="error", engines=SGL, field="spec.roles[].parallel.ep",
      title="--ep-size must divide --tp-size",
      why="SGLang derives the MoE TP width as tp // ep (runtime_context.py) and tiles the TP group with expert-parallel "
          "groups of ep ranks, moe_tp of them; when ep does not divide tp the last tp - ep x (tp // ep) ranks belong "
          "to no expert-parallel group. ServerArgs resolution does not check it (0.5.23 accepts --ep-size 3 and 16 "
          "with --tp-size 8 at config time).",
      fix="Pick parallel.ep among the divisors of parallel.tp (wide EP: ep = tp).",
      source="sglang srt/runtime_context.py:141-155@0.5.23 (moe_tp_size = tp // ep); "
             "sglang srt/distributed/parallel_state.py:2891-2908@0.5.23 (the expert-parallel groups)",
      no_cel=NO_CEL)
def check_sglang_ep_divides_tp(t: Topology):
    for r in t.roles:
        ep = int(r.resolved.value("parallel.ep") or 1)
        if ep > 1 and (r.tp % ep or ep > r.tp):
            yield r.field("parallel.ep"), f"{r.name}: EP {ep} does not divide TP {r.tp}"


# ------------------------------------------------------------------ DeepSeek-V4.1 DSpark P/D

def _deepseek_v41(r: TopoRole) -> bool:
    """model_type deepseek_v41 (config.json), else the catalog's DeepSeek-V4.1 entry."""
    arch = r.resolved.arch
    if arch is not None and arch.model_type is not None:
        return arch.model_type == "deepseek_v41"
    return r.doc_spec.model.name in _topo(r).get("dspark_layout_models", ())


@rule("sglang-dsv41-spec-pd", checked_by="oracle", family="topology", severity="error", engines=SGL,
      field="spec.roles[]",
      title="DeepSeek-V4.1 P/D with speculative decoding: static verify, Mooncake or NIXL, DCP 1, CP only on prefill",
      why="SGLang refuses a DeepSeek-V4.1 P/D server (prefill or decode) with a speculative algorithm unless "
          "SGLANG_RAGGED_VERIFY_MODE is static (the default), the transfer backend is mooncake or nixl, DCP is 1, and "
          "context parallelism (--enable-prefill-cp or --attn-cp-size other than 1) is only the prefill's "
          "--enable-prefill-cp with --cp-strategy interleave.",
      fix="Leave SGLANG_RAGGED_VERIFY_MODE unset (static), use --disaggregation-transfer-backend mooncake or nixl, "
          "DCP 1, and on the prefill only --enable-prefill-cp --cp-strategy interleave for context parallelism.",
      source="sglang srt/arg_groups/deepseek_v4_hook.py:355-382@0.5.23; speculative/ragged_verify.py:19-27@0.5.23",
      sources={"sglang 0.5.22": "sglang srt/arg_groups/deepseek_v4_hook.py:286-313@0.5.22"}, no_cel=NO_CEL)
def check_sglang_dsv41_spec_pd(t: Topology):
    for r in t.roles:
        algo = speculative_algorithm(r.resolved)
        if r.pd_mode not in ("prefill", "decode") or algo in (None, "NONE") or not _deepseek_v41(r):
            continue
        flags = _flags(r)
        prefill_cp = "--enable-prefill-cp" in flags and flags.get("--enable-prefill-cp") in (None, "true", "True", "1")
        cp_ok = r.pd_mode == "prefill" and prefill_cp and flags.get("--cp-strategy") == "interleave"
        mode = env_value(r.resolved, "SGLANG_RAGGED_VERIFY_MODE", env=r.env or {}) or "static"
        why = []
        if mode != "static":
            why.append(f"SGLANG_RAGGED_VERIFY_MODE={mode}")
        backend = r.transfer_backend or _topo(r).get("transfer_backend")
        if backend not in ("mooncake", "nixl"):
            why.append(f"transfer backend {backend}")
        if (prefill_cp or (_int(flags.get("--attn-cp-size")) or 1) != 1) and not cp_ok:
            why.append("context parallelism other than the prefill's --enable-prefill-cp --cp-strategy interleave")
        if r.dcp != 1:
            why.append(f"DCP {r.dcp}")
        if why:
            yield r.field(""), f"{r.name}: DeepSeek-V4.1 {r.pd_mode} server with {algo}: {', '.join(why)}"
