"""The rule of gpustack_k3/core/rules/vllm_checks_v2r10.py: with VLLM_USE_V2_MODEL_RUNNER=1 each modelled feature of
a release's Model Runner V2 list is refused, with the release's words; the same line with the variable unset or 0 is
left alone. tests/engine_oracle/test_v2r10_oracle.py has each release judge the same lines."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_v2r10 import ITEMS, RID
from tests.core.test_vllm_checks import product, refused_by_and_not_on_the_flip
from tests.engine_oracle.test_checks_vllm import finding_message

V2R10_DIRECT = {RID}   # wired in tests/core/test_registry.py and tests/core/test_rules.py

SMOL = ["/models/smollm2-hf"]
ON = {"VLLM_USE_V2_MODEL_RUNNER": "1"}
KIMI = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]

# the feature's line (after the model) per feature name of vllm_checks_v2r10.ITEMS
LINES = {
    "stock torch.compile": ["-cc", '{"mode": 1}'],
    "pipeline parallelism with external_launcher": ["--distributed-executor-backend", "external_launcher",
                                                    "-pp", "2"],
    # V1 asserts a DeepEP all2all backend for micro-batching (config/vllm.py, "Microbatching currently only ...")
    "dual batch overlap": ["--enable-dbo", "--all2all-backend", "deepep_low_latency"],
    "custom logits processors": ["--logits-processors", "synth.mod:Proc"],
    "prompt embeds": ["--enable-prompt-embeds"],
    "KV sharing fast prefill": ["--kv-sharing-fast-prefill"],
}

# (rule id, release, refused line, its env, the line with V2 unset or 0, its env, model, the feature names)
CASES = [
    (RID, rel, SMOL + LINES[name], ON, SMOL + LINES[name], ({} if i % 2 else {"VLLM_USE_V2_MODEL_RUNNER": "0"}),
     "smollm2-135m", [name])
    for rel, items in ITEMS.items() for i, (name, _, _) in enumerate(items)
] + [
    # two features: the release lists both, in its order
    (RID, rel, SMOL + LINES["KV sharing fast prefill"] + LINES["dual batch overlap"], ON,
     SMOL + LINES["KV sharing fast prefill"] + LINES["dual batch overlap"], {}, None,
     ["dual batch overlap", "KV sharing fast prefill"])
    for rel in ("0.28.0", "0.29.0")
] + [
    # Kimi-K3 with breakable CUDA graphs turned off: the mode stays STOCK_TORCH_COMPILE
    (RID, rel, KIMI + LINES["stock torch.compile"], {**ON, "VLLM_USE_BREAKABLE_CUDAGRAPH": "0"},
     KIMI + LINES["stock torch.compile"], {"VLLM_USE_BREAKABLE_CUDAGRAPH": "0"}, "kimi-k3", ["stock torch.compile"])
    for rel in ("0.28.0", "0.29.0")
]
IDS = [f"{c[1]}-{'+'.join(c[7])}-{i}" for i, c in enumerate(CASES)]

# lines the rule must leave (release, line, env, model): a feature off a release's list, or nothing on it
NOT_REFUSED = [
    ("0.29.0", SMOL + LINES["prompt embeds"], ON, "smollm2-135m"),
    ("0.33.0", SMOL + LINES["KV sharing fast prefill"], ON, "smollm2-135m"),
    ("0.33.0", SMOL + LINES["custom logits processors"], ON, "smollm2-135m"),
    ("0.33.0", SMOL + LINES["stock torch.compile"], ON, "smollm2-135m"),
    ("0.28.0", SMOL, ON, "smollm2-135m"),
    # --enforce-eager / TORCH_COMPILE_DISABLE=1 / breakable CUDA graphs set the compilation mode to NONE first
    ("0.28.0", SMOL + LINES["stock torch.compile"] + ["--enforce-eager"], ON, "smollm2-135m"),
    ("0.29.0", SMOL + LINES["stock torch.compile"], {**ON, "TORCH_COMPILE_DISABLE": "1"}, "smollm2-135m"),
    ("0.29.0", SMOL + LINES["stock torch.compile"], {**ON, "VLLM_USE_BREAKABLE_CUDAGRAPH": "1"}, "smollm2-135m"),
    ("0.29.0", SMOL + ["--distributed-executor-backend", "external_launcher"], ON, "smollm2-135m"),
    # Kimi-K3 is on both releases' breakable-CUDA-graph list: the mode is NONE before the list is taken
    ("0.28.0", KIMI + LINES["stock torch.compile"], ON, "kimi-k3"),
    ("0.29.0", KIMI + LINES["stock torch.compile"], ON, "kimi-k3"),
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model,names", CASES, ids=IDS)
def test_the_rule_fires_on_its_line_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model, names):
    refused_by_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model)
    said = finding_message(product(release, bad, bad_env, model), rid).split(" (")[0]
    assert said == f"Model Runner V2 does not yet support: {', '.join(names)}"


@pytest.mark.parametrize("release,line,env,model", NOT_REFUSED)
def test_the_rule_leaves_these_lines(release, line, env, model):
    assert RID not in product(release, line, env, model)["rules"]


def test_every_item_has_a_line_and_the_rule_is_on_its_releases_only():
    assert {n for items in ITEMS.values() for n, _, _ in items} == set(LINES)
    rule = RULES[RID]
    for rel in ITEMS:
        assert f"@{rel}" in rule.source_for("vllm", rel)
    assert "vllm 0.34.0" not in rule.sources and "vllm 0.11.0" not in rule.sources
    assert RID not in product("0.34.0", SMOL + LINES["dual batch overlap"], ON)["rules"]
    # the ngram item stays with rule vllm-v2-runner-spec-method (gpustack_k3/core/rules/spec.py)
    assert all("ngram" not in n for items in ITEMS.values() for n, _, _ in items)
