"""The model directories the engine oracle hands to an engine release: a config.json each, no weights.

  python3 -m gpustack_k3.oracle.models [--out DIR]     # write them (default: the cache, see model_root())

An engine's config validation reads the model's config.json (architecture, heads, MLA ranks, layers, maximum
positions, quantization); it never reads a weight. Each field below says where its value comes from:
- "catalog": gpustack_k3/catalog/data/models.yaml (max_context, hybrid_mamba, routed experts, draft path ...);
- "domain": the deployment write-up as docs/sources.md restates it (MXFP4: docs/sources.md#node; hybrid MLA + KDA
  attention: #hybrid-block, #kda-verify; MoE);
- "release": the field's reader in the engine release (vllm/transformers_utils/configs/*.py@0.33.0), which says
  which fields must exist and what the checks read;
- "assumed": the checkpoint's own value is not public here; the value is the public figure of the model family
  (Kimi-K2 / Kimi-Linear / DeepSeek-V3 config.json on the hub) and is marked so. A check that depends on an
  assumed figure (head counts for TP divisibility) is listed in the README's oracle section.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpustack_k3.oracle.cache import cache_dir

# field -> (value, source)
KIMI_K3_TEXT = {
    "model_type": ("kimi_linear", "release: KimiLinearConfig (configs/kimi_linear.py), nested text_config of kimi_k3"),
    "max_position_embeddings": (1000000, "catalog: models.yaml kimi-k3 max_context"),
    "vocab_size": (163840, "release: KimiLinearConfig default (= Kimi-K2 vocabulary)"),
    "hidden_size": (7168, "assumed: Kimi-K2 config.json hidden_size"),
    "num_hidden_layers": (61, "assumed: Kimi-K2 config.json num_hidden_layers"),
    "num_attention_heads": (64, "assumed: Kimi-K2 config.json num_attention_heads"),
    "num_key_value_heads": (64, "assumed: Kimi-K2 config.json (MLA: one latent KV)"),
    "q_lora_rank": (1536, "assumed: Kimi-K2 config.json (MLA, domain: hybrid MLA full attention)"),
    "kv_lora_rank": (512, "assumed: Kimi-K2 config.json (MLA)"),
    "qk_nope_head_dim": (128, "assumed: Kimi-K2 config.json"),
    "qk_rope_head_dim": (64, "assumed: Kimi-K2 config.json"),
    "v_head_dim": (128, "assumed: Kimi-K2 config.json"),
    "head_dim": (192, "assumed: qk_nope + qk_rope"),
    "intermediate_size": (18432, "assumed: Kimi-K2 config.json"),
    "moe_intermediate_size": (2048, "assumed: Kimi-K2 config.json"),
    "num_experts": (384, "assumed: Kimi-K2 config.json n_routed_experts (domain: MoE)"),
    "num_experts_per_token": (8, "assumed: Kimi-K2 config.json"),
    "num_shared_experts": (1, "assumed: Kimi-K2 config.json"),
    "first_k_dense_replace": (1, "assumed: Kimi-K2 config.json"),
    "moe_router_activation_func": ("sigmoid", "release: KimiLinearConfig default"),
    "num_nextn_predict_layers": (0, "release: KimiLinearConfig default (the draft is the separate DSpark checkpoint)"),
    "linear_attn_config": ({"kda_layers": [i for i in range(1, 62) if i % 4 != 0],
                            "full_attn_layers": [i for i in range(1, 62) if i % 4 == 0],
                            "num_heads": 64, "head_dim": 128, "short_conv_kernel_size": 4},
                           "domain: hybrid MLA + KDA (catalog hybrid_mamba: true); assumed: Kimi-Linear's 3:1 KDA:MLA "
                           "layer pattern and KDA head shape"),
    "torch_dtype": ("bfloat16", "domain: MXFP4 experts, bf16 elsewhere"),
}
KIMI_K3 = {
    "architectures": (["KimiK3ForConditionalGeneration"], "release: model registry name (models/registry.py@0.33.0)"),
    "model_type": ("kimi_k3", "release: KimiK3Config.model_type (configs/kimi_k3.py)"),
    "vision_config": ({}, "release: KimiK3VisionConfig defaults"),
    "quantization_config": ({"quant_method": "mxfp4"}, "catalog/domain: 'Kimi-K3, MXFP4 weights'"),
}
K3_DSPARK = {
    "architectures": (["K3DSparkModel"], "release: model registry name (models/registry.py@0.33.0)"),
    "model_type": ("k3_dspark", "release: K3DSparkConfig.model_type (configs/k3_dspark.py)"),
    "vocab_size": (163840, "release: K3DSparkConfig requires draft_vocab_size == target vocab_size"),
    "hidden_size": (7168, "assumed: = target hidden size (the draft shares embedding and LM head)"),
    "num_hidden_layers": (1, "assumed: one DSpark layer"),
    "num_attention_heads": (64, "assumed: = target"),
    "num_key_value_heads": (64, "assumed: = target"),
    "q_lora_rank": (1536, "release: K3DSparkConfig refuses q_lora_rank=None; assumed = target"),
    "kv_lora_rank": (512, "assumed: = target"),
    "qk_nope_head_dim": (128, "assumed: = target"),
    "qk_rope_head_dim": (64, "assumed: = target"),
    "v_head_dim": (128, "assumed: = target"),
    "intermediate_size": (18432, "assumed"),
    "max_position_embeddings": (1000000, "catalog: = target max_context"),
    "target_layer_ids": ([1, 30, 59], "release: K3DSparkConfig requires non-empty target_layer_ids; assumed ids"),
    "num_target_layers": (3, "release: must equal len(target_layer_ids)"),
    "block_size": (7, "catalog/presets: numTokens 7 is the seed's DSpark width (docs/sources.md#seed-vllm-deployment)"),
    "torch_dtype": ("bfloat16", "assumed"),
}
# SGLang's Kimi-K3 DSpark draft is a separate checkpoint (catalog: skyai/sglang-Kimi-K3-DSpark); SGLang recognises
# a DSpark draft by its architecture (srt/configs/model_config.py is_dspark_draft@0.5.23). Its config is not public:
# the release's recognised name with a transformers-known model_type carrying the target's MLA shapes (assumed).
K3_DSPARK_SGLANG = {
    "architectures": (["DSparkDraftModel"], "release: sglang srt/configs/model_config.py:256 is_dspark_draft@0.5.23"),
    "model_type": ("deepseek_v3", "assumed: a transformers-registered MLA config type"),
    **{k: v for k, v in K3_DSPARK.items() if k not in ("architectures", "model_type")},
}
DSV41_FLASH = {
    "architectures": (["DeepseekV41ForCausalLM"], "release: model registry name (models/registry.py@0.33.0)"),
    "model_type": ("deepseek_v41", "release: DeepseekV41Config.model_type (configs/deepseek_v41.py)"),
    "text_config": ({"vocab_size": 129280, "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
                     "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024,
                     "n_routed_experts": 384, "num_experts_per_tok": 6, "n_shared_experts": 1,
                     "moe_intermediate_size": 2048, "max_position_embeddings": 1048576, "torch_dtype": "bfloat16",
                     # read by SGLang's DeepseekV4 branch (srt/configs/model_config.py:1418-1428@0.5.23)
                     "sliding_window": 128, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 512,
                     "o_groups": 8, "o_lora_rank": 1024, "compress_rope_theta": 160000,
                     "compress_ratios": [0, 0, *[4, 128] * 20, 4, 0]},
                    "catalog: routed_experts 384, experts_per_token 6, max_context 1048576; assumed: the rest "
                    "(DeepSeek-V4-Flash family shapes; the V4.1 config is not public; sliding_window, the indexer, "
                    "o_groups/o_lora_rank, compress_rope_theta and compress_ratios (43 layers + the MTP slot) as in "
                    "the public V4-Flash-Base config.json, transcribed in the rtp-llm project's DeepSeek-V4 tests; a vLLM line of this model reads them too: re-run its oracle sample)"),
}
SMOLLM2 = {
    "architectures": (["LlamaForCausalLM"], "the converted checkpoint of .ci/setup_vllm_cpu.sh (transformers Llama)"),
    "model_type": ("llama", "same"),
    "vocab_size": (49152, "SmolLM2-135M-Instruct config.json (public)"),
    "hidden_size": (576, "SmolLM2-135M-Instruct config.json"),
    "intermediate_size": (1536, "SmolLM2-135M-Instruct config.json"),
    "num_hidden_layers": (30, "SmolLM2-135M-Instruct config.json; catalog kv_bytes_per_token 30 layers"),
    "num_attention_heads": (9, "SmolLM2-135M-Instruct config.json"),
    "num_key_value_heads": (3, "SmolLM2-135M-Instruct config.json; catalog 3 KV heads"),
    "max_position_embeddings": (8192, "catalog: models.yaml smollm2-135m max_context"),
    "rms_norm_eps": (1e-5, "SmolLM2-135M-Instruct config.json"),
    "rope_theta": (100000, "SmolLM2-135M-Instruct config.json"),
    "tie_word_embeddings": (True, "SmolLM2-135M-Instruct config.json"),
    "torch_dtype": ("bfloat16", "SmolLM2-135M-Instruct config.json"),
}


def _values(fields: dict) -> dict:
    return {k: v for k, (v, _src) in fields.items()}


# directory name -> (config.json fields, the names an engine command line uses for it)
MODELS = {
    "kimi-k3": ({**_values(KIMI_K3), "text_config": _values(KIMI_K3_TEXT)},
                ["/models/Kimi-K3", "moonshotai/Kimi-K3"]),
    "kimi-k3-dspark": (_values(K3_DSPARK),
                       ["/models/Kimi-K3-DSpark", "Inferact/Kimi-K3-DSpark", "skyai/Kimi-K3-DSpark"]),
    "kimi-k3-dspark-sglang": (_values(K3_DSPARK_SGLANG),
                              ["/models/sglang-Kimi-K3-DSpark", "skyai/sglang-Kimi-K3-DSpark"]),
    "deepseek-v4.1-flash": (_values(DSV41_FLASH), ["/models/DeepSeek-V4.1-Flash", "deepseek-ai/DeepSeek-V4.1-Flash",
                             # its DSpark draft reuses the full target config (vllm config/speculative.py:1557-1575@0.33.0)
                             "/models/DeepSeek-V4.1-Flash-DSpark"]),
    "smollm2-135m": (_values(SMOLLM2), ["/models/smollm2-hf", "HuggingFaceTB/SmolLM2-135M-Instruct"]),
}

SOURCES = {"kimi-k3": {**KIMI_K3, **{f"text_config.{k}": v for k, v in KIMI_K3_TEXT.items()}},
           "kimi-k3-dspark": K3_DSPARK, "kimi-k3-dspark-sglang": K3_DSPARK_SGLANG, "deepseek-v4.1-flash": DSV41_FLASH, "smollm2-135m": SMOLLM2}


# A tokenizer double: config validation loads the tokenizer only to encode marker strings (a --reasoning-parser's
# think markers: vllm config/reasoning.py initialize_token_ids@0.33.0); the checkpoints' tokenizers are not here.
# A word-level tokenizer whose vocabulary holds the markers the catalog's parsers encode; never decides a verdict
# (a parser that needs a token it lacks would raise - reported, not hidden).
TOKENIZER_MARKERS = ["<|media_pad|>", "<|open|>", "<|close|>", "<|sep|>", "think", "<think>", "</think>", "<|im_end|>",
                     "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                     "<|tool_call_end|>", "<|tool_call_argument_begin|>", "<｜begin▁of▁sentence｜>",
                     "<｜end▁of▁sentence｜>"]


def tokenizer_files() -> dict[str, str]:
    vocab = {"[UNK]": 0, **{t: i + 1 for i, t in enumerate(TOKENIZER_MARKERS)}}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for t, i in vocab.items() if t.startswith("<")],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}}
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1 << 30}
    return {"tokenizer.json": json.dumps(tok, ensure_ascii=False, indent=1) + "\n",
            "tokenizer_config.json": json.dumps(cfg, indent=1) + "\n"}


# Kimi-K3 is multimodal: building its config builds the multimodal processor, which reads the checkpoint's
# preprocessor_config.json (vllm models/kimi_k3/common/mm_preprocess.py:108 -> KimiK25FusedVisionProcessor
# (media_proc_cfg)). Assumed: Kimi-K2.5's public media_proc_cfg shape; the vision budget is not a rule input.
PREPROCESSOR = {"kimi-k3": {"media_proc_cfg": {
    "patch_size": 14, "merge_kernel_size": [2, 2], "temporal_merge_kernel_size": 4, "in_patch_limit": 16384,
    "patch_limit_on_one_side": 512, "fixed_output_tokens": None, "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5]}}}


# Model shapes beyond the catalogued three (issue 31 item 1), each the public config.json of a model family as
# aiconfigurator-core ships it (aiconfigurator_core/model_configs/, installed by .ci/setup_predict.sh): read from the
# installed package at run time, never copied into the repository. shape -> (file stem, command-line path).
SHAPES = {
    "mla-moe": ("deepseek-ai--DeepSeek-V3", "/models/shape-mla-moe"),           # DeepseekV3: MLA, 256 routed experts
    "gqa-dense": ("meta-llama--Meta-Llama-3.1-8B", "/models/shape-gqa-dense"),  # Llama: 32 heads, 8 KV heads
    "gqa-yarn": ("openai--gpt-oss-20b", "/models/shape-gqa-yarn"),              # GptOss: GQA 64/8, YaRN rope, MoE
    "hybrid": ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "/models/shape-hybrid"),   # NemotronH: Mamba + attn
}


def shape_configs() -> dict[str, dict]:
    """shape -> its config.json (dict) from the installed aiconfigurator-core; {} when the package is absent (the
    corpus then has the catalogued models only, and says so)."""
    try:
        from importlib.resources import files

        root = files("aiconfigurator_core") / "model_configs"
    except (ImportError, ModuleNotFoundError):
        return {}
    out = {}
    for shape, (stem, _path) in SHAPES.items():
        f = root / f"{stem}_config.json"
        if f.is_file():
            out[shape] = json.loads(f.read_text())
    return out


def model_root() -> Path:
    return cache_dir() / "engine-oracle" / "models"


def write_models(root: Path | None = None) -> dict[str, str]:
    """Write every model directory; return {name used on a command line: directory}."""
    root = root or model_root()
    aliases: dict[str, str] = {}
    for name, (config, names) in MODELS.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        files = {"config.json": json.dumps(config, indent=1, sort_keys=True) + "\n", **tokenizer_files()}
        if name in PREPROCESSOR:
            files["preprocessor_config.json"] = json.dumps(PREPROCESSOR[name], indent=1) + "\n"
        for fname, text in files.items():
            p = d / fname
            if not p.is_file() or p.read_text() != text:
                tmp = p.with_suffix(".tmp")
                tmp.write_text(text)
                tmp.replace(p)
        for n in names:
            aliases[n] = str(d)
    for shape, config in shape_configs().items():
        d = root / f"shape-{shape}"
        d.mkdir(parents=True, exist_ok=True)
        for fname, text in {"config.json": json.dumps(config, indent=1, sort_keys=True) + "\n",
                            **tokenizer_files()}.items():
            p = d / fname
            if not p.is_file() or p.read_text() != text:
                p.write_text(text)
        aliases[SHAPES[shape][1]] = str(d)
    return aliases


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="write the oracle's config.json model directories")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--sources", action="store_true", help="print each field's source as JSON")
    a = ap.parse_args(argv)
    if a.sources:
        print(json.dumps({m: {k: s for k, (_v, s) in f.items()} for m, f in SOURCES.items()}, indent=1))
        return 0
    for n, d in write_models(a.out).items():
        print(f"{n} -> {d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
