"""SGLang refusals that depend on a value the release resolves (helper smiss6, issue 31), beyond what the engine-check
table (gpustack_k3/catalog/data/checks/sglang.yaml) can express: the attention backend and page size SGLang picks for
Kimi-K3 on SM100/SM103 against a speculative draft tree (--speculative-eagle-topk above 1).

Each rule reads the values the release's own parser gives the command line (checks.line_view), lists the releases
whose code it follows with each release's own source, and is verified against the release by
tests/engine_oracle/test_sglang_python_rules_oracle.py (unit lines: tests/core/test_smiss6_rules.py)."""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.rules.sglang_checks_smiss5 import _backend_given, _int, kimi_k3_page_size

# ------------------------------------------------------------------ Kimi-K3: an EAGLE draft tree on the MLA kernels

# _handle_eagle_family (EAGLE, EAGLE3; NEXTN is EAGLE) refuses --speculative-eagle-topk above 1 with a page size
# above 1 unless the resolved attention backend is flashinfer, fa3 or triton. Kimi-K3 on SM100/SM103 with no attention
# backend on the line and no DCP: its override sets the prefill and decode backends to trtllm_mla
# (model_overrides/kimi_k3.py), _attention_backend_default makes the attention backend the same (both equal), and
# _mla_backend_page_constraints keeps a --page-size of 32 or 64 and makes any other 64 (overrides.py): always above 1
_EAGLE_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/speculative_hook.py:1268-1282,1309-1313,1355-1366@0.5.23, "
              "sglang/srt/arg_groups/model_overrides/kimi_k3.py:51-54,122-135@0.5.23, "
              "sglang/srt/arg_groups/overrides.py:1126-1131,1143-1163,1198-1200@0.5.23, "
              "sglang/srt/speculative/spec_info.py:262-264@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/speculative_hook.py:1178-1192,1219-1223,1265-1276@0.5.22, "
              "sglang/srt/arg_groups/model_overrides/kimi_k3.py:51-54,137-150@0.5.22, "
              "sglang/srt/arg_groups/overrides.py:1067-1072,1084-1104,1148-1150@0.5.22",
}
# NGRAM (_handle_ngram) sets the top-k to --speculative-ngram-max-bfs-breadth (default 10) and refuses a top-k above 1
# with a page size above 1 unless the attention backend is flashinfer
EAGLE_TREE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
PAGE_TREE_SPEC_BACKENDS = ("flashinfer", "fa3", "triton")   # speculative_hook.py:1271@0.5.23, :1181@0.5.22
NGRAM_TREE_BACKENDS = ("flashinfer",)                        # speculative_hook.py:1359@0.5.23, :1269@0.5.22


def kimi_k3_eagle_tree_page(r, v) -> int | None:
    """The page size the release resolves for a Kimi-K3 line whose attention backend it resolves to trtllm_mla (a
    backend outside PAGE_TREE_SPEC_BACKENDS): SM100/SM103, no backend on the line, no DCP, the CUDA device (None:
    another model, GPU or line, left to the release)."""
    if (_int(v.value("dcp_size")) or 1) > 1:
        return None   # DCP: cutedsl_mla decode beside trtllm_mla prefill, another default-backend path
    device = v.value("device")
    if device is not None and (not isinstance(device, str) or device.split(":")[0] != "cuda"):
        return None
    if _backend_given(v) or v.value("speculative_draft_attention_backend") is not None:
        return None
    return kimi_k3_page_size(r, v)


@rule("sglang-kimi-k3-eagle-topk-page-size", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="Kimi-K3 on SM100/SM103: an EAGLE or NGRAM draft tree (top-k above 1) on the TRT-LLM MLA backend",
      why="SGLang runs an EAGLE draft tree (top-k above 1) with a page size above 1 only on the flashinfer, fa3 and "
          "triton attention backends (two-pass cascade draft decode), an NGRAM tree (its BFS breadth, 10 unless "
          "given) only on flashinfer. For Kimi-K3 on SM100/SM103 with no attention "
          "backend given, SGLang picks trtllm_mla, whose page size is 32 or 64: the line is refused at start-up.",
      fix="Give --speculative-eagle-topk 1 (NGRAM: --speculative-ngram-max-bfs-breadth 1), a linear draft chain, or "
          "an attention backend that serves a draft tree (--attention-backend flashinfer; for EAGLE also fa3 or triton).",
      source=_EAGLE_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _EAGLE_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_kimi_k3_eagle_topk_page_size(r, c):
    v = line_view(r)
    if v is None or v.arch is None:
        return
    algo = v.value("speculative_algorithm")
    algo = algo.strip().upper() if isinstance(algo, str) else None
    if algo == "NGRAM":
        topk, given, allowed = (_int(v.value("speculative_ngram_max_bfs_breadth")),
                                "--speculative-ngram-max-bfs-breadth", NGRAM_TREE_BACKENDS)
    elif algo in EAGLE_TREE_ALGORITHMS and not v.value("speculative_adaptive"):
        topk, given, allowed = _int(v.value("speculative_eagle_topk")), "--speculative-eagle-topk", PAGE_TREE_SPEC_BACKENDS
    else:
        return
    if topk is None or topk <= 1:
        return
    page = kimi_k3_eagle_tree_page(r, v)
    if page is None or page <= 1:
        return
    yield "spec.extraArgs", (f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {allowed}: "
                             f"{given} {topk} ({algo}) with Kimi-K3 on {r.hardware.sm} and no attention backend "
                             f"given runs attention_backend 'trtllm_mla' at page size {page}.")


# ------------------------------------------------------------------ --prompt-tokens-buckets / --generation-tokens-buckets

# check_server_args validates both bucket rules with validate_buckets_rule (the same function at both releases): the
# port below follows it assertion by assertion, Python's own float()/int() included
_BUCKET_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/validation_hook.py:277-278,384-432@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/validation_hook.py:276-277,383-431@0.5.22",
}
BUCKET_OPTIONS = (("prompt_tokens_buckets", "--prompt-tokens-buckets"),
                  ("generation_tokens_buckets", "--generation-tokens-buckets"))


def buckets_rule_refusal(arg_name: str, rule_: list) -> str | None:
    """validation_hook.py validate_buckets_rule: the release's message for a bucket rule it refuses, None if it
    passes (an empty or unset rule passes)."""
    if not rule_:
        return None
    kind = rule_[0]
    if kind not in ("tse", "default", "custom"):
        return f"Unsupported {arg_name} rule type: '{kind}'. Must be one of: 'tse', 'default', 'custom'"
    if kind == "tse":
        if len(rule_) != 4:
            return (f"{arg_name} TSE rule requires exactly 4 parameters: ['tse', middle, base, count], got "
                    f"{len(rule_)}")
        try:
            middle, base, count = float(rule_[1]), float(rule_[2]), int(rule_[3])
        except (ValueError, IndexError):
            return f"{arg_name} TSE rule parameters must be: ['tse', <float:middle>, <float:base>, <int:count>]"
        if not base > 1:
            return f"{arg_name} TSE base must be larger than 1, got: {base}"
        if not count > 0:
            return f"{arg_name} TSE count must be positive, got: {count}"
        if not middle > 0:
            return f"{arg_name} TSE middle must be positive, got: {middle}"
    elif kind == "default":
        if len(rule_) != 1:
            return f"{arg_name} default rule should only have one parameter: ['default'], got {len(rule_)}"
    else:
        if len(rule_) < 2:
            return f"{arg_name} custom rule requires at least one bucket value: ['custom', value1, ...]"
        try:
            values = [float(x) for x in rule_[1:]]
        except ValueError:
            return f"{arg_name} custom rule bucket values must be numeric"
        if len(set(values)) != len(values):
            return f"{arg_name} custom rule bucket values should not contain duplicates"
        if not all(x >= 0 for x in values):
            return f"{arg_name} custom rule bucket values should be non-negative"
    return None


@rule("sglang-tokens-buckets-rule", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--prompt-tokens-buckets / --generation-tokens-buckets: a bucket rule SGLang does not accept",
      why="SGLang validates the metrics histogram bucket rules at start-up: 'default' alone, 'tse' with a middle "
          "above 0, a base above 1 and a positive integer count, or 'custom' with distinct non-negative numbers.",
      fix="Give 'default', 'tse MIDDLE BASE COUNT' (e.g. tse 1000 2 8) or 'custom V1 V2 ...' (distinct numbers >= 0), "
          "or drop the option.",
      source=_BUCKET_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _BUCKET_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_tokens_buckets_rule(r, c):
    v = line_view(r)
    if v is None:
        return
    for dest, flag in BUCKET_OPTIONS:
        value = v.value(dest) if v.given(dest) else None
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            continue
        msg = buckets_rule_refusal(flag, value)
        if msg is not None:
            yield "spec.extraArgs", msg + "."


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("sglang-kimi-k3-eagle-topk-page-size", "sglang-tokens-buckets-rule"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
