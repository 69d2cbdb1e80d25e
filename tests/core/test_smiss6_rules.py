"""The SGLang rule of gpustack_k3/core/rules/sglang_checks_smiss6.py and the smiss6 checks-table changes that need a
config.json the catalog does not carry (DeepSeek-V4 under model_type deepseek_v4): the product's side (check-args as
the differential runs it); the shared tests: tests/core/test_sglang_python_rules.py. The release's own verdict on the
same lines: tests/engine_oracle/test_sglang_python_rules_oracle.py."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import checks
from tests.core.test_smiss5_rules import KIMI, product

EAGLE = "sglang-kimi-k3-eagle-topk-page-size"
LMO_PD = "sglang-language-model-only-pd"
DSV4_DET = "sglang-dsv4-deterministic-inference"
BUCKETS = "sglang-tokens-buckets-rule"


def spec(algo: str, topk: int, steps: int, draft: int) -> list[str]:
    return ["--speculative-algorithm", algo, "--speculative-eagle-topk", str(topk), "--speculative-num-steps",
            str(steps), "--speculative-num-draft-tokens", str(draft)]


# (rule, release, refused line, accepted line): the release refuses the first at the rule's cited source and
# accepts the second (tests/engine_oracle/test_sglang_python_rules_oracle.py)
SMISS6_CASES = [
    (EAGLE, "0.5.23", KIMI + spec("EAGLE", 4, 3, 8), KIMI + spec("EAGLE", 1, 3, 4)),
    # a backend on the line that serves a draft tree
    (EAGLE, "0.5.23", KIMI + spec("EAGLE", 4, 3, 8), KIMI + spec("EAGLE", 4, 3, 8) + ["--attention-backend", "triton"]),
    # NEXTN is EAGLE; --page-size 32 is kept by the TRT-LLM MLA page pass (above 1 all the same)
    (EAGLE, "0.5.23", KIMI + spec("NEXTN", 2, 2, 4) + ["--page-size", "32"], KIMI + spec("NEXTN", 1, 2, 3) + ["--page-size", "32"]),
    # DCP: cutedsl_mla decode beside trtllm_mla prefill, and the release accepts the tree
    (EAGLE, "0.5.23", KIMI + spec("EAGLE", 4, 3, 8), KIMI + spec("EAGLE", 4, 3, 8) + ["--dcp-size", "8"]),
    (EAGLE, "0.5.22", KIMI + spec("EAGLE", 4, 3, 8), KIMI + spec("EAGLE", 1, 3, 4)),
    (EAGLE, "0.5.22", KIMI + spec("NEXTN", 2, 2, 4) + ["--page-size", "32"], KIMI + spec("EAGLE", 4, 3, 8) + ["--dcp-size", "8"]),
    # NGRAM: the top-k is the BFS breadth (default 10), and only flashinfer serves its tree
    (EAGLE, "0.5.23", KIMI + ["--speculative-algorithm", "NGRAM"],
     KIMI + ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "1"]),
    (EAGLE, "0.5.22", KIMI + ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "4"],
     KIMI + ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "1"]),
    # the metrics bucket rules (validate_buckets_rule): each refusal kind, and its nearest accepted rule
    (BUCKETS, "0.5.23", KIMI + ["--prompt-tokens-buckets", "tse"], KIMI + ["--prompt-tokens-buckets", "tse", "1000", "2", "8"]),
    (BUCKETS, "0.5.23", KIMI + ["--prompt-tokens-buckets", "linear"], KIMI + ["--prompt-tokens-buckets", "default"]),
    (BUCKETS, "0.5.23", KIMI + ["--generation-tokens-buckets", "tse", "1000", "1", "8"],
     KIMI + ["--generation-tokens-buckets", "tse", "1000", "1.5", "8"]),
    (BUCKETS, "0.5.23", KIMI + ["--generation-tokens-buckets", "tse", "1000", "2", "8.0"],
     KIMI + ["--generation-tokens-buckets", "tse", "0.5", "2", "8"]),
    (BUCKETS, "0.5.23", KIMI + ["--generation-tokens-buckets", "custom", "10", "10"],
     KIMI + ["--generation-tokens-buckets", "custom", "10", "20"]),
    (BUCKETS, "0.5.23", KIMI + ["--prompt-tokens-buckets", "custom", "-1", "10"], KIMI + ["--prompt-tokens-buckets", "custom", "0", "10"]),
    (BUCKETS, "0.5.23", KIMI + ["--prompt-tokens-buckets", "default", "10"], KIMI + ["--prompt-tokens-buckets", "custom", "1e3"]),
    (BUCKETS, "0.5.22", KIMI + ["--prompt-tokens-buckets", "custom"], KIMI + ["--prompt-tokens-buckets", "custom", "5"]),
    (BUCKETS, "0.5.22", KIMI + ["--generation-tokens-buckets", "tse", "0", "2", "8"], KIMI + ["--generation-tokens-buckets", "default"]),
]
SMISS6_DIRECT = {c[0] for c in SMISS6_CASES}


def dsv4_config(d) -> str:
    """DeepSeek-V4.1-Flash's config.json as the oracle holds it (gpustack_k3/oracle/models.py), flattened to a plain
    DeepseekV4ForCausalLM with model_type deepseek_v4 (what DeepSeek-V4-Flash's own file names): written into ``d``."""
    from tools.engine_oracle.product import model_config

    cfg = json.loads(open(model_config("deepseek-v4.1-flash")).read())
    text = cfg.pop("text_config")
    cfg.pop("vision_config", None)
    text.update({k: v for k, v in cfg.items() if k not in ("model_type", "architectures")})
    text.update(model_type="deepseek_v4", architectures=["DeepseekV4ForCausalLM"])
    (d / "config.json").write_text(json.dumps(text))
    return str(d / "config.json")


def test_buckets_port_follows_the_release_function():
    from gpustack_k3.core.rules.sglang_checks_smiss6 import buckets_rule_refusal as f

    assert f("--x", []) is None and f("--x", ["default"]) is None and f("--x", ["custom", "0", "1.5"]) is None
    assert "Unsupported --x rule type: 'y'" in f("--x", ["y"])
    assert "TSE rule parameters must be" in f("--x", ["tse", "a", "2", "3"])
    assert "TSE count must be positive, got: 0" in f("--x", ["tse", "1", "2", "0"])
    assert "must be numeric" in f("--x", ["custom", "a"])
    # float('nan') parses; nan > 1 is False: the release's assert fails the same way
    assert "TSE base must be larger than 1" in f("--x", ["tse", "1", "nan", "3"])


def test_eagle_rule_reads_the_gpu_the_backends_and_the_algorithm():
    line = KIMI + spec("EAGLE", 4, 3, 8)
    assert EAGLE in product("0.5.23", line, gpu_type="gb300")["rules"]
    assert EAGLE not in product("0.5.23", line, gpu_type="h200")["rules"]   # Hopper: no trtllm_mla override
    for flag in ("--attention-backend", "--prefill-attention-backend", "--decode-attention-backend",
                 "--speculative-draft-attention-backend"):
        assert EAGLE not in product("0.5.23", line + [flag, "flashinfer"])["rules"]
    assert EAGLE not in product("0.5.23", KIMI + spec("EAGLE", 1, 3, 4))["rules"]
    # DSPARK resolves its own tree and backend (speculative_hook.py _handle_dspark; kimi_k3.py's DSPARK branch)
    assert EAGLE not in product("0.5.23", KIMI + ["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path",
                                                  "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size",
                                                  "7"])["rules"]
    # NGRAM's tree is its BFS breadth, whatever --speculative-eagle-topk says
    assert EAGLE not in product("0.5.23", KIMI + ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth",
                                                  "1", "--speculative-eagle-topk", "4"])["rules"]
    # another model: its page size and backend are not read here
    assert EAGLE not in product("0.5.23", ["--model-path", "/models/shape-mla-moe", "--tp-size", "8",
                                           *spec("EAGLE", 4, 3, 8)])["rules"]


def test_language_model_only_pd_exempts_model_type_deepseek_v41_only(tmp_path):
    """model_hook.py:1097@0.5.23 tests hf_config.model_type: DeepSeek-V4.1 (deepseek_v41) is exempt, the same
    architecture under model_type deepseek_v4 is not (the entry exempted both DeepSeek-V4 architectures)."""
    pd = ["--tp-size", "8", "--language-model-only", "--disaggregation-mode", "prefill"]
    cfg = dsv4_config(tmp_path)
    for release in ("0.5.22", "0.5.23"):
        mine = product(release, ["--model-path", str(tmp_path), *pd], cfg)
        assert mine["verdict"] == "refuse" and LMO_PD in mine["rules"], mine
        mine = product(release, ["--model-path", "/models/DeepSeek-V4.1-Flash", *pd])
        assert LMO_PD not in mine["rules"], mine


def test_top_field_reads_the_top_level_not_the_text_config():
    """A text_config's own model_type does not move hf_config.model_type (configs/deepseek_v41.py drops it)."""
    from gpustack_k3.core.model_config import arch_from_config

    entry = checks.compile_entry("sglang", {
        "id": "sglang-x", "title": "t", "releases": {"0.5.23": "a.py:1@0.5.23"}, "message": "m", "why": "w",
        "fix": "f", "when": [{"model": {"top_field": "model_type", "ne": "deepseek_v41"}}]}, 0)
    cfg = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
           "text_config": {"model_type": "deepseek_v4", "hidden_size": 64, "num_hidden_layers": 2}}
    arch = arch_from_config(cfg, "x")
    assert arch.model_type == "deepseek_v4"    # the language model's own key: what field: reads
    assert not entry.cond(checks.LineView(None, {}, None, arch))
    arch = arch_from_config({**cfg, "model_type": "deepseek_v4"}, "x")
    assert entry.cond(checks.LineView(None, {}, None, arch))
    assert not entry.cond(checks.LineView(None, {}, None, None))   # no config.json: the entry does not fire
    with pytest.raises(checks.ChecksTableError):
        checks.compile_entry("sglang", {
            "id": "sglang-x", "title": "t", "releases": {"0.5.23": "a.py:1@0.5.23"}, "message": "m", "why": "w",
            "fix": "f", "when": [{"model": {"top_field": "model_type", "field": "x", "ne": "y"}}]}, 0)


def test_dsv4_deterministic_applies_to_the_v4_architecture_as_the_release_reads_it(tmp_path):
    cfg = dsv4_config(tmp_path)
    for release in ("0.5.22", "0.5.23"):
        mine = product(release, ["--model-path", str(tmp_path), "--tp-size", "8", "--enable-deterministic-inference"], cfg)
        assert DSV4_DET in mine["rules"], mine
        assert DSV4_DET not in product(release, KIMI + ["--enable-deterministic-inference"])["rules"]
