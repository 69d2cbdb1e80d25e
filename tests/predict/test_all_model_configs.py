"""Every config.json aiconfigurator-core 0.12.0 ships (read from the installed package, nothing copied here) through
the one reader and the per-rank plan (core/plan_moe.py, core/plan.py): each yields a plan for a sensible layout on
B300 or GB300 or names its unknown term; the weights per rank summed over the ranks equal the parameter count the
config implies (within the embedding / LM-head padding vLLM does); a MoE model's weights per GPU fall with EP; no
crash, no NaN."""
from __future__ import annotations

import math

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.core.model_config import arch_from_config
from gpustack_k3.core.plan import PlanUnavailable, plan
from gpustack_k3.core.plan_moe import VOCAB_PAD, param_parts, rank_weights, total_params
from gpustack_k3.core.resolve import resolve

pytestmark = pytest.mark.predict
aic = pytest.importorskip("aiconfigurator_core")

from bench.model_fit import configs  # noqa: E402

CONFIGS = configs()


def test_the_package_ships_the_configs():
    assert len(CONFIGS) >= 75            # 117 files: the config.json files and the hf_quant_config.json beside some


def _doc(name: str, gpu: str, tp: int, dp: int = 1, ep: bool = False) -> DeploymentDocument:
    return DeploymentDocument.model_validate({
        "apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment", "metadata": {"name": "t"},
        "spec": {"engine": {"name": "vllm", "version": "0.33.0"}, "model": {"name": name, "path": f"/models/{name}"},
                 "hardware": {"gpuType": gpu, "gpuCount": tp * dp},
                 "parallel": {"tp": tp, "dp": dp, **({"expertParallel": True} if ep else {})}}})


@pytest.mark.parametrize("name,cfg,hq", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_every_config_plans_or_names_its_unknown_term(name, cfg, hq):
    a = arch_from_config(cfg, name, hq)
    w8 = rank_weights(a, tp=8)
    if w8["unknown"]:
        assert all(isinstance(u, str) and u for u in w8["unknown"])
        with pytest.raises(PlanUnavailable, match="not derivable"):
            plan(resolve(_doc(name.replace("--", "-").lower()[:50], "b300", 8), arch=a))
        return
    # a sensible layout: the smallest TP (of 8 GPUs, a power of two dividing the heads) whose weights leave KV room
    for gpu in ("b300", "gb300"):
        gpus = 8 if gpu == "b300" else 4
        tps = [t for t in (1, 2, 4, 8) if t <= gpus and (not a.heads or a.heads % t == 0)]
        plans = []
        for tp in tps:
            try:
                plans.append(plan(resolve(_doc(name.lower()[:50], gpu, tp), arch=a)))
            except PlanUnavailable as exc:      # KV per token not derivable: named
                assert "not derivable" in str(exc)
                break
        for p in plans:
            assert p.basis == "config.json"
            for v in (p.weights_gib, p.kv_cache_allocated_gib, p.max_concurrency):
                assert not math.isnan(v) and not math.isinf(v)
            assert p.weights_gib > 0 and p.kv_bytes_per_token > 0
        if plans and len(plans) == len(tps):
            assert plans[-1].weights_gib <= plans[0].weights_gib     # more TP, less per GPU


@pytest.mark.parametrize("name,cfg,hq", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_weights_per_rank_sum_to_the_parameter_count(name, cfg, hq):
    a = arch_from_config(cfg, name, hq)
    total = total_params(a)
    if total is None:
        return
    parts, _, _ = param_parts(a)
    for tp, pp in ((1, 1), (2, 1), (8, 1), (4, 2)):
        if pp > 1 and len(parts["layers"]) < pp:
            continue
        w = rank_weights(a, tp=tp, pp=pp)
        # vLLM pads the vocabulary to 64 rows and splits it over TP: at most that many rows more per matrix
        pad = (VOCAB_PAD + tp) * a.hidden_size * (1 if a.tie_embeddings else 2)
        assert total <= w["params_all_gpus"] <= total + pad, (tp, pp)
        assert not math.isnan(w["gib"]) and w["gib"] > 0


@pytest.mark.parametrize("name,cfg,hq", [c for c in CONFIGS if arch_from_config(c[1], c[0], c[2]).moe],
                         ids=[c[0] for c in CONFIGS if arch_from_config(c[1], c[0], c[2]).moe])
def test_moe_weights_per_gpu_fall_with_ep(name, cfg, hq):
    a = arch_from_config(cfg, name, hq)
    if total_params(a) is None:
        return
    per = [rank_weights(a, tp=1, dp=dp, expert_parallel=True)["gib"] for dp in (1, 2, 4, 8)]
    assert per == sorted(per, reverse=True) and per[-1] < per[0]
    # the routed experts: once each across the EP group (plus the dense parts once per DP rank)
    parts, _, _ = param_parts(a)
    w = rank_weights(a, tp=1, dp=8, expert_parallel=True, redundant_experts=8)
    dense = sum(parts[k] for k in ("attention", "dense_ffn", "shared_experts", "other"))
    moe_layers = sum(1 for r in parts["layers"] if r["routed_experts"])
    vocab_rows = -(-a.vocab_size // VOCAB_PAD) * VOCAB_PAD
    emb = vocab_rows * a.hidden_size * (1 if a.tie_embeddings else 2)
    assert w["params_all_gpus"] == pytest.approx(8 * (dense + emb) + moe_layers * parts["per_expert"]
                                                 * (a.experts + 8), rel=1e-9)
