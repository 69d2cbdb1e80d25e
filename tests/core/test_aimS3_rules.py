"""The rules of gpustack_k3/core/rules/sglang_checks_aimS3.py (helper aimS3): FlashInfer linear-attention decode /
verify on an SM100-family GPU with a non-bfloat16 SSM state; an NVFP4 / MXFP8 KV cache off Blackwell. The product's side (check-args as the differential runs
it); the release's own verdict on the same lines: tests/engine_oracle/test_aimS3_rules_oracle.py."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_smiss5_rules import product

LINEAR = "sglang-linear-flashinfer-needs-bf16-ssm"
KVBW = "sglang-kv-cache-dtype-needs-blackwell"
HYBRID = ["--model-path", "/models/shape-hybrid", "--tp-size", "8"]
DENSE = ["--model-path", "/models/shape-gqa-dense", "--tp-size", "8"]

# (rule, release, gpu type, refused line, accepted line): the release refuses the first at the rule's cited source
# and accepts the second (tests/engine_oracle/test_aimS3_rules_oracle.py)
CASES = [
    (LINEAR, "0.5.23", "b300", HYBRID + ["--linear-attn-decode-backend", "flashinfer", "--mamba-ssm-dtype", "float32"],
     HYBRID + ["--linear-attn-decode-backend", "flashinfer", "--mamba-ssm-dtype", "bfloat16"]),
    (LINEAR, "0.5.23", "b300", HYBRID + ["--linear-attn-decode-backend", "flashinfer", "--mamba-ssm-dtype", "float16"],
     HYBRID + ["--linear-attn-backend", "triton", "--mamba-ssm-dtype", "float16"]),
    # verify on flashinfer, decode on triton
    (LINEAR, "0.5.23", "b300", HYBRID + ["--linear-attn-decode-backend", "triton", "--linear-attn-verify-backend",
                                         "flashinfer", "--mamba-ssm-dtype", "float32"],
     HYBRID + ["--linear-attn-decode-backend", "triton", "--linear-attn-verify-backend", "triton",
               "--mamba-ssm-dtype", "float32"]),
    (LINEAR, "0.5.22", "b300", HYBRID + ["--linear-attn-decode-backend", "flashinfer", "--mamba-ssm-dtype", "float32"],
     HYBRID + ["--linear-attn-decode-backend", "triton", "--mamba-ssm-dtype", "float32"]),
    (LINEAR, "0.5.22", "b300", HYBRID + ["--linear-attn-decode-backend", "triton", "--linear-attn-verify-backend",
                                         "flashinfer", "--mamba-ssm-dtype", "float16"],
     HYBRID + ["--linear-attn-decode-backend", "triton", "--linear-attn-verify-backend", "flashinfer",
               "--mamba-ssm-dtype", "bfloat16"]),
    (KVBW, "0.5.23", "h200", DENSE + ["--kv-cache-dtype", "nvfp4"], DENSE + ["--kv-cache-dtype", "fp8_e4m3"]),
    (KVBW, "0.5.23", "h200", DENSE + ["--kv-cache-dtype", "mxfp8"], DENSE),
    # the dequant hook refuses native NVFP4 prefill first (SM100 only)
    (KVBW, "0.5.23", "h200", DENSE + ["--kv-cache-dtype", "nvfp4", "--prefill-kv-cache-dequant-dtype", "nvfp4"],
     DENSE + ["--kv-cache-dtype", "fp8_e4m3"]),
    (KVBW, "0.5.22", "h200", DENSE + ["--kv-cache-dtype", "nvfp4"], DENSE),
    (KVBW, "0.5.22", "h200", DENSE + ["--kv-cache-dtype", "mxfp8"], DENSE + ["--kv-cache-dtype", "fp8_e4m3"]),
]
# lines the release accepts and the rules pass: the linear check on an SM90 GPU (it is SM100+ only), the KV dtypes on
# Blackwell
ACCEPTED = [
    ("0.5.23", "b300", DENSE + ["--kv-cache-dtype", "mxfp8"]),
    ("0.5.23", "b200", DENSE + ["--kv-cache-dtype", "nvfp4"]),
    ("0.5.23", "h200", HYBRID + ["--linear-attn-decode-backend", "flashinfer", "--mamba-ssm-dtype", "float32"]),
    ("0.5.22", "h200", HYBRID + ["--linear-attn-decode-backend", "triton", "--linear-attn-verify-backend",
                                 "flashinfer", "--mamba-ssm-dtype", "float32"]),
]
# --linear-attn-backend flashinfer alone: the release refuses it elsewhere first on a hybrid model (mamba_hook.py:161
# @0.5.23, trtllm_mha under the no_buffer strategy); the rule leaves it to the release
LEFT = [("0.5.23", "b300", HYBRID + ["--linear-attn-backend", "flashinfer", "--mamba-ssm-dtype", "float16"])]
IDS = [f"{c[0]}@{c[1]}-{k}" for k, c in enumerate(CASES)]


@pytest.mark.parametrize("rid,release,gpu,bad,good", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_its_flip(rid, release, gpu, bad, good):
    refused = product(release, bad, gpu_type=gpu)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    passed = product(release, good, gpu_type=gpu)
    assert rid not in passed.get("rules", []), passed


@pytest.mark.parametrize("release,gpu,line", ACCEPTED)
def test_the_rules_pass_the_accepted_lines(release, gpu, line):
    rules = product(release, line, gpu_type=gpu).get("rules", [])
    assert LINEAR not in rules and KVBW not in rules


@pytest.mark.parametrize("release,gpu,line", LEFT)
def test_the_rule_leaves_the_base_backend_alone(release, gpu, line):
    assert LINEAR not in product(release, line, gpu_type=gpu).get("rules", [])


def test_each_rule_cites_every_release_it_runs_on():
    for rid in AIMS3_DIRECT:
        releases = {c[1] for c in CASES if c[0] == rid}
        assert {k.split()[1] for k in RULES[rid].sources} == releases, rid


# the rules of gpustack_k3/core/rules/sglang_checks_aimS3.py with a firing case above (tests/core/test_registry.py
# test_every_rule_has_a_firing_case counts them)
AIMS3_DIRECT = {c[0] for c in CASES}


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.sglang_checks_aimS3"} \
        == AIMS3_DIRECT
