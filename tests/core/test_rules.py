"""Every spec and args rule of the registry: one case that fires it, one that does not (the table must cover them
all). Render, log and schema rules have their tables in tests/core/test_rules_render.py, tests/coldstart/test_doctor.py
and tests/core/test_schema_rule.py; tests/core/test_registry.py checks that every rule id has one."""
from __future__ import annotations

import pytest

from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.rules import RULES, validate
from gpustack_k3.core.rules.registry import of_family

from .conftest import preset_doc

V33 = {"engine": {"version": "0.33.0"}}
SPECIALIZED = {"engine": {"version": "0.33.0"}, "vllm": {"additionalConfig": {"decode_backend": "latency_specialized"}}}

# rule -> (positive: (preset, spec patch), negative: (preset, spec patch))
CASES = {
    "vllm-dcp-with-dspark": (("vllm-seed", {"parallel": {"dcp": 8}}), ("vllm-seed", {})),
    "vllm-dcp-with-spec": (("vllm-dcp-no-spec", {"engine": {"version": "0.11.0"}, "vllm": {"moeBackend": None, "attentionConfig": None},
                                                  "speculative": {"method": "ngram", "numTokens": 4}}),
                           ("vllm-dcp-no-spec", {"engine": {"version": "0.11.0"}, "vllm": {"moeBackend": None, "attentionConfig": None}})),
    "vllm-dspark-dcp-backend": (("vllm-seed", {"engine": {"version": "0.33.0"}, "parallel": {"dcp": 8},
                                               "speculative": {"attentionBackend": "B12X"}}),
                                ("vllm-seed", {"engine": {"version": "0.33.0"}, "parallel": {"dcp": 8}})),
    "vllm-dspark-dcp-backend-extra": (
        ("vllm-seed", {**V33, "parallel": {"dcp": 8}, "vllm": {"attentionConfig": {"backend": "FLASH_ATTN_MLA"}},
                       "extraArgs": ["--cp-kv-cache-interleave-size", "2"]}),
        ("vllm-seed", {**V33, "parallel": {"dcp": 8}, "vllm": {"attentionConfig": {"backend": "FLASH_ATTN_MLA"}}})),
    "dcp-divides-tp": (("vllm-seed", {"parallel": {"dcp": 3}}), ("vllm-seed", {"parallel": {"dcp": 4}})),
    "parallel-fits-node": (("vllm-seed", {"parallel": {"tp": 8, "pp": 2}}), ("vllm-seed", {"parallel": {"tp": 4, "pp": 2}})),
    "gpu-count-exceeds-node": (("vllm-seed", {"hardware": {"gpuCount": 16}}), ("vllm-seed", {"hardware": {"gpuCount": 8}})),
    "fixed-memory-exceeds-budget": (("vllm-seed", {"memory": {"fraction": 0.7}}), ("vllm-seed", {})),
    "plan-unavailable": (("vllm-seed", {"memory": {"kvCacheDtype": "nvfp4"}}), ("vllm-seed", {})),
    "vllm-max-model-len-exceeds-kv": (("vllm-seed", {"scheduling": {"maxModelLen": 1000000}, "memory": {"fraction": 0.82}}),
                                      ("vllm-seed", {})),
    # SGLang's command line has no --speculative-config: the vLLM keys would be dropped
    "speculative-field-not-carried": (("sglang-seed", {"speculative": {"extraConfig": {"disable_padded_drafter_batch": True}}}),
                                      ("sglang-seed", {})),
    "spec-draft-wrong-engine": (("sglang-seed", {"speculative": {"draftModel": "skyai/Kimi-K3-DSpark"}}), ("sglang-seed", {})),
    "spec-draft-missing": (("vllm-seed", {"speculative": {"draftModel": None}}), ("vllm-seed", {"speculative": {"method": "mtp", "draftModel": None, "numTokens": 1}})),
    "spec-method-unsupported": (("vllm-seed", {"engine": {"version": "0.11.0"}, "vllm": {"moeBackend": None, "attentionConfig": None}}),
                                ("vllm-seed", {"engine": {"version": "0.11.0"}, "vllm": {"moeBackend": None, "attentionConfig": None},
                                               "speculative": {"method": "ngram", "draftModel": None, "attentionBackend": None,
                                                               "draftSampleMethod": None, "rejectionSampleMethod": None}})),
    # SGLang's TP worker asserts context_len - 1 > 0 (managers/tp_worker.py:420-425@0.5.23)
    "sglang-context-length-below-two": (("sglang-seed", {"scheduling": {"maxModelLen": 1}}),
                                        ("sglang-seed", {"scheduling": {"maxModelLen": 2}})),
    "spec-json-tensor-parallel-size": (("vllm-seed", {"speculative": {"extraConfig": {"tensor_parallel_size": 8}}}), ("vllm-seed", {})),
    "spec-json-key-duplicates-field": (("vllm-seed", {"speculative": {"extraConfig": {"method": "mtp"}}}),
                                       ("vllm-seed", {"speculative": {"extraConfig": {"dspark_draft_topk": 4}}})),
    "model-draft-of-another-model": (("vllm-seed", {"model": {"name": "smollm2-135m", "source": None,
                                                              "path": "/models/SmolLM2-135M-Instruct"}}),
                                     ("vllm-seed", {"speculative": {"method": "mtp", "draftModel": None}})),
    "model-name-contradicts-source": (("vllm-seed", {"model": {"source": "deepseek-ai/DeepSeek-V4.1-Flash"}}),
                                      ("vllm-seed", {"model": {"source": "moonshotai/Kimi-K3"}})),
    "spec-draft-tp": (("vllm-seed", {"speculative": {"draftTensorParallelSize": 4}}), ("vllm-seed", {"speculative": {"draftTensorParallelSize": 8}})),
    "spec-mtp-multi-token": (("vllm-seed", {"speculative": {"method": "mtp", "draftModel": None, "numTokens": 3}}),
                             ("vllm-seed", {"speculative": {"method": "mtp", "draftModel": None, "numTokens": 1}})),
    "batched-tokens-below-seqs": (("vllm-seed", {"scheduling": {"maxNumBatchedTokens": 16, "maxNumSeqs": 32}}), ("vllm-seed", {})),
    "batched-tokens-below-max-len": (("vllm-fixed", {"scheduling": {"chunkedPrefill": False}}),
                                     ("vllm-fixed", {"scheduling": {"chunkedPrefill": False, "maxModelLen": 32768}})),
    "long-prefill-above-max-len": (("vllm-fixed", {"scheduling": {"longPrefillTokenThreshold": 300000}}), ("vllm-fixed", {})),
    "kv-cache-dtype-invalid": (("sglang-seed", {"memory": {"kvCacheDtype": "fp8"}}), ("sglang-seed", {})),
    # a preset names a catalog model by no local directory: no config.json; the quiet cases are in
    # tests/core/test_verdicts_fresh.py (a config.json given)
    "model-config-checks-skipped": (("vllm-seed", {}), None),
    "engine-image": (("vllm-seed", {}), None),   # every verdict states its image: never quiet
    "context-above-model": (("sglang-seed", {"scheduling": {"maxModelLen": 2000000}}),
                            ("sglang-seed", {"scheduling": {"maxModelLen": 2000000}, "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}})),
    "sglang-kimi-k3-dcp-decode-backend": (("sglang-seed", {"sglang": {"decodeAttentionBackend": "trtllm_mla"}}),
                                          ("sglang-seed", {"sglang": {"decodeAttentionBackend": "cutedsl_mla"}})),
    "sglang-dcp-dspark-ragged-verify": (("sglang-seed", {"env": {"SGLANG_RAGGED_VERIFY_MODE": "compact"}}),
                                        ("sglang-seed", {"env": {"SGLANG_RAGGED_VERIFY_MODE": "static"}})),
    "vllm-kimi-k3-specialized-decode": (("vllm-seed", {**SPECIALIZED, "speculative": {"numTokens": 8}}),
                                        ("vllm-seed", SPECIALIZED)),
    "vllm-compile-cache-env-per-pod": (("vllm-seed", {"env": {"VLLM_DP_RANK": "$(LWS_WORKER_INDEX)"}}),
                                       ("vllm-seed", {"env": {"VLLM_HOST_IP": "$(POD_IP)"}})),
    "field-unsupported": (("sglang-seed", {"vllm": {"moeBackend": "auto"}}), ("sglang-seed", {})),
    "extra-arg-duplicates-field": (("vllm-seed", {"extraArgs": ["--max-num-seqs", "64"]}), ("vllm-seed", {"extraArgs": ["--seed", "1"]})),
    "extra-arg-platform-owned": (("vllm-seed", {"extraArgs": ["--port", "9000"]}), ("vllm-seed", {"extraArgs": ["--seed", "1"]})),
    "extra-arg-unknown": (("vllm-seed", {"extraArgs": ["--max-num-seqz", "64"]}), ("vllm-seed", {"extraArgs": ["--block-size", "16"]})),
    "extra-arg-malformed": (("vllm-seed", {"extraArgs": ["seed"]}), ("vllm-seed", {"extraArgs": ["--seed", "1"]})),
    # issue 23: the README says duplicates in extraArgs are reported; -tp 8 and --tensor-parallel-size 8 are one flag
    "extra-arg-repeated": (("vllm-seed", {"extraArgs": ["--seed", "1", "--seed", "2"]}),
                           ("vllm-seed", {"extraArgs": ["--seed", "1", "--middleware", "a", "--middleware", "b"]})),
    "env-removed": (("vllm-seed", {"engine": {"version": "0.33.0"}, "env": {"VLLM_ATTENTION_BACKEND": "FLASHINFER_MLA"}}),
                    ("vllm-seed", {"engine": {"version": "0.11.0"}, "vllm": {"moeBackend": None, "attentionConfig": None},
                                   "speculative": {"method": "none"}, "env": {"VLLM_ATTENTION_BACKEND": "FLASHINFER_MLA"}})),
    "secret-in-env": (("vllm-seed", {"env": {"HF_TOKEN": "hf_abc"}}), ("vllm-seed", {"secretEnv": [{"name": "HF_TOKEN", "secretName": "hub", "key": "token"}]})),
    "unknown-catalog-entry": (("vllm-seed", {"engine": {"version": "0.10.0"}}), ("vllm-seed", {"engine": {"version": "0.33.0"}})),
    "sglang-dcp-static-verify": (("sglang-seed", {}), ("sglang-no-dcp", {})),
    "sglang-dcp-symm-mem-off": (("sglang-seed", {}), ("sglang-seed", {"sglang": {"symmMem": None}})),
    "vllm-kv-overcommit": (("vllm-seed", {}), ("vllm-seed", {"memory": {"fraction": 0.92}})),
    "vllm-max-len-caps-concurrency": (("vllm-seed", {}), ("vllm-seed", {"scheduling": {"maxModelLen": 65536}})),
    "vllm-long-prefill-disabled": (("vllm-seed", {}), ("vllm-fixed", {})),
    "sglang-kv-pool-below-context": (("sglang-seed", {}), ("sglang-fixed", {})),
    "sglang-mamba-caps-running-requests": (("sglang-seed", {}), ("sglang-fixed", {})),
    "sglang-custom-all-reduce-off": (("sglang-seed", {}), ("sglang-seed", {"sglang": {"customAllReduce": None}})),
    "vllm-flashinfer-autotune-off": (("vllm-seed", {"vllm": {"flashinferAutotune": False}}), ("vllm-seed", {})),
    "fp8-kv-no-scales": (("vllm-seed", {}), ("vllm-seed", {"memory": {"kvCacheDtype": "auto"}})),
    "slow-tokenizer": (("vllm-seed", {}), None),
    "vllm-compile-mode-none": (("vllm-seed", {}), ("vllm-seed", {"env": {"VLLM_USE_BREAKABLE_CUDAGRAPH": "0"}})),
    "vllm-hybrid-block-1536": (("vllm-seed", {}), None),
    # issue 22 item 5: versions users type resolve to the nearest pinned release at or below, with this warning
    # oracle finding 6: unknown backend names are refused by AttentionConfig (0.28.0 has no TRTLLM_MLA)
    "attention-backend-unknown": (("vllm-fixed", {"engine": {"version": "0.28.0"}, "vllm": {"attentionBackend": "TRTLLM_MLA"}}),
                                  ("vllm-fixed", {"engine": {"version": "0.33.0"}, "vllm": {"attentionBackend": "flashinfer_mla"}})),
    "vllm-v2-runner-spec-method": (("vllm-fixed", {"engine": {"version": "0.28.0"}, "env": {"VLLM_USE_V2_MODEL_RUNNER": "1"},
                                                   "speculative": {"method": "ngram", "numTokens": 3, "draftModel": None}}),
                                   ("vllm-fixed", {"engine": {"version": "0.33.0"}, "env": {"VLLM_USE_V2_MODEL_RUNNER": "1"},
                                                   "speculative": {"method": "ngram", "numTokens": 3, "draftModel": None}})),
    "spec-draft-method-mismatch": (("vllm-fixed", {"speculative": {"method": "eagle3"}}),
                                   ("vllm-fixed", {"speculative": {"method": "eagle3", "draftModel": "/models/an-eagle3-draft"}})),
    # oracle finding 6: --dtype float16 on the MXFP4 Kimi-K3 checkpoint
    "dtype-vs-quantization": (("vllm-fixed", {"engine": {"version": "0.33.0"}, "model": {"dtype": "half"}}),
                              ("vllm-fixed", {"engine": {"version": "0.33.0"}, "model": {"dtype": "bfloat16"}})),
    # a document's version is refused as the CRD refuses it (unknown-catalog-entry); the warning is for a command
    # line's --engine-version: tests/core/test_verdicts_fresh.py (FRESH_DIRECT)
    # the seed-0 vLLM differential's classes (tests/core/test_verdicts.py has the engine lines)
    "vllm-v1-runner-spec-method": (("vllm-fixed", {"engine": {"version": "0.33.0"}, "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}}),
                                   ("vllm-fixed", {"engine": {"version": "0.33.0"}})),
    "vllm-cpu-v2-runner": (("vllm-cpu-smollm2", {"env": {"VLLM_USE_V2_MODEL_RUNNER": "1"}}), ("vllm-cpu-smollm2", {})),
    "vllm-cpu-eplb": (("vllm-cpu-smollm2", {"parallel": {"eplb": {"enabled": True}}}), ("vllm-cpu-smollm2", {})),
    "dp-rank-in-range": (("vllm-seed", {"parallel": {"dp": 2}, "extraArgs": ["--data-parallel-rank", "3"]}),
                         ("vllm-seed", {"parallel": {"dp": 2}, "extraArgs": ["--data-parallel-rank", "1"]})),
    "parallel-fits-node-at-launch": (("vllm-seed", {"engine": {"version": "0.11.0"}, "parallel": {"tp": 8, "pp": 2}}),
                                     ("vllm-seed", {"engine": {"version": "0.11.0"}, "parallel": {"tp": 4, "pp": 2}})),
    "model-not-in-release": (("vllm-fixed", {"engine": {"version": "0.11.0"}}), ("vllm-fixed", {"engine": {"version": "0.28.0"}})),
    "vllm-v1-env-partial-prefill": (("vllm-cpu-smollm2", {"engine": {"version": "0.11.0"}, "env": {"VLLM_USE_V1": "1"},
                                                       "extraArgs": ["--max-num-partial-prefills", "2"]}),
                                    ("vllm-cpu-smollm2", {"engine": {"version": "0.11.0"},
                                                       "extraArgs": ["--max-num-partial-prefills", "2"]})),
    "dp-node-groups-divide-nnodes": (("vllm-seed", {"engine": {"version": "0.33.0"}, "parallel": {"dp": 32, "dpLocal": 4},
                                                   "extraArgs": ["--nnodes", "2"]}),
                                     ("vllm-seed", {"engine": {"version": "0.33.0"}, "parallel": {"dp": 32, "dpLocal": 4},
                                                   "extraArgs": ["--nnodes", "8"]})),
    "long-prefill-above-max-len-partial": (("vllm-cpu-smollm2", {"engine": {"version": "0.11.0"},
                                                              "scheduling": {"longPrefillTokenThreshold": 65536},
                                                              "extraArgs": ["--max-num-partial-prefills", "2"]}),
                                           ("vllm-cpu-smollm2", {"engine": {"version": "0.11.0"},
                                                              "scheduling": {"longPrefillTokenThreshold": 65536}})),
    "vllm-eplb-config-refused": (("vllm-seed", {"engine": {"version": "0.28.0"}, "parallel": {"expertParallel": True, "eplb": {"extraConfig": {"enable_migration_batching": True}}}}),
                                 ("vllm-seed", {"engine": {"version": "0.33.0"}, "parallel": {"expertParallel": True, "eplb": {"extraConfig": {"enable_migration_batching": True}}}})),
    "sglang-kda-verify-triton-fallback": (("sglang-seed", {}), ("sglang-seed", {"speculative": {"method": "none", "draftModel": None, "numTokens": None}})),
}


def rules_of(preset, patch):
    return [f.rule for f in validate(preset_doc(preset, patch))]


def test_every_spec_rule_has_cases():
    # argv-refused reads a command line, not a spec: its fire/quiet cases are in tests/core/test_argv_read.py
    # the model-config rules read a config.json: their cases are tests/core/test_verdicts.py MODEL_CASES
    # the SGLang rules the engine oracle led to: their cases are tests/core/test_verdicts_sglang.py
    from tests.core.test_sglang_python_rules import SGLANG_PY_DIRECT   # core/rules/sglang_checks_smiss{5,6,7}.py
    from tests.core.test_verdicts import MODEL_CASES
    from tests.core.test_verdicts_fresh import FRESH_DIRECT
    from tests.core.test_verdicts_heldout import HELDOUT_DIRECT
    from tests.core.test_verdicts_sglang import SGLANG_CASES, SGLANG_DIRECT
    from tests.core.test_vllm_034 import V034_DIRECT   # vLLM 0.34.0's rules: command lines judged on that release
    from tests.core.test_checks_table import CHECKS_DIRECT   # the checks tables' entries: each one's examples
    from tests.core.test_vllm_checks import VLLM_CHECKS_DIRECT   # core/rules/vllm_checks.py
    from tests.core.test_config_field_bounds import CFB_DIRECT   # config-class field constraints, per release
    from tests.core.test_false_refusals_fr3 import FR3_DIRECT   # command-line values outside a document's range
    from tests.core.test_vllm_python_rules import VMISS5_DIRECT, VMISS6_DIRECT, VMISS7_DIRECT   # vllm_checks_vmiss{5,6,7}.py

    from tests.core.test_lora7_rules import LORA7_DIRECT   # core/rules/vllm_checks_lora7.py (helper lora7)
    from tests.core.test_lateB_rules import LATEB_DIRECT   # core/rules/vllm_checks_lateB.py (helper lateB)
    from tests.core.test_lateA_rules import LATEA_DIRECT   # core/rules/vllm_checks_lateA.py (helper lateA)
    from tests.core.test_aimS2_rules import AIMS2_DIRECT   # core/rules/sglang_checks_aimS2.py (helper aimS2)
    from tests.core.test_miss8_rules import MISS8_DIRECT   # core/rules/{vllm,sglang}_checks_miss8.py (helper miss8)
    from tests.core.test_aimS3_rules import AIMS3_DIRECT   # core/rules/sglang_checks_aimS3.py (helper aimS3)
    from tests.core.test_aimV3_rules import AIMV3_DIRECT   # core/rules/vllm_checks_aimV3.py (helper aimV3)
    from tests.core.test_miss9_rules import MISS9_DIRECT   # core/rules/vllm_checks_miss9.py (helper miss9)
    from tests.core.test_mfixS_rules import MFIXS_DIRECT   # core/rules/sglang_checks_mfixS.py (helper mfixS)
    from tests.core.test_mfixV_rules import MFIXV_DIRECT   # core/rules/vllm_checks_mfixV.py (helper mfixV)
    from tests.core.test_mfix11_rules import MFIX11_DIRECT   # core/rules/vllm_checks_mfix11.py (helper mfix11)
    from tests.core.test_late9v_rules import LATE9V_DIRECT   # core/rules/vllm_checks_late9v.py (helper late9v)
    from tests.core.test_m10s_rules import M10S_DIRECT   # core/rules/sglang_checks_m10s.py (helper m10s)
    from tests.core.test_m10v_rules import M10V_DIRECT   # core/rules/vllm_checks_m10v.py (helper m10v)
    from tests.core.test_am10v_rules import AM10V_DIRECT   # core/rules/vllm_checks_am10v.py (helper am10v)
    from tests.core.test_m11v_rules import M11V_DIRECT   # core/rules/vllm_checks_m11v.py (helper m11v)
    from tests.core.test_draft11_rules import DRAFT11_DIRECT   # core/rules/vllm_checks_draft11.py (helper draft11)
    from tests.core.test_lead11_rules import LEAD11_DIRECT   # core/rules/vllm_checks_lead11.py (lead, round 11)
    from tests.core.test_am10s_rules import AM10S_DIRECT   # core/rules/sglang_checks_am10s.py (helper am10s)
    from tests.core.test_am11s_rules import AM11S_DIRECT   # core/rules/sglang_checks_am11s.py (helper am11s)
    from tests.core.test_v2r10_rules import V2R10_DIRECT   # core/rules/vllm_checks_v2r10.py (helper v2r10)
    from tests.core.test_reg11_rules import REG11_DIRECT   # core/rules/vllm_checks_reg11.py (helper reg11)
    from tests.core.test_m11s_rules import M11S_DIRECT   # core/rules/sglang_checks_m11s.py (helper m11s)

    assert set(CASES) == ({r.id for r in of_family("spec", "args")} - {"argv-refused"} - set(MODEL_CASES)
                          - set(SGLANG_CASES) - SGLANG_DIRECT - FRESH_DIRECT - HELDOUT_DIRECT - V034_DIRECT
                          - SGLANG_PY_DIRECT
                          - CHECKS_DIRECT - VLLM_CHECKS_DIRECT - CFB_DIRECT - FR3_DIRECT - VMISS5_DIRECT
                          - VMISS6_DIRECT - VMISS7_DIRECT
                          - LORA7_DIRECT - LATEB_DIRECT - LATEA_DIRECT
                          - AIMS2_DIRECT - MISS8_DIRECT - AIMS3_DIRECT - AIMV3_DIRECT - MISS9_DIRECT - MFIXS_DIRECT - MFIXV_DIRECT - MFIX11_DIRECT
                          - LATE9V_DIRECT - M10S_DIRECT - M10V_DIRECT - AM10V_DIRECT - AM10S_DIRECT - V2R10_DIRECT
                          - REG11_DIRECT - M11V_DIRECT - DRAFT11_DIRECT - LEAD11_DIRECT - AM11S_DIRECT - M11S_DIRECT)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires(rule_id):
    (preset, patch), _ = CASES[rule_id]
    assert rule_id in rules_of(preset, patch)


@pytest.mark.parametrize("rule_id", sorted(r for r, c in CASES.items() if c[1] is not None))
def test_rule_quiet(rule_id):
    _, (preset, patch) = CASES[rule_id]
    assert rule_id not in rules_of(preset, patch)


def test_unconditional_info_rules_are_model_specific():
    # slow-tokenizer and vllm-hybrid-block-1536 depend on the model, not the config: other models stay quiet.
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.resolve import resolve
    from gpustack_k3.core.rules import Ctx

    d = preset_doc("vllm-seed")
    r = resolve(d)
    r.doc.spec.model.name = "smollm2-135m"
    r = resolve(DeploymentDocument.model_validate(r.doc.model_dump()))
    assert list(RULES["slow-tokenizer"].check(r, Ctx(r))) == []
    assert list(RULES["vllm-hybrid-block-1536"].check(r, Ctx(r))) == []


def test_seed_vllm_validates_with_warnings_only():
    findings = validate(preset_doc("vllm-seed"))
    sev = {f.rule: f.severity for f in findings}
    assert "error" not in sev.values()
    assert sev["vllm-kv-overcommit"] == "warning" and sev["vllm-long-prefill-disabled"] == "warning"


def test_seed_vllm_with_dcp_refused_naming_dcp_and_dspark():
    findings = validate(preset_doc("vllm-seed", {"parallel": {"dcp": 8}}))
    errs = [f for f in findings if f.severity == "error"]
    assert [f.rule for f in errs] == ["vllm-dcp-with-dspark"]
    assert errs[0].field == "spec.parallel.dcp"
    assert "dspark" in errs[0].message and "decode_context_parallel_size=8" in errs[0].message
    assert "spec.speculative.method" in errs[0].fix


def test_seed_sglang_warns_static_verify():
    findings = validate(preset_doc("sglang-seed"))
    assert not [f for f in findings if f.severity == "error"]
    f = next(f for f in findings if f.rule == "sglang-dcp-static-verify")
    assert "8-token window" in f.message


def test_all_presets_are_valid():
    for name in load_catalog().presets:
        errs = [f for f in validate(preset_doc(name)) if f.severity == "error"]
        assert errs == [], name


def test_strict_turns_unknown_flags_into_errors():
    d = preset_doc("vllm-seed", {"extraArgs": ["--max-num-seqz", "64"]})
    assert {f.severity for f in validate(d) if f.rule == "extra-arg-unknown"} == {"warning"}
    assert {f.severity for f in validate(d, strict=True) if f.rule == "extra-arg-unknown"} == {"error"}


def test_findings_name_field_and_carry_source():
    for name in load_catalog().presets:
        for f in validate(preset_doc(name)):
            assert f.field.startswith("spec") and f.source and f.fix


def test_rule_versions_follow_traits():
    cat = load_catalog()
    assert RULES["vllm-dcp-with-dspark"].versions(cat) == [("vllm", "kimi-k3"), ("vllm", "0.28.0")]
    assert RULES["vllm-dcp-with-spec"].versions(cat) == [("vllm", "0.11.0")]
    assert {("vllm", "0.29.0"), ("vllm", "0.33.0")} <= set(RULES["vllm-dspark-dcp-backend"].versions(cat))
    assert set(RULES["vllm-kimi-k3-specialized-decode"].versions(cat)) == {("vllm", "0.33.0"), ("vllm", "0.34.0")}
