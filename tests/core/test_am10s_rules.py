"""The rules of gpustack_k3/core/rules/sglang_checks_am10s.py (helper am10s): UNO speculative decoding, the
tokenspeed_mla backend off Blackwell, 0.5.22's KV cache sharding of a DSA model. The product's side (check-args as
the differential runs it); the release's own verdict on the same lines: tests/engine_oracle/test_am10s_rules_oracle.py.
These lines were misses on r10base (the aimed lines of tools/engine_oracle/aimed/aim9d.yaml)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_mfixS_rules import model_dir
from tests.core.test_smiss5_rules import product as _product

UNO = "sglang-uno-speculative-config"
UNO_FA3 = "sglang-uno-needs-fa3-attention"
TOKENSPEED = "sglang-tokenspeed-mla-needs-blackwell"
DSA = "sglang-kv-cache-sharding-dsa-model"
PREFILL_CTX = "sglang-cuda-graph-prefill-max-context-above-context"
HISPARSE = "sglang-hisparse-dsa-kv-dtype-and-backends"
UM_OFFLOAD = "sglang-unified-memory-decode-offload-model"
BOTH = ("0.5.22", "0.5.23")

DENSE = "/models/shape-gqa-dense"
MLA = ["--model-path", "/models/shape-mla-moe", "--tp-size", "8"]
U = ["--model-path", DENSE, "--tp-size", "1", "--speculative-algorithm", "UNO", "--uno-lora-path", DENSE]
FA3 = ["--attention-backend", "fa3"]
Q4 = ["--speculative-num-draft-tokens", "4"]
LINEAR = U + Q4 + FA3                                                                 # accepted (H200 and B300)
TREE = U + ["--speculative-num-steps", "2", "--speculative-eagle-topk", "2"] + Q4 + FA3   # F 3, K 2, Q 4: accepted


def tree(steps: str, topk: str, q: str, *more: str) -> list[str]:
    return U + ["--speculative-num-steps", steps, "--speculative-eagle-topk", topk,
                "--speculative-num-draft-tokens", q] + FA3 + list(more)


# (rule, release, gpu, refused line, gpu, accepted line, env): the release refuses the first at the rule's cited
# source and accepts the second (tests/engine_oracle/test_am10s_rules_oracle.py)
_UNO = [
    (LINEAR + ["--device", "xpu"], LINEAR),
    (LINEAR + ["--speculative-draft-model-path", DENSE], LINEAR),
    (U[:6] + Q4 + FA3, LINEAR),                                           # no --uno-lora-path
    (LINEAR + ["--enable-deterministic-inference"], LINEAR),
    (LINEAR + ["--enable-strict-thinking"], LINEAR),
    (U + FA3, LINEAR),                                                    # no Q
    (U + ["--speculative-num-draft-tokens", "0"] + FA3, LINEAR),
    (U + ["--speculative-eagle-topk", "0"] + Q4 + FA3, LINEAR),
    (U + ["--speculative-eagle-topk", "2"] + Q4 + FA3, TREE),            # tree mode without F
    (tree("0", "2", "4"), TREE),
    (tree("3", "2", "2"), TREE),                                          # Q < F
    (tree("1", "2", "129"), TREE),                                        # Q > 128
    (tree("1", "17", "128"), TREE),                                       # Q*K > 2048
    (tree("1", "2", "4"), TREE),                                          # Q above the capacity 3
    (tree("1", "4", "3"), TREE),                                          # Q-1 above K*(F-2)+1
    (tree("2", "2", "4", "--enable-pdmux"), TREE),
    (tree("2", "2", "4", "--enable-two-batch-overlap"), TREE),
    (tree("2", "2", "4", "--speculative-accept-threshold-single", "0.5"), TREE),
    (["--model-path", DENSE, "--tp-size", "8"] + U[4:] + Q4 + FA3, LINEAR),   # TP 8
    (LINEAR + ["--enable-lora", "--max-lora-rank", "8", "--lora-target-modules", "all"], LINEAR),
    (LINEAR + ["--speculative-use-rejection-sampling"], LINEAR),
    (U + Q4 + ["--attention-backend", "flashinfer"], LINEAR),
    (U + Q4 + ["--decode-attention-backend", "triton"], LINEAR),
]
CASES = [(UNO, rel, "h200", bad, "h200", good, {}) for rel in BOTH for bad, good in _UNO] + [
    (TOKENSPEED, rel, "h200", MLA + ["--attention-backend", "tokenspeed_mla", "--kv-cache-dtype", "fp8_e4m3"],
     "b300", MLA + ["--attention-backend", "tokenspeed_mla", "--kv-cache-dtype", "fp8_e4m3"], {}) for rel in BOTH
] + [
    (TOKENSPEED, "0.5.22", "h200", MLA + ["--decode-attention-backend", "tokenspeed_mla", "--kv-cache-dtype",
                                          "fp8_e4m3"], "h200", MLA + ["--kv-cache-dtype", "fp8_e4m3"], {}),
]
# --cuda-graph-prefill-max-context above the context: shape-gqa-dense derives 131,072 (max_position_embeddings)
G = ["--model-path", DENSE, "--tp-size", "8", "--cuda-graph-prefill-max-context"]
CASES += [(PREFILL_CTX, rel, "b300", bad, "b300", good, {}) for rel in BOTH for bad, good in (
    (G + ["131073"], G + ["131072"]),
    (G + ["100000000"], G + ["65536"]),
    (G + ["8192", "--context-length", "4096"], G + ["4096", "--context-length", "4096"]),
)]
# --enable-unified-memory decode KV offload: MLA (shape-mla-moe) and hybrid Mamba (shape-hybrid, Nemotron-H); the twin
# is an MHA model (shape-gqa-dense) on triton (0.5.22 refuses its B300 default trtllm_mha with decode CUDA graphs)
UM = ["--tp-size", "8", "--enable-unified-memory", "--disaggregation-mode", "decode", "--disaggregation-transfer-backend",
      "mooncake", "--disaggregation-decode-enable-offload-kvcache", "--hicache-storage-backend", "file"]
CASES += [(UM_OFFLOAD, rel, "b300", ["--model-path", f"/models/shape-{shape}"] + UM, "b300",
           ["--model-path", DENSE] + UM + ["--attention-backend", "triton"], {})
          for rel in BOTH for shape in ("mla-moe", "hybrid")]
IDS = [f"{c[0]}@{c[1]}-{k}" for k, c in enumerate(CASES)]

# 0.5.22's KV sharding of a DSA model: DeepSeek-V3.2's public config.json; the twin is DeepSeek-V3's (a class of the
# same list without index_topk: not DSA for is_deepseek_dsa; V3.2 with index_topk null fails its config class).
# (rule, release, refused line after --model-path DIR, env, model of the refused line, model of the twin: (public
# config, keys replaced))
SHARD = ["--tp-size", "8", "--enable-kv-cache-sharding", "--disaggregation-mode", "prefill",
         "--disaggregation-transfer-backend", "nixl", "--attention-backend", "trtllm_mla", "--page-size", "64"]
PY_TREE = {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "python"}
V32 = "deepseek-ai--DeepSeek-V3.2"
MODEL_CASES = [
    (DSA, "0.5.22", SHARD, PY_TREE, (V32, {}), ("deepseek-ai--DeepSeek-V3", {}), SHARD),
]
# HiSparse on DeepSeek-V3.2 (DSA); the KV dtype on V3.2 relabelled as its NextN class (a DSA class outside the
# DeepSeek family, whose own DSA dtype check refuses fp8_e5m2 first: overrides.py:541@0.5.22)
HS = ["--tp-size", "8", "--enable-hisparse", "--disable-radix-cache"]
V32_NEXTN = (V32, {"architectures": ["DeepseekV3ForCausalLMNextN"]})
MODEL_CASES += [(HISPARSE, rel, HS + ["--kv-cache-dtype", "fp8_e5m2"], {}, V32_NEXTN, V32_NEXTN,
                 HS + ["--kv-cache-dtype", "fp8_e4m3"]) for rel in BOTH]
MODEL_CASES += [(HISPARSE, rel, HS + bad, {}, (V32, {}), (V32, {}), HS + good) for rel in BOTH for bad, good in (
    (["--kv-cache-dtype", "fp8_e4m3", "--dsa-prefill-backend", "flashmla_sparse"],
     ["--kv-cache-dtype", "fp8_e4m3", "--dsa-prefill-backend", "flashmla_kv"]),
    (["--kv-cache-dtype", "bfloat16", "--dsa-decode-backend", "flashmla_kv"],
     ["--kv-cache-dtype", "bfloat16", "--dsa-decode-backend", "flashmla_sparse"]),
)]
MODEL_IDS = [f"{c[0]}@{c[1]}-{k}" for k, c in enumerate(MODEL_CASES)]

# UNO with no attention backend: the release's pick is fa3 on H200 (accepted) and not fa3 on B300 (refused at the
# FA3 check): a warning on both (release, line, the GPU the release refuses it on, the GPU it accepts it on)
WARN_CASES = [(rel, U + Q4, "b300", "h200") for rel in BOTH]


def product(release: str, argv: list[str], gpu: str, env: dict | None = None, model_config: str | None = None):
    if not env:
        return _product(release, argv, model_config=model_config, gpu_type=gpu)
    from tools.engine_oracle.product import check_args
    from tests.core.test_smiss5_rules import shape_config

    line = {"argv": argv, "env": dict(env), "model": None, "gpu_type": gpu, "gpus": 8}
    cfg = model_config or shape_config(argv)
    if cfg:
        line["model_config"] = cfg
    return check_args("sglang", release, line)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("am10s")


@pytest.mark.parametrize("rid,release,gpu,bad,good_gpu,good,env", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_its_flip(rid, release, gpu, bad, good_gpu, good, env):
    refused = product(release, bad, gpu, env)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    passed = product(release, good, good_gpu, env)
    assert rid not in passed.get("rules", []) and passed["verdict"] != "refuse", passed


@pytest.mark.parametrize("rid,release,argv,env,bad_model,good_model,good", MODEL_CASES, ids=MODEL_IDS)
def test_the_model_rule_refuses_the_line_and_passes_its_flip(root, rid, release, argv, env, bad_model, good_model,
                                                             good):
    d = model_dir(root, *bad_model)
    refused = product(release, ["--model-path", d, *argv], "b300", env, f"{d}/config.json")
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    d = model_dir(root, *good_model)
    passed = product(release, ["--model-path", d, *good], "b300", env, f"{d}/config.json")
    assert rid not in passed.get("rules", []), passed


def findings(release: str, argv: list[str], gpu: str) -> dict[str, dict]:
    """check-args' findings (warnings too) for a line on an oracle shape and GPU."""
    import json

    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd
    from tests.core.test_smiss5_rules import shape_config
    from tools.engine_oracle.product import _common

    args = _common("sglang", release, None, gpu, shape_config(argv)) + ["--gpus", "8", "--", *argv]
    res = CliRunner().invoke(cmd, args)
    assert res.exit_code in (0, 1), res.output
    return {f["rule"]: f for f in json.loads(res.output)["findings"]}


@pytest.mark.parametrize("release,line,bad_gpu,good_gpu", WARN_CASES)
def test_uno_without_a_backend_is_a_warning_not_a_refusal(release, line, bad_gpu, good_gpu):
    for gpu in (bad_gpu, good_gpu):
        found = findings(release, line, gpu)
        assert found[UNO_FA3]["severity"] == "warning" and UNO not in found, found
        assert "--attention-backend fa3" in found[UNO_FA3]["message"] and "(SM" in found[UNO_FA3]["message"], found
        assert product(release, line, gpu)["verdict"] != "refuse"
    # fa3 given: neither rule
    assert not {UNO, UNO_FA3} & set(findings(release, LINEAR, bad_gpu))


def test_each_rule_cites_every_release_it_runs_on():
    for rid in AM10S_DIRECT - {UNO_FA3}:
        releases = {c[1] for c in CASES + MODEL_CASES if c[0] == rid}
        assert {k.split()[1] for k in RULES[rid].sources} == releases, rid
    assert {k.split()[1] for k in RULES[UNO_FA3].sources} == set(BOTH)


def test_the_uno_chain_reads_what_the_release_derives():
    from gpustack_k3.core.rules.sglang_checks_am10s import uno_refusal

    class V:   # a LineView stand-in: the values a line gives, the parser's defaults otherwise
        def __init__(self, **given):
            self.given = {"speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0,
                          "tp_size": 1, "pp_size": 1, "attn_dp_size": 1, "attn_cp_size": 1, "uno_lora_path": "x",
                          **given}

        def value(self, d):
            return self.given.get(d)

    ok = dict(speculative_num_draft_tokens=4, speculative_num_steps=2, speculative_eagle_topk=2)
    assert uno_refusal(V(**ok)) is None
    # F 4, K 3: capacity 1+3+9 = 13 reached at depth 2 (Q 10); parent list 3*(4-2)+1 = 7 < Q-1 = 9
    assert "parent-list" in uno_refusal(V(speculative_num_draft_tokens=10, speculative_num_steps=3,
                                          speculative_eagle_topk=3))
    assert uno_refusal(V(speculative_num_draft_tokens=8, speculative_num_steps=3, speculative_eagle_topk=3)) is None
    assert "capacity=3" in uno_refusal(V(speculative_num_draft_tokens=4, speculative_num_steps=1,
                                         speculative_eagle_topk=2))


# the rules of gpustack_k3/core/rules/sglang_checks_am10s.py with a firing case above (tests/core/test_registry.py
# test_every_rule_has_a_firing_case counts them)
AM10S_DIRECT = {c[0] for c in CASES} | {c[0] for c in MODEL_CASES} | {UNO_FA3}


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.sglang_checks_am10s"} \
        == AM10S_DIRECT
