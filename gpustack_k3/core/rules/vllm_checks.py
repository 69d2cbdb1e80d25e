"""vLLM config-time refusals that the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml, read by
gpustack_k3/core/rules/checks.py) cannot express: a test of a JSON option's keys, a product of two options. Each rule lists the releases whose
code refuses, with each release's own source; tests/core/test_vllm_checks.py and
tests/engine_oracle/test_checks_vllm.py hold its lines and have the release judge them."""
from __future__ import annotations

import json
import re

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.resolve import Resolved
from gpustack_k3.core.rules.args import PCP_FLAG, extra_arg, extra_arg_int
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.model_quant import DSV4_FP8, KIMI_K3_MXFP4, checkpoint_quant, vllm_quant
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
# the refusals that read model facts (multimodal architectures, experts, RoPE scaling) and the DeepSeek V4.1 MTP
# condition both releases' rules share
from gpustack_k3.core.rules.vllm_checks_vmiss5 import v41_mtp_refusal

_JSON_KEYS = ("reads the keys of a JSON option given in spec.extraArgs (argv tokenising and JSON parsing): beyond "
              "CEL; left to validate")

# --rope-scaling (0.11.0): ModelConfig makes it an hf_overrides entry (config/model.py:398-400@0.11.0), get_config
# writes it over the checkpoint's rope_scaling and then patches it (transformers_utils/config.py:628-638@0.11.0)
_ROPE_SOURCES = {
    "0.11.0": "vllm config/model.py:398-400@0.11.0, transformers_utils/config.py:376-391,628-638@0.11.0",
}


def _rope_scaling(r: Resolved) -> tuple[str, dict] | None:
    """(finding field, the dict) of --rope-scaling in extraArgs as the release's parser reads it (json.loads); None
    when absent, not JSON (the parser refuses that: rule argv-refused) or empty (``if self.rope_scaling:`` ignores
    it); the rules reading it run only on the releases their sources name (registry.ReleaseRule)."""
    found = extra_arg(r, "--rope-scaling")
    if found is None or found[1] is None:
        return None
    try:
        v = json.loads(found[1])
    except ValueError:
        return None
    if not isinstance(v, dict) or not v:
        return None
    return f"spec.extraArgs[{found[0]}]", v


@rule("vllm-rope-scaling-needs-type", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--rope-scaling needs a rope_type (or type) key",
      why="vLLM 0.11.0 writes --rope-scaling over the checkpoint's rope_scaling and then requires the dict to name "
          "its RoPE variant: rope_type, or the legacy type it copies into rope_type; without either ModelConfig "
          "refuses the line.",
      fix="Add \"rope_type\" (e.g. \"yarn\", \"linear\", \"dynamic\") to the --rope-scaling JSON.",
      source=_ROPE_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _ROPE_SOURCES.items()},
      no_cel=_JSON_KEYS)
def check_vllm_rope_scaling_needs_type(r, c):
    found = _rope_scaling(r)
    if found is not None and "rope_type" not in found[1] and "type" not in found[1]:
        yield found[0], "rope_scaling should have a 'rope_type' key"


@rule("vllm-rope-scaling-type-conflict", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--rope-scaling gives rope_type and type with different values",
      why="vLLM 0.11.0 accepts the legacy type key beside rope_type only when both name the same RoPE variant; "
          "ModelConfig refuses two different ones.",
      fix="Keep one of rope_type and type in the --rope-scaling JSON (rope_type is the current key).",
      source="vllm transformers_utils/config.py:376-382@0.11.0",
      sources={"vllm 0.11.0": "vllm transformers_utils/config.py:376-382@0.11.0"},
      no_cel=_JSON_KEYS)
def check_vllm_rope_scaling_type_conflict(r, c):
    found = _rope_scaling(r)
    if found is None:
        return
    v = found[1]
    if "rope_type" in v and "type" in v and v["rope_type"] != v["type"]:
        yield found[0], (f"Found conflicts between 'rope_type={v['rope_type']}' (modern field) and "
                         f"'type={v['type']}' (legacy field). You should only specify one of them.")


# ParallelConfig._validate_parallel_config: with PCP, DCP is 1, PCP or TP x PCP (without PCP, rule dcp-divides-tp)
_PCP_SOURCES = {
    "0.28.0": "vllm config/parallel.py:524-526,529-538@0.28.0",
    "0.29.0": "vllm config/parallel.py:545-547,550-559@0.29.0",
    "0.33.0": "vllm config/parallel.py:594-596,597-606@0.33.0",
    "0.34.0": "vllm config/parallel.py:635-637,638-647@0.34.0",
}


@rule("vllm-pcp-dcp-span", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.parallel.dcp",
      title="With prefill context parallelism DCP must be 1, PCP or TP x PCP",
      why="With --prefill-context-parallel-size above 1, decode context parallelism must be off, span the PCP axis or "
          "the whole TP x PCP axis; ParallelConfig refuses any other DCP size (a DCP that divides TP is not enough).",
      fix="Set --decode-context-parallel-size to 1, to the PCP size, or to TP x PCP.",
      source=_PCP_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _PCP_SOURCES.items()},
      no_cel="reads --prefill-context-parallel-size, a pass-through flag of spec.extraArgs (argv tokenising); left "
             "to validate")
def check_vllm_pcp_dcp_span(r, c):
    pcp = extra_arg_int(r, PCP_FLAG)
    if pcp is None or pcp <= 1:
        return
    tp, dcp = r.tp, r.dcp
    if dcp not in (1, pcp, tp * pcp):
        yield None, (f"When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full TP x PCP axis. "
                     f"Got TP={tp}, PCP={pcp}, DCP={dcp}; valid DCP sizes are {sorted({1, pcp, tp * pcp})}.")


def _json_option(r: Resolved, dest: str) -> dict | None:
    """The dict the release's parser made of a JSON config option (``--profiler-config`` and its dotted forms), as
    the engine-check table reads it (checks.line_view); None when the line does not give it."""
    v = line_view(r)
    if v is None or not v.given(dest):
        return None
    x = v.value(dest)
    return x if isinstance(x, dict) else None


# ProfilerConfig._validate_profiler_config (a pydantic model_validator): the parser runs it when it reads
# --profiler-config (engine/arg_utils.py parse_dataclass: TypeAdapter(cls).validate_json), so the line is refused
# at parse time ("argument --profiler-config: 1 validation error for ProfilerConfig").
_PROFILER_SOURCES = {
    "0.28.0": "vllm config/profiler.py:24-35,167-237@0.28.0",
    "0.29.0": "vllm config/profiler.py:24-35,167-237@0.29.0",
    "0.33.0": "vllm config/profiler.py:52-63,214-307@0.33.0",
    "0.34.0": "vllm config/profiler.py:51-62,204-302@0.34.0",
}
# the class's field defaults the validator sees where the JSON does not give the field (config/profiler.py:42-100@0.28.0,
# :70-138@0.33.0); 0.28.0/0.29.0 have neither torch_profiler_activities nor proton_graph_attribution (the parser
# refuses the key: extra="forbid")
_PROFILER_DEFAULTS = {"profiler": None, "torch_profiler_dir": "", "torch_profiler_activities": None,
                      "proton_profiler_dir": "", "proton_context": "shadow", "proton_data": "tree",
                      "proton_backend": None, "proton_mode": None, "proton_hook": None, "proton_output_format": None,
                      "proton_graph_attribution": False, "capture_torch_profiler": False}
_PROTON_OPTIONS = ("proton_profiler_dir", "proton_context", "proton_data", "proton_backend", "proton_mode",
                   "proton_hook", "proton_output_format", "proton_graph_attribution")


def _is_uri_path(path: str) -> bool:
    """config/profiler.py _is_uri_path: scheme://..., a scheme longer than one character."""
    return "://" in path and len(path.split("://")[0]) > 1


def profiler_refusal(cfg: dict, release: str) -> str | None:
    """The message ProfilerConfig's validator of ``release`` raises for the --profiler-config JSON ``cfg`` (the first
    check that fails, in the release's order), or None when it accepts it."""
    new = release in ("0.33.0", "0.34.0")   # activities and graph attribution: 0.33.0 on
    c = {**_PROFILER_DEFAULTS, **cfg}
    prof = c["profiler"]
    acts = c["torch_profiler_activities"]
    if new and acts is not None:
        if prof != "torch":
            return "torch_profiler_activities is only applicable when profiler is set to 'torch'"
        if len(acts) != len(set(acts)):
            return "torch_profiler_activities must not contain duplicates"
    if c["torch_profiler_dir"] and prof != "torch":
        return "torch_profiler_dir is only applicable when profiler is set to 'torch'"
    if prof == "torch" and not c["torch_profiler_dir"]:
        return "torch_profiler_dir must be set when profiler is 'torch'"
    names = _PROTON_OPTIONS if new else _PROTON_OPTIONS[:-1]
    non_default = [n for n in names if c[n] != _PROFILER_DEFAULTS[n]]
    if prof != "proton" and non_default:
        return f"{', '.join(non_default)} only applicable when profiler is set to 'proton'"
    if prof == "proton" and not c["proton_profiler_dir"]:
        return "proton_profiler_dir must be set when profiler is 'proton'"
    if c["proton_profiler_dir"] and _is_uri_path(c["proton_profiler_dir"]):
        return "proton_profiler_dir must be a local directory"
    if prof == "proton":
        fmt, data = c["proton_output_format"], c["proton_data"]
        if new and c["proton_graph_attribution"] and data != "tree":
            return "proton_graph_attribution requires proton_data='tree'"
        mode = c["proton_mode"]
        if new and c["proton_graph_attribution"] and mode and mode.split(":", 1)[0].lower() == "periodic_flushing":
            return "proton_graph_attribution is incompatible with periodic_flushing: both manage Proton data phases."
        if fmt == "chrome_trace" and data != "trace":
            return "chrome_trace output requires proton_data='trace'"
        if fmt in ("hatchet", "hatchet_msgpack") and data != "tree":
            return f"{fmt} output requires proton_data='tree'"
    if c["capture_torch_profiler"] and prof != "torch":
        return "capture_torch_profiler is only applicable when profiler is set to 'torch'"
    return None


@rule("vllm-profiler-config-invalid", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--profiler-config is refused by ProfilerConfig's validator",
      why="The parser validates --profiler-config with ProfilerConfig's own checks: a profiler's directory must be "
          "set for it (torch_profiler_dir for torch, a local proton_profiler_dir for proton), each profiler's options "
          "only with that profiler, and proton's output format matching proton_data. vllm serve refuses the line "
          "before anything is loaded.",
      fix="Give the profiler's directory with it (\"profiler\": \"torch\" with torch_profiler_dir, \"proton\" with "
          "proton_profiler_dir), drop options of the other profiler, and match proton_output_format to proton_data.",
      source=_PROFILER_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _PROFILER_SOURCES.items()},
      no_cel=_JSON_KEYS)
def check_vllm_profiler_config(r, c):
    cfg = _json_option(r, "profiler_config")
    if cfg is None:
        return
    problem = profiler_refusal(cfg, r.version.key)
    if problem:
        found = extra_arg(r, "--profiler-config")
        yield (f"spec.extraArgs[{found[0]}]" if found else None), problem


# ModelConfig._verify_quantization: --quantization against the release's QuantizationMethods (a Literal the parser
# does not enforce: --quantization is a plain string) and against the checkpoint's quantization_config.quant_method
_QUANT_METHODS_AT = {
    "0.11.0": "model_executor/layers/quantization/__init__.py:9-39@0.11.0",
    "0.28.0": "model_executor/layers/quantization/__init__.py:12-47@0.28.0",
    "0.29.0": "model_executor/layers/quantization/__init__.py:12-47@0.29.0",
    "0.33.0": "model_executor/layers/quantization/__init__.py:15-50@0.33.0",
    "0.34.0": "model_executor/layers/quantization/__init__.py:15-52@0.34.0",
}
_Q_COMMON = ("awq", "fp8", "fbgemm_fp8", "modelopt", "modelopt_fp4", "gptq_marlin", "awq_marlin", "gptq",
             "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4")
_Q_028 = _Q_COMMON + ("auto_awq", "fp_quant", "modelopt_mxfp8", "modelopt_mixed", "auto_gptq", "humming",
                      "gpt_oss_mxfp4", "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block",
                      "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8")
QUANTIZATION_METHODS = {   # get_args(QuantizationMethods) of each release (the files above)
    "0.11.0": frozenset(_Q_COMMON + ("deepspeedfp", "tpu_int8", "ptpc_fp8", "bitblas", "gguf", "gptq_marlin_24",
                                     "gptq_bitblas", "bitsandbytes", "hqq", "ipex", "auto-round", "rtn",
                                     "petit_nvfp4")),
    "0.28.0": frozenset(_Q_028),
    "0.29.0": frozenset(_Q_028),
    "0.33.0": frozenset(_Q_028),
    "0.34.0": frozenset(set(_Q_028) - {"fp_quant"} | {"w4afp8", "lut_b_moe", "mxfp4_hadamard32"}),
}
_Q_UNKNOWN_SOURCES = {
    "0.11.0": "vllm config/model.py:959-963@0.11.0, " + _QUANT_METHODS_AT["0.11.0"],
    "0.28.0": "vllm config/model.py:1280-1285@0.28.0, " + _QUANT_METHODS_AT["0.28.0"],
    "0.29.0": "vllm config/model.py:1326-1331@0.29.0, " + _QUANT_METHODS_AT["0.29.0"],
    "0.33.0": "vllm config/model.py:1464-1469@0.33.0, " + _QUANT_METHODS_AT["0.33.0"],
    "0.34.0": "vllm config/model.py:1484-1489@0.34.0, " + _QUANT_METHODS_AT["0.34.0"],
}
_Q_MISMATCH_SOURCES = {
    "0.11.0": "vllm config/model.py:857-877,885-957@0.11.0",
    "0.28.0": "vllm config/model.py:1205-1278@0.28.0, transformers_utils/model_arch_config_convertor.py:241-292@0.28.0",
    "0.29.0": "vllm config/model.py:1251-1324@0.29.0, transformers_utils/model_arch_config_convertor.py:241-292@0.29.0",
    "0.33.0": "vllm config/model.py:1389-1462@0.33.0, transformers_utils/model_arch_config_convertor.py:241-292@0.33.0",
    "0.34.0": "vllm config/model.py:1409-1482@0.34.0, transformers_utils/model_arch_config_convertor.py:241-292@0.34.0",
}
for _v in KIMI_K3_MXFP4:   # Kimi-K3's compressed-tensors MXFP4 read as mxfp4; DeepSeek-V4's fp8 claimed (core/rules/model_quant.py)
    _Q_MISMATCH_SOURCES[_v] += f", {KIMI_K3_MXFP4[_v]}, {DSV4_FP8[_v][1]}"
# checkpoint quantizations no override of these releases claims for another --quantization on a CUDA node (the
# overrides of gptq/awq checkpoints, ModelOpt (quant_algo/producer), GPT-OSS mxfp4, auto-round, humming, ROCm's
# petit and CPU/XPU's ipex are left out: with them the release may take a different --quantization)
_PLAIN_CHECKPOINT_QUANT = ("fp8", "mxfp4", "compressed-tensors")


def _quant_arg(r: Resolved) -> str | None:
    v = line_view(r)
    if v is None:
        return None
    q = v.value("quantization")
    return q if isinstance(q, str) else None


@rule("vllm-quantization-unknown", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--quantization names no quantization method of the release",
      why="--quantization is a free string to the parser; ModelConfig refuses a name outside the release's "
          "quantization methods when the checkpoint has no quantization_config (with one, rule "
          "vllm-quantization-mismatch: the checkpoint's method must match).",
      fix="Drop --quantization (the checkpoint decides), or give one of the release's quantization methods.",
      source=_Q_UNKNOWN_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _Q_UNKNOWN_SOURCES.items()},
      no_cel="per-release method lists and the checkpoint's config.json; left to validate")
def check_vllm_quantization_unknown(r, c):
    q = _quant_arg(r)
    decidable, ckpt = checkpoint_quant(r.model_arch)
    if q is None or not decidable or ckpt is not None or q in QUANTIZATION_METHODS[r.version.key]:
        return
    yield None, f"Unknown quantization method: {q}"


@rule("vllm-quantization-mismatch", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--quantization differs from the checkpoint's quantization method",
      why="A checkpoint with a quantization_config is loaded with its own method; ModelConfig refuses a different "
          "--quantization unless one of the release's overrides claims the checkpoint for it (GPTQ/AWQ Marlin "
          "kernels, ModelOpt, GPT-OSS mxfp4: not checked here, those checkpoints are left to the release).",
      fix="Drop --quantization (the checkpoint's quantization_config decides), or give the checkpoint's method.",
      source=_Q_MISMATCH_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _Q_MISMATCH_SOURCES.items()},
      no_cel="the checkpoint's config.json quantization_config against --quantization; left to validate")
def check_vllm_quantization_mismatch(r, c):
    q = _quant_arg(r)
    # the catalog's architecture block decides where no config.json is given: for Kimi-K3 and DeepSeek-V4.1-Flash it
    # is the engine oracle's config.json (gpustack_k3/oracle/models.py), so both judge one quantization_config
    decidable, ckpt, claimed = vllm_quant(r.model_arch, r.version.key, q)
    if q is None or not decidable or ckpt not in _PLAIN_CHECKPOINT_QUANT or q == ckpt or q == "humming" or claimed:
        return
    yield None, (f"Quantization method specified in the model config ({ckpt}) does not match the quantization "
                 f"method specified in the `quantization` argument ({q})")


# SpeculativeConfig.__post_init__: an MTP method (MTPModelTypes; every alias becomes "mtp") without a draft model
# drafts from the target's own checkpoint; for DeepSeek V4.1 (model_type deepseek_v41) the release refuses it: its
# checkpoints carry DSpark stages, not a classic MTP head (0.33.0: the draft config becomes deepseek_mtp,
# config/speculative.py:765-776@0.33.0, and the method stays mtp unless the checkpoint's path names another method;
# 0.34.0: the MTP speculator drafts from the target when no model is given, MTPSpeculatorConfig.default_model, and
# refuses a deepseek_v41 target when it adapts the draft config). One condition: v41_mtp_refusal
_V41_MTP_SOURCES = {"0.33.0": "vllm config/speculative.py:38-67,1246-1263,1433-1479,765-776@0.33.0",
                    "0.34.0": "vllm config/speculative.py:53-83,1374-1389@0.34.0, "
                              "v1/worker/gpu/spec_decode/speculator_config.py:221@0.34.0, "
                              "v1/worker/gpu/spec_decode/mtp/config.py:42-55,79-89@0.34.0"}


@rule("vllm-spec-mtp-on-deepseek-v41", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="An MTP speculative method on DeepSeek V4.1 (it has no classic MTP draft)",
      why="vLLM drafts an MTP method (mtp or any of its aliases, e.g. deepseek_mtp) from the target's own "
          "checkpoint; DeepSeek V4.1's checkpoints ship DSpark stages under mtp.*, and the release refuses the "
          "method for model_type deepseek_v41 (0.33.0: SpeculativeConfig; 0.34.0: the MTP speculator's config).",
      fix="Use \"method\": \"dspark\" in --speculative-config.",
      source=_V41_MTP_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _V41_MTP_SOURCES.items()},
      no_cel=_JSON_KEYS)
def check_vllm_spec_mtp_on_deepseek_v41(r, c):
    problem = v41_mtp_refusal(r)
    if problem:
        yield None, problem


# SpeculativeConfig.__post_init__, the ngram methods: prompt_lookup_min/max default to each other (both unset: 5);
# 0.11.0 checks both >= 1 here (0.28.0 on: Field(ge=1), the parser's schema refuses it: rule argv-refused), then
# min <= max
_NGRAM_SOURCES = {
    "0.11.0": "vllm config/speculative.py:243-273@0.11.0",
    "0.28.0": "vllm config/speculative.py:742-751,800-829@0.28.0",
    "0.29.0": "vllm config/speculative.py:1080-1089,1141-1170@0.29.0",
    "0.33.0": "vllm config/speculative.py:1236-1244,1297-1326@0.33.0",
}


def ngram_lookup_refusal(spec: dict, release: str) -> str | None:
    """The message SpeculativeConfig of ``release`` raises for an ngram method's lookup window, or None."""
    methods = ("ngram", "[ngram]") if release == "0.11.0" else ("ngram", "[ngram]", "ngram_gpu")
    method = spec.get("method")
    if method is None and spec.get("model") in ("ngram", "[ngram]"):
        method = "ngram"
    if method not in methods:
        return None
    lo, hi = spec.get("prompt_lookup_min"), spec.get("prompt_lookup_max")
    if lo is None and hi is None:
        lo = hi = 5
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
        return None
    if release == "0.11.0" and lo < 1:
        return f"prompt_lookup_min={lo} must be > 0"
    if release == "0.11.0" and hi < 1:
        return f"prompt_lookup_max={hi} must be > 0"
    if lo > hi:
        return f"prompt_lookup_min={lo} must be <= prompt_lookup_max={hi}"
    return None


@rule("vllm-spec-ngram-lookup-range", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="The ngram lookup window: prompt_lookup_min 1 .. prompt_lookup_max",
      why="The ngram speculative method matches the last prompt_lookup_min .. prompt_lookup_max tokens (either "
          "defaults to the other, both to 5); SpeculativeConfig refuses a window below 1 or a minimum above the "
          "maximum.",
      fix="Set prompt_lookup_min and prompt_lookup_max in --speculative-config to 1 <= min <= max.",
      source=_NGRAM_SOURCES["0.33.0"], sources={f"vllm {k}": v for k, v in _NGRAM_SOURCES.items()},
      no_cel=_JSON_KEYS)
def check_vllm_spec_ngram_lookup(r, c):
    spec = _json_option(r, "speculative_config")
    problem = ngram_lookup_refusal(spec, r.version.key) if spec is not None else None
    if problem:
        yield None, problem


# CompilationConfig.__post_init__ (run by the parser's TypeAdapter(cls).validate_json on --compilation-config /
# -cc / -O.x): the custom_ops syntax, one base mode, no op both enabled and disabled, piecewise compilation's
# backends, and the CUDA-graph size lists of the decoder replay and the multimodal encoder
_COMPILATION_SOURCES = {
    "0.11.0": "vllm config/compilation.py:427,489-494@0.11.0",
    "0.28.0": "vllm config/compilation.py:40-49,447,843-861,906,999-1058@0.28.0",
    "0.29.0": "vllm config/compilation.py:40-49,447,849-867,912,1005-1064@0.29.0",
    "0.33.0": "vllm config/compilation.py:40-49,432,853-871,915,1014-1078@0.33.0",
    "0.34.0": "vllm config/compilation.py:41-50,513,1003-1021,1065,1164-1237@0.34.0",
}
_COMPILATION_MODES = ("NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE")   # CompilationMode, 0-3
_VLLM_COMPILE = 3   # CompilationMode.VLLM_COMPILE (the JSON gives 3 or the name, any case: validate_mode_before)


def _ints(x) -> list | None:
    return x if isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in x) else None


def compilation_refusal(cfg: dict, release: str) -> str | None:
    """The message CompilationConfig.__post_init__ of ``release`` raises for the --compilation-config JSON ``cfg``
    (the checks mirrored here, in the release's order), or None."""
    mode = cfg.get("mode")
    if release != "0.11.0" and mode is not None:   # the field's own validation comes before __post_init__
        # validate_mode_before: a name is looked up upper-cased; otherwise pydantic reads the CompilationMode enum
        if isinstance(mode, str) and mode.upper() not in _COMPILATION_MODES:
            return f"Invalid compilation mode: {mode}. Valid modes are: {', '.join(_COMPILATION_MODES)}"
        if isinstance(mode, int) and not isinstance(mode, bool) and not 0 <= mode <= 3:
            return "Input should be 0, 1, 2 or 3"
    ops = cfg.get("custom_ops") or []
    if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
        return None
    for op in ops:
        bad = (op[:1] not in ("+", "-")) if release == "0.11.0" else (len(op) < 2 or op[0] not in ("+", "-"))
        if op and op not in ("all", "none") and bad:
            return (f"Invalid syntax '{op}' for custom op, must be 'all', 'none', '+op' or '-op' (where 'op' is the "
                    f"registered op name)")
    if release == "0.11.0":
        return None
    if len([o for o in ops if o in ("all", "none")]) > 1:
        return "custom_ops can contain only one base mode: 'all' or 'none'"
    both = sorted({o[1:] for o in ops if o.startswith("+")} & {o[1:] for o in ops if o.startswith("-")})
    if both:
        return (f"custom_ops cannot both enable and disable the same operation(s): {', '.join(both)}. Remove either "
                f"the '+' or '-' directive")
    mode = cfg.get("mode")
    if isinstance(mode, str):
        mode = {"NONE": 0, "STOCK_TORCH_COMPILE": 1, "DYNAMO_TRACE_ONCE": 2, "VLLM_COMPILE": 3}.get(mode.upper())
    backend = cfg.get("backend", "")
    if mode == _VLLM_COMPILE and isinstance(backend, str) and backend not in ("", "eager", "inductor"):
        return f"Invalid backend for piecewise compilation: {backend}"
    if release in ("0.33.0", "0.34.0"):
        sizes = _ints(cfg.get("decoder_replay_cudagraph_capture_sizes") or [])
        if sizes and any(n <= 0 for n in sizes):
            return "All decoder_replay_cudagraph_capture_sizes must be positive"
    if cfg.get("cudagraph_mm_encoder") is True:
        items = cfg.get("encoder_cudagraph_max_vision_items_per_batch", 0)
        if isinstance(items, int) and items < 0:
            return "encoder_cudagraph_max_vision_items_per_batch must be non-negative (0 = auto-infer)"
        frames = cfg.get("encoder_cudagraph_max_frames_per_batch")
        if isinstance(frames, int) and frames < 0:
            return "encoder_cudagraph_max_frames_per_batch must be non-negative (None = auto-infer)"
    if release == "0.34.0":
        cap = cfg.get("encoder_cudagraph_max_token_budget")
        if isinstance(cap, int) and not isinstance(cap, bool) and cap <= 0:
            return f"encoder_cudagraph_max_token_budget must be positive (None = no limit), got {cap}"
    budgets = _ints(cfg.get("encoder_cudagraph_token_budgets") or [])
    if budgets and any(b <= 0 for b in budgets):
        return f"All encoder_cudagraph_token_budgets must be positive, got {budgets}"
    return None


@rule("vllm-compilation-config-invalid", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--compilation-config is refused by CompilationConfig's checks",
      why="The parser builds --compilation-config with CompilationConfig's own checks: custom_ops entries are "
          "'all', 'none', '+op' or '-op' (one base mode, no op both on and off), piecewise compilation (mode 3, "
          "VLLM_COMPILE) runs on the eager or inductor backend only, mode is 0-3 or one of their names, and the "
          "CUDA-graph size lists hold positive "
          "numbers. vllm serve refuses the line before anything is loaded.",
      fix="Correct the named key of --compilation-config (the message says which).",
      source=_COMPILATION_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _COMPILATION_SOURCES.items()},
      no_cel=_JSON_KEYS)
def check_vllm_compilation_config(r, c):
    cfg = _json_option(r, "compilation_config")
    problem = compilation_refusal(cfg, r.version.key) if cfg is not None else None
    if problem:
        yield None, problem


# ParallelConfig._validate_numa_bind_cpus (a pydantic field validator, run when create_engine_config builds
# ParallelConfig): each --numa-bind-cpus entry is a numactl --physcpubind CPU list, N or N-M joined by commas, with
# ascending ranges; the releases' pattern (vllm's `regex`, str mode: \d is any Unicode decimal digit, as in `re`)
_NUMA_CPUS_SOURCES = {
    "0.28.0": "vllm config/parallel.py:34,425-449@0.28.0",
    "0.29.0": "vllm config/parallel.py:34,446-470@0.29.0",
    "0.33.0": "vllm config/parallel.py:35,495-519@0.33.0",
    "0.34.0": "vllm config/parallel.py:35,533-557@0.34.0",
}
_NUMACTL_CPUSET = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")


def numa_bind_cpus_refusal(value: list[str]) -> str | None:
    """The message ParallelConfig._validate_numa_bind_cpus raises for the --numa-bind-cpus list ``value``, or None."""
    if not value:
        return "numa_bind_cpus must not be empty."
    for cpuset in value:
        if not cpuset:
            return "numa_bind_cpus entries must not be empty."
        if not _NUMACTL_CPUSET.fullmatch(cpuset):
            return "numa_bind_cpus entries must use numactl CPU list syntax, for example '0-3' or '0,2,4-7'."
        for part in cpuset.split(","):
            if "-" in part:
                start, end = part.split("-", 1)
                if int(start) > int(end):
                    return f"numa_bind_cpus ranges must be ascending, but got '{cpuset}'."
    return None


@rule("vllm-numa-bind-cpus-syntax", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--numa-bind-cpus entries must be numactl CPU lists",
      why="Each --numa-bind-cpus entry is handed to numactl --physcpubind; ParallelConfig refuses an entry that is "
          "not a CPU list (N or N-M, joined by commas) or that holds a descending range.",
      fix="Give each --numa-bind-cpus entry as a numactl CPU list, e.g. '0-3' or '0,2,4-7' (ranges low-high).",
      source=_NUMA_CPUS_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _NUMA_CPUS_SOURCES.items()},
      no_cel="the syntax of each entry of a pass-through list flag of spec.extraArgs (argv tokenising); left to "
             "validate")
def check_vllm_numa_bind_cpus_syntax(r, c):
    v = line_view(r)
    value = v.value("numa_bind_cpus") if v is not None else None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        return
    problem = numa_bind_cpus_refusal(value)
    if problem:
        found = extra_arg(r, "--numa-bind-cpus")
        yield (f"spec.extraArgs[{found[0]}]" if found else None), problem


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-rope-scaling-needs-type", "vllm-rope-scaling-type-conflict", "vllm-pcp-dcp-span",
            "vllm-profiler-config-invalid", "vllm-quantization-unknown", "vllm-quantization-mismatch",
            "vllm-spec-mtp-on-deepseek-v41", "vllm-spec-ngram-lookup-range", "vllm-compilation-config-invalid",
            "vllm-numa-bind-cpus-syntax"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
