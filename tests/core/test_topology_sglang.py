"""SGLang topologies (docs/design/007-sglang-topologies.md): per rule of core/rules/topology_sglang.py a firing and a
quiet case from the two SGLang P/D presets (they join tests/core/test_rules_topology.py's TOPOLOGY_CASES), and the
launch: what each role's pods run (P/D mode, transfer backend, bootstrap port, --nnodes, per-pod --node-rank and
--dist-init-addr)."""
from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import Refused, build_topology_launch
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules import validate
from gpustack_k3.core.topology import Topology, document_topology, role_views

SGK = "kimi-k3-b300-1p1d-sglang"
SGD = "dsv41-flash-gb300-8p1d-sglang"
KIMI_VLLM = "kimi-k3-b300-1p1d"


def data(preset: str) -> dict:
    return copy.deepcopy(load_catalog().presets[preset].document)


def edit(preset: str, fn: Callable[[dict], None] | None = None) -> DeploymentDocument:
    d = data(preset)
    if fn:
        fn(d)
    return DeploymentDocument.model_validate(d)


def doc_case(preset: str, fn: Callable[[dict], None] | None = None) -> Callable[[], DeploymentDocument]:
    return lambda: edit(preset, fn)


def _set(path: str, value, name: str | None = None):
    def fn(d: dict) -> None:
        cur = next(r for r in d["spec"]["roles"] if r["name"] == name) if name else d["spec"]
        *head, last = path.split(".")
        for p in head:
            cur = cur.setdefault(p, {})
        cur[last] = value
    return fn


def _both(*fns):
    def fn(d: dict) -> None:
        for f in fns:
            f(d)
    return fn


def tweak(preset: str, name: str, **facts) -> Callable[[], Topology]:
    """The preset's topology with one role's launch facts replaced (what a command line can state)."""
    def build() -> Topology:
        t = document_topology(edit(preset))
        return Topology([r._replace(**facts) if r.name == name else r for r in t.roles], t.disaggregation, t.source)
    return build


def tweak_doc(preset: str, name: str, fn: Callable[[dict], None]) -> Callable[[], Topology]:
    """The preset's topology with one role resolved from an edited document (a second command line that differs
    where a document cannot: the model)."""
    def build() -> Topology:
        t = document_topology(edit(preset))
        other = edit(preset, fn)
        view = next(v for v in role_views(other) if v.role.name == name)
        r2 = resolve(view.document)
        return Topology([r._replace(resolved=r2) if r.name == name else r for r in t.roles], t.disaggregation,
                        t.source)
    return build


def _drop_decode(d: dict) -> None:
    d["spec"]["roles"] = [r for r in d["spec"]["roles"] if r["role"] != "decode"]


SGLANG_CASES: dict[str, tuple[Callable, Callable]] = {
    "sglang-topology-unsupported": (doc_case(SGK, _set("parallel.dpLocal", 1, "decode")), doc_case(SGK)),
    "sglang-pd-fields-on-vllm": (doc_case(KIMI_VLLM, _set("disaggregation.transferBackend", "nixl")),
                                 doc_case(KIMI_VLLM)),
    "sglang-topology-version-unverified": (doc_case(SGK, _set("engine.version", "kimi-k3")), doc_case(SGK)),
    "sglang-pd-roles": (doc_case(SGK, _drop_decode), doc_case(SGK)),
    "sglang-pd-transfer-backend": (tweak(SGK, "decode", transfer_backend="mooncake"), doc_case(SGK)),
    "sglang-pd-page-size": (doc_case(SGK, _both(_set("extraArgs", ["--page-size", "64"], "decode"),
                                                _set("extraArgs", ["--page-size", "32"], "prefill"))),
                            doc_case(SGK, _set("extraArgs", ["--page-size", "64"]))),
    "sglang-pd-page-size-undecided": (doc_case(SGK, _set("extraArgs", ["--page-size", "64"], "decode")),
                                      doc_case(SGK, _set("extraArgs", ["--page-size", "64"]))),
    "sglang-pd-kv-dtype": (doc_case(SGK, _set("memory.kvCacheDtype", "auto", "prefill")), doc_case(SGK)),
    "sglang-pd-allocation-policy": (
        doc_case(SGK, _set("extraArgs", ["--disaggregation-decode-allocation-policy", "prefill_complete"], "decode")),
        doc_case(SGK, _set("extraArgs", ["--disaggregation-decode-allocation-policy", "early"], "decode"))),
    "sglang-pd-model": (tweak_doc(SGK, "decode", _set("model.path", "/models/Kimi-K3-other")), doc_case(SGK)),
    "sglang-pd-dspark-layout": (doc_case(SGD, _set("sglang.attnDpSize", 1, "prefill")), doc_case(SGD)),
    "sglang-pd-decode-dcp": (doc_case(SGK, _set("extraArgs", ["--attn-cp-size", "2"], "prefill")), doc_case(SGK)),
    "sglang-pd-prefill-dcp": (doc_case(SGK, _set("parallel.dcp", 1, "decode")), doc_case(SGK)),
    "sglang-pd-prefill-fake-backend": (tweak(SGK, "prefill", transfer_backend="fake"), doc_case(SGK)),
    "sglang-bootstrap-port": (doc_case(SGK, _set("disaggregation.bootstrapPort", 30000)),
                              doc_case(SGK, _set("disaggregation.bootstrapPort", 9000))),
    "sglang-attn-dp-divides-tp": (doc_case(SGD, _set("sglang.attnDpSize", 3, "decode")), doc_case(SGD)),
    "sglang-attn-dp-with-replicas": (doc_case(SGD, _set("parallel.dp", 2, "prefill")), doc_case(SGD)),
    "sglang-replayssm-spec-on-pd-prefill": (doc_case(SGK, _set("sglang.linearReplayssmSpec", True, "prefill")),
                                            doc_case(SGK)),
    "sglang-dspark-attn-dp": (doc_case(SGD, _set("sglang.moeA2aBackend", "deepep", "decode")),
                              doc_case(SGD, _set("sglang.moeA2aBackend", "megamoe", "decode"))),
    "sglang-dspark-pp-prefill": (doc_case(SGK, _set("parallel.pp", 2, "decode")),
                                 doc_case(SGK, _set("parallel.pp", 2, "prefill"))),
    "sglang-nnodes-gpus": (doc_case(SGD, _set("gpusPerPod", 8, "decode")), doc_case(SGD)),
    "sglang-ep-size": (doc_case(SGD), doc_case(SGK)),
    "sglang-ep-divides-tp": (doc_case(SGD, _set("parallel.ep", 3, "decode")), doc_case(SGD)),
    "sglang-deepep-mode-ignored": (doc_case(SGD, _set("sglang.deepepMode", "low_latency", "decode")),
                                   doc_case(SGD, _set("sglang.deepepMode", "auto", "decode"))),
    "sglang-deepep-normal-no-graphs": (doc_case(SGK, _both(_set("sglang.moeA2aBackend", "deepep", "decode"),
                                                           _set("sglang.deepepMode", "normal", "decode"))),
                                       doc_case(SGK, _both(_set("sglang.moeA2aBackend", "deepep", "prefill"),
                                                           _set("sglang.deepepMode", "normal", "prefill")))),
}


def _rule_hits(case, rule_id: str) -> list:
    from gpustack_k3.core.rules import validate_topology

    x = case()
    fs = validate_topology(x) if isinstance(x, Topology) else validate(x)
    return [f for f in fs if f.rule == rule_id]


def test_the_deprecated_dp_attention_spelling_is_read_as_the_release_reads_it():
    """`--dp-size 8 --enable-dp-attention` is --attn-dp-size 8 with --dp-size 1 (parallel_hook.py:39-61@0.5.23):
    with --tp-size 6 it fails the divisibility check, and it is not DP replicas beside DP attention."""
    from gpustack_k3.core.rules import topology_sglang as ts

    t = tweak(SGK, "decode", extra_flags={"--enable-dp-attention": None})()
    d = next(r for r in t.roles if r.name == "decode")
    d = d._replace(resolved=resolve(next(v for v in role_views(edit(SGK, _set("parallel.dp", 8, "decode")))
                                         if v.role.name == "decode").document))
    assert (ts.attn_dp(d), ts.dp_replicas(d), ts.attn_tp(d)) == (8, 1, 1)


@pytest.mark.parametrize("preset", [SGK, SGD])
def test_the_sglang_presets_have_no_errors(preset):
    assert [f for f in validate(edit(preset)) if f.severity == "error"] == []


def _argv(launch) -> list[str]:
    return [t for a in launch.arguments for t in a.tokens]


def test_the_kimi_1p1d_launch_runs_each_side_in_its_mode():
    topo, _, _ = build_topology_launch(edit(SGK))
    assert topo.disaggregation == "nixl"
    for role in topo.roles:
        argv = _argv(role.leader)
        assert argv[argv.index("--disaggregation-mode") + 1] == role.kind
        assert argv[argv.index("--disaggregation-transfer-backend") + 1] == "nixl"
        assert argv[argv.index("--disaggregation-bootstrap-port") + 1] == "8998"   # the release default
        assert role.worker is None and role.per_pod == []
        assert "--kv-transfer-config" not in argv and "VLLM_NIXL_SIDE_CHANNEL_HOST" not in role.env_from_pod
    assert topo.role("prefill").ports == {"bootstrap": 8998} and topo.role("decode").ports == {}


def test_the_dsv41_decode_spans_eight_pods_with_per_pod_rank_and_leader_endpoint():
    topo, _, _ = build_topology_launch(edit(SGD))
    dec = topo.role("decode")
    argv = _argv(dec.leader)
    assert argv[argv.index("--nnodes") + 1] == "8" and argv.count("--nnodes") == 1
    for flag, value in (("--tp-size", "32"), ("--attn-dp-size", "32"), ("--ep-size", "32")):
        assert argv[argv.index(flag) + 1] == value
    assert "--enable-dp-lm-head" in argv
    assert _argv(dec.worker) == argv   # every pod runs the same line; the rank comes per pod
    assert [(a.flag, a.source, a.port) for a in dec.per_pod] == [
        ("--node-rank", "worker_index", None), ("--dist-init-addr", "leader_endpoint", 20000)]
    assert dec.load_balancing == "internal" and dec.pods_per_instance == 8 and dec.gpus_per_pod == 4
    pre = topo.role("prefill")
    assert pre.instances == 8 and pre.per_pod == [] and "--nnodes" not in _argv(pre.leader)


def test_spec_fields_override_the_release_defaults():
    topo, _, _ = build_topology_launch(edit(SGK, _both(_set("disaggregation.transferBackend", "mooncake"),
                                                       _set("disaggregation.bootstrapPort", 9100),
                                                       _set("disaggregation.ibDevice", "mlx5_0,mlx5_1"))))
    argv = _argv(topo.role("decode").leader)
    assert argv[argv.index("--disaggregation-transfer-backend") + 1] == "mooncake"
    assert argv[argv.index("--disaggregation-bootstrap-port") + 1] == "9100"
    assert argv[argv.index("--disaggregation-ib-device") + 1] == "mlx5_0,mlx5_1"
    assert topo.role("prefill").ports == {"bootstrap": 9100}


def test_a_refused_sglang_topology_renders_nothing():
    with pytest.raises(Refused) as exc:
        build_topology_launch(edit(SGD, _set("sglang.moeA2aBackend", "deepep", "decode")))
    assert any(f.rule == "sglang-dspark-attn-dp" for f in exc.value.findings)


def test_the_catalog_topology_flags_are_the_flag_tables():
    """One fact: the topology section's DP-attention/EP flags are the flag table's spelling of those fields."""
    eng = load_catalog().engine("sglang")
    table = {f.field: f.flag for f in eng.flags}
    topo = eng.topology
    assert topo["dp_attention_flag"] == table["sglang.attnDpSize"]
    assert topo["dp_size_flag"] == table["parallel.dp"] and topo["ep_size_flag"] == table["parallel.ep"]
    assert topo["a2a_backend_flag"] == table["sglang.moeA2aBackend"]
    assert topo["deepep_mode_flag"] == table["sglang.deepepMode"]
    assert topo["dp_lm_head_flag"] == table["sglang.enableDpLmHead"]


def test_the_plan_shards_experts_over_sglangs_ep():
    """SGLang's EP is --ep-size (runtime_context.py:159-217@0.5.23), not vLLM's TP x DP: DEP32 holds 384 / 32 = 12
    routed experts per GPU; DP attention is named, and adds no GPUs."""
    from gpustack_k3.core.plan_topology import plan_topology

    plan = {r.role: r for r in plan_topology(edit(SGD)).roles}
    dec = plan["decode"]
    assert (dec.tp, dec.ep, dec.routed_experts_per_rank, dec.gpus) == (32, 32, 12, 32)
    assert any("attention DP 32 inside TP 32" in n for n in dec.notes)
    kimi = {r.role: r for r in plan_topology(edit(SGK)).roles}
    assert kimi["decode"].ep == 1 and kimi["decode"].routed_experts_per_rank is None
