"""vLLM 0.11.0 config-time refusals found by the aimed lines (tools/engine_oracle/aimed/aim9a.yaml, aimV1.yaml,
aimV2.yaml) that the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express: a fact of the
model's config.json tested with a substring or a remainder, or a JSON option's inner element types (helper mfix11).

- EAGLE-3 drafting: SpeculativeConfig._verify_args accepts method eagle3 only for a target whose
  ``hf_text_config.model_type`` *contains* one of llama / qwen / minicpm / gpt_oss (a substring test).
- MTP draft tokens: the MTP draft built from the target's own checkpoint (``hf_config_override``) predicts
  ``num_nextn_predict_layers`` tokens (``n_predict``); more draft tokens than that must be a multiple of it.
- -O compile_sizes: a string element other than "cudagraph_capture_sizes" (CompilationConfig.init_with_cudagraph_sizes,
  called on every CUDA platform: support_static_graph_mode).
- a ModelOpt quantization_config (producer modelopt) whose quant_algo is neither FP8 nor NVFP4.
- prefix caching with a sliding-window model (Llama / Mistral config.json, not interleaved) on the V0 engine.
- --swap-space x TP above 70 % of the host's RAM (a warning: the node's RAM is not on the line; the catalog's
  host_ram_gib is a datasheet figure).
- --dtype float16 for a model type the release marks numerically unstable in float16 (gemma2, gemma3, gemma3_text,
  plamo2, glm4: ``_FLOAT16_NOT_SUPPORTED_MODELS``), read from config.json's top-level ``model_type`` (the release
  passes ``hf_config``).

Every fact comes from the one config.json reader (``core.model_config``, through ``checks.line_view``'s ``arch``);
without a config.json the rules do not fire. tests/core/test_mfix11_rules.py holds the lines;
tests/engine_oracle/test_mfix11_oracle.py has the release judge them and their twins.
"""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

COMPILE = "--compilation-config"

_EAGLE3_SOURCES = {"0.11.0": "vllm config/speculative.py:518-519,540-548@0.11.0"}
EAGLE3_TARGETS = ("llama", "qwen", "minicpm", "gpt_oss")   # config/speculative.py:540@0.11.0

_MTP_SOURCES = {"0.11.0": "vllm config/speculative.py:145-201,213-233,384-394@0.11.0"}
# hf_config_override (config/speculative.py:145-201@0.11.0): the target's config.json read as an MTP draft; the
# model types and first architectures that get n_predict = num_nextn_predict_layers (longcat_flash defaults to 1)
_MTP_MODEL_TYPES = ("deepseek_v3", "deepseek_v32", "deepseek_mtp", "ernie4_5_moe", "ernie_mtp", "qwen3_next",
                    "qwen3_next_mtp")
_MTP_ARCHITECTURES = ("MiMoForCausalLM", "Glm4MoeForCausalLM")
# SpeculativeConfig's MTP aliases (MTP_MODEL_TYPES, config/speculative.py:36-37,213-216@0.11.0): all become "mtp"
_MTP_METHODS = ("mtp", "deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp",
                "longcat_flash_mtp")

_COMPILE_SIZES_SOURCES = {"0.11.0": "vllm config/compilation.py:523-545@0.11.0, config/__init__.py:358-386,551,612-613@0.11.0"}

_MODELOPT_SOURCES = {"0.11.0": "vllm config/model.py:857-876,885-890@0.11.0"}
MODELOPT_ALGOS = ("FP8", "NVFP4")   # config/model.py:868-871@0.11.0

_SLIDING_PREFIX_SOURCES = {
    "0.11.0": "vllm config/cache.py:188-195@0.11.0, engine/arg_utils.py:1161-1162,1172-1177,1199,1540-1558,1575-1577@0.11.0, "
              "config/model.py:632-635,1065-1067@0.11.0, transformers_utils/config.py:439-447@0.11.0, envs.py:900-901@0.11.0"}
# the model types whose transformers config keeps config.json's sliding_window as written (Llama: an attribute the
# class does not declare, kept by PretrainedConfig; Mistral: declared, no switch); Qwen2-family classes drop it unless
# use_sliding_window is true, others may derive layer_types: not judged
SLIDING_KEPT_MODEL_TYPES = ("llama", "mistral")

_SWAP_SOURCES = {"0.11.0": "vllm config/cache.py:152,204-222@0.11.0, config/__init__.py:313@0.11.0"}

_FLOAT16_SOURCES = {"0.11.0": "vllm config/model.py:577-583,1581-1602,1693-1722@0.11.0"}
FLOAT16_UNSUPPORTED = ("gemma2", "gemma3", "gemma3_text", "plamo2", "glm4")   # config/model.py:1581-1588@0.11.0


def _spec(v: Any) -> dict | None:
    sc = v.value("speculative_config")
    return sc if isinstance(sc, dict) else None


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _where(r: Any, flag: str) -> str | None:
    found = extra_arg(r, flag)
    return f"spec.extraArgs[{found[0]}]" if found else None


def _where_field(r: Any, field: str) -> str:
    """The spec field the catalog's flag table maps (its flag in extraArgs where the line gives it there)."""
    return _where(r, r.engine.flag_of(field)) or f"spec.{field}"


def text_model_type(arch: Any) -> str | None:
    """``hf_text_config.model_type`` as config.json writes it: the text_config's own, or the top level's for a
    config without one (None when the text_config does not write it: its class's default, beyond the file)."""
    raw = getattr(arch, "raw", None)
    if not isinstance(raw, dict):
        return None
    text = raw.get("text_config")
    mt = (text if isinstance(text, dict) else raw).get("model_type")
    return mt if isinstance(mt, str) else None


def eagle3_unsupported_target(model_type: str | None) -> bool:
    """The release's test: no supported name is a substring of the model type."""
    return model_type is not None and not any(s in model_type for s in EAGLE3_TARGETS)


def mtp_n_predict(raw: Any) -> int | None:
    """n_predict of the MTP draft the release builds from this (target) config.json; None where it sets none."""
    if not isinstance(raw, dict) or "text_config" in raw:
        return None
    archs = raw.get("architectures")
    first = archs[0] if isinstance(archs, list) and archs else None
    if raw.get("model_type") in _MTP_MODEL_TYPES or first in _MTP_ARCHITECTURES:
        return _int(raw.get("num_nextn_predict_layers"))
    return None


def mtp_tokens_refused(k: int | None, n: int | None) -> bool:
    """config/speculative.py:388-390@0.11.0: more tokens than n_predict and not a multiple of it."""
    return k is not None and n is not None and n > 0 and k > n and k % n != 0


def modelopt_quant_algo(raw: Any) -> Any:
    """The quant_algo of a ModelOpt quantization_config (producer modelopt) the release does not map, else None:
    config.json's top-level quantization_config, or the text_config's where the top level writes neither it nor a
    compression_config (_verify_quantization, config/model.py:885-890@0.11.0)."""
    if not isinstance(raw, dict):
        return None
    q = raw.get("quantization_config")
    if q is None and raw.get("compression_config") is None and isinstance(raw.get("text_config"), dict):
        q = raw["text_config"].get("quantization_config")
    if not isinstance(q, dict) or not isinstance(q.get("producer"), dict) or q["producer"].get("name") != "modelopt":
        return None
    quant = q.get("quantization")
    algo = quant.get("quant_algo") if isinstance(quant, dict) else None
    return None if algo is None or algo in MODELOPT_ALGOS else algo


def bad_compile_sizes(cc: Any) -> list[str]:
    """The string elements of -O compile_sizes other than "cudagraph_capture_sizes"."""
    sizes = cc.get("compile_sizes") if isinstance(cc, dict) else None
    if not isinstance(sizes, list):
        return []
    return [x for x in sizes if isinstance(x, str) and x != "cudagraph_capture_sizes"]


@rule("vllm-eagle3-target-model-type-011", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="EAGLE-3 drafting for a target model type vLLM 0.11.0 does not support",
      why="vLLM 0.11.0 runs an EAGLE-3 draft only against targets whose model type contains llama, qwen, minicpm or "
          "gpt_oss (the hidden states EAGLE-3 reads are taken from those model classes); SpeculativeConfig refuses "
          "method eagle3 for any other target.",
      fix="Use a speculative method the target supports (mtp for a model with MTP layers, eagle, ngram), or run a "
          "later vLLM release, which drops that list.",
      source=_EAGLE3_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _EAGLE3_SOURCES.items()},
      no_cel="reads the JSON of --speculative-config and a substring of config.json's model_type; left to validate")
def check_vllm_eagle3_target_model_type_011(r, c):
    v = line_view(r)
    sc = None if v is None else _spec(v)
    if sc is None or sc.get("method") != "eagle3":
        return
    mt = text_model_type(v.arch)
    if not eagle3_unsupported_target(mt):
        return
    yield _where_field(r, "speculative"), (
        f"--speculative-config method eagle3 (vLLM 0.11.0): Eagle3 is only supported for {list(EAGLE3_TARGETS)} "
        f"models; the target's model_type is {mt!r}: use another method (mtp, eagle, ngram)")


RULES["vllm-eagle3-target-model-type-011"] = ReleaseRule.of(RULES["vllm-eagle3-target-model-type-011"])


@rule("vllm-mtp-spec-tokens-not-multiple-of-layers-011", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="MTP num_speculative_tokens above the model's MTP layers and not a multiple of them (vLLM 0.11.0)",
      why="The MTP draft vLLM 0.11.0 builds from the target's own checkpoint predicts num_nextn_predict_layers "
          "tokens per step (n_predict); more draft tokens reuse the MTP modules in whole rounds, so "
          "SpeculativeConfig refuses a count above n_predict that is not a multiple of it.",
      fix="Give --speculative-config num_speculative_tokens at most num_nextn_predict_layers, or a multiple of it.",
      source=_MTP_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _MTP_SOURCES.items()},
      no_cel="reads the JSON of --speculative-config against config.json's num_nextn_predict_layers (a remainder); "
             "left to validate")
def check_vllm_mtp_spec_tokens_not_multiple_011(r, c):
    v = line_view(r)
    sc = None if v is None else _spec(v)
    # the draft is the target's own checkpoint only without a model in the JSON (speculative.py:218-227@0.11.0)
    if sc is None or sc.get("method") not in _MTP_METHODS or sc.get("model") is not None:
        return
    k = _int(sc.get("num_speculative_tokens"))
    n = mtp_n_predict(getattr(v.arch, "raw", None))
    if not mtp_tokens_refused(k, n):
        return
    yield _where_field(r, "speculative"), (
        f"--speculative-config num_speculative_tokens {k} (vLLM 0.11.0): num_speculative_tokens:{k} must be "
        f"divisible by n_predict={n}; n_predict is the model's num_nextn_predict_layers: give at most {n} or a "
        f"multiple of {n}")


RULES["vllm-mtp-spec-tokens-not-multiple-of-layers-011"] = ReleaseRule.of(
    RULES["vllm-mtp-spec-tokens-not-multiple-of-layers-011"])


@rule("vllm-compile-sizes-unknown-name-011", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="-O compile_sizes with a name other than cudagraph_capture_sizes (vLLM 0.11.0)",
      why="compile_sizes lists batch sizes (integers) and may name the one list 'cudagraph_capture_sizes'; when "
          "VllmConfig sets the CUDA graph sizes it asserts every other string away.",
      fix="Give -O compile_sizes integers, or the string \"cudagraph_capture_sizes\".",
      source=_COMPILE_SIZES_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _COMPILE_SIZES_SOURCES.items()},
      no_cel="reads the element types of a list inside the JSON of --compilation-config; left to validate")
def check_vllm_compile_sizes_unknown_name_011(r, c):
    v = line_view(r)
    if v is None:
        return
    bad = bad_compile_sizes(v.value("compilation_config"))
    if not bad:
        return
    yield _where(r, COMPILE) or _where(r, "-O"), (
        f"-O compile_sizes {bad[0]!r} (vLLM 0.11.0): Unrecognized size type in compile_sizes, expect "
        f"'cudagraph_capture_sizes', got {bad[0]}; give integers or \"cudagraph_capture_sizes\"")


RULES["vllm-compile-sizes-unknown-name-011"] = ReleaseRule.of(RULES["vllm-compile-sizes-unknown-name-011"])


@rule("vllm-modelopt-unknown-quant-algo-011", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.model",
      title="A ModelOpt checkpoint whose quant_algo vLLM 0.11.0 does not know (only FP8 and NVFP4)",
      why="vLLM 0.11.0 reads a config.json quantization_config produced by ModelOpt (producer.name modelopt) as "
          "quant method modelopt (quant_algo FP8) or modelopt_fp4 (NVFP4) and refuses any other quant_algo while it "
          "builds the model config.",
      fix="Serve the checkpoint with a later vLLM release that knows its ModelOpt algorithm, or use an FP8 / NVFP4 "
          "ModelOpt export.",
      source=_MODELOPT_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _MODELOPT_SOURCES.items()},
      no_cel="reads nested fields of config.json's quantization_config; left to validate")
def check_vllm_modelopt_unknown_quant_algo_011(r, c):
    v = line_view(r)
    algo = None if v is None else modelopt_quant_algo(getattr(v.arch, "raw", None))
    if algo is None:
        return
    yield "spec.model", (
        f"config.json quantization_config (producer modelopt, vLLM 0.11.0): Unknown ModelOpt quant algo: {algo}; "
        "only FP8 and NVFP4 are known to this release: use a later release or an FP8/NVFP4 export")


RULES["vllm-modelopt-unknown-quant-algo-011"] = ReleaseRule.of(RULES["vllm-modelopt-unknown-quant-algo-011"])


def kept_sliding_window(arch: Any) -> int | None:
    """config.json's sliding_window where the release's hf_text_config keeps it and the model is not interleaved
    (no layer_types in the text config), for the model types above; None otherwise."""
    raw = getattr(arch, "raw", None)
    if not isinstance(raw, dict) or "text_config" in raw or raw.get("model_type") not in SLIDING_KEPT_MODEL_TYPES:
        return None
    if raw.get("layer_types") is not None:
        return None
    return _int(raw.get("sliding_window"))


@rule("vllm-prefix-caching-sliding-window-v0-011", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="Prefix caching with a sliding-window model on the V0 engine (VLLM_USE_V1=0, vLLM 0.11.0)",
      why="The V0 engine of vLLM 0.11.0 cannot cache prefixes for a model that attends through a sliding window "
          "(config.json sliding_window, not interleaved with full attention); CacheConfig refuses prefix caching "
          "then, which EngineArgs turns on by default for a generating runner.",
      fix="Give --disable-sliding-window (the context is then capped to the window), or --no-enable-prefix-caching, "
          "or run the V1 engine (unset VLLM_USE_V1 or set it to 1).",
      source=_SLIDING_PREFIX_SOURCES["0.11.0"],
      sources={f"vllm {k}": v for k, v in _SLIDING_PREFIX_SOURCES.items()},
      no_cel="reads config.json's sliding_window and model type with the release's environment and prefix-caching "
             "default; left to validate")
def check_vllm_prefix_caching_sliding_window_v0_011(r, c):
    v = line_view(r)
    if v is None or v.env_value("VLLM_USE_V1", "vllm_int_bool", None) is not False:
        return
    if v.value("disable_sliding_window") is True or v.value("enable_prompt_embeds") is True:
        return
    pc = v.value("enable_prefix_caching")
    # an explicit --enable-prefix-caching, or the default a generating runner gets (--runner auto: not judged)
    if not (pc is True or (pc is None and v.value("runner") in ("generate", "draft"))):
        return
    window = kept_sliding_window(v.arch)
    if window is None:
        return
    yield _where_field(r, "scheduling.prefixCaching"), (
        f"prefix caching on the V0 engine (VLLM_USE_V1=0, vLLM 0.11.0) for a model with sliding_window {window}: "
        "Prefix caching is not supported with sliding window; run with --disable-sliding-window, "
        "--no-enable-prefix-caching or the V1 engine")


RULES["vllm-prefix-caching-sliding-window-v0-011"] = ReleaseRule.of(
    RULES["vllm-prefix-caching-sliding-window-v0-011"])


def swap_gib(swap_space: Any, tp: Any) -> float | None:
    """The host RAM --swap-space asks for on one node as the release counts it: GiB per GPU x the TP size."""
    if isinstance(swap_space, bool) or not isinstance(swap_space, (int, float)):
        return None
    if isinstance(tp, bool) or not isinstance(tp, int):
        return None
    return float(swap_space) * tp


@rule("vllm-swap-space-above-host-ram-011", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--swap-space x TP above 70 % of the node's host RAM (vLLM 0.11.0; the node's RAM decides)",
      why="vLLM 0.11.0 reserves --swap-space GiB of CPU memory per GPU of the tensor-parallel group on one node and "
          "refuses the line when that exceeds 70 % of the host's total CPU memory (psutil, read on the node). "
          "gpustack-k3 knows the GPU type's host RAM only as the catalog's datasheet figure "
          "(catalog/data/hardware.yaml host_ram_gib), not the node's own: it warns.",
      fix="Lower --swap-space (GiB per GPU; default 4) so that it times the TP size stays under 70 % of the node's "
          "RAM (under 40 % to avoid the engine's own warning).",
      source=_SWAP_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _SWAP_SOURCES.items()})
def check_vllm_swap_space_above_host_ram_011(r, c):
    v = line_view(r)
    ram = getattr(getattr(r, "hardware", None), "host_ram_gib", None)
    if v is None or not ram:
        return
    usage = swap_gib(v.value("swap_space"), v.value("tensor_parallel_size"))
    if usage is None or usage <= 0.7 * ram:
        return
    yield _where(r, "--swap-space") or "spec.extraArgs", (
        f"--swap-space {v.value('swap_space')} GiB x TP {v.value('tensor_parallel_size')} = {usage:.2f} GiB of CPU "
        f"memory: above 70 % of {ram} GiB, the catalog's host RAM for {r.hardware.description} (datasheet, not the "
        "node's own reading); vLLM 0.11.0 refuses 'Too large swap space' where the node has no more RAM than that: "
        "lower --swap-space")


RULES["vllm-swap-space-above-host-ram-011"] = ReleaseRule.of(RULES["vllm-swap-space-above-host-ram-011"])


@rule("vllm-float16-unsupported-model-type-011", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--dtype float16 for a model type vLLM 0.11.0 refuses in float16 (gemma2/3, plamo2, glm4)",
      why="vLLM 0.11.0 marks gemma2, gemma3, gemma3_text, plamo2 and glm4 numerically unstable in float16 and "
          "refuses --dtype float16 (half) for them while it builds the model config.",
      fix="Give --dtype bfloat16 (or float32, or auto).",
      source=_FLOAT16_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _FLOAT16_SOURCES.items()},
      no_cel="reads config.json's model_type with the --dtype the release's parser reads; left to validate")
def check_vllm_float16_unsupported_model_type_011(r, c):
    v = line_view(r)
    if v is None:
        return
    dtype = v.value("dtype")
    raw = getattr(v.arch, "raw", None)
    mt = raw.get("model_type") if isinstance(raw, dict) else None
    if not isinstance(dtype, str) or dtype.lower() not in ("float16", "half") or mt not in FLOAT16_UNSUPPORTED:
        return
    yield _where_field(r, "model.dtype"), (
        f"--dtype {dtype} (vLLM 0.11.0): The model type {mt!r} does not support float16; numerical instability: "
        "give --dtype bfloat16 or float32")


RULES["vllm-float16-unsupported-model-type-011"] = ReleaseRule.of(RULES["vllm-float16-unsupported-model-type-011"])
