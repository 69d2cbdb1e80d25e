"""The SGLang rules of gpustack_k3/core/rules/sglang_checks_smiss7.py (the SM100 default attention backend of a model
that is not MLA and the checks keyed on it, --pp-size 0 with DCP, the AMD monokernel plugin): the product's side
(check-args as the differential runs it); the shared tests: tests/core/test_sglang_python_rules.py. The release's own
verdict on the same lines: tests/engine_oracle/test_sglang_python_rules_oracle.py."""
from __future__ import annotations

from gpustack_k3.core.rules import RULES
from tests.core.test_smiss5_rules import KIMI, findings, product

MIS = "sglang-mis-sm100-default-backend"
DET = "sglang-deterministic-sm100-override-backend"
TOPK = "sglang-trtllm-mha-eagle-topk"
PP0 = "sglang-pp-size-zero-dcp-comm-default"
AMD = "sglang-amd-monokernel-plugin"
MORI = "sglang-mori-default-chunk-dispatch-tokens"
NGRAM = "sglang-ngram-tree-trtllm-mha"
DENSE = ["--model-path", "/models/shape-gqa-dense", "--tp-size", "8"]     # LlamaForCausalLM: no model override
YARN = ["--model-path", "/models/shape-gqa-yarn", "--tp-size", "8"]       # GptOssForCausalLM: its override
HYBRID = ["--model-path", "/models/shape-hybrid", "--tp-size", "8"]       # NemotronHForCausalLM: its override
FI = ["--attention-backend", "flashinfer"]
K3_DCP_PP0 = KIMI + ["--dcp-size", "8", "--pp-size", "0"]


def eagle(model: list[str], algo: str, topk: int) -> list[str]:
    path = model[model.index("--model-path") + 1]
    return model + ["--speculative-algorithm", algo, "--speculative-draft-model-path", path, "--speculative-eagle-topk",
                    str(topk), "--speculative-num-steps", "3", "--speculative-num-draft-tokens", str(3 * topk + 1 if topk > 1 else 4)]


# (rule, release, refused line, accepted line): the release refuses the first at the rule's cited source and
# accepts the second (tests/engine_oracle/test_sglang_python_rules_oracle.py)
SMISS7_CASES = [
    # --enable-mis: SM100 picks trtllm_mha for an MHA model (get_default_attn_backend, or the GPT-OSS / Nemotron-H override)
    (MIS, "0.5.23", DENSE + ["--enable-mis"], DENSE + ["--enable-mis", *FI]),
    (MIS, "0.5.23", YARN + ["--enable-mis"], YARN),
    (MIS, "0.5.23", HYBRID + ["--enable-mis"], HYBRID),
    # one phase given: the other is the attention_backend _attention_backend_default fills in
    (MIS, "0.5.23", DENSE + ["--enable-mis", "--prefill-attention-backend", "flashinfer"], DENSE + ["--enable-mis", *FI]),
    (MIS, "0.5.23", DENSE + ["--enable-mis", "--decode-attention-backend", "flashinfer"], DENSE + ["--enable-mis", *FI]),
    (MIS, "0.5.22", DENSE + ["--enable-mis"], DENSE + ["--enable-mis", *FI]),
    (MIS, "0.5.22", HYBRID + ["--enable-mis"], HYBRID),
    # deterministic inference: the GPT-OSS / Nemotron-H override sets trtllm_mha before the deterministic pass
    (DET, "0.5.23", YARN + ["--rl-on-policy-target", "fsdp"], YARN + ["--rl-on-policy-target", "fsdp", "--attention-backend", "triton"]),
    (DET, "0.5.23", HYBRID + ["--enable-deterministic-inference"],
     HYBRID + ["--enable-deterministic-inference", "--attention-backend", "triton"]),
    # Nemotron-H with a speculative top-k above 1: its override picks triton
    (DET, "0.5.23", eagle(HYBRID, "EAGLE", 1) + ["--enable-deterministic-inference"],
     eagle(HYBRID, "EAGLE", 4) + ["--enable-deterministic-inference"]),
    (DET, "0.5.22", YARN + ["--enable-deterministic-inference"],
     YARN + ["--enable-deterministic-inference", "--attention-backend", "triton"]),
    (DET, "0.5.22", HYBRID + ["--rl-on-policy-target", "fsdp"], DENSE + ["--rl-on-policy-target", "fsdp"]),
    # an EAGLE tree on trtllm_mha: GPT-OSS's override, or the line's own backend (either phase)
    (TOPK, "0.5.23", eagle(YARN, "EAGLE", 4), eagle(YARN, "EAGLE", 1)),
    (TOPK, "0.5.23", eagle(DENSE, "EAGLE", 2) + ["--attention-backend", "trtllm_mha"],
     eagle(DENSE, "EAGLE", 1) + ["--attention-backend", "trtllm_mha"]),
    (TOPK, "0.5.23", eagle(DENSE, "EAGLE3", 2) + ["--decode-attention-backend", "trtllm_mha"], eagle(DENSE, "EAGLE", 4)),
    (TOPK, "0.5.22", eagle(YARN, "EAGLE", 4), eagle(YARN, "EAGLE", 4) + ["--attention-backend", "triton"]),
    # an NGRAM tree (BFS breadth 10 unless given) on trtllm_mha: the override's (GPT-OSS, Nemotron-H) or the line's
    (NGRAM, "0.5.23", YARN + ["--speculative-algorithm", "NGRAM"],
     YARN + ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "1"]),
    (NGRAM, "0.5.23", HYBRID + ["--speculative-algorithm", "NGRAM"],
     HYBRID + ["--speculative-algorithm", "NGRAM", "--speculative-eagle-topk", "4"]),
    (NGRAM, "0.5.23", DENSE + ["--speculative-algorithm", "NGRAM", "--attention-backend", "trtllm_mha"],
     DENSE + ["--speculative-algorithm", "NGRAM"]),
    (NGRAM, "0.5.22", YARN + ["--speculative-algorithm", "NGRAM"],
     YARN + ["--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "1"]),
    (NGRAM, "0.5.22", DENSE + ["--speculative-algorithm", "NGRAM", "--attention-backend", "trtllm_mha", "--speculative-ngram-max-bfs-breadth", "4"],
     DENSE + ["--speculative-algorithm", "NGRAM", "--attention-backend", "trtllm_mha", "--speculative-ngram-max-bfs-breadth", "1"]),
    # MoRI with no --chunked-prefill-size: the B300 default (16384) is above the dispatch cap (4096)
    (MORI, "0.5.23", KIMI + ["--moe-a2a-backend", "mori"], KIMI + ["--moe-a2a-backend", "mori", "--chunked-prefill-size", "4096"]),
    (MORI, "0.5.23", YARN + ["--moe-a2a-backend", "mori"], YARN + ["--moe-a2a-backend", "mori", "--chunked-prefill-size", "4096"]),
    (MORI, "0.5.23", HYBRID + ["--moe-a2a-backend", "mori"], HYBRID + ["--moe-a2a-backend", "mori", "--chunked-prefill-size", "2048"]),
    (MORI, "0.5.22", DENSE + ["--moe-a2a-backend", "mori"], DENSE + ["--moe-a2a-backend", "mori", "--chunked-prefill-size", "4096"]),
    (MORI, "0.5.22", KIMI + ["--moe-a2a-backend", "mori"], KIMI + ["--moe-a2a-backend", "mori", "--attn-dp-size", "8", "--enable-dp-lm-head"]),
]
SMISS7_DIRECT = {c[0] for c in SMISS7_CASES} | {PP0, AMD}


def test_default_backend_model_reads_the_gpu_the_flags_and_the_model():
    line = DENSE + ["--enable-mis"]
    assert MIS in product("0.5.23", line, gpu_type="gb300")["rules"]
    assert MIS not in product("0.5.23", line, gpu_type="h200")["rules"]   # Hopper: fa3, another path
    # a speculative algorithm moves get_default_attn_backend's choice (top-k): left to the release
    assert MIS not in product("0.5.23", eagle(DENSE, "EAGLE", 4) + ["--enable-mis"])["rules"]
    # MLA models (DeepSeek-V3 shape, Kimi-K3) are other entries' and other paths'
    assert MIS not in product("0.5.23", ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--enable-mis"])["rules"]
    assert MIS not in product("0.5.23", KIMI + ["--enable-mis"])["rules"]
    # no model override: the deterministic pass falls back to flashinfer itself (the release accepts)
    assert DET not in product("0.5.23", DENSE + ["--enable-deterministic-inference"])["rules"]
    assert product("0.5.23", DENSE + ["--rl-on-policy-target", "fsdp"])["verdict"] == "pass"
    # Nemotron-H's override reads the line's top-k (it runs before the speculative hooks): none given is trtllm_mha
    hyb = HYBRID + ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/models/shape-hybrid",
                    "--enable-deterministic-inference"]
    assert DET in product("0.5.23", hyb)["rules"]
    assert DET not in product("0.5.23", hyb + ["--speculative-eagle-topk", "2", "--speculative-num-steps", "2",
                                               "--speculative-num-draft-tokens", "4"])["rules"]


def test_default_backend_model_leaves_override_architectures_to_the_release():
    from gpustack_k3.core.rules.sglang_checks_smiss7 import MODEL_OVERRIDE_ARCHS, NEMOTRON_H_ARCHS

    assert "GptOssForCausalLM" in MODEL_OVERRIDE_ARCHS and set(NEMOTRON_H_ARCHS) <= MODEL_OVERRIDE_ARCHS
    assert "LlamaForCausalLM" not in MODEL_OVERRIDE_ARCHS


def test_pp_size_zero_is_a_warning_off_an_nvlink_fabric_gpu():
    for release in ("0.5.22", "0.5.23"):
        found = findings_on(release, K3_DCP_PP0)
        assert found[PP0]["severity"] == "warning" and "ZeroDivisionError" in found[PP0]["message"]
        assert product(release, K3_DCP_PP0)["verdict"] == "pass"
    # GB300 is an MNNVL fabric device by name: no division
    assert PP0 not in findings_on("0.5.23", K3_DCP_PP0, "gb300")
    assert PP0 not in findings_on("0.5.23", K3_DCP_PP0, "h200")              # not SM100: is_fi_a2a_supported is False
    assert PP0 not in findings_on("0.5.23", K3_DCP_PP0 + ["--dcp-comm-backend", "a2a"])
    assert PP0 not in findings_on("0.5.23", KIMI + ["--pp-size", "0"])        # no DCP: the default is ag_rs
    assert PP0 not in findings_on("0.5.23", KIMI + ["--dcp-size", "8", "--pp-size", "1"])


def findings_on(release: str, argv: list[str], gpu: str = "b300") -> dict[str, dict]:
    import json

    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd

    res = CliRunner().invoke(cmd, ["--engine", "sglang", "--engine-version", release, "--gpu-type", gpu, "-o", "json",
                                   "--", *argv])
    assert res.exit_code in (0, 1), res.output
    return {f["rule"]: f for f in json.loads(res.output)["findings"]}


def test_amd_monokernel_is_a_warning_on_0523_only():
    assert set(RULES[AMD].sources) == {"sglang 0.5.23"}   # 0.5.22's parser has no --enable-amd-monokernel
    for flag in (["--enable-amd-monokernel"], ["--monokernel-backend", "amd"]):
        found = findings("0.5.23", KIMI + flag)
        assert found[AMD]["severity"] == "warning" and "'amd' monokernel backend" in found[AMD]["message"]
        assert product("0.5.23", KIMI + flag)["verdict"] == "pass"
    assert AMD not in findings("0.5.23", KIMI)


def test_warnings_name_their_releases():
    assert {k.split(" ", 1)[1] for k in RULES[PP0].sources} == {"0.5.22", "0.5.23"}


def test_mori_default_chunk_reads_the_gpu_memory_and_the_cap():
    from gpustack_k3.core.rules.sglang_checks_smiss7 import default_chunked_prefill_size

    class R:
        def __init__(self, gib, sm="SM103"):
            self.hardware = type("H", (), {"visible_gib": gib, "sm": sm})()

    assert [default_chunked_prefill_size(R(g)) for g in (16, 24, 40, 80, 139.8, 178.35, 267.69)] == [
        2048, 4096, 4096, 8192, 8192, 16384, 16384]
    assert default_chunked_prefill_size(R(64, "none")) is None
    line = KIMI + ["--moe-a2a-backend", "mori"]
    found = findings_on("0.5.23", line)
    assert "16384" in found[MORI]["message"]
    # a cap at the default chunk lets it through; a decode server skips the check
    from tools.engine_oracle.product import check_args

    res = check_args("sglang", "0.5.23", {"argv": line, "env": {"SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "16384"},
                                          "model": None, "gpu_type": "b300", "gpus": 8})
    assert MORI not in res["rules"], res
    res = check_args("sglang", "0.5.23", {"argv": line, "env": {"SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "8192"},
                                          "model": None, "gpu_type": "b300", "gpus": 8})
    assert MORI in res["rules"], res
    assert MORI not in findings_on("0.5.23", line + ["--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl"])
    # an architecture whose path is not read here is left to the release
    from gpustack_k3.core.rules.sglang_checks_smiss7 import MORI_DEFAULT_CHUNK_ARCHS

    assert "Qwen3MoeForCausalLM" not in MORI_DEFAULT_CHUNK_ARCHS
