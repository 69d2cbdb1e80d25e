"""vLLM 0.34.0's new config-time refusals (docs/releases/vllm-0.33.0-to-0.34.0.md lists what changed from 0.33.0).

Each rule is switched on by a trait of the release's catalog entry (catalog/data/engines/vllm.yaml), so a later
release that keeps the behaviour only sets the trait; the facts a rule compares against (removed keys, the methods
that may draft in parallel, the refused environment variables) are catalog data, not code, read where the entry sets
``vllm_034_data: true``. Every source is a line of
the 0.34.0 wheel (file:line relative to its vllm/ package).
"""
from __future__ import annotations

import json
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.resolve import Resolved
from gpustack_k3.core.rules.args import extra_arg, extra_arg_switch
from gpustack_k3.core.rules.registry import rule

# the rules that compare against data of the release's entry (env_refused, speculative_removed_keys,
# speculative_config_fields, parallel_drafting_methods) apply where the entry says it carries that data
_DATA = {"vllm_034_data": (True,)}
_ENV_FREE_FORM = "reads spec.env, a free-form map of strings, against per-release data; left to validate"
_EXTRA_FREE_FORM = ("spec.speculative.extraConfig is free-form JSON (x-kubernetes-preserve-unknown-fields); the "
                    "per-release key lists are left to validate")


def _method(r: Resolved) -> str:
    """The speculative method as vLLM reads it (the catalog's spec -> engine method name)."""
    m = r.spec.speculative.method
    return r.engine.speculative["methods"].get(m, m)


def pydantic_bool(v: Any) -> bool | None:
    """A value as pydantic's lax bool reads it (None: pydantic refuses it)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("1", "on", "t", "true", "y", "yes"):
            return True
        if low in ("0", "off", "f", "false", "n", "no"):
            return False
    return None


def pydantic_int(v: Any) -> int | None:
    """A value as pydantic's lax int reads it (None: pydantic refuses it)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            return None
    return None


# ------------------------------------------------------------------ environment

@rule("vllm-model-runner-v1-removed", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"model_runner_v1_removed": (True,)}, field="spec.env.VLLM_USE_V2_MODEL_RUNNER",
      title="Model Runner V1 is removed: VLLM_USE_V2_MODEL_RUNNER other than 1 is refused",
      why="From 0.34.0 the V2 model runner is the only one. When the engine config is created, the platform's "
          "environment check compares the raw string of VLLM_USE_V2_MODEL_RUNNER with \"1\" and raises for anything "
          "else (\"0\", \"true\", \" 1\"); \"1\" itself only logs that it is redundant.",
      fix="Unset VLLM_USE_V2_MODEL_RUNNER (`gpustack-k3 upgrade-check` rewrites a 0.33.0 line that way).",
      source="vllm platforms/interface.py:1476-1491@0.34.0 (validate_environ), engine/arg_utils.py:2294@0.34.0",
      no_cel=_ENV_FREE_FORM)
def check_vllm_model_runner_v1_removed(r, c):
    raw = r.spec.env.get("VLLM_USE_V2_MODEL_RUNNER")
    if raw is not None and raw != "1":
        yield None, (f"VLLM_USE_V2_MODEL_RUNNER={raw!r} on vLLM {r.version.key}: Model Runner V1 has been removed and "
                     "the engine refuses any value but \"1\"")


@rule("vllm-model-runner-v2-env-redundant", checked_by="product", family="spec", severity="info",
      engines=[ENGINE_VLLM], when={"model_runner_v1_removed": (True,)}, field="spec.env.VLLM_USE_V2_MODEL_RUNNER",
      title="VLLM_USE_V2_MODEL_RUNNER=1 is redundant",
      why="With Model Runner V1 removed the variable chooses nothing; the engine logs a warning and goes on.",
      fix="Unset VLLM_USE_V2_MODEL_RUNNER.",
      source="vllm platforms/interface.py:1487-1491@0.34.0 (validate_environ)")
def check_vllm_model_runner_v2_env_redundant(r, c):
    if r.spec.env.get("VLLM_USE_V2_MODEL_RUNNER") == "1":
        yield None, f"VLLM_USE_V2_MODEL_RUNNER=1 is redundant on vLLM {r.version.key} (V2 is the only model runner)"


@rule("vllm-env-refused", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when=_DATA, field="spec.env",
      title="An environment variable this release removed and refuses",
      why="vLLM keeps a list of removed variables with a hint each (envs.removed_environment_variables); setting one "
          "raises when the engine config is created, unlike a merely unknown variable, which is only logged.",
      fix="Unset the variable and use the replacement the message names.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (env_refused per version); vllm envs.py:654-660@0.34.0, "
             "platforms/interface.py:1492-1493@0.34.0",
      no_cel=_ENV_FREE_FORM)
def check_vllm_env_refused(r, c):
    refused = r.trait("env_refused") or {}
    for k in r.spec.env:
        if k in refused:
            yield f"spec.env.{k}", f"{k} has been removed from vLLM {r.version.key}: {refused[k]}"



# ------------------------------------------------------------------ --speculative-config

@rule("vllm-speculative-removed-key", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when=_DATA, field="spec.speculative.extraConfig",
      title="A --speculative-config key this release removed",
      why="SpeculativeConfig is a pydantic dataclass that forbids extra fields: a key the release no longer has "
          "(0.34.0: disable_padded_drafter_batch, use_heterogeneous_vocab) fails the config at start-up.",
      fix="Drop the key (`gpustack-k3 upgrade-check` rewrites a 0.33.0 line that way).",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (speculative_removed_keys per version); vllm "
             "config/utils.py:72@0.34.0 (extra=\"forbid\"), config/speculative.py:448-449@0.34.0",
      no_cel=_EXTRA_FREE_FORM)
def check_vllm_speculative_removed_key(r, c):
    removed = r.trait("speculative_removed_keys") or {}
    if not r.spec_enabled:
        return
    for k in r.spec.speculative.extraConfig:
        if k in removed:
            yield (f"spec.speculative.extraConfig.{k}",
                   f"--speculative-config key {k!r} no longer exists in vLLM {r.version.key} (it was {removed[k]})")


@rule("vllm-speculative-unknown-key", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when=_DATA, field="spec.speculative.extraConfig",
      title="A --speculative-config key SpeculativeConfig does not have",
      why="vLLM builds SpeculativeConfig(**the JSON) ('-' in a key read as '_'); the class is a pydantic dataclass that "
          "forbids extra fields, so any key that is not one of its init fields fails the config at start-up.",
      fix="Drop the key or correct its spelling (the message lists the release's keys closest to it).",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (speculative_config_fields per version, read from "
             "config/speculative.py:449-1842@0.34.0); vllm engine/arg_utils.py:2159-2172@0.34.0, config/utils.py:72@0.34.0",
      no_cel=_EXTRA_FREE_FORM)
def check_vllm_speculative_unknown_key(r, c):
    import difflib

    fields = r.trait("speculative_config_fields")
    removed = r.trait("speculative_removed_keys") or {}
    if not fields or not r.spec_enabled:
        return
    for k in r.spec.speculative.extraConfig:
        key = str(k).replace("-", "_")
        if key not in fields and key not in removed:      # removed keys: rule vllm-speculative-removed-key
            close = difflib.get_close_matches(key, fields, n=3)
            hint = f" (closest: {', '.join(close)})" if close else ""
            yield (f"spec.speculative.extraConfig.{k}",
                   f"--speculative-config key {k!r} is not a field of vLLM {r.version.key}'s SpeculativeConfig{hint}")


@rule("vllm-parallel-drafting-method", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when=_DATA, field="spec.speculative.extraConfig.parallel_drafting",
      title="parallel_drafting only for the methods that draft in parallel",
      why="From 0.34.0 parallel_drafting is deprecated and has no effect; set true with any method but dflash and "
          "dspark it raises when the speculative config is verified.",
      fix="Drop parallel_drafting from the speculative config.",
      source="gpustack_k3/catalog/data/engines/vllm.yaml (parallel_drafting_methods); vllm "
             "config/speculative.py:559-561,1688-1693@0.34.0",
      no_cel=_EXTRA_FREE_FORM)
def check_vllm_parallel_drafting_method(r, c):
    allowed = r.trait("parallel_drafting_methods")
    if not allowed or not r.spec_enabled or "parallel_drafting" not in r.spec.speculative.extraConfig:
        return   # a release without the list (0.33.0 and older) has its own parallel_drafting checks
    v = r.spec.speculative.extraConfig["parallel_drafting"]
    if v is not None and pydantic_bool(v) is True and _method(r) not in allowed:
        yield None, (f"parallel_drafting={json.dumps(v)} with speculative method {_method(r)} on vLLM {r.version.key}: "
                     f"only {', '.join(allowed)} accept it")


@rule("vllm-parallel-drafting-deprecated", checked_by="product", family="spec", severity="info", engines=[ENGINE_VLLM],
      when=_DATA, field="spec.speculative.extraConfig.parallel_drafting",
      title="parallel_drafting is deprecated and has no effect",
      why="DFlash and DSpark always draft in parallel from 0.34.0 and no other method supports it; the engine warns "
          "when the key is set.",
      fix="Drop parallel_drafting from the speculative config.",
      source="vllm config/speculative.py:1688-1698@0.34.0")
def check_vllm_parallel_drafting_deprecated(r, c):
    allowed = r.trait("parallel_drafting_methods")
    v = r.spec.speculative.extraConfig.get("parallel_drafting") if r.spec_enabled and allowed else None
    if v is not None and not (pydantic_bool(v) is True and _method(r) not in allowed):
        yield None, f"parallel_drafting is deprecated and has no effect on vLLM {r.version.key}"


# methods whose draft is a model (DraftModelSpeculatorConfig): they resolve the draft's DCP
_DRAFT_MODEL_METHODS = ("dspark", "mtp", "eagle3")


@rule("vllm-draft-dcp-value", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"draft_dcp": (True,)}, field="spec.speculative.extraConfig.draft_decode_context_parallel_size",
      title="The draft's decode context parallel size is 1 or the target's",
      why="draft_decode_context_parallel_size is an integer >= 1; a draft model (DSpark, MTP, EAGLE-3) takes 1 or "
          "the target's decode_context_parallel_size, and any other value raises when the draft is configured.",
      fix="Set draft_decode_context_parallel_size to 1 (a replicated draft KV cache) or to spec.parallel.dcp, or drop "
          "it (the engine then picks: 1 for a DSpark/DFlash draft unless it is full-attention MLA, else the target's).",
      source="vllm config/speculative.py:484-488,1554-1565@0.34.0; "
             "v1/worker/gpu/spec_decode/speculator_config.py:232-239@0.34.0",
      no_cel=_EXTRA_FREE_FORM)
def check_vllm_draft_dcp_value(r, c):
    extra = r.spec.speculative.extraConfig
    if not r.spec_enabled or extra.get("draft_decode_context_parallel_size") is None:
        return
    raw = extra["draft_decode_context_parallel_size"]
    v = pydantic_int(raw)
    if v is None or v < 1:
        yield None, (f"draft_decode_context_parallel_size={json.dumps(raw)} on vLLM {r.version.key}: an integer of "
                     "at least 1")
    elif _method(r) in _DRAFT_MODEL_METHODS and v not in (1, r.dcp):
        yield None, (f"draft_decode_context_parallel_size={v} on vLLM {r.version.key}: must be 1 or the target's "
                     f"decode_context_parallel_size {r.dcp}")


@rule("vllm-draft-dcp-default", checked_by="product", family="spec", severity="info", engines=[ENGINE_VLLM],
      when={"draft_dcp": (True,)}, field="spec.speculative.extraConfig.draft_decode_context_parallel_size",
      title="A DSpark draft under DCP runs with its own DCP default",
      why="From 0.34.0 a DFlash/DSpark draft whose draft_decode_context_parallel_size is unset runs with DCP 1 (its "
          "KV cache replicated on every DCP rank, not sharded with the target's) unless the draft is full-attention "
          "MLA without sliding-window layers, which keeps the target's DCP; 0.33.0 always used the target's. Over "
          "NIXL a DCP-replicated MLA draft cache pulls only from a DCP prefill into a non-DCP decode.",
      fix="Set draft_decode_context_parallel_size in spec.speculative.extraConfig (1 or spec.parallel.dcp) to choose.",
      source="vllm v1/worker/gpu/spec_decode/dflash/config.py:33-47@0.34.0, "
             "v1/worker/gpu/spec_decode/speculator_config.py:232-239@0.34.0, "
             "distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:2771@0.34.0")
def check_vllm_draft_dcp_default(r, c):
    if (r.spec_enabled and _method(r) == "dspark" and r.dcp > 1
            and r.spec.speculative.extraConfig.get("draft_decode_context_parallel_size") is None):
        yield None, (f"DSpark draft with DCP {r.dcp} on vLLM {r.version.key}: the draft's DCP is 1 unless it is "
                     f"full-attention MLA (then {r.dcp}); set draft_decode_context_parallel_size to choose")


# ------------------------------------------------------------------ CUDA-graph capture sizes

_LEGACY = ("cudagraph_capture_sizes", "max_cudagraph_capture_size")
_SPLIT = ("prefill_cudagraph_capture_token_sizes", "max_prefill_cudagraph_capture_tokens",
          "decode_cudagraph_capture_request_sizes", "max_decode_cudagraph_capture_requests")


def compilation_config(r: Resolved) -> tuple[int | None, dict[str, Any]]:
    """(the --compilation-config / -cc argument's index in spec.extraArgs, its JSON object); (None, {}) when absent
    or not a JSON object (rule argv-refused reports a value the parser refuses)."""
    found = extra_arg(r, "--compilation-config", "-cc")
    if not found or found[1] is None:
        return None, {}
    try:
        v = json.loads(found[1])
    except ValueError:
        return None, {}
    return (found[0], v) if isinstance(v, dict) else (None, {})


def _graphs_captured(r: Resolved, cc: dict[str, Any]) -> bool:
    """Whether the engine resolves capture sizes at all: not with enforce-eager or cudagraph_mode NONE
    (config/vllm.py:2371-2375@0.34.0)."""
    if r.spec.vllm.enforceEager:
        return False
    mode = cc.get("cudagraph_mode")
    return not (isinstance(mode, str) and mode.upper() == "NONE" or mode == 0)


def _set(cc: dict[str, Any], k: str) -> bool:
    return cc.get(k) is not None


def _ints(v: Any) -> list[int] | None:
    if not isinstance(v, list):
        return None
    out = [pydantic_int(x) for x in v]
    return None if any(x is None for x in out) else out  # type: ignore[return-value]


def _decode_tokens(sizes: list[int], max_reqs: int, max_tokens: int) -> set[int]:
    """Token counts of the one-token-per-request decode graphs for request counts ``sizes``
    (config/compilation.py:54-68@0.34.0 decode_cudagraph_capture_shapes with query length 1)."""
    sizes = sorted(set(sizes))
    limit = min(max_reqs, max_tokens)
    if limit < 1:
        return set()
    reachable = [n for n in sizes if n < limit] + [n for n in sizes if n >= limit][:1]
    return {min(n, limit) for n in reachable}


def mixed_sizes_refused(r: Resolved, cc: dict[str, Any]) -> bool | None:
    """Whether 0.34.0 refuses deprecated and split capture sizes set together: True/False where this can be computed
    as _split_cudagraph_capture_sizes does (config/vllm.py:2558-2725@0.34.0) -- no speculative decoding (query length
    1, no draft graphs), an explicit cudagraph_capture_sizes, and each split family given by an explicit list or not at
    all --; None otherwise (grids of the caps, speculative query lengths: not computed here)."""
    tokens, seqs = r.value("scheduling.maxNumBatchedTokens"), r.value("scheduling.maxNumSeqs")
    shared = _ints(cc.get("cudagraph_capture_sizes"))
    if r.spec_enabled or tokens is None or seqs is None or shared is None or not shared:
        return None
    if cc.get("max_prefill_cudagraph_capture_tokens") is not None and cc.get("prefill_cudagraph_capture_token_sizes") is None:
        return None
    if cc.get("max_decode_cudagraph_capture_requests") is not None and cc.get("decode_cudagraph_capture_request_sizes") is None:
        return None
    n_tok, n_seq = int(tokens), int(seqs)
    s = sorted({x for x in shared if x <= n_tok})                                  # config/vllm.py:2459-2470@0.34.0
    given_max = pydantic_int(cc.get("max_cudagraph_capture_size")) if cc.get("max_cudagraph_capture_size") is not None else None
    if not s or (given_max is not None and given_max != s[-1]):
        return None                                                                 # another refusal (:2508-2517)
    pre, dec = _ints(cc.get("prefill_cudagraph_capture_token_sizes")), _ints(cc.get("decode_cudagraph_capture_request_sizes"))
    if (cc.get("prefill_cudagraph_capture_token_sizes") is not None and pre is None) or \
            (cc.get("decode_cudagraph_capture_request_sizes") is not None and dec is None):
        return None
    prefill = sorted({x for x in pre if 1 <= x <= n_tok}) if pre is not None else s           # :2627-2644
    decode = sorted({x for x in dec if 1 <= x <= n_seq}) if dec is not None else sorted({min(x, n_seq) for x in s})
    cap = pydantic_int(cc.get("max_decode_cudagraph_capture_tokens")) if cc.get("max_decode_cudagraph_capture_tokens") else None
    dec_tokens = _decode_tokens(decode, n_seq, min(n_tok, cap or n_tok))                       # :2676-2688
    return s not in (sorted(dec_tokens | set(prefill)), sorted(dec_tokens))                      # :2712-2724


def _mixed(r: Resolved) -> tuple[int | None, dict[str, Any], list[str], list[str]]:
    i, cc = compilation_config(r)
    if i is None or not _graphs_captured(r, cc):
        return None, {}, [], []
    return i, cc, [k for k in _LEGACY if _set(cc, k)], [k for k in _SPLIT if _set(cc, k)]


@rule("vllm-cudagraph-sizes-mixed", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"cudagraph_split_sizes": (True,)}, field="spec.extraArgs",
      title="Deprecated CUDA-graph capture sizes combined with prefill/decode ones that resolve differently",
      why="0.34.0 splits CUDA-graph capture sizes into prefill token sizes and decode request counts "
          "(prefill_cudagraph_capture_token_sizes / max_prefill_cudagraph_capture_tokens, "
          "decode_cudagraph_capture_request_sizes / max_decode_cudagraph_capture_requests) and deprecates "
          "cudagraph_capture_sizes / max_cudagraph_capture_size. Set together, the engine raises unless the "
          "deprecated sizes equal every graph size the new fields resolve to; this rule computes that where it can "
          "(no speculative decoding, explicit size lists) and refuses only a certain mismatch.",
      fix="Keep only the prefill/decode fields in --compilation-config (decode sizes count requests, not tokens), or "
          "only the deprecated ones.",
      source="vllm config/vllm.py:2377-2382,2459-2470,2574-2586,2612-2688,2712-2724@0.34.0 "
             "(_split_cudagraph_capture_sizes), config/compilation.py:54-68@0.34.0",
      no_cel="reads the --compilation-config JSON inside spec.extraArgs (argv tokens, not a typed field)")
def check_vllm_cudagraph_sizes_mixed(r, c):
    i, cc, legacy, split = _mixed(r)
    if legacy and split and mixed_sizes_refused(r, cc) is True:
        yield f"spec.extraArgs[{i}]", (f"--compilation-config sets {', '.join(legacy)} with {', '.join(split)} on vLLM "
                                       f"{r.version.key}, and the deprecated sizes differ from the sizes the new "
                                       "fields resolve to: the engine refuses the combination")


@rule("vllm-cudagraph-sizes-mixed-undecided", checked_by="product", family="spec", severity="warning",
      engines=[ENGINE_VLLM], when={"cudagraph_split_sizes": (True,)}, field="spec.extraArgs",
      title="Deprecated and prefill/decode CUDA-graph capture sizes together: refused unless they agree",
      why="The engine refuses the combination unless the deprecated sizes equal every graph size the new fields "
          "resolve to (speculative query lengths, draft graphs and the caps' size grids included), which this rule "
          "does not compute for this line.",
      fix="Keep only the prefill/decode fields in --compilation-config, or only the deprecated ones.",
      source="vllm config/vllm.py:2712-2724@0.34.0 (_split_cudagraph_capture_sizes)")
def check_vllm_cudagraph_sizes_mixed_undecided(r, c):
    i, cc, legacy, split = _mixed(r)
    if legacy and split and mixed_sizes_refused(r, cc) is None:
        yield f"spec.extraArgs[{i}]", (f"--compilation-config sets {', '.join(legacy)} with {', '.join(split)} on vLLM "
                                       f"{r.version.key}: the engine refuses this unless they resolve to the same "
                                       "sizes")


@rule("vllm-cudagraph-size-above-cap", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_VLLM],
      when={"cudagraph_split_sizes": (True,)}, field="spec.extraArgs",
      title="A prefill/decode CUDA-graph size above its own cap",
      why="Explicit prefill_cudagraph_capture_token_sizes (kept within [1, max_num_batched_tokens]) may not exceed "
          "max_prefill_cudagraph_capture_tokens, nor decode_cudagraph_capture_request_sizes (kept within "
          "[1, max_num_seqs]) max_decode_cudagraph_capture_requests: the engine raises naming both.",
      fix="Raise the cap to the largest size, or drop the sizes above it.",
      source="vllm config/vllm.py:2612-2625,2627-2634,2646-2653@0.34.0 (_split_cudagraph_capture_sizes.explicit)",
      no_cel="reads the --compilation-config JSON inside spec.extraArgs (argv tokens, not a typed field)")
def check_vllm_cudagraph_size_above_cap(r, c):
    i, cc = compilation_config(r)
    if i is None or not _graphs_captured(r, cc):
        return
    limits = {"prefill": r.value("scheduling.maxNumBatchedTokens"), "decode": r.value("scheduling.maxNumSeqs")}
    for kind, sizes_key, cap_key in (("prefill", "prefill_cudagraph_capture_token_sizes",
                                      "max_prefill_cudagraph_capture_tokens"),
                                     ("decode", "decode_cudagraph_capture_request_sizes",
                                      "max_decode_cudagraph_capture_requests")):
        sizes, cap = cc.get(sizes_key), pydantic_int(cc.get(cap_key)) if cc.get(cap_key) is not None else None
        if not isinstance(sizes, list) or cap is None:
            continue
        limit = limits[kind]
        kept = sorted({s for s in (pydantic_int(x) for x in sizes)
                       if s is not None and s >= 1 and (limit is None or s <= int(limit))})
        if kept and kept[-1] > cap:
            yield f"spec.extraArgs[{i}]", (f"{sizes_key} holds {kept[-1]}, above {cap_key}={cap} on vLLM "
                                           f"{r.version.key}")


# ------------------------------------------------------------------ other new refusals of 0.34.0

@rule("vllm-checkpoint-prepare-needs-sleep-mode", checked_by="oracle", family="spec", severity="error",
      engines=[ENGINE_VLLM], when={"checkpoint_prepare_on_startup": (True,)}, field="spec.extraArgs",
      title="--checkpoint-prepare-on-startup needs --enable-sleep-mode",
      why="0.34.0's new --checkpoint-prepare-on-startup prepares a checkpoint for sleep mode; the model config raises "
          "when it is on and sleep mode is not.",
      fix="Add --enable-sleep-mode, or drop --checkpoint-prepare-on-startup.",
      source="vllm config/model.py:681-682@0.34.0; engine/arg_utils.py:1054,1076@0.34.0",
      no_cel="reads switches inside spec.extraArgs (argv tokens, not a typed field)")
def check_vllm_checkpoint_prepare_needs_sleep_mode(r, c):
    if extra_arg_switch(r, "--checkpoint-prepare-on-startup") and not extra_arg_switch(r, "--enable-sleep-mode"):
        found = extra_arg(r, "--checkpoint-prepare-on-startup")
        yield f"spec.extraArgs[{found[0]}]", (f"--checkpoint-prepare-on-startup without --enable-sleep-mode on vLLM "
                                              f"{r.version.key}")
