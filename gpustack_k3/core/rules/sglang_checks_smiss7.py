"""SGLang refusals that depend on a value the release resolves (helper smiss7, issue 31), beyond what the engine-check
table (gpustack_k3/catalog/data/checks/sglang.yaml) can express:

- the attention backend SGLang picks on SM100/SM103 (B200, B300, GB300) for a model that is not MLA when the line
  names none (:func:`sm100_mha_default_backend`, the one place this is modelled), and the checks that key on it:
  --enable-mis (multi-item scoring needs flashinfer) and deterministic inference (--enable-deterministic-inference,
  --rl-on-policy-target: a model override's backend must be a deterministic one);
- --pp-size 0 where the release divides by it (the DCP communication backend default);
- --enable-amd-monokernel: the monokernel plugin is a fact of the serving image (a warning).

Each rule reads the values the release's own parser gives the command line (checks.line_view), lists the releases
whose code it follows with each release's own source, and is verified against the release by
tests/engine_oracle/test_sglang_python_rules_oracle.py (unit lines: tests/core/test_sglang_python_rules.py)."""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, LineView, line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.sglang_checks_smiss5 import _backend_given, _int, _on_sm100

# ------------------------------------------------------------------ the SM100 default attention backend (not MLA)

# With no --attention-backend / --prefill-attention-backend / --decode-attention-backend the backend of a model that
# is not MLA on SM100/SM103 is, in the release's order:
#  1. the model override's (model_overrides/*.py, run before the post-processes): GPT-OSS sets attention_backend
#     trtllm_mha on SM100 (gpt_oss.py:30-31, both releases); Nemotron-H sets trtllm_mha on SM100 without a speculative
#     algorithm, and with one when --speculative-eagle-topk is unset or 1, else triton (nemotron_h.py; it runs before
#     the speculative hooks, so it reads the line's top-k);
#  2. else _attention_backend_default (overrides.py) -> get_default_attn_backend (model_override_base.py): Whisper
#     flashinfer; an MHA model on SM100 without a speculative algorithm: fa4 with unequal K/V widths, else trtllm_mha.
# Both releases follow the same code (0.5.23 adds only DFLASH's top-k to the speculative branch, which this model
# leaves to the release). Left to the release (None): another GPU, a backend on the line, a speculative algorithm on
# a model without an override read here, an MLA model, a device other than CUDA, a diffusion LLM algorithm, an NVFP4
# KV cache (kv_cache_hook.py sets its own backends), and every architecture either release registers a model override
# for (MODEL_OVERRIDE_ARCHS: its override may set the backend) other than the two read here.
_DEFAULT_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/model_override_base.py:277-325@0.5.23, "
              "sglang/srt/arg_groups/overrides.py:1126-1140@0.5.23, "
              "sglang/srt/arg_groups/model_overrides/gpt_oss.py:24-31@0.5.23, "
              "sglang/srt/arg_groups/model_overrides/nemotron_h.py:17-20,123-148@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/model_override_base.py:268-315@0.5.22, "
              "sglang/srt/arg_groups/overrides.py:1067-1081@0.5.22, "
              "sglang/srt/arg_groups/model_overrides/gpt_oss.py:24-31@0.5.22, "
              "sglang/srt/arg_groups/model_overrides/nemotron_h.py:17-20,103-128@0.5.22",
}
# every architecture a model override is registered for (@_register_for in sglang/srt/arg_groups/model_overrides/*.py),
# union of 0.5.22 and 0.5.23
MODEL_OVERRIDE_ARCHS = frozenset((
    "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration", "BeamForCausalLM", "Cohere2MoeForCausalLM",
    "Cohere2VisionForConditionalGeneration", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
    "DiffusionGemmaForBlockDiffusion", "Dots3NoteForCausalLM", "EmbeddingGemma2Model",
    "Ernie4_5_VLMoeForConditionalGeneration", "Exaone4ForCausalLM", "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM",
    "FalconH1ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
    "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
    "Gemma4UnifiedForConditionalGeneration", "GigaChat35ForCausalLM", "GigaChat35ForCausalLMNextN",
    "Glm4MoeForCausalLM", "Glm5NextForConditionalGeneration", "GlmMoeDsaForCausalLM", "GptOssForCausalLM",
    "GraniteMoeHybridForCausalLM", "HYV4ForCausalLM", "HYV4ForCausalLMNextN", "IQuestQ1ForCausalLM", "IQuestQ1MTP",
    "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP", "InternS2MobiusForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "JetNemotronForCausalLM", "JetVLMForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "KimiK3ForConditionalGeneration", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM",
    "Llama4ForCausalLM", "Llama4ForConditionalGeneration", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN",
    "MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM", "MiniCPMForCausalLM", "MiniCPMSALAForCausalLM",
    "MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration", "MiniMaxM2ForCausalLM",
    "MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration", "MistralLarge3ForCausalLM",
    "MossVLForConditionalGeneration", "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
    "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3", "Olmo2ForCausalLM",
    "PixtralForConditionalGeneration", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM", "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration",
))
NEMOTRON_H_ARCHS = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3")


class DefaultBackend:
    """The backend SGLang resolves for a line that names none: ``backend`` (prefill and decode alike), ``by`` (the
    release code that picks it), ``override`` (True: a model override set it before the post-processes run)."""

    __slots__ = ("backend", "by", "override")

    def __init__(self, backend: str, by: str, override: bool) -> None:
        self.backend, self.by, self.override = backend, by, override


def sm100_mha_default_backend(r, v: LineView, one_phase: bool = False) -> DefaultBackend | None:
    """The attention backend SGLang resolves for this line on an SM100/SM103 GPU when the line names none, for a
    model that is not MLA (None: left to the release, see the comment above). ``one_phase``: the line gives only a
    --prefill-attention-backend or only a --decode-attention-backend: the model overrides do not run (they need all
    three unset) and _attention_backend_default fills attention_backend, the other phase's backend."""
    if not _on_sm100(r):
        return None
    if one_phase:
        given = [v.value(d) is not None for d in ("prefill_attention_backend", "decode_attention_backend")]
        if v.value("attention_backend") is not None or sum(given) != 1:
            return None
    elif _backend_given(v):
        return None
    device = v.value("device")
    if device is not None and (not isinstance(device, str) or device.split(":")[0] != "cuda"):
        return None
    if v.value("dllm_algorithm") is not None:
        return None
    kv = v.value("kv_cache_dtype")
    if isinstance(kv, str) and "fp4" in kv.lower():
        return None
    arch = v.arch
    name = getattr(arch, "architecture", None) if arch is not None else None
    if not isinstance(name, str) or getattr(arch, "kv_lora_rank", None) is not None:
        return None
    algo = v.value("speculative_algorithm")
    if one_phase and name in MODEL_OVERRIDE_ARCHS:
        return None
    if name == "GptOssForCausalLM":
        return DefaultBackend("trtllm_mha", "the GPT-OSS model override (model_overrides/gpt_oss.py)", True)
    if name in NEMOTRON_H_ARCHS:
        if algo is None:
            return DefaultBackend("trtllm_mha", "the Nemotron-H model override (model_overrides/nemotron_h.py)", True)
        # the override runs before the speculative hooks (which set NGRAM's top-k and EAGLE's auto parameters): it
        # reads the line's --speculative-eagle-topk, None when not given
        topk = v.value("speculative_eagle_topk") if v.given("speculative_eagle_topk") else None
        if topk is not None and _int(topk) is None:
            return None
        return DefaultBackend("trtllm_mha" if topk in (None, 1) else "triton",
                              "the Nemotron-H model override (model_overrides/nemotron_h.py)", True)
    if name in MODEL_OVERRIDE_ARCHS:
        return None
    if name == "WhisperForConditionalGeneration":
        return DefaultBackend("flashinfer", "get_default_attn_backend (Whisper)", False)
    if algo is not None:
        return None
    text = getattr(arch, "text", None) or {}
    if any(k in text for k in ("v_head_dim", "swa_head_dim", "swa_v_head_dim")):
        return None   # has_asymmetric_kv (fa4) reads figures the product does not model
    return DefaultBackend("trtllm_mha", "get_default_attn_backend (an MHA model on SM100)", False)


def _sources(extra: dict[str, str]) -> dict[str, str]:
    return {k: f"{extra[k]}, {_DEFAULT_SOURCES[k]}" for k in extra}


_MIS_SOURCES = _sources({
    "0.5.23": "sglang/srt/arg_groups/attention_hook.py:572-577@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/attention_hook.py:571-576@0.5.22",
})


@rule("sglang-mis-sm100-default-backend", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--enable-mis on SM100/SM103 with no attention backend: SGLang picks one that is not flashinfer",
      why="Multi-item scoring builds a custom attention mask that only the flashinfer backend applies, for prefill "
          "and decode. With no attention backend on the line, SGLang picks trtllm_mha for this model on an "
          "SM100/SM103 GPU (its model override, or get_default_attn_backend for an MHA model), and the multi-item "
          "scoring check refuses it.",
      fix="Give --attention-backend flashinfer with --enable-mis, or drop --enable-mis.",
      source=_MIS_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _MIS_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_mis_sm100_default_backend(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_mis"):
        return
    if v.value("dllm_algorithm") is not None:
        return
    d, what = sm100_mha_default_backend(r, v), "no attention backend"
    if d is None:
        # only one phase given (flashinfer: another one is the entry sglang-mis-needs-flashinfer-attention's)
        d = sm100_mha_default_backend(r, v, one_phase=True)
        what = "no --attention-backend for the other phase"
    if d is None or d.backend == "flashinfer":
        return
    yield "spec.extraArgs", ("Multi-item scoring requires flashinfer attention backend for custom attention mask "
                             f"support: --enable-mis with {what} on {r.hardware.sm} runs '{d.backend}' ({d.by}). "
                             "Please set --attention-backend flashinfer when using --enable-mis.")


DETERMINISTIC_BACKENDS = ("ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton")   # choices.py:113-120
_DET_SOURCES = _sources({
    "0.5.23": "sglang/srt/arg_groups/overrides.py:1093-1095,1117-1122@0.5.23; "
              "sglang/srt/arg_groups/choices.py:113-120@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/overrides.py:1034-1036,1058-1063@0.5.22; "
              "sglang/srt/arg_groups/choices.py:113-120@0.5.22",
})


@rule("sglang-deterministic-sm100-override-backend", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="Deterministic inference with no attention backend: the model override's SM100 backend is not a "
            "deterministic one",
      why="With --enable-deterministic-inference (or --rl-on-policy-target, which turns it on) and no attention "
          "backend, SGLang falls back to flashinfer or triton, unless a model override has already set one: on "
          "SM100/SM103 the GPT-OSS and Nemotron-H overrides set trtllm_mha, which batch-invariant attention does not "
          "support, and the deterministic check refuses it as if given.",
      fix="Give --attention-backend flashinfer, fa4 or triton (one this model supports), or drop "
          "--enable-deterministic-inference / --rl-on-policy-target.",
      source=_DET_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _DET_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_deterministic_sm100_override_backend(r, c):
    v = line_view(r)
    if v is None or not (v.value("enable_deterministic_inference") or v.value("rl_on_policy_target") is not None):
        return
    d = sm100_mha_default_backend(r, v)
    if d is None or not d.override or d.backend in DETERMINISTIC_BACKENDS:
        return
    yield "spec.extraArgs", (f"Currently only {list(DETERMINISTIC_BACKENDS)} attention backends are supported for "
                             f"deterministic inference: with no attention backend on {r.hardware.sm}, {d.by} sets "
                             f"'{d.backend}'.")


# _handle_eagle_family (EAGLE, EAGLE3, NEXTN = EAGLE, STANDALONE; spec_info.py) refuses a --speculative-eagle-topk
# above 1 when trtllm_mha is the prefill or decode backend: one the line gives, or the model override's (GPT-OSS on
# SM100, sm100_mha_default_backend). A top-k the line gives stays (the auto parameters run only without
# --speculative-num-steps, and then a given top-k is refused earlier); Gemma4 drafts are promoted to FROZEN_KV_MTP
# (another handler): left to the release, as is --speculative-adaptive.
_TOPK_SOURCES = _sources({
    "0.5.23": "sglang/srt/arg_groups/speculative_hook.py:1159-1164,1176-1180@0.5.23; "
              "sglang/srt/speculative/spec_info.py:262-264@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/speculative_hook.py:1085-1089@0.5.22; "
              "sglang/srt/speculative/spec_info.py:262-263@0.5.22",
})
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


def trtllm_mha_backend(r, v: LineView) -> str | None:
    """How trtllm_mha becomes a prefill or decode backend of this line (None: it does not, or not knowably)."""
    given = {d: v.value(d) for d in ("attention_backend", "prefill_attention_backend", "decode_attention_backend")}
    prefill = given["prefill_attention_backend"] or given["attention_backend"]
    decode = given["decode_attention_backend"] or given["attention_backend"]
    if "trtllm_mha" in (prefill, decode):
        return "the line's attention backend"
    if any(x is not None for x in given.values()):
        return None
    d = sm100_mha_default_backend(r, v)
    return d.by if d is not None and d.override and d.backend == "trtllm_mha" else None


@rule("sglang-trtllm-mha-eagle-topk", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="An EAGLE draft tree (--speculative-eagle-topk above 1) on the trtllm_mha attention backend",
      why="SGLang's trtllm_mha backend verifies a linear draft chain only: with trtllm_mha as the prefill or decode "
          "backend (given on the line, or set by the model's SM100 override, as GPT-OSS's), an EAGLE top-k above 1 "
          "is refused at start-up.",
      fix="Give --speculative-eagle-topk 1, or an attention backend that serves a draft tree (e.g. "
          "--attention-backend triton).",
      source=_TOPK_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _TOPK_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_trtllm_mha_eagle_topk(r, c):
    v = line_view(r)
    if v is None or v.value("speculative_adaptive"):
        return
    algo = v.value("speculative_algorithm")
    if not isinstance(algo, str) or algo.strip().upper() not in EAGLE_FAMILY:
        return
    name = getattr(v.arch, "architecture", None) if v.arch is not None else None
    if not isinstance(name, str) or name.startswith("Gemma4"):
        return
    topk = _int(v.value("speculative_eagle_topk")) if v.given("speculative_eagle_topk") else None
    if topk is None or topk <= 1 or not v.given("speculative_num_steps"):
        return
    how = trtllm_mha_backend(r, v)
    if how is None:
        return
    yield "spec.extraArgs", (f"trtllm_mha backend only supports topk = 1 for speculative decoding: "
                             f"--speculative-eagle-topk {topk} with trtllm_mha from {how}.")


# _handle_ngram sets the top-k to --speculative-ngram-max-bfs-breadth (default 10) and refuses a top-k above 1 with a
# page size above 1 unless attention_backend is flashinfer. trtllm_mha as attention_backend (the line's, with no
# phase backend, or the GPT-OSS override's) always runs a page size of 16 or more (_mla_backend_page_constraints:
# 16, 32, 64 or 128, anything else becomes 64), so the tree is refused.
_NGRAM_SOURCES = _sources({
    "0.5.23": "sglang/srt/arg_groups/speculative_hook.py:1285,1309-1313,1355-1366@0.5.23; "
              "sglang/srt/arg_groups/overrides.py:1174-1187@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/speculative_hook.py:1195,1219-1223,1265-1276@0.5.22; "
              "sglang/srt/arg_groups/overrides.py:1124-1137@0.5.22",
})


@rule("sglang-ngram-tree-trtllm-mha", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="An NGRAM draft tree (BFS breadth above 1) on the trtllm_mha attention backend",
      why="SGLang runs an NGRAM draft tree (its BFS breadth, 10 unless given) with a page size above 1 only on the "
          "flashinfer attention backend. trtllm_mha (given on the line, or set by the model's SM100 override, as "
          "GPT-OSS's) runs a page size of 16 to 128: the line is refused at start-up.",
      fix="Give --speculative-ngram-max-bfs-breadth 1, or --attention-backend flashinfer if the model supports it.",
      source=_NGRAM_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _NGRAM_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_ngram_tree_trtllm_mha(r, c):
    v = line_view(r)
    if v is None:
        return
    algo = v.value("speculative_algorithm")
    if not isinstance(algo, str) or algo.strip().upper() != "NGRAM":
        return
    breadth = _int(v.value("speculative_ngram_max_bfs_breadth"))
    if breadth is None or breadth <= 1:
        return
    if v.value("prefill_attention_backend") is None and v.value("decode_attention_backend") is None \
            and v.value("attention_backend") == "trtllm_mha":
        how = "the line's --attention-backend"
    else:
        d = sm100_mha_default_backend(r, v)
        if d is None or not d.override or d.backend != "trtllm_mha":
            return
        how = d.by
    yield "spec.extraArgs", (f"speculative_eagle_topk({breadth}) > 1 with page_size > 1 is only supported for the "
                             f"'flashinfer' backend: NGRAM's BFS breadth {breadth} with trtllm_mha from {how} "
                             "(page size 16 to 128).")


# ------------------------------------------------------------------ --pp-size 0: the DCP communication backend default

# _dcp_comm_backend_default (a post-process) with DCP above 1 and no --dcp-comm-backend calls is_fi_a2a_supported,
# which on SM100 returns True for an MNNVL fabric device (GB200/GB300 by device name; another GPU when NVML reports a
# completed NVLink fabric clique) and else computes tp_size // max(nnodes // pp_size, 1): ZeroDivisionError at
# --pp-size 0. Whether NVML reports a fabric clique on a B200/B300 node is a fact of the node the product does not
# know: a warning there (the oracle's platform reports none, and refuses); GB200/GB300 never divide.
_PP0_SOURCES = {
    "0.5.23": "sglang/srt/utils/common.py:1038-1054,1056-1064@0.5.23, "
              "sglang/srt/arg_groups/overrides.py:1374-1386@0.5.23",
    "0.5.22": "sglang/srt/utils/common.py:1012-1020@0.5.22, sglang/srt/arg_groups/overrides.py:1337-1349@0.5.22",
}


@rule("sglang-pp-size-zero-dcp-comm-default", checked_by="oracle", family="args", severity="warning",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--pp-size 0 with DCP: SGLang divides by the pipeline size choosing the DCP communication backend",
      why="With --dcp-size above 1 and no --dcp-comm-backend, SGLang picks the DCP communication backend and, on an "
          "SM100/SM103 GPU that is not on an NVLink fabric (MNNVL), divides the node count by --pp-size: 0 raises "
          "ZeroDivisionError at start-up. Whether the node's NVML reports an NVLink fabric (which skips the division) "
          "is a fact of the node, which a command line does not tell: a warning.",
      fix="Give --pp-size 1 (or the number of pipeline stages), or give --dcp-comm-backend.",
      source=_PP0_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _PP0_SOURCES.items()})
def check_sglang_pp_size_zero_dcp_comm_default(r, c):
    v = line_view(r)
    if v is None or _int(v.value("pp_size")) != 0 or (_int(v.value("dcp_size")) or 1) <= 1:
        return
    if v.value("dcp_comm_backend") is not None or not _on_sm100(r):
        return
    # is_mnnvl_fabric_device: the CUDA device name (catalog hardware.yaml description, e.g. "NVIDIA GB300 ...")
    name = str(getattr(r.hardware, "description", "") or "").upper()
    if "GB200" in name or "GB300" in name:
        return
    yield "spec.extraArgs", ("--pp-size 0 with --dcp-size above 1 and no --dcp-comm-backend: SGLang computes "
                             "tp_size // max(nnodes // pp_size, 1) to pick the DCP communication backend "
                             f"(is_fi_a2a_supported) on {r.hardware.sm} unless NVML reports an NVLink fabric: "
                             "ZeroDivisionError at start-up.")


# ------------------------------------------------------------------ MoRI with the default chunked prefill size

# The entry sglang-mori-dispatch-tokens-per-rank (checks/sglang.yaml) judges a --chunked-prefill-size the line gives.
# Without one, _handle_gpu_memory_settings (memory_hook.py) sets it from the GPU's memory before the MoE hook reads
# it: 16384 at 160 GiB and above (B200, B300, GB300), 8192 from 60 GiB (H200), 4096 below; the MoRI check then
# asserts it is <= SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK (default 4096). The same exclusions as the entry's
# (MORI_DEFAULT_CHUNK_ARCHS; no Waterfill, prefill CP, DWDP, decode server, DP attention, KV sharding, --enable-mis).
_MORI_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/moe_hook.py:543,564-572,834-837@0.5.23; sglang/srt/environ.py:930@0.5.23; "
              "sglang/srt/arg_groups/memory_hook.py:78,89-167@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/moe_hook.py:467,488-496,758-761@0.5.22; sglang/srt/environ.py:867@0.5.22; "
              "sglang/srt/arg_groups/memory_hook.py:78,89-167@0.5.22",
}
# the architectures whose path to the MoRI check is read and judged by the oracle (Kimi-K3 and the oracle's shapes:
# none turns chunked prefill off or resizes it); a model capability that does (embedding, multimodal without chunked
# prefill, ...) or another architecture is left to the release
MORI_DEFAULT_CHUNK_ARCHS = ("KimiK3ForConditionalGeneration", "GptOssForCausalLM", "LlamaForCausalLM",
                            "NemotronHForCausalLM", "DeepseekV3ForCausalLM")
# (GiB below which, default chunked prefill size): memory_hook.py:89-167, the last one beyond every bound
_CHUNK_BY_GPU_MEM = ((20, 2048), (35, 4096), (60, 4096), (90, 8192), (160, 8192), (float("inf"), 16384))


def default_chunked_prefill_size(r) -> int | None:
    """The chunked prefill size SGLang sets from the GPU's memory when the line gives none (None: no GPU profile)."""
    hw = getattr(r, "hardware", None)
    gib = getattr(hw, "visible_gib", None)
    if not isinstance(gib, (int, float)) or str(getattr(hw, "sm", "")).lower() == "none":
        return None
    return next(size for bound, size in _CHUNK_BY_GPU_MEM if gib < bound)


@rule("sglang-mori-default-chunk-dispatch-tokens", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--moe-a2a-backend mori with the default chunked prefill size, above SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK",
      why="The MoRI all-to-all dispatch buffer holds SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK tokens per rank "
          "(4096 unless set); a prefill chunk dispatches up to the chunked prefill size, which SGLang sets from the "
          "GPU's memory when the line gives none (16384 on B200/B300/GB300, 8192 on H200).",
      fix="Give --chunked-prefill-size 4096 (or no larger than SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK), or raise "
          "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK to at least the chunk.",
      source=_MORI_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _MORI_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_mori_default_chunk_dispatch_tokens(r, c):
    v = line_view(r)
    if v is None or v.value("moe_a2a_backend") != "mori" or v.given("chunked_prefill_size"):
        return
    if (v.value("enable_waterfill") or v.value("enable_prefill_cp") or (_int(v.value("dwdp_size")) or 0) > 1
            or v.value("disaggregation_mode") == "decode" or (_int(v.value("attn_dp_size")) or 1) > 1
            or v.value("enable_dp_attention") or v.value("enable_kv_cache_sharding") or v.value("enable_mis")):
        return
    name = getattr(v.arch, "architecture", None) if v.arch is not None else None
    if name not in MORI_DEFAULT_CHUNK_ARCHS:
        return
    chunk = default_chunked_prefill_size(r)
    cap = v.env_value("SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "sglang_env_int", 4096)
    if chunk is None or not isinstance(cap, int) or chunk <= cap:
        return
    yield "spec.extraArgs", ("SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK (default 4096) must be >= the per-rank "
                             f"MoRI dispatch tokens: {cap} < the chunked prefill size SGLang sets on "
                             f"{r.hardware.sm} with {getattr(r.hardware, 'visible_gib', '?')} GiB per GPU ({chunk}).")


# ------------------------------------------------------------------ --enable-amd-monokernel: a fact of the image

# handle_amd_monokernel (kernel_plugins/amd/binding.py) refuses unless a monokernel backend 'amd' is registered by a
# plugin (kernels/plugin_kernels/amd/spec.py find_spec: "install the plugin that provides it") whose spec lists the
# model's architecture and the GPU's ISA (sm_103 on B300/GB300); then the spec's own features, tp sizes, dtypes and
# decode backends decide. Nothing in the wheel refuses the flag for an NVIDIA GPU as such (device_isa answers
# sm_XY on CUDA, and the spec's device list is the plugin's data), and the wheel carries no 'amd' spec: whether the
# serving image installs one, and what it lists, is a fact of the image. A warning, as for --enable-nvidia-megakernel.
_AMD_SOURCES = {
    "0.5.23": "sglang/srt/kernel_plugins/amd/binding.py:71-78,132-145,205-215@0.5.23, "
              "sglang/kernels/plugin_kernels/amd/spec.py:194-227@0.5.23",
}


@rule("sglang-amd-monokernel-plugin", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--enable-amd-monokernel needs a plugin that registers the 'amd' monokernel backend",
      why="SGLang refuses --enable-amd-monokernel at start-up unless a plugin has registered the 'amd' monokernel "
          "backend with a spec for the model's architecture on the GPU's ISA; the sglang wheel registers none. "
          "Whether the serving image installs such a plugin (and what its spec lists) is a fact of the image, "
          "which a command line does not tell.",
      fix="Serve with an image whose plugin registers the 'amd' monokernel backend for this model and GPU, or drop "
          "--enable-amd-monokernel (deprecated spelling: --monokernel-backend amd).",
      source=_AMD_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _AMD_SOURCES.items()})
def check_sglang_amd_monokernel_plugin(r, c):
    v = line_view(r)
    if v is None or v.value("enable_amd_monokernel") is not True:
        return
    yield "spec.extraArgs", ("--enable-amd-monokernel needs a plugin that registers the 'amd' monokernel backend "
                             "(the sglang wheel registers none): unless the serving image adds one with a spec for "
                             "this model on this GPU, SGLang refuses the line at start-up.")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("sglang-mis-sm100-default-backend", "sglang-deterministic-sm100-override-backend",
            "sglang-trtllm-mha-eagle-topk", "sglang-mori-default-chunk-dispatch-tokens", "sglang-ngram-tree-trtllm-mha",
            "sglang-pp-size-zero-dcp-comm-default", "sglang-amd-monokernel-plugin"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
