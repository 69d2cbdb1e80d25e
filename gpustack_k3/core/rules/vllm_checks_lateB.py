"""--disable-sliding-window on vLLM 0.11.0 for a model whose config.json sets no rope_scaling, where the transformers
the release runs with answers a default one.

``_get_and_verify_max_len`` (vllm config/model.py:1763-1854@0.11.0, from ``ModelConfig.__post_init__`` :602 through
:1502-1509 with ``hf_config=self.hf_text_config``) refuses ``--disable-sliding-window`` for a model whose
``rope_scaling`` is not None and whose rope type is not su / longrope / llama3 (not for gemma3): NotImplementedError
"Disabling sliding window is not supported for models with rope_scaling" (:1847-1854). Only 0.11.0 has the check
(from 0.28.0 the function no longer takes ``disable_sliding_window``: config/model.py:2333-2346@0.28.0; no such message
in 0.29.0, 0.33.0, 0.34.0). Rule vllm-disable-sliding-window-rope-scaling (core/rules/vllm_checks_vmiss5.py) judges a
rope_scaling written in config.json, and a missing one for the model types llama, mistral, qwen2, qwen3.

The release's wheel asks for ``transformers>=4.55.2`` (unpinned); with transformers 5.x (5.19.0 in the engine
oracle's interpreter) every config class that standardises its rope parameters answers ``rope_scaling`` with
``{"rope_type": "default", "rope_theta": ...}`` when config.json sets none, so the release refuses the flag for
those models too (the oracle, 2026-12-04: ``/models/Qwen3-30B-A3B --disable-sliding-window`` refused on 0.11.0,
model type qwen3_moe). ``DEFAULT_ROPE_MODEL_TYPES`` lists them: the model types of transformers 5.19.0's
``CONFIG_MAPPING`` whose config, built with its defaults, has no nested text config and answers that default
``rope_scaling``; without vLLM 0.11.0's own config classes (``_CONFIG_REGISTRY``,
transformers_utils/config.py:66-88@0.11.0, which do not come from transformers), without gemma3 (the release skips it)
and without vmiss5's four. tests/engine_oracle/test_lateB_oracle.py recomputes the list in the oracle's interpreter.
With transformers 4.x such a config keeps ``rope_scaling`` None and the release accepts (helper miss8, 2026-12-04:
transformers 4.57.6, the last 4.x, builds Qwen3MoeConfig from the oracle's Qwen3-30B-A3B config.json with
``rope_scaling`` None, and every model type of DEFAULT_ROPE_MODEL_TYPES and vmiss5's four that 4.57.6 knows answers
None or has no such attribute, but efficientloftr, a vision matcher). The release's image, vllm/vllm-openai:v0.11.0,
was built with the transformers 4.x of its day, while ``pip install vllm==0.11.0`` today resolves 5.x: the verdict
rests on which transformers the engine runs beside the release, a term gpustack-k3 does not know. So this rule
warns (severity warning, naming that term) and rule vllm-disable-sliding-window-rope-scaling refuses only where
config.json itself writes a rope_scaling that the release refuses whatever transformers reads it.
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.vllm_checks_vmiss5 import disabled_sliding_window_config

_SOURCE = ("vllm config/model.py:1502-1509,1838-1854@0.11.0, transformers_utils/config.py:365-398@0.11.0 "
           "(patch_rope_scaling)")
# the four types vmiss5's rule judged until miss8 (warned here since; the oracle's list below leaves them out)
_VMISS5_TYPES = frozenset(("llama", "mistral", "qwen2", "qwen3"))
_KEPT = ("su", "longrope", "llama3")   # config/model.py:1847@0.11.0 (after patch_rope_scaling_dict: su -> longrope)
DEFAULT_ROPE_MODEL_TYPES = frozenset((
    "EvollaModel", "afmoe", "arcee", "aria_text", "axk1", "axk2", "bamba", "bitnet", "blt",
    "blt_global_transformer", "blt_local_decoder", "blt_local_encoder", "blt_patcher", "chameleon", "cohere",
    "cohere2", "cosmos3_edge_text", "csm", "csm_depth_decoder_model", "dbrx", "deepseek_ocr2_encoder",
    "deepseek_ocr2_text", "deepseek_v2", "dia_decoder", "dia_encoder", "diffllama", "doge", "dots1",
    "efficientloftr", "emu3_text_model", "eomt_dinov3", "ernie4_5", "ernie4_5_moe", "ernie4_5_vl_moe_text", "esmc",
    "eurobert", "evolla", "exaone4", "exaone_moe", "falcon", "falcon_h1", "flex_olmo", "gemma", "gemma2", "glm",
    "glm4", "glm4_moe", "glm4_moe_lite", "glm4v_moe_text", "glm4v_text", "glm_image_text", "glm_moe_dsa",
    "glm_ocr_text", "glmasr_encoder", "gpt_neox", "gpt_neox_japanese", "granite", "granite4_vision_text",
    "granite_swa", "granitemoe", "granitemoe_swa", "granitemoehybrid", "granitemoeshared", "gte", "helium",
    "hrm_text", "hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl_text", "hy_v3", "hy_v4", "hyperclovax", "idefics",
    "jais2", "jetmoe", "jina_embeddings_v3", "kyutai_speech_to_text", "lasr_encoder", "lfm2", "lfm2_moe", "llama",
    "llama4_text", "llama4_vision_model", "longcat_flash", "mimi", "minicpm3", "minimax", "minimax_m2",
    "minimax_m3_vl_text", "ministral", "mistral", "mixtral", "mllama_text_model", "moonshine",
    "moonshine_streaming", "moshi", "muse_glimmer_assistant", "muse_glimmer_text", "nanochat",
    "nemotron3_diarization_audio", "neucodec", "nomic_bert", "olmo", "olmo2", "olmo_hybrid", "olmoe",
    "paddleocr_vl_text", "pe_audio_encoder", "persimmon", "phi", "phi3", "phi4_multimodal", "phimoe", "qwen2",
    "qwen2_5_omni_dit", "qwen2_5_omni_talker", "qwen2_5_omni_text", "qwen2_5_vl_text", "qwen2_moe", "qwen2_vl_text",
    "qwen3", "qwen3_5_moe_text", "qwen3_5_text", "qwen3_moe", "qwen3_omni_moe_talker_code_predictor",
    "qwen3_omni_moe_talker_text", "qwen3_omni_moe_text", "qwen3_vl_moe_text", "qwen3_vl_text", "qwen4_exp_text",
    "recurrent_gemma", "seed_oss", "smollm3", "solar_open", "stablelm", "starcoder2", "t5_gemma_module",
    "timesfm2_5", "vaultgemma", "voxtral_realtime_encoder", "voxtral_realtime_text", "xcodec2", "youtu", "zamba2",
)) - _VMISS5_TYPES
WARNED_MODEL_TYPES = DEFAULT_ROPE_MODEL_TYPES | _VMISS5_TYPES


@rule("vllm-disable-sliding-window-default-rope", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--disable-sliding-window on vLLM 0.11.0 for a model whose default rope parameters count as rope_scaling",
      why="vLLM 0.11.0 refuses to disable the sliding window of a model with RoPE scaling other than su, longrope "
          "and llama3; under transformers 5 (what pip resolves for vllm 0.11.0 today) a config.json that sets no "
          "rope_scaling is answered with the default rope parameters (rope_type 'default'), which the release "
          "counts as RoPE scaling; under the transformers 4.x of the release's image it stays None and the release "
          "accepts. Which one the engine runs is not known to gpustack-k3.",
      fix="Run the release with transformers 4.x (its image vllm/vllm-openai:v0.11.0 does), or drop "
          "--disable-sliding-window (cap the context with --max-model-len instead), or run a release from 0.28.0 on, "
          "which no longer refuses it.",
      source=_SOURCE, sources={"vllm 0.11.0": _SOURCE})
def check_vllm_disable_sliding_window_default_rope(r, c):
    raw = disabled_sliding_window_config(r)
    if raw is None:
        return
    model_type = str(raw.get("model_type") or "")
    if model_type not in WARNED_MODEL_TYPES or "text_config" in raw or raw.get("rope_scaling") is not None:
        return
    params = raw.get("rope_parameters")   # transformers 5's own key, when config.json writes it
    if params is not None:
        kind = params.get("rope_type", params.get("type")) if isinstance(params, dict) else None
        if kind is None or kind in _KEPT or kind == "su":
            return
    found = extra_arg(r, "--disable-sliding-window")
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        f"--disable-sliding-window on vLLM {r.version.key} for a {model_type} config.json that sets no rope_scaling: "
        "refused ('Disabling sliding window is not supported for models with rope_scaling') where the engine runs "
        "transformers 5, which reads default rope parameters; accepted with transformers 4.x (the release's image): "
        "the transformers version beside the engine is not known to gpustack-k3")


# applies to the releases its sources name (registry.ReleaseRule): 0.11.0 only
RULES["vllm-disable-sliding-window-default-rope"] = ReleaseRule.of(RULES["vllm-disable-sliding-window-default-rope"])
