"""The rules of gpustack_k3/core/rules/vllm_checks_aimV3.py: integer --device-ids beyond the devices the line's
CUDA_VISIBLE_DEVICES makes visible are refused (0.28.0 and later); left alone without the variable, with UUIDs and
within range. LoRA with a speculative config whose --max-num-batched-tokens is below --max-num-seqs x (draft tokens
+ 1) is refused (0.28.0 and later); left alone at the bound and without a speculative config. --quantization-config
targets naming no online shorthand, a "re:" key that is no regex, a hadamard_size not a power of two are refused
(0.33.0, 0.34.0). tests/engine_oracle/test_aimV3_rules_oracle.py has each release judge the same
lines."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_aimV3 import device_ids, out_of_range
from tests.core.test_vllm_checks import product, refused_by_and_not_on_the_flip

RID = "vllm-device-ids-outside-visible-devices"
LSP = "vllm-lora-spec-batched-tokens"
QCT = "vllm-quantization-config-targets-invalid"
AIMV3_DIRECT = {RID, LSP, QCT}   # wired in tests/core/test_registry.py and tests/core/test_rules.py

DENSE = ["/models/shape-gqa-dense", "-tp", "8"]
SMOL = ["/models/smollm2-hf"]
IDS8 = ["--device-ids", "0,1,2,3,4,5,6,7"]
QC = ["--quantization", "online", "--quantization-config"]
NGRAM7 = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 7, "prompt_lookup_max": 3}']
LORA = DENSE + ["--enable-lora"] + NGRAM7 + ["--max-num-seqs", "32"]

# (rule id, release, refused line, its env, the line flipped, its env, catalog model or shape-X)
CASES = [
    (RID, "0.34.0", DENSE + IDS8, {"CUDA_VISIBLE_DEVICES": "0,1"}, DENSE + IDS8,
     {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, "shape-gqa-dense"),
    (RID, "0.33.0", DENSE + IDS8, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, DENSE + IDS8, {}, "shape-gqa-dense"),
    (RID, "0.29.0", SMOL + ["--device-ids", "3"], {"CUDA_VISIBLE_DEVICES": "1,2"}, SMOL + ["--device-ids", "1"],
     {"CUDA_VISIBLE_DEVICES": "1,2"}, None),
    (RID, "0.28.0", SMOL + ["--device-ids", "2"], {"CUDA_VISIBLE_DEVICES": "0"}, SMOL + ["--device-ids", "0"],
     {"CUDA_VISIBLE_DEVICES": "0"}, None),
    # 128 < 32 x (7 + 1); the flip gives 256
    (LSP, "0.34.0", LORA + ["--max-num-batched-tokens", "128"], {}, LORA + ["--max-num-batched-tokens", "256"], {},
     "shape-gqa-dense"),
    (LSP, "0.33.0", LORA + ["--max-num-batched-tokens", "255"], {}, LORA + ["--max-num-batched-tokens", "256"], {},
     "shape-gqa-dense"),
    (LSP, "0.29.0", LORA + ["--max-num-batched-tokens", "128"], {}, LORA + ["--max-num-batched-tokens", "512"], {},
     "shape-gqa-dense"),
    (LSP, "0.28.0", LORA + ["--max-num-batched-tokens", "128"], {}, DENSE + NGRAM7 + ["--max-num-seqs", "32",
     "--max-num-batched-tokens", "128"], {}, "shape-gqa-dense"),
    (QCT, "0.34.0", DENSE + QC + ['{"targets": {"re:.*proj": "not_a_shorthand"}}'], {},
     DENSE + QC + ['{"targets": {"re:.*proj": "fp8_per_tensor"}}'], {}, "shape-gqa-dense"),
    (QCT, "0.34.0", DENSE + QC + ['{"targets": {"re:(": "fp8_per_tensor"}}'], {},
     DENSE + QC + ['{"targets": {"re:(a)": "fp8_per_tensor"}}'], {}, "shape-gqa-dense"),
    (QCT, "0.34.0", DENSE + QC + ['{"linear": {"weight": "mxfp4", "hadamard_size": 3}}'], {},
     DENSE + QC + ['{"linear": {"weight": "mxfp4", "hadamard_size": 32}}'], {}, "shape-gqa-dense"),
    (QCT, "0.33.0", DENSE + QC + ['{"targets": {"re:.*proj": "mxfp4_hadamard32"}}'], {},
     DENSE + QC + ['{"targets": {"re:.*proj": "mxfp4"}}'], {}, "shape-gqa-dense"),
    (QCT, "0.33.0", DENSE + QC + ['{"targets": {"re:[": "fp8_per_block"}}'], {},
     DENSE + QC + ['{"targets": {"[": "fp8_per_block"}}'], {}, "shape-gqa-dense"),
]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines the rule must leave (release, line, env, catalog model or shape-X); the engine oracle judges them
NOT_REFUSED = [
    ("0.34.0", SMOL + ["--device-ids", "5"], {}, None),                                   # no CUDA_VISIBLE_DEVICES
    ("0.34.0", SMOL + ["--device-ids", "5"], {"CUDA_VISIBLE_DEVICES": ""}, None),         # empty: not composed
    ("0.33.0", SMOL + ["--device-ids", "1"], {"CUDA_VISIBLE_DEVICES": "6,7"}, None),      # index 1 of two
    # 0.34.0's targets take a quantization spec and its own shorthand lut_b_moe (0.33.0 has no such name)
    ("0.34.0", DENSE + QC + ['{"targets": {"re:.*proj": {"weight": "fp8_per_tensor_static"}}}'], {}, "shape-gqa-dense"),
    ("0.34.0", DENSE + QC + ['{"targets": {"re:.*proj": "lut_b_moe"}}'], {}, "shape-gqa-dense"),
    # LoRA + speculation without a speculative config: nothing to multiply
    ("0.34.0", DENSE + ["--enable-lora", "--max-num-seqs", "32", "--max-num-batched-tokens", "128"], {}, "shape-gqa-dense"),
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_fires_on_its_line_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused_by_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model)


@pytest.mark.parametrize("release,line,env,model", NOT_REFUSED)
def test_the_rules_leave_these_lines(release, line, env, model):
    got = product(release, line, env, model)["rules"]
    assert not AIMV3_DIRECT & set(got), got


def test_the_rules_are_on_the_releases_that_check():
    for rid in AIMV3_DIRECT:
        for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0") if rid != QCT else ("0.33.0", "0.34.0"):
            assert f"@{rel}" in RULES[rid].source_for("vllm", rel)
    assert device_ids("0, 1,GPU-ab") == [0, 1, "GPU-ab"] and device_ids([2, "3"]) == [2, "3"]
    assert out_of_range([0, 1, 2], "0,1") == 2 and out_of_range([1, 0], "4,5") is None
    # where the release refuses first or checks nothing: duplicates, UUIDs, a mix, no variable
    assert out_of_range([3, 3], "0") is None and out_of_range(["GPU-a"], "0") is None
    assert out_of_range([0, "GPU-a"], "0") is None and out_of_range([5], None) is None and out_of_range([5], "") is None
