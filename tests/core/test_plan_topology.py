"""The planner per role: the seed's derivable figures (docs/sources.md#dsv41-flash-layout), "unknown" where the
catalog has no figure (never a number), Kimi-K3 1P1D planned fully from its single-node figures, experts sharded
over EP with dense parts replicated; `plan` / `dry-run` / `render` of documents with roles through the CLI."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.cli.common import load_document
from gpustack_k3.core import plan_topology as pt
from gpustack_k3.core.plan import plan
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.topology import role_views

from .test_cli import run


def tplan(preset):
    return pt.plan_topology(load_document(None, preset))


def test_seed_decode_dep32_64_per_gpu_is_2048_per_instance():
    p = tplan("dsv41-flash-gb300-8p1d")
    d = next(r for r in p.roles if r.role == "decode")
    # seed 002: DEP32 at 64 requests per GPU (TP1: one DP rank per GPU)
    assert (d.tp, d.dp, d.ep, d.dp_local, d.gpus) == (1, 32, 32, 4, 32)
    assert d.max_num_seqs_per_rank == 64 and d.concurrency_per_rank == 64
    assert d.concurrency_per_instance == 64 * 32 == 2048 and d.concurrency_per_role == 2048
    # 384 routed experts over EP 32, the DSpark draft's 128 too (EPLB includes the draft)
    assert (d.routed_experts_per_rank, d.draft_routed_experts_per_rank) == (12, 4)


@pytest.mark.parametrize("preset,prefill_instances,gpus,free", [
    ("dsv41-flash-gb300-8p1d", 8, 48, 24), ("dsv41-flash-gb300-7p1d", 7, 46, 26)])
def test_rack_totals(preset, prefill_instances, gpus, free):
    p = tplan(preset)
    pre = next(r for r in p.roles if r.role == "prefill")
    assert (pre.instances, pre.gpus, pre.ep, pre.routed_experts_per_rank) == (prefill_instances, 2 * prefill_instances, 2, 192)
    assert (p.gpus, p.gpus_per_rack, p.racks, p.gpus_free_in_racks) == (gpus, 72, 1, free)
    assert p.nodes_per_rack == 18                              # NVL72: 18 trays x 4 GPUs
    assert p.nodes == -(-prefill_instances // 2) + 8           # two DEP2 pods per 4-GPU tray + 8 decode trays
    assert p.pods == prefill_instances + 8


def test_dsv41_roles_are_planned_from_the_v4_family_config_the_assumption_named():
    """V4.1-Flash's own config.json is not public: the catalog's block is the DeepSeek-V4 family config with V4.1's
    published experts, and says so; the published 890 B/token wins over the derived KV geometry."""
    for r in tplan("dsv41-flash-gb300-8p1d").roles:
        assert r.weights_per_gpu_gib is not None and r.weights_per_gpu_gib > 0 and r.memory is None
        assert r.kv_bytes_per_token == 890
        assert any("assumed: the DeepSeek-V4 family config" in n for n in r.notes)
        # what is public is used: 890 B/token x max-num-seqs x max-model-len for one rank
        assert r.kv_gib_per_rank_at_max_seqs == pytest.approx(890 * r.max_num_seqs_per_rank * r.max_model_len / 2**30)


def test_kimi_1p1d_plans_fully_from_single_node_figures():
    doc = load_document(None, "kimi-k3-b300-1p1d")
    p = pt.plan_topology(doc)
    assert (p.gpus, p.pods, p.nodes, p.racks) == (16, 2, 2, None)
    for view, r in zip(role_views(doc), p.roles):
        single = plan(resolve(view.document))              # the rank is one TP8 engine: the single-node plan
        assert r.unknown == [] and r.memory == single.to_dict()
        assert r.weights_per_gpu_gib == pytest.approx(single.weights_gib)
        assert r.kv_tokens_per_rank == single.kv_cache_tokens
        assert r.concurrency_per_rank == min(32, single.max_concurrency)
        assert r.concurrency_per_role == r.concurrency_per_rank


def test_experts_shard_over_tp_x_dp_with_the_share_the_config_gives():
    """vLLM shards the fused-MoE layers over TP x DP devices (fused_moe/config.py:1106-1245@0.33.0): a DP 2 rank holds
    half the routed experts of a DP 1 rank; the dense parts stay / TP. The routed share comes from Kimi-K3's config
    (catalog architecture block), the calibrated TP 8 figure is scaled by it."""
    from gpustack_k3.core.plan_moe import rank_weights

    doc = load_document(None, "kimi-k3-b300-1p1d")
    data = doc.model_dump(mode="json", exclude_none=True)
    data["spec"]["roles"][1].update(podsPerInstance=2, parallel={"tp": 8, "dp": 2, "dpLocal": 1, "expertParallel": True,
                                                                    "dcp": 8})
    view = role_views(type(doc).model_validate(data))[1]
    r = resolve(view.document)
    rp = pt.plan_role(view, r)
    assert rp.ep == 16
    st = rank_weights(r.model_arch, tp=8)["stages"][0]
    share = sum(t["gib"] for t in st["terms"] if t["term"].startswith("routed_experts")) / st["gib"]
    assert 0.5 < share < 1
    assert rp.weights_per_gpu_gib == pytest.approx(194.54 * ((1 - share) + share / 2))
    assert rp.memory["weights_gib"] == pytest.approx(rp.weights_per_gpu_gib)
    assert any("/ DP 2" in n for n in rp.memory["notes"])


def test_roleless_document_plans_one_serve_role():
    p = tplan("vllm-fixed")
    (r,) = p.roles
    assert (r.kind, r.gpus, r.dp, p.racks) == ("serve", 8, 1, None)
    assert r.memory == plan(resolve(load_document(None, "vllm-fixed"))).to_dict()


# ----------------------------------------------------------------------------- CLI

def test_plan_cli_per_role_text_and_json():
    p = run("plan", "--preset", "dsv41-flash-gb300-8p1d")
    assert p.returncode == 0, p.stderr
    assert "-- role decode (decode, spec.roles[1]): 1 instance(s) x 8 pod(s) x 4 GPU(s) = 32 GPUs" in p.stdout
    assert "64 per rank, 2,048 per instance, 2,048 per role" in p.stdout
    assert "rank plan derived from catalog models.yaml deepseek-v4.1-flash: assumed" in p.stdout
    assert "1 rack(s) of 72 GPUs (18 nodes), 24 GPU(s) free" in p.stdout
    d = json.loads(run("plan", "--preset", "dsv41-flash-gb300-8p1d", "-o", "json").stdout)
    assert [r["role"] for r in d["roles"]] == ["prefill", "decode"] and d["roles"][1]["weights_per_gpu_gib"] > 0
    k = json.loads(run("plan", "--preset", "kimi-k3-b300-1p1d", "-o", "json").stdout)
    assert all(r["memory"]["kv_cache_tokens"] > 0 and r["unknown"] == [] for r in k["roles"])


def test_plan_cli_roles_refused_exit_1(tmp_path):
    import yaml

    data = load_document(None, "dsv41-flash-gb300-8p1d").model_dump(mode="json", exclude_none=True)
    data["spec"]["roles"][1]["parallel"]["dp"] = 30          # 8 pods x dpLocal 4 != 30
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment", **data}))
    p = run("plan", str(f))
    assert p.returncode == 1 and "-- role decode" in p.stdout and "spec.roles[1].parallel" in p.stderr


def test_dry_run_cli_per_role():
    p = run("dry-run", "--preset", "dsv41-flash-gb300-8p1d")
    assert p.returncode == 0, p.stderr
    assert "== launch: role decode (decode), 1 instance(s) x 8 pod(s)" in p.stdout
    assert '--data-parallel-start-rank "$((LWS_WORKER_INDEX * 4))"' in p.stdout
    assert "docker      refused: spec.roles[1].podsPerInstance" in p.stdout
    d = json.loads(run("dry-run", "--preset", "kimi-k3-b300-1p1d", "-o", "json").stdout)
    assert d["ok"] and [r["role"] for r in d["roles"]] == ["prefill", "decode"]
    assert d["roles"][0]["leader"]["argv"][:2] == ["vllm", "serve"] and "worker" not in d["roles"][0]
    assert d["plan"]["roles"][1]["memory"]["kv_cache_tokens"] > 0
    assert d["targets"]["docker"].startswith("refused: spec.disaggregation")


def test_render_cli_roles(tmp_path):
    p = run("render", "--preset", "dsv41-flash-gb300-8p1d", "--target", "launch")
    assert p.returncode == 0, p.stderr
    tl = json.loads(p.stdout)
    assert [r["role"] for r in tl["roles"]] == ["prefill", "decode"] and tl["roles"][1]["worker"] is not None
    argv = json.loads(run("render", "--preset", "dsv41-flash-gb300-8p1d", "--target", "argv").stdout)
    assert argv["roles"][1]["worker"]["per_pod_args"][-2:] == ["--data-parallel-start-rank", "$((LWS_WORKER_INDEX * 4))"]
    for target, field in (("docker", "spec.roles[1].podsPerInstance"), ("gpustack", "spec.roles[1].podsPerInstance")):
        p = run("render", "--preset", "dsv41-flash-gb300-8p1d", "--target", target, "--out", str(tmp_path / target))
        assert p.returncode == 1 and field in p.stderr and not (tmp_path / target).exists()
    p = run("render", "--preset", "kimi-k3-b300-1p1d", "--target", "docker")
    assert p.returncode == 1 and "spec.disaggregation" in p.stderr
    # one LeaderWorkerSet per role (the LWS renderer), never the base document's single-pod objects
    p = run("render", "--preset", "kimi-k3-b300-1p1d", "--target", "kubernetes")
    assert p.returncode == 0 and p.stdout.count("kind: LeaderWorkerSet") == 2
    p = run("render", "--preset", "kimi-k3-b300-1p1d", "--target", "all", "--out", str(tmp_path / "all"))
    assert p.returncode == 0, p.stderr
    assert sorted(q.relative_to(tmp_path / "all").as_posix() for q in (tmp_path / "all").rglob("*")
                  if q.is_file() and q.name != ".gpustack-k3-render") == [
        "argv/argv.json", "argv/argv.sh", "docker/refused.txt", "gpustack/refused.txt", "kubernetes/kubernetes.yaml",
        "launch/launch.json"]


def test_one_single_pod_role_renders_for_docker_as_that_role():
    import json as _json
    from pathlib import Path

    import yaml

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.render.targets import render_topology_targets

    data = yaml.safe_load((Path(__file__).parents[1] / "engine" / "fixtures" / "cpu-dp2.yaml").read_text())
    data["spec"]["roles"][0].update(podsPerInstance=1, parallel={"tp": 1})
    files, refused, _ = render_topology_targets(DeploymentDocument.model_validate(data), ("docker", "launch"))
    assert refused == {}
    params = _json.loads(files["docker"]["docker-run-params.json"])
    assert params["name"] == "cpu-dp2-serve" and "--headless" not in params["command"]
    assert _json.loads(files["launch"]["launch.json"])["roles"][0]["role"] == "serve"


# --------------------------------------------------------------------------- memory per rank of a MoE model (plan_moe)
from types import SimpleNamespace  # noqa: E402

from gpustack_k3.core import plan_moe  # noqa: E402
from gpustack_k3.core.model_config import arch_from_config  # noqa: E402

# DeepSeek-V3's config.json figures (deepseek-ai/DeepSeek-V3 config.json, unquantized here): a public MoE with MLA to
# check the arithmetic against its published totals (671B parameters, 37B activated per token; the MTP module excluded).
DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "num_hidden_layers": 61,
        "first_k_dense_replace": 3, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048, "intermediate_size": 18432, "vocab_size": 129280, "tie_word_embeddings": False,
        "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "torch_dtype": "bfloat16",
        "num_nextn_predict_layers": 1}


def arch(**over):
    return arch_from_config({**DSV3, **over}, "deepseek-ai/DeepSeek-V3 config.json")


def test_param_parts_reproduce_deepseek_v3_published_totals():
    parts, unknown, _ = plan_moe.param_parts(arch())
    assert unknown == []
    total = plan_moe.total_params(arch())
    active = total - parts["routed_experts"] + parts["routed_experts"] * 8 / 256
    assert abs(total / 671e9 - 1) < 0.002          # published: 671B
    assert abs(active / 37e9 - 1) < 0.02           # published: 37B activated


def test_mla_kv_bytes_come_from_the_latent_and_gqa_from_the_heads():
    assert plan_moe.kv_bytes_per_token(arch(), "auto", 8)[0] == (512 + 64) * 61 * 2
    assert plan_moe.kv_bytes_per_token(arch(), "fp8", 8)[0] == (512 + 64) * 61
    gqa = arch(kv_lora_rank=None, num_key_value_heads=8, head_dim=128)
    assert plan_moe.kv_bytes_per_token(gqa, "auto", 4)[0] == 2 * 2 * 128 * 61 * 2      # 8 KV heads / TP 4
    assert plan_moe.kv_bytes_per_token(arch(num_hidden_layers=None), "auto", 1)[0] is None


def _rank(model_arch, **kw):
    args = dict(arch=model_arch, figures=None, tp=1, dp=32, expert_parallel=True, pods=8, kv_dtype="fp8",
                enforce_eager=True, redundant_experts=0, include_draft=False, speculative=False,
                all2all_backend=None, env={}, visible_gib=267.69, fraction=0.9)
    args.update(kw)
    return plan_moe.rank_memory(**args)


def test_experts_shard_over_ep_and_dense_parts_replicate():
    m = _rank(arch(), redundant_experts=32)
    terms = {t["term"]: t["gib"] for t in m["terms"]}
    parts, _, _ = plan_moe.param_parts(arch())
    # (256 + 32) physical experts / EP 32 = 9 per rank, 58 MoE layers, 2 bytes per parameter
    assert terms["target routed_experts (/ EP 32)"] == round(parts["per_expert"] * 58 * 9 * 2 / 2**30, 4)
    assert terms["target attention (/ TP 1)"] == round(parts["attention"] * 2 / 2**30, 4)
    assert terms["target shared_experts (/ TP 1)"] == round(parts["shared_experts"] * 2 / 2**30, 4)
    tp2 = {t["term"]: t["gib"] for t in _rank(arch(), tp=2, dp=16)["terms"]}
    assert tp2["target attention (/ TP 2)"] == round(parts["attention"] / 2 * 2 / 2**30, 4)
    assert "target: 256 routed experts + 32 redundant / EP 32 = 9 per GPU" in m["notes"]


def test_buffers_follow_the_all2all_backend_as_vllm_sizes_them():
    def buf(**kw):
        return next(t["gib"] for t in _rank(arch(), **kw)["terms"] if t["term"].startswith("all2all"))
    assert buf() == 0.0                                                        # allgather_reducescatter
    assert buf(all2all_backend="deepep_high_throughput", pods=1) == 1.0         # NVLink buffer only
    assert buf(all2all_backend="deepep_high_throughput") == 2.0                 # + RDMA: EP spans pods
    assert buf(all2all_backend="deepep_high_throughput", env={"VLLM_DEEPEP_BUFFER_SIZE_MB": "512"}) == 1.0
    # low latency: needs max_num_batched_tokens (what vLLM passes as tokens per DP rank)
    ll = _rank(arch(), all2all_backend="deepep_low_latency")
    assert any("deepep_low_latency" in u for u in ll["unknown"])
    assert buf(all2all_backend="deepep_low_latency", max_num_batched_tokens=128) == round(
        (2**30 + plan_moe.deepep_ll_rdma_bytes(128, 7168, 256)) / 2**30, 4)


def test_deepep_low_latency_rdma_hint_by_hand():
    """DeepEP LowLatencyLayout at 128 tokens, hidden 7168, 288 experts, worked by hand: 56 scales; dispatch message
    16 + max(14336, 7168 + 224) = 14352 B, combine 224 + 14336 = 14560 B; send = max(128 x 14352, 288 x 128 x 14560)
    = 536,739,840; receive = max(288 x 128 x 14352, 288 x 128 x 14560) = 536,739,840; signaling 1,152; total
    2 x (2 x 536,739,840 + 1,152) = 2,146,961,664, rounded up past the next 128 B: 2,146,961,792."""
    assert plan_moe.deepep_ll_rdma_bytes(128, 7168, 288) == 2_146_961_792


def test_a_kv_pool_only_when_every_term_is_known():
    m = _rank(arch())
    assert m["kv_pool_gib"] is None and any("activation peak" in u for u in m["unknown"])
    figs = SimpleNamespace(cudagraph_gib=None, calibration=None, activation_peak_gib=4.0)
    full = _rank(arch(), figures=figs)
    assert full["unknown"] == []
    assert full["kv_pool_gib"] == round(267.69 * 0.9 - full["known_gib"] - 4.0, 4)
    assert full["kv_tokens"] == int(full["kv_pool_gib"] * 2**30 // ((512 + 64) * 61))
    graphs = _rank(arch(), figures=figs, enforce_eager=False)
    assert any(u.startswith("CUDA graphs") for u in graphs["unknown"]) and graphs["kv_pool_gib"] is None


def test_dsv41_presets_plan_per_rank_for_both_roles_and_name_what_is_unknown():
    p = tplan("dsv41-flash-gb300-8p1d")
    by = {r.role: r.rank_memory for r in p.roles}
    assert set(by) == {"prefill", "decode"}
    assert by["decode"]["ep"] == 32 and by["prefill"]["ep"] == 2
    assert "target: 384 routed experts / EP 32 = 12 per GPU" in by["decode"]["notes"]
    assert "draft: 128 routed experts / EP 32 = 4 per GPU" in by["decode"]["notes"]
    for m in by.values():
        assert m["kv_bytes_per_token"] == 890 and m["kv_pool_gib"] is None
        assert any(u.startswith("draft weights: hidden_size: not in the config") for u in m["unknown"])
        assert all(t["gib"] is None for t in m["terms"] if t["term"].startswith("draft"))
        assert any(t["term"].startswith("target routed_experts") and t["gib"] > 0 for t in m["terms"])
    terms = {t["term"]: t for t in by["prefill"]["terms"]}
    assert terms["CUDA graphs"]["gib"] == 0.0            # prefill runs enforceEager
    assert next(t for t in by["decode"]["terms"] if t["term"] == "CUDA graphs")["gib"] is None


def test_plan_cli_shows_the_memory_per_rank_of_both_roles():
    p = run("plan", "--preset", "dsv41-flash-gb300-8p1d")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("memory per GPU of one DP rank") == 2
    assert "unknown: draft weights: hidden_size" in p.stdout and "890" in p.stdout
    j = run("plan", "--preset", "dsv41-flash-gb300-8p1d", "-o", "json")
    out = json.loads(j.stdout)
    assert [r["rank_memory"]["ep"] for r in out["roles"]] == [2, 32]
