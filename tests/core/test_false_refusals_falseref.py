"""False refusals (the product refuses, exit 1 or 2, what the pinned release accepts), each found by the engine
oracle or read in the release's source, and the refusals kept where the release refuses too.

Each case names the release's source that decides it; the engine-side proof of the same lines is in
tests/engine_oracle/test_false_refusals_falseref.py (the engine_oracle tier).
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.main import cli

KIMI = ["/models/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code"]
SGL_KIMI = ["--model-path", "/models/Kimi-K3", "--tp", "8", "--trust-remote-code"]


def check_args(engine: str, version: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[int, dict]:
    envs = [a for k, v in (env or {}).items() for a in ("--env", f"{k}={v}")]
    res = CliRunner().invoke(cli, ["check-args", "--engine", engine, "--engine-version", version, "-o", "json",
                                   *envs, "--", *argv], catch_exceptions=False)
    return res.exit_code, json.loads(res.stdout)


def errors(doc: dict) -> set[str]:
    return {f["rule"] for f in doc.get("findings") or [] if f["severity"] == "error"}


def spec(**kw) -> list[str]:
    return ["--speculative-config", json.dumps(kw)]


# ------------------------------------------------------------------ speculative methods

# vLLM 0.34.0 SpeculativeMethod (config/speculative.py:53-97@0.34.0) and 0.33.0's (config/speculative.py:38-82@0.33.0)
# take "suffix", "draft_model", "eagle", "ngram_gpu", "dflash" and the *_mtp model types; the spec's method field
# was a Literal of four names and refused every other one with exit 2
@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
@pytest.mark.parametrize("method", ["suffix", "eagle", "ngram_gpu", "deepseek_mtp"])
def test_vllm_speculative_method_the_release_accepts_is_read(version, method):
    code, doc = check_args("vllm", version, KIMI + spec(method=method, num_speculative_tokens=1))
    assert code != 2, doc
    assert "spec-method-unsupported" not in errors(doc)
    assert "input-error" not in json.dumps(doc.get("error") or "")


def test_vllm_034_suffix_passes():
    # accepted by the release: SpeculativeConfig._validate_method (config/speculative.py:1623-1634@0.34.0) takes any
    # built-in SpeculativeMethod; the engine oracle accepts this line (stage run_server)
    code, doc = check_args("vllm", "0.34.0", KIMI + spec(method="suffix"))
    assert code == 0, doc


@pytest.mark.parametrize("version, where", [("0.34.0", "config/speculative.py:1623-1634@0.34.0"),
                                            ("0.33.0", "config/speculative.py:74-82@0.33.0"),
                                            ("0.11.0", "config/speculative.py:32-35@0.11.0")])
def test_vllm_unknown_speculative_method_is_refused_naming_the_list(version, where):
    code, doc = check_args("vllm", version, KIMI + spec(method="bogus", num_speculative_tokens=1))
    assert code == 1, doc
    hit = [f for f in doc["findings"] if f["rule"] == "spec-method-unsupported"]
    assert hit, doc
    assert hit[0]["field"] == "spec.speculative.method"
    assert "'bogus'" in hit[0]["message"] and "ngram" in hit[0]["message"]
    assert where.split("@")[1] in hit[0]["source"], hit[0]["source"]


def test_vllm_011_suffix_refused_034_list_is_not_011s():
    # 0.11.0's SpeculativeMethod has no suffix (config/speculative.py:32-35@0.11.0, a pydantic dataclass field)
    code, doc = check_args("vllm", "0.11.0", KIMI + spec(method="suffix", num_speculative_tokens=1))
    assert code == 1 and "spec-method-unsupported" in errors(doc), doc


def test_vllm_033_custom_class_is_gone_in_034():
    # "custom_class" is in 0.33.0's SpeculativeMethod (config/speculative.py:74-82@0.33.0), not in 0.34.0's
    # (config/speculative.py:90-97@0.34.0: a custom method is registered by a plugin instead)
    _, doc33 = check_args("vllm", "0.33.0", KIMI + spec(method="custom_class", num_speculative_tokens=1))
    assert "spec-method-unsupported" not in errors(doc33)
    code, doc34 = check_args("vllm", "0.34.0", KIMI + spec(method="custom_class", num_speculative_tokens=1))
    assert code == 1 and "spec-method-unsupported" in errors(doc34)


# ------------------------------------------------------------------ context length / max model len

def test_sglang_context_length_0_is_read_and_refused_as_the_worker_refuses_it():
    # SGLang builds its ModelConfig with context_length 0 (configs/model_config.py:1291-1318@0.5.23: 0 is not above
    # the derived length, so context_len = 0; the engine oracle accepts the line at resolve_once); the TP worker then
    # asserts min(context_len - 1, pool - 1) > 0 (managers/tp_worker.py:420-425@0.5.23) after the pool is allocated.
    # Before: exit 2 (spec.scheduling.maxModelLen >= 1), a refusal of a value the engine's config accepts.
    code, doc = check_args("sglang", "0.5.23", SGL_KIMI + ["--context-length", "0"])
    assert code != 2, doc
    hit = [f for f in doc["findings"] if f["rule"] == "sglang-context-length-below-two"]
    assert code == 1 and hit and "tp_worker.py:420-425@0.5.23" in hit[0]["source"], doc


def test_sglang_context_length_2_passes():
    code, doc = check_args("sglang", "0.5.23", SGL_KIMI + ["--context-length", "2"])
    assert code == 0, doc


def test_vllm_011_max_model_len_0_passes():
    # vLLM 0.11.0 declares no bound on max_model_len (config/model.py:160@0.11.0 SkipValidation; no positive check):
    # the engine oracle accepts `--max-model-len 0` and `-5` (stage run_server). Before: exit 2.
    for value in ("0", "-5"):
        code, doc = check_args("vllm", "0.11.0", ["/models/SmolLM2-135M-Instruct", "--max-model-len", value])
        assert code != 2, doc
        assert "vllm-config-bounds" not in errors(doc), doc


@pytest.mark.parametrize("version, where", [("0.34.0", "config/model.py:1090-1095@0.34.0"),
                                            ("0.33.0", "config/model.py:1070-1075@0.33.0")])
def test_vllm_max_model_len_0_refused_by_the_config_bound(version, where):
    # ModelConfig.validate_model_config_after: max_model_len must be a positive integer (the oracle: refused at
    # vllm/config/model.py:1091 on 0.34.0)
    code, doc = check_args("vllm", version, KIMI + ["--max-model-len", "0"])
    assert code == 1, doc
    hit = [f for f in doc["findings"] if f["rule"] == "vllm-config-bounds"]
    assert hit and hit[0]["field"] == "spec.scheduling.maxModelLen" and where in hit[0]["source"], doc



# ------------------------------------------------------------------ MTP without MTP layers on 0.34.0

NEMOTRON_H = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 2688,
              "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "num_hidden_layers": 52,
              "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
              "n_routed_experts": 128, "num_experts_per_tok": 6, "max_position_embeddings": 262144,
              "vocab_size": 131072, "torch_dtype": "bfloat16"}


def _with_config(argv: list[str], cfg: dict, tmp_path) -> list[str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return ["--model-config", str(path), "--", *argv]


def check_args_cfg(version: str, argv: list[str], cfg: dict, tmp_path) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["check-args", "--engine", "vllm", "--engine-version", version, "-o", "json",
                                   *_with_config(argv, cfg, tmp_path)], catch_exceptions=False)
    return res.exit_code, json.loads(res.stdout)


def test_vllm_034_mtp_on_a_model_without_mtp_layers_is_accepted_at_config_time(tmp_path):
    # 0.34.0 builds the MTP draft's config from the target's (config/speculative.py:1012-1022@0.34.0: nemotron_h
    # becomes nemotron_h_mtp only with num_nextn_predict_layers > 0) and validates the token count only where the
    # draft declares n_predict (v1/worker/gpu/spec_decode/speculator_config.py:275-291@0.34.0): the engine oracle
    # accepts `/models/shape-hybrid -tp 8 --speculative-config {"method": "mtp", ...}` (seed 8087's false refusal)
    argv = ["/models/shape-hybrid", "--tensor-parallel-size", "8",
            "--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 7})]
    code, doc = check_args_cfg("0.34.0", argv, NEMOTRON_H, tmp_path)
    assert "spec-mtp-needs-mtp-layers" not in errors(doc), doc
    # 0.33.0 refuses it when the config is built (config/speculative.py:1468-1499@0.33.0)
    code33, doc33 = check_args_cfg("0.33.0", argv, NEMOTRON_H, tmp_path)
    assert "spec-mtp-needs-mtp-layers" in errors(doc33), doc33


def test_vllm_034_mtp_on_deepseek_v41_still_refused(tmp_path):
    # v1/worker/gpu/spec_decode/mtp/config.py:80-89@0.34.0: DeepSeek V4.1 has no classic-MTP draft
    cfg = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "hidden_size": 4096,
           "num_attention_heads": 64, "num_key_value_heads": 1, "num_hidden_layers": 43, "n_routed_experts": 384,
           "num_experts_per_tok": 6, "max_position_embeddings": 1048576, "vocab_size": 129280}
    code, doc = check_args_cfg("0.34.0", ["/models/DeepSeek-V4.1-Flash", "--tensor-parallel-size", "8",
                                          *spec(method="mtp", num_speculative_tokens=1)], cfg, tmp_path)
    hit = [f for f in doc.get("findings") or [] if f["rule"] == "spec-mtp-needs-mtp-layers"]
    assert code == 1 and hit and "mtp/config.py:80-89@0.34.0" in hit[0]["source"], doc


# ------------------------------------------------------------------ DSpark + DCP: the draft's own DCP (0.34.0)

DSPARK = {"method": "dspark", "model": "/models/Kimi-K3-DSpark", "num_speculative_tokens": 7}
DCP8 = ["--decode-context-parallel-size", "8"]


def test_vllm_034_dspark_draft_dcp_1_skips_the_draft_backend_check():
    # mla_attention.py:2507-2516@0.34.0 returns before the support check when the builder's KV cache is not DCP
    # sharded; a draft at DCP 1 under a DCP target keeps a replicated cache (v1/worker/gpu/model_runner.py:632-642
    # @0.34.0). TRITON_MLA has no non-causal DCP support, but with draft DCP 1 it is never asked for it.
    argv = KIMI + DCP8 + ["--attention-backend", "FLASHINFER_MLA"] + spec(
        **DSPARK, attention_backend="TRITON_MLA", draft_decode_context_parallel_size=1)
    code, doc = check_args("vllm", "0.34.0", argv)
    assert "vllm-dspark-dcp-backend" not in errors(doc), doc


def test_vllm_034_dspark_draft_at_target_dcp_keeps_the_draft_backend_check():
    # the Kimi-K3 DSpark draft is full-attention MLA (k3_dspark: transformers_utils/model_arch_config_convertor.py:
    # 294-306@0.34.0, no sliding window), so its DCP defaults to the target's (dflash/config.py:33-47@0.34.0) and its
    # cache is sharded: TRITON_MLA is refused at model construction
    for extra in ({}, {"draft_decode_context_parallel_size": 8}):
        argv = KIMI + DCP8 + ["--attention-backend", "FLASHINFER_MLA"] + spec(
            **DSPARK, attention_backend="TRITON_MLA", **extra)
        code, doc = check_args("vllm", "0.34.0", argv)
        assert "vllm-dspark-dcp-backend" in errors(doc), (extra, doc)


def test_vllm_033_dspark_draft_dcp_1_has_no_such_exemption():
    # 0.33.0 checks every MLA builder under DCP (mla_attention.py:2303-2325@0.33.0: no dcp_sharded condition) and
    # has no draft DCP of its own
    argv = KIMI + DCP8 + ["--attention-backend", "FLASHINFER_MLA"] + spec(**DSPARK, attention_backend="TRITON_MLA")
    code, doc = check_args("vllm", "0.33.0", argv)
    assert "vllm-dspark-dcp-backend" in errors(doc), doc


# ------------------------------------------------------------------ co-refusals: the rule names the engine's reason

# (release, the product's refusing rule, where the release raised) of co-refusals the held-out differentials (seeds
# 6151 and 8087) counted as "refused for another reason" although the rule's reason is the engine's: the rule's
# per-release source now cites the file the release raises in (bench/oracle_differential.py right_reason)
SAME_REASON = [
    ("vllm-0.33.0", "parallel-fits-node", "vllm/v1/engine/utils.py:476"),
    ("vllm-0.34.0", "parallel-fits-node", "vllm/v1/engine/utils.py:476"),
    ("vllm-0.11.0", "parallel-fits-node-at-launch", "vllm/v1/engine/utils.py:188"),
    ("vllm-0.34.0", "spec-draft-method-mismatch", "vllm/v1/worker/gpu/spec_decode/speculator_config.py:418"),
    ("vllm-0.33.0", "spec-draft-method-mismatch", "vllm/model_executor/models/registry.py:1249"),
    ("vllm-0.11.0", "spec-draft-method-mismatch", "vllm/transformers_utils/config.py:138"),
    ("vllm-0.34.0", "spec-mtp-needs-mtp-layers", "vllm/v1/worker/gpu/spec_decode/mtp/config.py:83"),
    ("vllm-0.33.0", "topology-dp-layout", "vllm/config/parallel.py:546"),
    ("vllm-0.11.0", "spec-method-unsupported", "vllm/engine/arg_utils.py:1109"),
]


@pytest.mark.parametrize("release, rule_id, where", SAME_REASON)
def test_co_refusal_names_the_engines_reason(release, rule_id, where):
    from bench.oracle_differential import right_reason

    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.rules import RULES

    engine, version = release.split("-", 1)
    rule = RULES[rule_id]
    assert (engine, version) in rule.versions(load_catalog()) or rule.family == "topology"
    # right_reason reads every source of the rule (explain RULE -o json); the release's own must name the file
    assert where.split(":")[0].removeprefix("vllm/") in rule.source_for(engine, version), rule.source_for(engine, version)
    assert right_reason({"rules": [rule_id]}, {"stage": "create_engine_config", "where": where})


# ------------------------------------------------------------------ an API-server-only DP node (dpLocal 0)

@pytest.mark.parametrize("version", ["0.34.0", "0.33.0"])
def test_vllm_data_parallel_size_local_0_is_an_api_only_node(version):
    # ParallelConfig.data_parallel_size_local: Field(default=1, ge=0) (config/parallel.py:158@0.34.0, :150@0.33.0):
    # 0 local engines is the API-server-only node of a multi-node DP group (only headless refuses it,
    # entrypoints/cli/serve.py:199-203@0.34.0). The engine oracle accepts this line on 0.34.0 (stage setup_server).
    # Before: exit 2 (spec.parallel.dpLocal >= 1), and its ranks would have been counted as all of DP's.
    code, doc = check_args("vllm", version, KIMI + ["-dp", "2", "--data-parallel-size-local", "0",
                                                    "--data-parallel-address", "127.0.0.1"])
    assert code == 0, doc


def test_vllm_headless_data_parallel_size_local_0_still_refused_by_schema_or_rule():
    # headless with no local engine is refused (entrypoints/cli/serve.py:202-203@0.34.0): not a false refusal to keep
    code, doc = check_args("vllm", "0.34.0", KIMI + ["-dp", "2", "--data-parallel-size-local", "-1"])
    assert code in (1, 2), doc
