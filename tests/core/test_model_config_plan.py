"""The memory plan from a model's config.json (core/plan.py _plan_config, core/plan_moe.py): a model the catalog does
not know gets its own figures, never Kimi-K3's; a config.json under a catalog model's name decides over the entry."""
from __future__ import annotations

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.core.model_config import arch_from_config
from gpustack_k3.core.plan import plan
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules import Ctx, validate_resolved

# Qwen/Qwen3-1.7B config.json (the figures the plan reads)
QWEN3_1_7B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2048,
              "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
              "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
              "torch_dtype": "bfloat16"}
# Qwen/Qwen3-30B-A3B config.json
QWEN3_30B_A3B = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
                 "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
                 "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_attention_heads": 32,
                 "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": False,
                 "max_position_embeddings": 40960, "torch_dtype": "bfloat16", "mlp_only_layers": []}


def doc(name="Qwen3-1.7B", path="/models/Qwen3-1.7B", **parallel):
    return DeploymentDocument.model_validate({
        "apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment", "metadata": {"name": "t"},
        "spec": {"engine": {"name": "vllm", "version": "0.33.0"}, "model": {"name": name, "path": path},
                 "hardware": {"gpuType": "b300", "gpuCount": 8}, "parallel": {"tp": 8, **parallel}}})


def test_an_uncatalogued_model_is_planned_from_its_config_not_from_kimi_k3():
    r = resolve(doc(), arch=arch_from_config(QWEN3_1_7B, "Qwen3-1.7B/config.json"))
    p = plan(r)
    assert p.basis == "config.json"
    # 1.72B parameters in bf16 (tied embeddings: one vocab x hidden matrix, / TP on each GPU): ~0.40 GiB per GPU
    assert p.weights_gib == pytest.approx(0.40, abs=0.01)
    assert p.max_model_len == 40960                       # the config's max_position_embeddings, not 1,048,576
    # (K + V) x 1 KV head per GPU x 128 x 28 layers x 2 B
    assert p.kv_bytes_per_token == 2 * 1 * 128 * 28 * 2
    assert any("activation" in u for u in p.unknown)


def test_a_config_under_a_catalog_name_decides_and_the_disagreement_is_exposed():
    r = resolve(doc(name="kimi-k3", path="/models/Kimi-K3"), arch=arch_from_config(QWEN3_1_7B, "Kimi-K3/config.json"))
    figures = {f for f, _, _ in r.catalog_disagreements}
    assert {"layers", "hidden_size", "experts", "max_positions"} <= figures
    assert ("max_positions", 1048576, 40960) in r.catalog_disagreements
    assert not r.calibrated and plan(r).basis == "config.json"
    assert plan(r).weights_gib < 1                        # not Kimi-K3's 194.54 GiB


def test_routed_experts_per_gpu_fall_with_dp_and_ep():
    a = arch_from_config(QWEN3_30B_A3B, "Qwen3-30B-A3B/config.json")
    tp8 = plan(resolve(doc("Qwen3-30B-A3B", "/models/Qwen3-30B-A3B"), arch=a)).weights_gib
    tp1 = plan(resolve(doc("Qwen3-30B-A3B", "/models/Qwen3-30B-A3B", tp=1), arch=a)).weights_gib
    dep8 = plan(resolve(doc("Qwen3-30B-A3B", "/models/Qwen3-30B-A3B", tp=1, dp=8, expertParallel=True), arch=a))
    assert tp1 > dep8.weights_gib > tp8
    assert any("/ EP 8" in t["term"] for t in dep8.weight_terms)


def test_kimi_k3_dep8_divides_the_experts_by_eight():
    """DEP8 (-tp 1 -dp 8 --enable-expert-parallel): the routed experts are / 8; the dense parts (bf16 attention, shared
    experts) replicate per DP rank. Before: every weight / TP 1 = 1556 GiB per GPU."""
    r = resolve(doc(name="kimi-k3", path="/models/Kimi-K3", tp=1, dp=8, expertParallel=True))
    p = plan(r)
    assert p.basis == "calibrated"
    assert 250 < p.weights_gib < 320                      # not 1556: the experts are / 8
    msgs = [f.message for f in validate_resolved(r, ctx=Ctx(r, plan=p)) if f.rule == "fixed-memory-exceeds-budget"]
    assert not any("1571" in m or "1556" in m for m in msgs)


def test_a_draft_the_plan_cannot_see_turns_the_memory_refusal_into_a_warning():
    d = doc(tp=1).model_copy(deep=True)
    d.spec.speculative.method = "eagle3"
    d.spec.speculative.draftModel = "/models/draft"
    big = {**QWEN3_1_7B, "num_hidden_layers": 2800}       # weights far above the GPU
    r = resolve(d, arch=arch_from_config(big, "big/config.json"))
    p = plan(r)
    assert p.unaccounted and p.weights_gib > p.requested_gib
    found = validate_resolved(r, ctx=Ctx(r, plan=p))
    assert not [f for f in found if f.rule == "fixed-memory-exceeds-budget"]
    assert any(f.rule == "plan-unavailable" and "not decisive" in f.message for f in found)
    d.spec.speculative.method = "none"
    d.spec.speculative.draftModel = None
    r = resolve(d, arch=arch_from_config(big, "big/config.json"))
    found = validate_resolved(r, ctx=Ctx(r))
    assert any(f.rule == "fixed-memory-exceeds-budget" and "fullest GPU" in f.message for f in found)


def test_a_local_directory_named_like_a_catalog_model_follows_its_own_config(tmp_path):
    """check-args on a local ``.../Kimi-K3`` whose config.json is Qwen3-1.7B: the config decides (no Kimi-K3 memory
    figures or rules, its 40,960 positions), the catalog entry of that name is set aside."""
    import json

    from click.testing import CliRunner

    from gpustack_k3.cli.main import cli

    d = tmp_path / "Kimi-K3"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(QWEN3_1_7B))
    res = CliRunner().invoke(cli, ["check-args", "--engine", "vllm", "--engine-version", "0.33.0", "-o", "json",
                                   "--", str(d), "-tp", "8"],
                             catch_exceptions=False)
    found = json.loads(res.output)["findings"]
    rules = {f["rule"] for f in found}
    assert res.exit_code == 0, res.output
    assert "plan-unavailable" not in rules               # planned from the config, not refused with Kimi-K3's figures
    assert not rules & {"fixed-memory-exceeds-budget", "vllm-kv-overcommit", "vllm-kimi-k3-specialized-decode"}
    r = resolve(doc(name="kimi-k3", path=str(d)), arch=arch_from_config(QWEN3_1_7B, str(d / "config.json")))
    assert r.model is None and r.figures is None and r.catalog_disagreements
    assert r.value("scheduling.maxModelLen") == 40960 and plan(r).basis == "config.json"


def test_sglang_redundant_experts_add_to_the_experts_per_gpu():
    """SGLang --ep-size 8 --ep-num-redundant-experts 8: (128 + 8) physical experts over 8 ranks, 17 on each."""
    a = arch_from_config(QWEN3_30B_A3B, "Qwen3-30B-A3B/config.json")

    def sglang(extra):
        d = doc("Qwen3-30B-A3B", "/models/Qwen3-30B-A3B").model_copy(deep=True)
        d.spec.engine.name, d.spec.engine.version = "sglang", "0.5.23"
        d.spec.parallel.ep = 8
        d.spec.extraArgs = extra
        return plan(resolve(d, arch=a))

    base, red = sglang([]), sglang(["--ep-num-redundant-experts", "8"])
    routed = {p: next(t for t in x.weight_terms if t["term"].startswith("routed_experts")) for p, x in
              (("base", base), ("red", red))}
    assert routed["red"]["params"] == routed["base"]["params"] * 17 // 16
    assert red.weights_gib > base.weights_gib


def test_pipeline_stages_name_the_fullest_one():
    a = arch_from_config(QWEN3_1_7B, "Qwen3-1.7B/config.json")   # tied embeddings: the embedding on stage 0 only
    p = plan(resolve(doc(tp=1, pp=2), arch=a))
    (note,) = [n for n in p.notes if n.startswith("the fullest GPU is on PP stage")]
    assert "PP stage 0 (layers 0-13, the embeddings)" in note
    one = plan(resolve(doc(tp=1), arch=a))
    assert one.weights_gib / 2 < p.weights_gib < one.weights_gib
