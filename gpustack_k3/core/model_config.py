"""A model's architecture figures from its ``config.json`` (``--model-config FILE`` or a local model directory).

Pure: the caller reads the file (the CLI edge) and passes the parsed object. The one reader of a model's architecture:
the flag and divisibility rules read its figures (layers, attention heads, KV heads, head sizes, MLA ranks, routed
experts, dtype, maximum positions), and the memory plan derives weights per rank and KV bytes per token from them
(core/plan_moe.py, which also reads the layer layout and quantization keys kept as written). The catalog's
architecture blocks are config.json-shaped and read here too.
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.errors import InputError

# config.json keys per figure, first present wins (HF names; DeepSeek/Kimi MLA and MoE names; Mixtral/Qwen MoE)
_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "head_dim": ("head_dim",),
    "hidden_size": ("hidden_size", "d_model", "n_embd"),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "experts": ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"),
    # Kimi-K3's text_config spells it num_experts_per_token (its "top_k" is the sampling default, 50); gemma4
    # top_k_experts; gpt-oss experts_per_token
    "experts_per_token": ("num_experts_per_tok", "num_experts_per_token", "top_k_experts", "experts_per_token",
                          "moe_topk", "top_k"),
    "max_positions": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
    # multi-token-prediction layers the checkpoint carries (DeepSeek/Kimi/GLM/MiMo: num_nextn_predict_layers; the
    # Transformers backend's num_mtp_layers; Qwen3.5's mtp_num_hidden_layers): vLLM's MTP draft is built from them
    "mtp_layers": ("num_nextn_predict_layers", "num_mtp_layers", "mtp_num_hidden_layers"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "moe_intermediate_size": ("moe_intermediate_size", "expert_intermediate_size"),
    "shared_experts": ("n_shared_experts", "num_shared_experts"),
    "first_dense_layers": ("first_k_dense_replace",),
    # figures the per-rank weight plan reads (core/plan_moe.py); added after the contract above, never renamed
    "routed_expert_hidden_size": ("routed_expert_hidden_size", "moe_latent_size"),   # latent MoE (Kimi-K3, Nemotron 3)
    "shared_expert_intermediate_size": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
                                        "shared_intermediate_size", "share_expert_dim"),
    "dense_intermediate_size": ("intermediate_size_mlp", "dense_intermediate_size"),   # Llama 4, MiniMax-M3
}
# non-integer figures read as they are (None when absent): rope scaling as the release reads it is the rules' job
_RAW_KEYS = {
    "model_type": ("model_type",),
    "rope_scaling": ("rope_scaling", "rope_parameters"),
    "tie_embeddings": ("tie_word_embeddings",),
    "layer_types": ("layer_types",),
    "sliding_window": ("sliding_window",),
    # hybrid and MoE layouts the per-rank weight plan reads (core/plan_moe.py) as written
    "linear_attn_config": ("linear_attn_config",),                   # Kimi-K3 KDA layers
    "hybrid_override_pattern": ("hybrid_override_pattern", "layers_block_type"),   # Nemotron-H: M mamba, * attention, E MoE, - MLP
    "moe_layer_freq": ("moe_layer_freq",),
    "mlp_only_layers": ("mlp_only_layers",),
    "interleave_moe_layer_step": ("interleave_moe_layer_step",),
}
_DTYPE_KEYS = ("torch_dtype", "dtype")


class ModelArch:
    """Architecture figures of one model (plain: docs/architecture.md, Start-up). ``None``: not in the file."""

    __slots__ = ("source", "architecture", "dtype", "quantization", "quant_config", "hf_quant", "text", "raw",
                 "unread", *_KEYS, *_RAW_KEYS)

    def __init__(self, source: str, architecture: str | None = None, dtype: str | None = None,
                 quantization: str | None = None, quant_config: dict | None = None, hf_quant: dict | None = None,
                 text: dict | None = None, raw: dict | None = None, unread: dict | None = None,
                 **figures: Any) -> None:
        self.source = source                    # where the figures come from (the file), for messages
        self.architecture = architecture
        self.dtype = dtype
        self.quantization = quantization        # quantization_config.quant_method (mxfp4, fp8, ...)
        self.quant_config = quant_config        # quantization_config as written (None: none)
        self.hf_quant = hf_quant                # hf_quant_config.json's "quantization" object (ModelOpt), if given
        self.text = text or {}                  # the language model's config object as written (text_config or top)
        self.raw = raw                          # the whole config.json object as written (what predict hands AIC)
        self.unread = unread or {}              # figure keys whose value is no count, as written (read as not given)
        for k in (*_KEYS, *_RAW_KEYS):
            setattr(self, k, figures.get(k))

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the language model's config as written (figures the contract above does not name)."""
        v = self.text.get(key)
        return default if v is None else v

    @property
    def known(self) -> bool:
        """The file gave figures (False: a stand-in naming where a config.json would come from)."""
        return self.layers is not None or self.hidden_size is not None

    def __repr__(self) -> str:
        return f"ModelArch({self.source!r}, {self.architecture!r})"

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek/Kimi): a KV LoRA rank in the config."""
        return bool(self.kv_lora_rank)

    @property
    def moe(self) -> bool:
        return bool(self.experts)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if k not in ("text", "raw", "unread")}


class ModelConfigError(InputError, ValueError):
    """config.json is not a usable model configuration (the message names the key)."""

    def __init__(self, message: str) -> None:
        super().__init__("config.json", message)


def _count(v: Any) -> int | None:
    """A figure's value when it is a non-negative whole number, else None (not a count the figure can stand on).

    The release never refuses a config.json for such a value on its own: vLLM reads these keys with getattr where a
    model uses them (num_mtp_layers: only the Transformers backend's MTP, config/speculative.py:1381-1399@0.33.0;
    num_nextn_predict_layers gates nemotron_h's MTP draft with ``> 0``, config/speculative.py:895-900@0.33.0), and
    whether a value's type is refused depends on the model's own Transformers config class (the engine oracle, vLLM
    0.33.0, accepts num_mtp_layers -1 and "auto", num_hidden_layers -1, "auto" and true, num_key_value_heads,
    n_routed_experts and vocab_size -1 on NemotronH, 2026-12-04). So the figure reads as not given (the checks that
    need it do not run, rule model-config-checks-skipped says so where it is the heads) instead of exit 2."""
    if v is None or isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


def require_counts(arch: ModelArch) -> ModelArch:
    """``arch`` when every figure key it holds is a count; else ModelConfigError naming the first that is not.

    For a document's own config.json (spec.model.config / configJSON): the document is planned and rendered from
    these figures, so one that is no count is unusable input there. An engine command line's config.json is read
    as the release reads it (:func:`_count`: not given, never exit 2)."""
    for key, value in arch.unread.items():
        raise ModelConfigError(f"{key} must be a non-negative whole number, got {value!r}")
    if arch.heads == 0:       # the plan divides by it (an engine line is the release's: NemotronH accepts 0)
        raise ModelConfigError("num_attention_heads must be positive")
    return arch


def arch_from_config(cfg: Any, source: str, hf_quant: Any = None) -> ModelArch:
    """The figures of a parsed config.json. A multimodal model's language figures live in ``text_config`` (Kimi-K3's
    KimiK3ForConditionalGeneration, vLLM's get_hf_text_config): read from there, the architecture from the top.
    ``hf_quant``: a parsed ``hf_quant_config.json`` beside it (ModelOpt checkpoints), when there is one."""
    if not isinstance(cfg, dict):
        raise ModelConfigError("config.json must be a JSON object")
    archs = cfg.get("architectures")
    architecture = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    figures: dict[str, Any] = {}
    unread: dict[str, Any] = {}
    for name, keys in _KEYS.items():
        for k in keys:
            for where in (text, cfg):
                if k in where and where[k] is not None and figures.get(name) is None:
                    figures[name] = _count(where[k])
                    if figures[name] is None:
                        unread.setdefault(k, where[k])
    for name, keys in _RAW_KEYS.items():
        figures[name] = next((where[k] for k in keys for where in (text, cfg) if where.get(k) is not None), None)
    dtype = next((str(d) for k in _DTYPE_KEYS for d in (text.get(k), cfg.get(k)) if isinstance(d, str)), None)
    if figures.get("kv_heads") is None and figures.get("heads") is not None:
        figures["kv_heads"] = figures["heads"]       # no num_key_value_heads: multi-head attention
    q = cfg.get("quantization_config") if isinstance(cfg.get("quantization_config"), dict) else (
        text.get("quantization_config") if isinstance(text.get("quantization_config"), dict) else {})
    quant = q.get("quant_method") if isinstance(q.get("quant_method"), str) else None
    hq = hf_quant.get("quantization", hf_quant) if isinstance(hf_quant, dict) else None
    if hq is not None and not isinstance(hq, dict):
        raise ModelConfigError("hf_quant_config.json: quantization must be a JSON object")
    if quant is None and hq is not None and isinstance(hq.get("quant_algo"), str):
        quant = "modelopt"     # vLLM reads hf_quant_config.json as quant_method modelopt (config/model.py)
    return ModelArch(source, architecture, dtype, quant, quant_config=q or None, hf_quant=hq, text=text, raw=cfg,
                     unread=unread, **figures)


INLINE_SOURCE = "spec.model.configJSON"


def document_arch(model: Any) -> ModelArch | None:
    """The architecture a document carries itself: ``spec.model.configJSON`` (the inline config.json), None without
    it. An unusable one is unusable input naming spec.model.configJSON (the CLI exits 2; the operator reports it as
    rule spec.schema, operator/hooks.py). Pure: ``spec.model.config`` is a path only the CLI edge reads
    (cli/model_source.py); the operator reports it (operator/hooks.py)."""
    cfg = getattr(model, "configJSON", None)
    if cfg is None:
        return None
    hint = "give the model's Hugging Face config.json object as it is written"
    try:
        arch = require_counts(arch_from_config(cfg, INLINE_SOURCE))
    except ModelConfigError as exc:
        raise InputError(INLINE_SOURCE, f"not a usable config.json: {exc}", hint) from None
    if not arch.known:
        raise InputError(INLINE_SOURCE, "not a usable config.json: none of num_hidden_layers / hidden_size is given",
                         hint)
    return arch
