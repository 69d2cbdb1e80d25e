"""Helper m10v (held-out seed 35791's vLLM misses and two suspected false refusals), the product side:

- gpustack_k3/core/rules/vllm_checks_m10v.py: an explicit max_cudagraph_capture_size below 1 with CUDA graphs on is
  refused on 0.28.0, 0.29.0, 0.33.0 and 0.34.0, left alone where the line turns CUDA graphs off, and warned about
  where the line sets a term that may turn them off (a compilation mode: 0.28.0 accepts, 0.34.0 refuses);
- gpustack_k3/catalog/data/checks/vllm.yaml: vllm-replayssm-nemotron-h-only-028 on the held-out line (a preset's own
  config.json, which the table's examples cannot name); the V0 fallback of vllm-spec-decoding-v0-011 is in the
  entry's examples (tests/core/test_checks_table.py, tests/engine_oracle/test_checks_vllm.py);
- gpustack_k3/core/rules/spec.py: spec-draft-missing lets a DSpark self-draft with num_speculative_tokens pass on
  0.28.0 and 0.29.0 (refused only for a target with num_nextn_predict_layers 0), model-dcp-gqa reads DeepSeek-V4.1
  as MLA (its compress ratios), as the releases do.
tests/engine_oracle/test_m10v_rules_oracle.py has each release judge the same lines."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_m10v import ERROR, UNDECIDED
from tests.core.test_vllm_checks import product, refused_by_and_not_on_the_flip

M10V_DIRECT = {ERROR, UNDECIDED}   # wired in tests/core/test_registry.py and tests/core/test_rules.py

SMOL = ["/models/smollm2-hf"]
SMOL_M = "smollm2-135m"
MAX0 = ["--max-cudagraph-capture-size", "0"]
GRAPH_RELEASES = ("0.28.0", "0.29.0", "0.33.0", "0.34.0")


def cc(**kw) -> list[str]:
    return ["-cc", json.dumps(kw)]


# the held-out lines (seed 35791): the engine refuses them at the assertion, their flips (no explicit maximum) pass
HELDOUT_033 = ["/models/Kimi-K3", "--trust-remote-code", "--load-format", "fastsafetensors", "--gpu-memory-utilization",
               "0.92", "--tensor-parallel-size", "8", "--decode-context-parallel-size", "8", "--max-model-len",
               "262144", "--kv-cache-dtype", "fp8", "--attention-backend", "FLASHINFER_MLA",
               "--max-num-batched-tokens", "32768", "--enable-prefix-caching", "--max-num-seqs", "32",
               "--speculative-config", json.dumps({"model": "Inferact/Kimi-K3-DSpark", "num_speculative_tokens": 7,
                                                   "method": "dspark", "attention_backend": "FLASHINFER_MLA",
                                                   "draft_sample_method": "probabilistic",
                                                   "rejection_sample_method": "block"}),
               "--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer",
                                                   "kv_load_failure_policy": "fail"})]
HELDOUT_033_ENV = {"VLLM_CACHE_ROOT": "/cache/vllm", "VLLM_ENGINE_READY_TIMEOUT_S": "1890",
                   "VLLM_NIXL_SIDE_CHANNEL_PORT": "5600", "VLLM_NIXL_SIDE_CHANNEL_HOST": "$(POD_IP)"}
HELDOUT_028 = ["/models/Kimi-K3", "--trust-remote-code", "--load-format", "fastsafetensors", "--moe-backend", "auto",
               "--gpu-memory-utilization", "0.92", "--tensor-parallel-size", "8", "--decode-context-parallel-size", "8",
               "--max-model-len", "1000000", "--kv-cache-dtype", "fp8", "--attention-config",
               json.dumps({"mla_prefill_backend": "TRTLLM_RAGGED", "use_prefill_query_quantization": True}),
               "--max-num-batched-tokens", "32768", "--long-prefill-token-threshold", "4096",
               "--enable-prefix-caching", "--enable-auto-tool-choice", "--tool-call-parser", "kimi_k3",
               "--reasoning-parser", "kimi_k3", "--max-num-seqs", "32", "--trust-request-chat-template"]
HELDOUT_028_ENV = {"VLLM_CACHE_ROOT": "/cache/vllm", "VLLM_ENGINE_READY_TIMEOUT_S": "3600",
                   "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1", "VLLM_ALLREDUCE_USE_FLASHINFER": "1",
                   "VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_USE_RUST_FRONTEND": "1"}

# (rule id, release, refused line, its env, the line flipped, its env, catalog model)
CASES = [
    (ERROR, rel, SMOL + MAX0, {}, SMOL + ["--max-cudagraph-capture-size", "1"], {}, SMOL_M) for rel in GRAPH_RELEASES
] + [
    (ERROR, "0.34.0", SMOL + MAX0 + cc(cudagraph_mode="PIECEWISE"), {}, SMOL + MAX0 + cc(cudagraph_mode="NONE"), {},
     SMOL_M),
    (ERROR, "0.29.0", SMOL + ["-O1"] + cc(max_cudagraph_capture_size=-2), {},
     SMOL + ["-O1"] + cc(max_cudagraph_capture_size=2), {}, SMOL_M),
    (ERROR, "0.33.0", SMOL + ["-O1"] + cc(max_cudagraph_capture_size=-2), {},
     SMOL + ["-O1", "--enforce-eager"] + cc(max_cudagraph_capture_size=-2), {}, SMOL_M),
    (ERROR, "0.33.0", HELDOUT_033 + MAX0, HELDOUT_033_ENV, HELDOUT_033, HELDOUT_033_ENV, "kimi-k3"),
    (ERROR, "0.28.0", HELDOUT_028 + MAX0, HELDOUT_028_ENV, HELDOUT_028, HELDOUT_028_ENV, "kimi-k3"),
]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines with a maximum below 1 the rules leave alone (release, line, env, catalog model); the engine accepts them
# (0.32.0-cpu: no static graph mode, the rules are not on that release)
NOT_REFUSED = [
    ("0.28.0", SMOL + ["-O0"] + MAX0, {}, SMOL_M),
    ("0.34.0", SMOL + ["-O0"] + MAX0, {}, SMOL_M),
    ("0.34.0", SMOL + cc(cudagraph_mode="NONE", max_cudagraph_capture_size=0), {}, SMOL_M),
    ("0.29.0", SMOL + MAX0 + ["--enforce-eager"], {}, SMOL_M),
    ("0.32.0-cpu", ["--model"] + SMOL + MAX0, {}, SMOL_M),
]

# the warning's lines: the same term (a compilation mode other than VLLM_COMPILE), two verdicts of the engine
UNDECIDED_LINES = [
    ("0.28.0", SMOL + cc(mode=0, max_cudagraph_capture_size=0), {}, SMOL_M, "accepted"),
    ("0.34.0", SMOL + cc(mode=0, max_cudagraph_capture_size=0), {}, SMOL_M, "refused"),
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_fires_on_its_line_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused_by_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model)


@pytest.mark.parametrize("release,line,env,model", NOT_REFUSED)
def test_the_rules_leave_these_lines(release, line, env, model):
    got = product(release, line, env, model)
    assert not {ERROR, UNDECIDED} & set(got["rules"]), got


def findings(release: str, line: list[str], env: dict, model: str) -> list[dict]:
    """check-args' findings (every severity) in-process, with the arguments the differential gives it."""
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd
    from tools.engine_oracle.product import _common

    args = _common("vllm", release, model, "b300") + ["--gpus", "8"]
    for k, v in sorted(env.items()):
        args += ["--env", f"{k}={v}"]
    res = CliRunner().invoke(cmd, args + ["--", *line])
    return json.loads(res.stdout if hasattr(res, "stdout") else res.output)["findings"]


@pytest.mark.parametrize("release,line,env,model,engine", UNDECIDED_LINES)
def test_a_compilation_mode_is_warned_not_refused(release, line, env, model, engine):
    got = product(release, line, env, model)
    assert got["verdict"] == "pass" and ERROR not in got["rules"], got
    found = [f for f in findings(release, line, env, model) if f["rule"] == UNDECIDED]
    assert len(found) == 1 and found[0]["severity"] == "warning", found
    assert "compilation mode 0" in found[0]["message"] and "max_cudagraph_capture_size=0" in found[0]["message"]
    # a line the error rule refuses carries no warning as well
    assert not [f for f in findings(release, SMOL + MAX0, {}, model) if f["rule"] == UNDECIDED]


def test_the_rules_are_on_the_releases_with_the_assertion():
    for rid in (ERROR, UNDECIDED):
        assert {k.split()[1] for k in RULES[rid].sources} == set(GRAPH_RELEASES)
        for rel in GRAPH_RELEASES:
            assert f"@{rel}" in RULES[rid].source_for("vllm", rel)
    # 0.11.0 (no such flag) and 0.32.0-cpu (no static graphs): not switched on
    assert ERROR not in product("0.11.0", SMOL + cc(max_cudagraph_capture_size=0), {}, SMOL_M)["rules"]


# ------------------------------------------------------------------ --use-replayssm on 0.28.0 (the held-out line)

QWEN3 = ["/models/Qwen3-30B-A3B", "--gpu-memory-utilization", "0.9", "--tensor-parallel-size", "1",
         "--data-parallel-size", "8", "--enable-expert-parallel", "--long-prefill-token-threshold", "4096",
         "--enable-prefix-caching", "--max-num-seqs", "48", "--max-model-len", "auto",
         "--dp-supervisor-probe-failure-threshold", "1"]
QWEN3_ENV = {"VLLM_CACHE_ROOT": "/cache/vllm", "VLLM_ENGINE_READY_TIMEOUT_S": "3600",
             "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
REPLAYSSM = "vllm-replayssm-nemotron-h-only-028"


def preset_product(release: str, argv: list[str], env: dict, preset_model: str) -> dict:
    """check-args with a preset's own config.json (the file the oracle's preset-<name> directory holds)."""
    from gpustack_k3.oracle.models import preset_model_config, write_models
    from tools.engine_oracle.product import check_args

    write_models()
    return check_args("vllm", release, {"argv": argv, "env": env, "model": None, "gpu_type": "b300", "gpus": 8,
                                        "model_config": preset_model_config(preset_model)})


def test_replayssm_on_the_heldout_qwen3_line():
    got = preset_product("0.28.0", QWEN3 + ["--use-replayssm"], QWEN3_ENV, "qwen3-30b-a3b")
    assert got["verdict"] == "refuse" and REPLAYSSM in got["rules"], got
    assert "--use-replayssm is only supported for Nemotron-H models" in got["message"], got
    assert REPLAYSSM not in preset_product("0.28.0", QWEN3, QWEN3_ENV, "qwen3-30b-a3b")["rules"]


# ------------------------------------------------------------------ DSpark self-draft (spec-draft-missing)

DSPARK7 = ["--speculative-config", json.dumps({"method": "dspark", "num_speculative_tokens": 7})]
DSPARK1 = ["--speculative-config", json.dumps({"method": "dspark", "num_speculative_tokens": 1})]
DSPARK_NONE = ["--speculative-config", json.dumps({"method": "dspark"})]
MLA_MOE = ["/models/shape-mla-moe", "-tp", "8"]
KIMI = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]

# (release, line, catalog model or shape-X, the engine's verdict): the product refuses exactly the refused ones
DSPARK_LINES = [
    ("0.28.0", MLA_MOE + DSPARK1, "shape-mla-moe", "accepted"),      # num_nextn_predict_layers 1: n_predict 1
    ("0.29.0", MLA_MOE + DSPARK1, "shape-mla-moe", "accepted"),
    ("0.33.0", MLA_MOE + DSPARK1, "shape-mla-moe", "accepted"),
    ("0.28.0", KIMI + DSPARK7, "kimi-k3", "refused"),                # num_nextn_predict_layers 0: modulo by zero
    ("0.29.0", KIMI + DSPARK7, "kimi-k3", "refused"),
    ("0.33.0", KIMI + DSPARK7, "kimi-k3", "accepted"),
    ("0.34.0", KIMI + DSPARK7, "kimi-k3", "accepted"),
    ("0.29.0", MLA_MOE + DSPARK_NONE, "shape-mla-moe", "refused"),   # no num_speculative_tokens
    ("0.34.0", KIMI + DSPARK_NONE, "kimi-k3", "refused"),
]


@pytest.mark.parametrize("release,line,model,engine", DSPARK_LINES)
def test_dspark_self_draft(release, line, model, engine):
    got = product(release, line, {}, model)
    assert ("spec-draft-missing" in got["rules"]) == (engine == "refused"), got


# ------------------------------------------------------------------ DeepSeek-V4.1 is MLA by its compress ratios

DSV41 = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code"]
DSV41_LINES = [
    ("0.33.0", DSV41 + ["-tp", "1", "-dcp", "2"]),   # refused by dcp-divides-tp (tp not divisible), not as GQA
    ("0.34.0", DSV41 + ["-tp", "1", "-dcp", "2"]),
    ("0.34.0", DSV41 + ["-tp", "4", "-dcp", "4"]),
]


@pytest.mark.parametrize("release,line", DSV41_LINES)
def test_deepseek_v41_is_not_judged_as_gqa(release, line):
    assert "model-dcp-gqa" not in product(release, line, {}, "deepseek-v4.1-flash")["rules"]
