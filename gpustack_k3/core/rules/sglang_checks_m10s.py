"""SGLang refusals of the held-out seed 35791 misses that need computation (helper m10s, issue 31), beyond what the
engine-check table (gpustack_k3/catalog/data/checks/sglang.yaml, block h-m10s) can express:

- ``--quantization`` against the checkpoint's quantization method (``ModelConfig._verify_quantization``): the
  release's own compatibility logic, per release (the pairs it allows, the requantization methods, the overrides
  that claim a checkpoint for a given ``--quantization``); the checkpoint's method is read through the one
  config.json reader (``core.model_config`` via ``core.rules.model_quant.checkpoint_quant``), never a second time;
  where that reader cannot tell the method (no config.json, no quantization_config SGLang would read, ModelOpt,
  a compression_config) the rule does not refuse;
- ``--enable-unified-cache-external-linker`` with deterministic inference and no attention backend on the line: the
  backend deterministic inference picks depends on the GPU (flashinfer on SM100/SM120 outside the DeepSeek family,
  which switches the radix cache off), so a warning, not a refusal.

Each rule reads the values the release's own parser gives the command line (checks.line_view), cites each release's
source, and is verified against the release by tests/engine_oracle/test_m10s_oracle.py (unit lines:
tests/core/test_m10s_rules.py)."""
from __future__ import annotations

from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, LineView, line_view
from gpustack_k3.core.rules.model_quant import checkpoint_quant
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.sglang_checks_smiss7 import MODEL_OVERRIDE_ARCHS

SGL = [ENGINE_SGLANG]


def _sources(by_release: dict[str, str]) -> dict[str, str]:
    return {f"sglang {k}": s for k, s in by_release.items()}


# ------------------------------------------------------------------ --quantization against the checkpoint's method

# ModelConfig._verify_quantization (configs/model_config.py:2000-2148@0.5.23, :1891-2036@0.5.22): the checkpoint's
# quant_method (hf_config.quantization_config, lower case as written: no compressed_tensors rewrite) against the
# lower-cased --quantization. Not refused: the same name; a --quantization of REQUANTIZATION_METHODS (quark_mxfp4:
# requantized online, model_config.py:545@0.5.23, :467@0.5.22); a pair of compatible_quantization_methods; a
# checkpoint an override claims (the loop over QUANTIZATION_METHODS' override_quantization_method, first non-None
# wins and becomes both sides). The overrides of a CUDA node, given --quantization (layers/quantization/, the same
# lines in both releases): moe_wna16.py:164-192 (moe_wna16 for a gptq / awq checkpoint), awq/awq.py:333-354 (marlin /
# awq_marlin for an awq checkpoint), gptq/gptq.py:414-438 (marlin / gptq_marlin for a gptq checkpoint),
# humming.py:503-508 (humming for any checkpoint but mxfp4), base_config.py:223-253@0.5.23 / :204-234@0.5.22
# (ModelOpt: modelopt with a quant_algo, a modelopt_fp8 / modelopt_fp4 checkpoint), modelopt_quant.py:830-835
# (modelopt_mixed); mlx.py:80-104 only without --quantization, petit.py:101-110 only on ROCm.
COMPATIBLE = {
    "0.5.22": {
        "modelopt_fp8": ("modelopt",), "modelopt_fp4": ("modelopt", "fp8"), "modelopt_mixed": ("modelopt",),
        "nvfp4_online": ("fp8", "modelopt_fp8"), "petit_nvfp4": ("modelopt",),
        "w8a8_int8": ("compressed-tensors", "compressed_tensors"),
        "w8a8_fp8": ("compressed-tensors", "compressed_tensors"),
        "auto-round-int8": ("compressed-tensors", "compressed_tensors"),
    },
}
COMPATIBLE["0.5.23"] = {**COMPATIBLE["0.5.22"], "minimax_m3_nvfp4": ("mxfp8",)}   # model_config.py:2050-2051@0.5.23
REQUANTIZATION = ("quark_mxfp4",)
# SGLang's config classes that lift text_config's quantization_config to hf_config.quantization_config:
# configs/kimi_k3.py:113-114, configs/kimi_k25.py:158-159, configs/deepseek_v41.py:23-41 (text_config merged into the
# top level), the same lines in both releases
LIFTS_TEXT_QUANT = ("kimi_k3", "kimi_k25", "deepseek_v41")
_QUANT_SOURCES = {
    "0.5.23": "sglang/srt/configs/model_config.py:545,1727-1740,2000-2148@0.5.23; "
              "sglang/srt/layers/quantization/base_config.py:223-253@0.5.23; "
              "sglang/srt/layers/quantization/moe_wna16.py:164-192@0.5.23; "
              "sglang/srt/layers/quantization/awq/awq.py:333-354@0.5.23; "
              "sglang/srt/layers/quantization/gptq/gptq.py:414-438@0.5.23; "
              "sglang/srt/layers/quantization/humming.py:503-508@0.5.23; "
              "sglang/srt/layers/quantization/modelopt_quant.py:830-835@0.5.23; "
              "sglang/srt/configs/kimi_k3.py:113-114@0.5.23; sglang/srt/configs/deepseek_v41.py:23-41@0.5.23; "
              "sglang/srt/arg_groups/serving_hook.py:695-701@0.5.23",
    "0.5.22": "sglang/srt/configs/model_config.py:467,1618-1631,1891-2036@0.5.22; "
              "sglang/srt/layers/quantization/base_config.py:204-234@0.5.22; "
              "sglang/srt/layers/quantization/moe_wna16.py:164-192@0.5.22; "
              "sglang/srt/layers/quantization/awq/awq.py:333-354@0.5.22; "
              "sglang/srt/layers/quantization/gptq/gptq.py:414-438@0.5.22; "
              "sglang/srt/layers/quantization/humming.py:503-508@0.5.22; "
              "sglang/srt/layers/quantization/modelopt_quant.py:830-835@0.5.22; "
              "sglang/srt/configs/kimi_k3.py:113-114@0.5.22; sglang/srt/configs/deepseek_v41.py:23-41@0.5.22; "
              "sglang/srt/arg_groups/serving_hook.py:674-680@0.5.22",
}


def sglang_checkpoint_quant_config(arch: Any) -> dict | None:
    """The quantization_config SGLang's hf_config carries, as config.json writes it (through the one reader's
    ModelArch: ``raw`` and ``quant_config``); None: none, or one the reader cannot tell (checkpoint_quant not
    decidable: no config.json, ModelOpt, a compression_config), or one only in a text_config SGLang does not lift."""
    decidable, method = checkpoint_quant(arch)
    if not decidable or method is None:
        return None
    raw = arch.raw if isinstance(arch.raw, dict) else {}
    if isinstance(raw.get("quantization_config"), dict):
        return raw["quantization_config"]
    if raw.get("model_type") in LIFTS_TEXT_QUANT and isinstance(arch.quant_config, dict):
        return arch.quant_config
    return None


def _claimed(user: str, method: str, q: dict) -> bool:
    """Whether an override of the release may claim a ``method`` checkpoint for ``--quantization user``."""
    if user == "moe_wna16" and method in ("gptq", "awq"):
        return True
    if method == "awq" and user in ("marlin", "awq_marlin"):
        return True
    if method == "gptq" and user in ("marlin", "gptq_marlin"):
        return True
    if user == "humming" and method != "mxfp4":
        return True
    if user == "modelopt" and isinstance(q.get("quant_algo"), str):
        return True
    return method.startswith("modelopt")    # modelopt_fp8 / modelopt_fp4 / modelopt_mixed (ModelOpt parse, overrides)


def quantization_mismatch(v: LineView) -> str | None:
    """The release's refusal of ``--quantization`` against the checkpoint's method, or None (no refusal, or one this
    model cannot tell)."""
    key = getattr(v.version, "key", None)
    user = v.value("quantization")
    if key not in COMPATIBLE or not isinstance(user, str):
        return None
    user = user.lower()
    # unquant resolves to no quantization (serving_hook.py); quark_mxfp4 requantizes; modelslim reads its own
    # quant_model_description.json; gguf is a file format resolved from the weights
    if user in ("unquant", "modelslim", "gguf") or user in REQUANTIZATION or v.value("load_format") == "gguf":
        return None
    q = sglang_checkpoint_quant_config(v.arch)
    if q is None or not isinstance(q.get("quant_method"), str):
        return None
    method = q["quant_method"].lower()
    if method == user or _claimed(user, method, q) or method in COMPATIBLE[key].get(user, ()):
        return None
    return (f"Quantization method specified in the model config ({method}) does not match the quantization method "
            f"specified in the `quantization` argument ({user}).")


@rule("sglang-quantization-mismatch", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--quantization differs from the checkpoint's quantization method (SGLang)",
      why="SGLang loads a checkpoint with a quantization_config by its own method; ModelConfig refuses a different "
          "--quantization unless the release lists the pair as compatible (e.g. w8a8_int8 / w8a8_fp8 on a "
          "compressed-tensors checkpoint, nvfp4_online / modelopt_fp4 on fp8), requantizes online (quark_mxfp4), or "
          "an override claims the checkpoint (Marlin kernels for GPTQ/AWQ, moe_wna16, humming, ModelOpt).",
      fix="Drop --quantization (the checkpoint's quantization_config decides), or give the checkpoint's method or a "
          "method the release lists as compatible with it.",
      source=_QUANT_SOURCES["0.5.23"], sources=_sources(_QUANT_SOURCES), no_cel=NO_CEL)
def check_sglang_quantization_mismatch(r, c):
    v = line_view(r)
    if v is None or v.arch is None:
        return
    msg = quantization_mismatch(v)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ external linker, deterministic, GPU-picked backend

# hicache_hook.py:44-49@0.5.23 refuses the linker without the radix cache; attention_hook.py:586-591,656-662@0.5.23
# turns the radix cache off for deterministic inference on a backend outside choices.py:249
# (RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND: ascend, fa3, fa4, triton); with no --attention-backend
# overrides.py:1093-1116@0.5.23 (_deterministic_attention_backend) picks it per GPU: SM100/SM120 flashinfer (triton
# for the DeepSeek family), else fa3. 0.5.22 has no such linker check (hicache_hook.py:31-42@0.5.22).
_LINKER_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/hicache_hook.py:44-49@0.5.23; "
              "sglang/srt/arg_groups/attention_hook.py:586-591,656-662@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:1093-1116@0.5.23; sglang/srt/arg_groups/choices.py:249@0.5.23",
}


def linker_gpu_backend_warning(v: LineView, sm: str | None) -> str | None:
    """The warning for the external linker with deterministic inference on a GPU-picked backend, or None."""
    if getattr(v.version, "key", None) not in _LINKER_SOURCES or not v.value("enable_unified_cache_external_linker"):
        return None
    if v.value("disable_radix_cache") or v.value("radix_cache_backend") is not None:
        return None     # entry sglang-external-linker-needs-radix-cache
    if v.value("disaggregation_mode") == "decode" and not v.value("disaggregation_decode_enable_radix_cache"):
        return None     # entry sglang-unified-linker-radix-cache-off
    if not (v.value("enable_deterministic_inference") or v.value("rl_on_policy_target") is not None):
        return None
    if v.value("attention_backend") is not None:
        return None     # an explicit backend: entry sglang-unified-linker-radix-cache-off reads flashinfer
    if sm is not None and not (sm.startswith("SM10") or sm.startswith("SM12")):
        return None     # another GPU: fa3, which keeps the radix cache
    return ("--enable-unified-cache-external-linker needs the radix cache, and deterministic inference without "
            "--attention-backend lets SGLang pick the backend per GPU: on SM100/SM120 (B200, B300, GB300) it picks "
            "flashinfer for a model outside the DeepSeek family, which switches the radix cache off, and SGLang then "
            "refuses the linker.")


@rule("sglang-unified-linker-deterministic-gpu-backend", checked_by="oracle", family="args", severity="warning",
      engines=SGL, field="spec.extraArgs",
      title="--enable-unified-cache-external-linker with deterministic inference on the attention backend the GPU picks",
      why="Deterministic inference (--enable-deterministic-inference, --rl-on-policy-target) without "
          "--attention-backend takes the backend SGLang picks for the GPU; flashinfer (SM100/SM120, outside the "
          "DeepSeek family) switches the radix cache off, and the unified-cache external linker needs it. The GPU "
          "term decides: a warning.",
      fix="Give --attention-backend fa3, fa4 or triton with deterministic inference, or drop "
          "--enable-unified-cache-external-linker.",
      source=_LINKER_SOURCES["0.5.23"], sources=_sources(_LINKER_SOURCES))
def check_sglang_unified_linker_deterministic_gpu_backend(r, c):
    v = line_view(r)
    if v is None:
        return
    hw = getattr(r, "hardware", None)
    sm = str(getattr(hw, "sm", "") or "").upper() or None
    msg = linker_gpu_backend_warning(v, sm)
    if msg is not None:
        yield "spec.extraArgs", msg


# ------------------------------------------------------------------ hierarchical cache, deterministic, GPU-picked backend

# kv_cache_hook.py:393-397 (both releases) refuses --enable-hierarchical-cache with the radix cache off; deterministic
# inference (--enable-deterministic-inference, or --rl-on-policy-target which turns it on: attention_hook.py:586-591)
# turns it off on a backend outside RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND (attention_hook.py:656-662,
# choices.py:249); with no --attention-backend _deterministic_attention_backend picks flashinfer on an SM100/SM120 GPU
# for a model outside its DeepSeek list (overrides.py:1093-1116@0.5.23, :1034-1057@0.5.22; the list at
# :1039-1058 / :998-1017). An explicit flashinfer backend is entry sglang-hicache-deterministic-flashinfer. Read here:
# the document's GPU (catalog/data/hardware.yaml sm: SM100, SM103), no attention backend on the line (none of the three
# options), no diffusion LLM algorithm (dllm_hook.py turns the hierarchical cache off), and an architecture without a
# model override (its override may set the backend; sglang_checks_smiss7.MODEL_OVERRIDE_ARCHS) or Kimi-K3 (its override
# sets only the prefill / decode backends, and the release refuses its lines: tests/engine_oracle/test_m10s_oracle.py).
_HICACHE_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_cache_hook.py:393-397@0.5.23; "
              "sglang/srt/arg_groups/attention_hook.py:586-591,656-662@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:1039-1058,1093-1116@0.5.23; sglang/srt/arg_groups/choices.py:249@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/kv_cache_hook.py:393-397@0.5.22; "
              "sglang/srt/arg_groups/attention_hook.py:585-590,655-661@0.5.22; "
              "sglang/srt/arg_groups/overrides.py:998-1017,1034-1057@0.5.22; sglang/srt/arg_groups/choices.py:247@0.5.22",
}
DETERMINISTIC_DEEPSEEK = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                          "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
                          "Glm4MoeLiteForCausalLM")
_HICACHE_OVERRIDE_READ = ("KimiK3ForConditionalGeneration",)


def deterministic_flashinfer_on_gpu(v: LineView, sm: str | None) -> bool:
    """Whether deterministic inference takes flashinfer for this line on this GPU (the radix cache then goes off):
    an SM100/SM120 GPU, no attention backend on the line, a model outside the DeepSeek list and without a model
    override other than the ones read here."""
    if sm is None or not (sm.startswith("SM10") or sm.startswith("SM12")):
        return False
    if not (v.value("enable_deterministic_inference") or v.value("rl_on_policy_target") is not None):
        return False
    if any(v.value(d) is not None for d in ("attention_backend", "prefill_attention_backend",
                                             "decode_attention_backend")):
        return False
    arch = getattr(v.arch, "architecture", None) if v.arch is not None else None
    if arch is None or arch in DETERMINISTIC_DEEPSEEK:
        return False
    return arch not in MODEL_OVERRIDE_ARCHS or arch in _HICACHE_OVERRIDE_READ


@rule("sglang-hicache-deterministic-gpu-backend", checked_by="oracle", family="args", severity="error", engines=SGL,
      field="spec.extraArgs",
      title="--enable-hierarchical-cache with deterministic inference on the backend an SM100 GPU picks (flashinfer)",
      why="Deterministic inference (--enable-deterministic-inference, --rl-on-policy-target) without "
          "--attention-backend takes flashinfer on an SM100/SM120 GPU (B200, B300, GB300) for a model outside the "
          "DeepSeek family, and switches the radix cache off on flashinfer; the hierarchical cache needs the radix "
          "cache. On another GPU the release picks fa3 and keeps it.",
      fix="Give --attention-backend fa3, fa4 or triton with deterministic inference, or drop "
          "--enable-hierarchical-cache.",
      source=_HICACHE_SOURCES["0.5.23"], sources=_sources(_HICACHE_SOURCES), no_cel=NO_CEL)
def check_sglang_hicache_deterministic_gpu_backend(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_hierarchical_cache") or v.value("disable_radix_cache"):
        return     # --disable-radix-cache itself: entry sglang-hicache-disable-radix-cache
    if v.value("dllm_algorithm") is not None:
        return
    hw = getattr(r, "hardware", None)
    sm = str(getattr(hw, "sm", "") or "").upper() or None
    if deterministic_flashinfer_on_gpu(v, sm):
        yield "spec.extraArgs", (
            f"The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive and cannot be "
            f"used at the same time: deterministic inference without --attention-backend picks flashinfer on this "
            f"{sm} GPU, which switches the radix cache off.")


for _id in ("sglang-quantization-mismatch", "sglang-unified-linker-deterministic-gpu-backend",
            "sglang-hicache-deterministic-gpu-backend"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
