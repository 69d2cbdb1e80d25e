"""False refusals, fourth batch (issue 31): lines gpustack-k3 refused (exit 1 or 2) that vLLM 0.33.0 accepts, found
by the coverage-driven differential (bench/results/raise-sites-vllm-0.33.0-coverage-seed{3301,7919}.json
``product.false_refusals``, re-judged 2026-12-04) and by the P/D differential (seed 5153). Each case names the
release's source that decides it; tests/engine_oracle/test_false_refusals_fr4_oracle.py has the engine re-judge the
same lines with the real release.
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.main import cli
from gpustack_k3.core.model_config import arch_from_config
from gpustack_k3.core.rules import RULES

RUNTIME_ONLY = {k for k, r in RULES.items() if r.checked_by == "runtime-only"}

# NVIDIA-Nemotron-3-Nano's config.json, the fields the rules read (the oracle's shape-hybrid)
NEMOTRON_H = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 2688,
              "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "num_hidden_layers": 52,
              "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
              "n_routed_experts": 128, "num_experts_per_tok": 6, "max_position_embeddings": 262144,
              "vocab_size": 131072, "torch_dtype": "bfloat16", "intermediate_size": 1856,
              "moe_intermediate_size": 1856, "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 3712,
              "tie_word_embeddings": False}


def check_args(version: str, argv: list[str], cfg: dict | None, tmp_path, *, engine: str = "vllm",
               extra: list[str] | None = None) -> tuple[int, dict]:
    opts = list(extra or [])
    if cfg is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(cfg))
        opts += ["--model-config", str(path)]
    res = CliRunner().invoke(cli, ["check-args", "--engine", engine, "--engine-version", version, "-o", "json",
                                   *opts, "--", *argv], catch_exceptions=False)
    return res.exit_code, json.loads(res.stdout)


def findings(doc: dict, severity: str) -> list[dict]:
    return [f for f in doc.get("findings") or [] if f["severity"] == severity]


def errors(doc: dict) -> set[str]:
    return {f["rule"] for f in findings(doc, "error")}


def assert_not_refused(code: int, doc: dict) -> None:
    """Not an input error, and no refusal but a runtime-only rule's (the differential judges those apart)."""
    assert code != 2, doc
    assert errors(doc) <= RUNTIME_ONLY, doc


# ------------------------------------------------------------------ 1. config.json figures the release does not check

# 0.33.0 reads num_mtp_layers only with getattr and only for the Transformers modelling backend
# (config/speculative.py:1381-1399@0.33.0); nemotron_h's MTP draft needs num_nextn_predict_layers > 0
# (config/speculative.py:895-900@0.33.0). The oracle accepts `DIR -tp 8` whose config.json says num_mtp_layers -1 or
# "auto" (seed 3301: 26 lines), and -1 layers / KV heads / experts / vocabulary and 0 attention heads on the same
# Nemotron-H config (`python3 -m tools.engine_oracle vllm-0.33.0`, 2026-12-04; a Llama config with 0 heads is refused:
# ZeroDivisionError in its Transformers config, which this product does not model).
@pytest.mark.parametrize("key, value", [("num_mtp_layers", -1), ("num_mtp_layers", "auto"),
                                        ("num_nextn_predict_layers", -1), ("num_hidden_layers", -1),
                                        ("num_hidden_layers", "auto"), ("num_hidden_layers", True),
                                        ("num_key_value_heads", -1), ("vocab_size", -1),
                                        ("num_attention_heads", 0)])
def test_a_config_figure_the_release_accepts_is_not_unusable_input(key, value, tmp_path):
    code, doc = check_args("0.33.0", ["/models/shape-hybrid", "--tensor-parallel-size", "8"],
                           {**NEMOTRON_H, key: value}, tmp_path)
    assert_not_refused(code, doc)


@pytest.mark.parametrize("value", [-1, "auto", 2.5, True, [1]])
def test_an_mtp_count_that_is_no_count_reads_as_not_given(value):
    # the one reader: a figure that is not a non-negative whole number is not a figure (None) and is named as unread
    a = arch_from_config({**NEMOTRON_H, "num_mtp_layers": value}, "t")
    assert a.mtp_layers is None and a.unread == {"num_mtp_layers": value}
    assert arch_from_config({**NEMOTRON_H, "num_mtp_layers": 2}, "t").mtp_layers == 2


def test_a_later_key_of_the_same_figure_is_read_when_the_first_is_no_count():
    a = arch_from_config({**NEMOTRON_H, "num_nextn_predict_layers": "auto", "num_mtp_layers": 1}, "t")
    assert a.mtp_layers == 1


# ------------------------------------------------------------------ 2. MultiModalConfig bounds: multimodal models only

# ModelConfig builds MultiModalConfig only `if self._model_info.supports_multimodal` (config/model.py:831-881@0.33.0),
# so its Field bounds (mm_processor_cache_gb ge=0, video_pruning_rate lt=1: config/multimodal.py) never see a text
# model's values: the oracle accepts `/models/shape-gqa-yarn -tp 8 --mm-processor-cache-gb -1` (seeds 3301, 7919)
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
         "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
MM_FLAGS = [["--mm-processor-cache-gb", "-1"], ["--video-pruning-rate", "1.0"]]


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
@pytest.mark.parametrize("flag", MM_FLAGS)
def test_multimodal_config_bounds_are_not_judged_for_a_text_model(version, flag, tmp_path):
    code, doc = check_args(version, ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8", *flag], LLAMA, tmp_path)
    assert_not_refused(code, doc)
    assert "vllm-config-field-bounds" not in {f["rule"] for f in doc.get("findings") or []}


@pytest.mark.parametrize("flag", MM_FLAGS)
def test_multimodal_config_bounds_still_refused_for_a_multimodal_model(flag, tmp_path):
    # Kimi-K3 (KimiK3ForConditionalGeneration) is in _MULTIMODAL_MODELS (model_executor/models/registry.py@0.33.0)
    code, doc = check_args("0.33.0", ["/models/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code",
                                      *flag], None, tmp_path)
    assert code == 1 and "vllm-config-field-bounds" in errors(doc), doc


def test_without_a_config_json_the_multimodal_bounds_are_named_not_judged(tmp_path):
    # a model known by no config.json and no catalog entry: whether the release builds MultiModalConfig is unknown
    code, doc = check_args("0.33.0", ["/nowhere/some-model", "--tensor-parallel-size", "8",
                                      "--mm-processor-cache-gb", "-1"], None, tmp_path)
    assert_not_refused(code, doc)
    skipped = [f for f in doc["findings"] if f["rule"] == "model-config-checks-skipped"]
    assert skipped and "vllm-config-field-bounds (--mm-processor-cache-gb: MultiModalConfig" in skipped[0]["message"]
    # a non-MultiModalConfig bound is judged as before
    code, doc = check_args("0.33.0", ["/nowhere/some-model", "--max-num-queued-reqs", "-1"], None, tmp_path)
    assert code == 1 and "vllm-config-field-bounds" in errors(doc), doc


# ------------------------------------------------------------------ 3. --headless with a non-positive API server count

# ServeSubcommand.cmd refuses --headless only with `args.api_server_count > 0` and then sets it to 0
# (entrypoints/cli/serve.py:69-77@0.33.0, :70-77@0.34.0, :66-74@0.29.0, :65-73@0.28.0): the oracle accepts
# `/models/shape-gqa-yarn -tp 8 --headless --api-server-count -1` (seed 7919, both orders)
@pytest.mark.parametrize("version", ["0.33.0", "0.34.0", "0.29.0"])
@pytest.mark.parametrize("count", ["-1", "0"])
def test_headless_with_a_non_positive_api_server_count_is_accepted(version, count, tmp_path):
    argv = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8", "--headless", "--api-server-count", count]
    code, doc = check_args(version, argv, LLAMA, tmp_path)
    assert "topology-lb-exclusive" not in errors(doc), doc


def test_headless_with_a_positive_api_server_count_stays_refused(tmp_path):
    argv = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8", "--headless", "--api-server-count", "1"]
    code, doc = check_args("0.33.0", argv, LLAMA, tmp_path)
    assert code == 1 and "topology-lb-exclusive" in errors(doc), doc


# ------------------------------------------------------------------ 4. method mtp with a draft model of its own

# With a draft `model` given, 0.33.0 builds the draft's ModelConfig from that model (config/speculative.py:1400-1430
# @0.33.0) and decides from the draft, not the target: a draft named *dspark* becomes method dspark
# (:1455-1468), an MTP-type draft stays mtp (:1469-1490), n_predict is the draft's (:1594-1611). The target's MTP
# layers play no part: the oracle accepts a Llama or NemotronH target with {"method": "mtp", "model":
# "Inferact/Kimi-K3-DSpark"} (seed 7919)
@pytest.mark.parametrize("target, cfg", [("/models/shape-gqa-dense", LLAMA), ("/models/shape-hybrid", NEMOTRON_H)])
def test_mtp_with_a_draft_model_is_not_judged_by_the_targets_mtp_layers(target, cfg, tmp_path):
    argv = [target, "--tensor-parallel-size", "8", "--speculative-config",
            json.dumps({"model": "Inferact/Kimi-K3-DSpark", "num_speculative_tokens": 7, "method": "mtp"})]
    code, doc = check_args("0.33.0", argv, cfg, tmp_path)
    assert "spec-mtp-needs-mtp-layers" not in errors(doc), doc


def test_mtp_without_a_draft_model_still_needs_the_targets_mtp_layers(tmp_path):
    argv = ["/models/shape-gqa-dense", "--tensor-parallel-size", "8", "--speculative-config",
            json.dumps({"num_speculative_tokens": 1, "method": "mtp"})]
    code, doc = check_args("0.33.0", argv, LLAMA, tmp_path)
    assert code == 1 and "spec-mtp-needs-mtp-layers" in errors(doc), doc


def test_0_34_refuses_mtp_on_deepseek_v41_whatever_the_draft(tmp_path):
    # v1/worker/gpu/spec_decode/mtp/config.py:80-88@0.34.0 reads the target's model type (adapt_draft_model_config)
    cfg = {"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41", "hidden_size": 4096,
           "num_attention_heads": 64, "num_key_value_heads": 1, "num_hidden_layers": 43, "n_routed_experts": 384,
           "num_experts_per_tok": 6, "max_position_embeddings": 1048576, "vocab_size": 129280}
    argv = ["/models/DeepSeek-V4.1-Flash", "--tensor-parallel-size", "8", "--speculative-config",
            json.dumps({"num_speculative_tokens": 1, "method": "mtp", "model": "/models/some-mtp-draft"})]
    code, doc = check_args("0.34.0", argv, cfg, tmp_path)
    assert code == 1 and "spec-mtp-needs-mtp-layers" in errors(doc), doc


# ------------------------------------------------------------------ 5. TP x PP above the node's GPUs, backend given

# ParallelConfig.__post_init__ checks the world size against the node's GPUs only while it picks the executor itself:
# `if self.distributed_executor_backend is None and self.world_size_across_dp > 1: ... elif current_platform.is_cuda()
# and current_platform.device_count() < self.world_size: raise` (config/parallel.py:1053-1076@0.33.0). With
# --distributed-executor-backend given it does not check; the oracle (2026-12-04) accepts `-tp 8 -pp 2` on 8 GPUs
# with mp (with or without --nnodes 1) and external_launcher, refuses it without a backend (parallel.py:1071), and
# refuses DP ranks past the node's GPUs whatever the backend (v1/engine/utils.py:476, the local DP device range).
# With mp the multiprocessing executor starts every rank of the world on this node (v1/executor/
# multiproc_executor.py:305-357@0.33.0): ranks past the GPUs fail at launch -- a runtime-only refusal.
TP8PP2 = ["/models/shape-gqa-dense", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]


@pytest.mark.parametrize("extra", [["--distributed-executor-backend", "mp", "--nnodes", "1"],
                                   ["--distributed-executor-backend", "mp"]])
def test_tp_pp_past_the_gpus_with_mp_is_a_launch_refusal(extra, tmp_path):
    code, doc = check_args("0.33.0", TP8PP2 + extra, LLAMA, tmp_path, extra=["--gpus", "8"])
    assert "parallel-fits-node" not in errors(doc), doc
    launch = [f for f in findings(doc, "error") if f["rule"] == "parallel-fits-node-at-launch"]
    assert launch and "16 ranks" in launch[0]["message"] and RULES["parallel-fits-node-at-launch"].checked_by == \
        "runtime-only", doc
    assert_not_refused(code, doc)


@pytest.mark.parametrize("backend", ["external_launcher", "ray"])
def test_tp_pp_past_the_gpus_with_a_multi_node_backend_is_not_refused(backend, tmp_path):
    # ray / torchrun may place the world on several nodes: a count of one node's GPUs accounts for no such thing
    code, doc = check_args("0.33.0", TP8PP2 + ["--distributed-executor-backend", backend], LLAMA, tmp_path,
                           extra=["--gpus", "8"])
    assert not {"parallel-fits-node", "parallel-fits-node-at-launch"} & errors(doc), doc


def test_tp_pp_past_the_gpus_without_a_backend_stays_a_config_refusal(tmp_path):
    code, doc = check_args("0.33.0", TP8PP2, LLAMA, tmp_path, extra=["--gpus", "8"])
    assert code == 1 and "parallel-fits-node" in errors(doc), doc


@pytest.mark.parametrize("extra", [[], ["--distributed-executor-backend", "mp"]])
def test_dp_ranks_past_the_gpus_stay_refused_whatever_the_backend(extra, tmp_path):
    argv = ["/models/shape-gqa-dense", "--tensor-parallel-size", "4", "--data-parallel-size", "4", *extra]
    code, doc = check_args("0.33.0", argv, LLAMA, tmp_path, extra=["--gpus", "8"])
    assert code == 1 and "parallel-fits-node" in errors(doc), doc


# ------------------------------------------------------------------ 6. a P/D pair: a draft without KV of its own

# An ngram / suffix draft has no draft model and no draft KV layers: 0.33.0 sets draft_model_config to the target's
# (ngram, config/speculative.py:1300-1331@0.33.0; suffix :1333-1334) and the NIXL compatibility hash takes the
# speculative factors only for hidden-state drafts (`use_eagle()`, nixl/metadata.py:103-138@0.33.0). What KV moves
# is the same with or without it: the oracle accepts the pair through the NIXL handshake (seed 5153, pair 19).
KV_P = '\'{"kv_connector":"NixlConnector","kv_role":"kv_producer"}\''
KV_D = '\'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}\''
PD_LINE = "vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --kv-transfer-config "
PD_ENV = ("--prefill-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "--decode-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2")


def check_pd(prefill_extra: str, decode_extra: str = "", engine_version: str = "0.33.0") -> tuple[int, list[dict]]:
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "vllm", "--engine-version", engine_version, "--model",
                                   "kimi-k3", "--prefill", PD_LINE + KV_P + prefill_extra,
                                   "--decode", PD_LINE + KV_D + decode_extra, "-o", "json", *PD_ENV],
                           catch_exceptions=False)
    return res.exit_code, json.loads(res.output)["findings"]


@pytest.mark.parametrize("method", ["ngram", "suffix", "ngram_gpu"])
def test_a_draft_without_kv_on_one_side_is_not_part_of_the_pair_identity(method):
    cfg = {"method": method} if method == "suffix" else {"method": method, "num_speculative_tokens": 3,
                                                          "prompt_lookup_max": 4}
    code, found = check_pd(f" --speculative-config '{json.dumps(cfg)}'")
    assert not [f for f in found if f["rule"] == "pd-pair-identity"], found


def test_a_draft_with_kv_layers_on_one_side_stays_refused():
    cfg = {"method": "mtp", "num_speculative_tokens": 1}
    code, found = check_pd(f" --speculative-config '{json.dumps(cfg)}'")
    hits = [f for f in found if f["rule"] in ("pd-pair-identity", "pd-compat-hash") and "draft" in f["message"]]
    assert code == 1 and hits, found


SGL_PD = ("python3 -m sglang.launch_server --model-path /models/Kimi-K3 --trust-remote-code --tp-size 8 "
          "--kv-cache-dtype fp8_e4m3 --disaggregation-transfer-backend nixl")


@pytest.mark.parametrize("draft, in_identity", [
    (" --speculative-algorithm NGRAM --speculative-num-draft-tokens 4", False),   # ngram_worker.py:76-120@0.5.23
    (" --speculative-algorithm EAGLE3 --speculative-draft-model-path /models/eagle3 --speculative-num-steps 2 "
     "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3", True),
])
def test_sglang_pair_identity_counts_only_a_draft_with_kv(draft, in_identity):
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "sglang", "--engine-version", "0.5.23", "--prefill",
                                   SGL_PD + " --disaggregation-mode prefill" + draft, "--decode",
                                   SGL_PD + " --disaggregation-mode decode", "-o", "json"], catch_exceptions=False)
    found = {f["rule"] for f in json.loads(res.output)["findings"] if f["severity"] == "error"}
    assert ("pd-pair-identity" in found) is in_identity, found
