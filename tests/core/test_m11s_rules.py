"""The rules of gpustack_k3/core/rules/sglang_checks_m11s.py (helper m11s): the SGLang held-out misses of seeds 57119 /
46901 that need computation, and the kernel-plugin flags. The product's side (check-args as the differential runs it,
on the oracle's own model directories); the release's own verdict on the same lines: tests/engine_oracle/
test_m11s_oracle.py."""
from __future__ import annotations

import pytest

from tests.core.test_smiss5_rules import product

JSON = "sglang-json-model-override-args-not-object"
NOBUF = "sglang-mamba-no-buffer-page-size"
DCP = "sglang-unified-memory-dcp-attention-backend"
KV4 = "sglang-kv4-mla-attention-backend"
BOTH = ("0.5.22", "0.5.23")
K3 = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8"]
HYBRID = ["--model-path", "/models/shape-hybrid", "--tp-size", "8"]
DENSE = ["--model-path", "/models/shape-gqa-dense", "--tp-size", "8"]
UM_DCP = ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--enable-unified-memory", "--dcp-size", "2"]

# (rule, the refused line, its accepted twin): both releases refuse the first at the rule's cited source and accept
# the twin (tests/engine_oracle/test_m11s_oracle.py)
_SPECS = [
    (JSON, [*DENSE, "--json-model-override-args", "x"], [*DENSE, "--json-model-override-args", "{}"]),
    (JSON, [*DENSE, "--json-model-override-args", '{"a": 1'], [*DENSE, "--json-model-override-args", "null"]),
    (JSON, [*DENSE, "--json-model-override-args", "1"], [*DENSE, "--json-model-override-args", "[]"]),
    # the held-out miss of seed 57119 (0.5.22's counterpart): NemotronH, a non-triton linear-attention backend: the
    # strategy auto resolves to no_buffer, which refuses --page-size 64
    (NOBUF, [*HYBRID, "--linear-replayssm-cache-len", "16", "--linear-attn-backend", "intel_xpu",
             "--offload-prefetch-step", "3", "--page-size", "64"],
     [*HYBRID, "--linear-replayssm-cache-len", "16", "--offload-prefetch-step", "3", "--page-size", "64"]),
    (NOBUF, [*HYBRID, "--linear-attn-backend", "intel_xpu", "--page-size", "64"],
     [*HYBRID, "--linear-attn-backend", "intel_xpu", "--page-size", "64", "--disable-radix-cache"]),
    (NOBUF, [*K3, "--page-size", "64", "--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"],
     [*K3, "--page-size", "64"]),
    (NOBUF, [*K3, "--page-size", "64", "--linear-attn-backend", "cutedsl"],
     [*K3, "--page-size", "64", "--linear-attn-backend", "triton"]),
    # the aimed line kv_cache_hook.py:754@0.5.23 / :759@0.5.22: unified memory, DCP, an MLA model, a backend the
    # release did not audit; flashinfer (and the resolved default here) it accepts
    (DCP, [*UM_DCP, "--attention-backend", "triton"], [*UM_DCP, "--attention-backend", "flashinfer"]),
    (DCP, [*UM_DCP, "--attention-backend", "fa3"], UM_DCP),
    (DCP, [*UM_DCP, "--decode-attention-backend", "triton"], [*UM_DCP, "--decode-attention-backend", "flashinfer"]),
    # the aimed line kv_cache_hook.py:302 (both releases): an FP4 KV cache on an MLA model with triton
    (KV4, ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--kv-cache-dtype", "fp4_mx_block16",
           "--attention-backend", "triton"],
     ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--kv-cache-dtype", "fp4_mx_block16",
      "--attention-backend", "flashinfer"]),
]
CASES = [(rid, rel, bad, good) for rid, bad, good in _SPECS for rel in BOTH]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# the held-out seed 57119 miss on 0.5.23 (bench/results/oracle-differential-seed57119-d146a35.json): refused by JSON
HELDOUT_JSON = ["--trust-remote-code", "--model-path", "/models/Kimi-K3", "--tp-size", "8", "--dcp-size", "8",
                "--mem-fraction-static", "0.88", "--mamba-full-memory-ratio", "0.86", "--speculative-algorithm", "DSPARK",
                "--speculative-draft-model-path", "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size",
                "7", "--chunked-prefill-size", "32768", "--max-prefill-tokens", "32768", "--context-length", "262144",
                "--kv-cache-dtype", "fp8_e4m3", "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend",
                "nixl", "--disaggregation-bootstrap-port", "8998", "--json-model-override-args", "x", "--page-size",
                "16"]
HELDOUT_ENV = {"SGLANG_DG_CACHE_DIR": "/cache/deepgemm", "SGLANG_RAGGED_VERIFY_MODE": "static"}

# the kernel-plugin flags (0.5.23): alone, the plugin in the serving image decides (a warning; the oracle answers
# not_decidable); both together the release refuses whatever the plugin (an error); 0.5.22 has neither flag
NV = "sglang-nvidia-megakernel-plugin"
AMD = "sglang-amd-monokernel-plugin"
BOTH_FLAGS = "sglang-nvidia-megakernel-with-amd-monokernel"
MLA = ["--model-path", "/models/shape-mla-moe", "--tp-size", "8"]
PLUGIN_LINES = [
    ([*MLA, "--enable-nvidia-megakernel"], NV),
    ([*MLA, "--enable-amd-monokernel"], AMD),
    ([*MLA, "--monokernel-backend", "amd"], AMD),
]

# the rules of gpustack_k3/core/rules/sglang_checks_m11s.py with a firing case here (tests/core/test_registry.py and
# tests/core/test_rules.py count them)
M11S_DIRECT = {c[0] for c in CASES}


def _product(release, argv, env=None):
    if env:
        from tools.engine_oracle.product import check_args

        return check_args("sglang", release, {"argv": argv, "env": env, "model": None, "gpu_type": "b300", "gpus": 8})
    return product(release, argv)


@pytest.mark.parametrize("rid,release,bad,good", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_its_twin(rid, release, bad, good):
    refused = _product(release, bad)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    passed = _product(release, good)
    assert rid not in passed.get("rules", []), passed


def test_the_heldout_json_miss_is_refused():
    out = _product("0.5.23", HELDOUT_JSON, HELDOUT_ENV)
    assert out["verdict"] == "refuse" and JSON in out["rules"], out
    assert "--json-model-override-args" in out["message"] and "JSON object" in out["message"], out


def test_the_no_buffer_rule_leaves_a_page_size_of_one_and_a_model_without_mamba_state():
    for argv in ([*HYBRID, "--linear-attn-backend", "intel_xpu", "--page-size", "1"],
                 [*DENSE, "--mamba-radix-cache-strategy", "no_buffer", "--page-size", "64"],
                 [*HYBRID, "--linear-attn-backend", "intel_xpu", "--page-size", "64", "--disaggregation-mode",
                  "decode"]):
        out = _product("0.5.23", argv)
        assert NOBUF not in out.get("rules", []), (argv, out)


@pytest.mark.parametrize("argv,rid", PLUGIN_LINES)
def test_a_kernel_plugin_flag_alone_warns_on_0_5_23(argv, rid):
    from tests.core.test_miss9_rules import findings

    got = findings("sglang", "0.5.23", argv, model="shape-mla-moe")
    assert got.get(rid) == "warning", got
    assert "error" not in {s for r, s in got.items() if r != "argv-refused"} and "argv-refused" not in got, got


def test_both_kernel_plugin_flags_are_refused_on_0_5_23_and_the_flags_unknown_on_0_5_22():
    out = _product("0.5.23", [*MLA, "--enable-nvidia-megakernel", "--enable-amd-monokernel"])
    assert out["verdict"] == "refuse" and BOTH_FLAGS in out["rules"], out
    for argv, _rid in PLUGIN_LINES:
        out = _product("0.5.22", argv)
        assert out["verdict"] == "refuse" and "argv-refused" in out["rules"], out
