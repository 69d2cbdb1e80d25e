"""A stand-in estimator for the unit tests: a hand-written op graph of three MLA-like layers and a pricer whose
costs are simple enough to compute by hand (double for aiconfigurator-core, which these tiers do not need)."""
from __future__ import annotations

from gpustack_k3.predict.estimator import PlannedOp
from gpustack_k3.predict.types import EngineConfig, OpCost

US = 1e-3   # ms per unit


KIMI_MLA = (96, 512, 64, 192)   # Kimi-K3's config.json: heads, kv_lora_rank, qk_rope_head_dim, nope + rope


def cfg(engine="vllm", dcp=1, drafts=7, custom=True, comm="ag_rs", tp=8, seqs=32, budget=32768, lpt=0):
    return EngineConfig(engine, "x", "b300", "kimi-k3", tp, dcp, 1, drafts, "dspark" if drafts else "none", "fp8",
                        seqs, budget, lpt, comm, custom, engine == "sglang" and dcp > 1, mla=KIMI_MLA)


def graph() -> list[dict]:
    return [
        {"Gemm": {"name": "generation_mla_q_b_gemm", "scale_factor": 24.0, "n": 12 * 192, "k": 1536}},
        {"MlaBmm": {"name": "generation_bmm_pre", "scale_factor": 24.0, "num_heads": 12, "is_pre": True}},
        {"GenerationMla": {"name": "generation_attention", "scale_factor": 24.0, "num_heads": 12,
                           "kv_cache_dtype": "fp8"}},
        {"CustomAllReduce": {"name": "generation_mla_ar", "scale_factor": 24.0, "hidden_size": 7168, "tp_size": 8}},
        {"Moe": {"name": "generation_moe", "scale_factor": 92.0, "quant_mode": "w4a16_mxfp4"}},
        {"MoeDispatch": {"name": "generation_moe_pre_dispatch", "scale_factor": 92.0, "moe_quant": "w4a16_mxfp4"}},
        {"GenerationAttention": {"name": "draft_attention", "scale_factor": 4.375, "n": 8, "n_kv": 8}},
    ]


class FakeEstimator:
    """Prices: attention = layers x rows x s x heads x 1 us / 1000 (KV read per row, per head);
    everything else = layers x 1 us x rows (per-token work); NCCL = layers x rows x elements x 1e-6 us."""
    name = "fake"
    version = "0"

    def __init__(self):
        self.calls = 0

    def graph(self, cfg, phase):
        return graph()

    def catalog_arch(self, model):
        from gpustack_k3.core.model_config import ModelArch

        heads, kv_lora, rope, qk = KIMI_MLA
        return ModelArch("fake", "KimiK3ForConditionalGeneration", heads=heads, kv_lora_rank=kv_lora,
                         qk_rope_head_dim=rope, qk_nope_head_dim=qk - rope)

    def family(self, cfg, arch):
        return "FAKE"

    def price(self, cfg, ops: list[PlannedOp]) -> list[OpCost]:
        self.calls += 1
        out = []
        for op in ops:
            k = next(iter(op.spec))
            f = op.spec[k]
            n = f.get("scale_factor", 1.0)
            if k in ("GenerationMla",):
                ms = n * op.batch * op.s * f["num_heads"] / 1000 * US
            elif k == "GenerationAttention":
                ms = n * op.batch * op.s * f["n"] / 1000 * US
            elif k == "Nccl":
                ms = n * op.batch * f["hidden_size"] * 1e-6 * US
            else:
                ms = n * op.batch * US
            out.append(OpCost(op.name, op.category, ms, "silicon", op.batch, op.s, op.table, list(op.corrections)))
        return out
