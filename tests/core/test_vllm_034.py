"""vLLM 0.34.0 pinned: `check-args --engine-version 0.34.0` refuses what 0.34.0 newly refuses (the rules of
gpustack_k3/core/rules/vllm_034.py, each switched on by a trait of its catalog entry) and accepts what it accepts,
including the presets' rendered lines; the same lines on 0.33.0 do not meet those rules."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.main import cli

# the rules of this module's cases (tests/core/test_registry.py: every rule has a firing case)
V034_DIRECT = {"vllm-model-runner-v1-removed", "vllm-model-runner-v2-env-redundant", "vllm-env-refused",
               "vllm-speculative-removed-key", "vllm-parallel-drafting-method", "vllm-parallel-drafting-deprecated",
               "vllm-draft-dcp-value", "vllm-draft-dcp-default", "vllm-cudagraph-sizes-mixed",
               "vllm-cudagraph-size-above-cap", "vllm-cudagraph-sizes-mixed-undecided", "vllm-speculative-unknown-key",
               "vllm-checkpoint-prepare-needs-sleep-mode"}

LINE = ["vllm", "serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code"]
DCP8 = ["--decode-context-parallel-size", "8"]
DRAFT = "/models/Kimi-K3-DSpark"


def spec(**kw) -> list[str]:
    return ["--speculative-config", json.dumps(kw)]


def cc(**kw) -> list[str]:
    return ["--compilation-config", json.dumps(kw)]


def check_args(version: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[int, list[dict]]:
    envs = [a for k, v in (env or {}).items() for a in ("--env", f"{k}={v}")]
    res = CliRunner().invoke(cli, ["check-args", "--engine", "vllm", "--engine-version", version, "-o", "json",
                                   *envs, "--", *argv], catch_exceptions=False)
    doc = json.loads(res.stdout)
    return res.exit_code, doc["findings"]


def rules(findings: list[dict], severity: str = "error") -> set[str]:
    return {f["rule"] for f in findings if f["severity"] == severity}


REFUSED = [
    ("vllm-model-runner-v1-removed", LINE, {"VLLM_USE_V2_MODEL_RUNNER": "0"}),
    ("vllm-model-runner-v1-removed", LINE, {"VLLM_USE_V2_MODEL_RUNNER": "true"}),   # the raw string, not int()
    ("vllm-model-runner-v1-removed", LINE, {"VLLM_USE_V2_MODEL_RUNNER": " 1"}),
    ("vllm-env-refused", LINE, {"VLLM_MARLIN_INPUT_DTYPE": "int8"}),
    ("vllm-speculative-removed-key", LINE + spec(method="mtp", num_speculative_tokens=1,
                                                 disable_padded_drafter_batch=True), {}),
    ("vllm-speculative-removed-key", LINE + spec(method="mtp", num_speculative_tokens=1,
                                                 use_heterogeneous_vocab=False), {}),
    ("vllm-parallel-drafting-method", LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4,
                                                  parallel_drafting=True), {}),
    # SpeculativeConfig forbids extra fields (found by the 0.34.0 differential's directed lines)
    ("vllm-speculative-unknown-key", LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4,
                                                 bogus=1), {}),
    ("vllm-speculative-unknown-key", LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4,
                                                 speculative_max_model_len=0), {}),
    ("vllm-checkpoint-prepare-needs-sleep-mode", LINE + ["--checkpoint-prepare-on-startup"], {}),
    ("vllm-parallel-drafting-method", LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4,
                                                  parallel_drafting="yes"), {}),
    ("vllm-draft-dcp-value", LINE + DCP8 + spec(method="dspark", model=DRAFT, num_speculative_tokens=3,
                                                draft_decode_context_parallel_size=2), {}),
    ("vllm-draft-dcp-value", LINE + ["-dcp", "4"] + spec(method="dspark", model=DRAFT, num_speculative_tokens=3,
                                                         draft_decode_context_parallel_size=8), {}),
    ("vllm-draft-dcp-value", LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4,
                                         draft_decode_context_parallel_size=0), {}),     # Field(ge=1)
    # the deprecated sizes differ from what the new fields resolve to (judged so by the 0.34.0 engine oracle)
    ("vllm-cudagraph-sizes-mixed", LINE + cc(cudagraph_capture_sizes=[1, 2, 4, 8],
                                             decode_cudagraph_capture_request_sizes=[1, 2, 4, 8, 16]), {}),
    ("vllm-cudagraph-sizes-mixed", LINE + cc(cudagraph_capture_sizes=[1, 2, 4, 8],
                                             prefill_cudagraph_capture_token_sizes=[512],
                                             decode_cudagraph_capture_request_sizes=[1, 2]), {}),
    ("vllm-cudagraph-size-above-cap", LINE + cc(prefill_cudagraph_capture_token_sizes=[256, 4096],
                                                max_prefill_cudagraph_capture_tokens=2048), {}),
    ("vllm-cudagraph-size-above-cap", LINE + cc(decode_cudagraph_capture_request_sizes=[1, 128],
                                                max_decode_cudagraph_capture_requests=64), {}),
]


@pytest.mark.parametrize("rule,argv,env", REFUSED, ids=[f"{c[0]}-{i}" for i, c in enumerate(REFUSED)])
def test_0_34_0_refuses_and_0_33_0_does_not_meet_the_rule(rule, argv, env):
    code, findings = check_args("0.34.0", argv, env)
    assert code == 1 and rule in rules(findings), findings
    f = next(f for f in findings if f["rule"] == rule)
    assert "@0.34.0" in f["source"] and "0.34.0" in f["message"], f
    _, old = check_args("0.33.0", argv, env)
    assert rule not in rules(old) | rules(old, "info")


ACCEPTED = [
    # "1" is only redundant (a warning in the engine's log)
    (LINE, {"VLLM_USE_V2_MODEL_RUNNER": "1"}, {"vllm-model-runner-v2-env-redundant"}),
    # DSpark drafts in parallel anyway: deprecated, no effect; the draft's DCP 1 or the target's
    (LINE + DCP8 + spec(method="dspark", model=DRAFT, num_speculative_tokens=3, parallel_drafting=True,
                        draft_decode_context_parallel_size=1), {}, {"vllm-parallel-drafting-deprecated"}),
    (LINE + DCP8 + spec(method="dspark", model=DRAFT, num_speculative_tokens=3, draft_decode_context_parallel_size=8), {}, set()),
    (LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4, parallel_drafting=False), {},
     {"vllm-parallel-drafting-deprecated"}),
    # ngram has no draft model: its draft DCP is never resolved (ngram/config.py:19@0.34.0)
    (LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4,
                 draft_decode_context_parallel_size=4), {}, set()),
    # DSpark + DCP without the key: accepted, the draft's DCP default is reported
    (LINE + DCP8 + spec(method="dspark", model=DRAFT, num_speculative_tokens=3), {}, {"vllm-draft-dcp-default"}),
    # either family of capture sizes alone; a size above max_num_seqs is dropped (a warning), not held against the cap
    (LINE + cc(cudagraph_capture_sizes=[1, 2, 4, 8], max_cudagraph_capture_size=8), {}, set()),
    (LINE + cc(decode_cudagraph_capture_request_sizes=[1, 2, 4, 8], max_decode_cudagraph_capture_requests=8,
               prefill_cudagraph_capture_token_sizes=[512, 2048], max_prefill_cudagraph_capture_tokens=2048), {}, set()),
    (LINE + ["--max-num-seqs", "64"] + cc(decode_cudagraph_capture_request_sizes=[1, 2048],
                                          max_decode_cudagraph_capture_requests=64), {}, set()),
    # deprecated and split sizes that resolve to the same graphs: the engine accepts them (decode-only graphs match
    # in the second line); the 0.34.0 engine oracle accepts both
    (LINE + cc(cudagraph_capture_sizes=[1, 2, 4, 8], decode_cudagraph_capture_request_sizes=[1, 2, 4, 8]), {}, set()),
    (LINE + cc(cudagraph_capture_sizes=[1, 2, 4, 8], prefill_cudagraph_capture_token_sizes=[512]), {}, set()),
    # SpeculativeConfig's own keys, dashes read as underscores (engine/arg_utils.py:2159-2161@0.34.0)
    (LINE + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4, prompt_lookup_min=2,
                 enforce_eager=True), {}, set()),
    (LINE + ["--checkpoint-prepare-on-startup", "--enable-sleep-mode"], {}, set()),
    # no CUDA graphs: the sizes are never resolved (config/vllm.py:2371-2375@0.34.0)
    (LINE + ["--enforce-eager"] + cc(cudagraph_capture_sizes=[1, 2], decode_cudagraph_capture_request_sizes=[1]),
     {}, set()),
    (LINE + cc(cudagraph_mode="NONE", cudagraph_capture_sizes=[1, 2], decode_cudagraph_capture_request_sizes=[1]),
     {}, set()),
]


@pytest.mark.parametrize("argv,env,infos", ACCEPTED)
def test_0_34_0_accepts(argv, env, infos):
    code, findings = check_args("0.34.0", argv, env)
    assert code == 0 and not rules(findings), findings
    assert rules(findings, "info") & V034_DIRECT == infos


@pytest.mark.parametrize("preset", ["vllm-seed", "vllm-fixed", "vllm-dcp-no-spec", "kimi-k3-b300-1p1d",
                                    "dsv41-flash-gb300-8p1d", "dsv41-flash-gb300-7p1d"])
def test_the_presets_rendered_lines_pass_on_0_34_0(preset):
    res = CliRunner().invoke(cli, ["dry-run", "--preset", preset, "-o", "json"], catch_exceptions=False)
    doc = json.loads(res.stdout)
    launches = [r["leader"] for r in doc["roles"]] if doc.get("roles") else [doc["launch"]]
    for launch in launches:
        code, findings = check_args("0.34.0", launch["argv"], launch.get("env") or {})
        assert code == 0 and not rules(findings), (preset, findings)
        v1 = launch.get("env", {}).get("VLLM_USE_V2_MODEL_RUNNER")
        assert ("vllm-model-runner-v2-env-redundant" in rules(findings, "info")) == (v1 == "1")


def test_0_34_0_is_pinned_and_read_with_its_own_parser():
    v = load_catalog().engines["vllm"].versions["0.34.0"]
    assert v.parser.dump == "engines/vllm-0.34.0-options.json" and v.traits["nixl_connector_version"] == 16
    # a flag 0.34.0 added: read by 0.34.0's parser, unknown to 0.33.0's
    code, findings = check_args("0.34.0", LINE + ["--shuffle-safetensors-files"])
    assert code == 0 and "extra-arg-unknown" not in rules(findings, "warning"), findings
    code, old = check_args("0.33.0", LINE + ["--shuffle-safetensors-files"])
    assert "argv-refused" in rules(old), old
    # no nearest-release warning: the release itself is pinned
    assert "engine-version-nearest" not in {f["rule"] for f in findings}


def test_mixed_sizes_this_rule_cannot_compute_are_a_warning_not_a_refusal():
    # the caps' size grids are not computed here; the 0.34.0 engine oracle accepts this line
    code, findings = check_args("0.34.0", LINE + cc(max_cudagraph_capture_size=512,
                                                    max_prefill_cudagraph_capture_tokens=2048))
    assert code == 0 and "vllm-cudagraph-sizes-mixed-undecided" in rules(findings, "warning"), findings
    assert "vllm-cudagraph-sizes-mixed" not in rules(findings)


def explain(rule: str) -> dict:
    res = CliRunner().invoke(cli, ["explain", rule, "-o", "json"], catch_exceptions=False)
    return json.loads(res.stdout)


@pytest.mark.parametrize("rule", sorted(V034_DIRECT))
def test_explain_shows_the_new_rules_on_0_34_0_only(rule):
    doc = explain(rule)
    assert doc["applies_to"] == ["vllm 0.34.0"] and "@0.34.0" in doc["source"], doc


@pytest.mark.parametrize("rule", ["attention-backend-unknown", "vllm-dspark-dcp-backend", "pd-compat-hash"])
def test_explain_lists_0_34_0_beside_the_other_releases(rule):
    doc = explain(rule)
    assert "vllm 0.34.0" in doc["applies_to"] and "vllm 0.33.0" in doc["applies_to"], doc["applies_to"]
    assert any(p["version"] == "0.34.0" for p in doc["per_release"]), doc["per_release"]
