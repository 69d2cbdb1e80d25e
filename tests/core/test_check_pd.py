"""check-pd on the llm-d wide-EP recipe's command lines (guides/wide-ep-lws, GB200 NVL72: prefill DEP2, decode DEP32
with hybrid LB) and on a mismatching variant per P/D rule; the check-args JSON contract and exit codes."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.main import cli

KV = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_load_failure_policy":"fail"}\''
COMMON = f"--trust-remote-code --kv-transfer-config {KV} --kv-cache-dtype fp8 --block-size 256 " \
         "--no-disable-hybrid-kv-cache-manager"
PREFILL = ("vllm serve /models/DeepSeek-V4.1-Flash --tensor-parallel-size 1 --data-parallel-size 2 "
           "--data-parallel-size-local 2 --enable-expert-parallel --enforce-eager --no-async-scheduling "
           f"--gpu-memory-utilization 0.95 {COMMON}")
DECODE = ("vllm serve /models/DeepSeek-V4.1-Flash --data-parallel-size 32 --data-parallel-size-local 4 "
          "--data-parallel-start-rank $((LWS_WORKER_INDEX*4)) --data-parallel-address $LWS_LEADER_ADDRESS "
          "--data-parallel-rpc-port 5555 --data-parallel-hybrid-lb --enable-expert-parallel --enable-eplb "
          f"--max-num-seqs 64 {COMMON}")
HOST = "VLLM_NIXL_SIDE_CHANNEL_HOST=$(POD_IP)"


def run(prefill=PREFILL, decode=DECODE, *extra, env=True, model="deepseek-v4.1-flash"):
    args = ["check-pd", "--engine", "vllm", "--engine-version", "0.33.0", "--model", model, "--gpu-type", "gb300",
            "--prefill", prefill, "--decode", decode, "--decode-pods", "8", "-o", "json", *extra]
    if env:
        args += ["--prefill-env", HOST, "--decode-env", HOST]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    return res.exit_code, res.output


def rules(out: str, severity: str = "error") -> set[str]:
    return {f["rule"] for f in json.loads(out)["findings"] if f["severity"] == severity}


def test_the_recipe_pair_passes():
    code, out = run()
    assert code == 0, out
    d = json.loads(out)
    assert d["ok"] is True and rules(out) == set()
    infos = {f["rule"]: f for f in d["findings"] if f["severity"] == "info"}
    assert "2,048 per instance" in infos["topology-max-num-seqs-per-rank"]["message"]
    assert {"rule", "severity", "field", "message", "fix", "source"} <= set(d["findings"][0])


@pytest.mark.parametrize("rule_id,prefill,decode,env", [
    ("pd-compat-hash", PREFILL.replace("--kv-cache-dtype fp8", "--kv-cache-dtype auto"), DECODE, True),
    ("pd-compat-hash", PREFILL, DECODE + " --speculative-config '{\"method\":\"dspark\",\"model\":\"/d\","
     "\"num_speculative_tokens\":5}'", True),
    ("pd-compat-hash", PREFILL + " --attention-backend CUTLASS_MLA", DECODE + " --attention-backend FLASHINFER_MLA",
     True),
    ("pd-compat-hash", PREFILL + " --dtype float16", DECODE + " --dtype bfloat16", True),
    ("pd-dcp-divide", PREFILL.replace("--tensor-parallel-size 1", "--tensor-parallel-size 3 -dcp 3"),
     DECODE + " --tensor-parallel-size 2 -dcp 2", True),
    ("pd-compat-hash", PREFILL, DECODE.replace('"NixlConnector"', '"NixlPushConnector"'), True),
    ("pd-compat-hash", PREFILL + " --disable-hybrid-kv-cache-manager", DECODE, True),
    ("pd-roles", PREFILL.replace(f"--kv-transfer-config {KV}", ""), DECODE, True),
    ("pd-side-channel-host", PREFILL, DECODE, False),
    ("topology-lb-exclusive", PREFILL, DECODE + " --data-parallel-external-lb", True),
    ("topology-lb-exclusive", PREFILL, DECODE + " --headless", True),
    ("topology-dp-layout", PREFILL, DECODE.replace("--data-parallel-size 32", "--data-parallel-size 30"), True),
    ("topology-start-rank", PREFILL, DECODE.replace("$((LWS_WORKER_INDEX*4))", "6"), True),
    ("topology-nnodes-backend", PREFILL, DECODE + " --nnodes 8 --data-parallel-backend ray", True),
    ("eplb-needs-ep", PREFILL, DECODE.replace("--enable-expert-parallel ", ""), True),
    ("eplb-redundant-needs-eplb", PREFILL + " --eplb-config '{\"num_redundant_experts\":32}'", DECODE, True),
    ("eplb-async-communicator", PREFILL, DECODE + " --eplb-config '{\"communicator\":\"pynccl\"}'", True),
])
def test_a_mismatching_variant_is_refused(rule_id, prefill, decode, env):
    code, out = run(prefill, decode, env=env)
    assert code == 1, out
    assert rule_id in rules(out)


def test_hybrid_models_need_equal_dcp_and_block_size():
    kimi = "vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --kv-transfer-config " + KV
    code, out = run(kimi + " -dcp 8", kimi, model="kimi-k3")
    assert code == 1 and "pd-hybrid-dcp-equal" in rules(out)
    code, out = run(kimi + " --block-size 64", kimi + " --block-size 128", model="kimi-k3")
    assert "pd-hybrid-block-size" in rules(out, "warning")   # the engine re-aligns hybrid block sizes at start-up
    code, out = run(kimi, kimi, model="kimi-k3")
    assert not {"pd-hybrid-dcp-equal", "pd-hybrid-block-size"} & rules(out)


@pytest.mark.parametrize("prefill,needle", [
    ("vllm serve 'unterminated", "--prefill"),
    ("", "--prefill"),
])
def test_bad_input_exits_2_naming_the_option(prefill, needle):
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "vllm", "--prefill", prefill, "--decode", DECODE])
    assert res.exit_code == 2 and needle in res.output, res.output
    assert "Traceback" not in res.output


def test_a_token_the_engine_refuses_is_an_argv_refused_finding_of_its_side():
    # read as check-args reads it: vLLM's parser refuses `x` for an int option (exit 1, not unusable input)
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "vllm", "--prefill", "vllm serve m --tensor-parallel-size x",
                                   "--decode", DECODE])
    assert res.exit_code == 1 and "[argv-refused] --prefill argv[1]" in res.output, res.output
    assert "invalid int value: 'x'" in res.output
    # bad JSON in --kv-transfer-config is read by the engine's parser too (TypeAdapter.validate_json): argv-refused
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "vllm", "--prefill", "vllm serve m --kv-transfer-config '{oops'",
                                   "--decode", DECODE])
    assert res.exit_code == 1 and "[argv-refused] --prefill argv[1]: argument --kv-transfer-config" in res.output


SGL = ("python3 -m sglang.launch_server --model-path /models/Kimi-K3 --trust-remote-code --tp-size 8 "
       "--kv-cache-dtype fp8_e4m3 --disaggregation-transfer-backend nixl")


def sgl(prefill: str, decode: str, *extra: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "sglang", "--engine-version", "0.5.23", "--prefill", prefill,
                                   "--decode", decode, "-o", "json", *extra], catch_exceptions=False)
    return res.exit_code, res.output


def test_check_pd_on_sglang_checks_the_pair():
    """check-pd --engine sglang reads both lines with the release's parser and runs the SGLang P/D rules (issue 27):
    a matching pair passes, as the vLLM path does."""
    code, out = sgl(SGL + " --disaggregation-mode prefill", SGL + " --disaggregation-mode decode")
    assert code == 0 and rules(out) == set(), out
    assert json.loads(out)["ok"] is True


@pytest.mark.parametrize("rule_id,prefill,decode", [
    ("sglang-pd-roles", SGL, SGL + " --disaggregation-mode decode"),
    ("sglang-pd-transfer-backend", SGL.replace("nixl", "mooncake") + " --disaggregation-mode prefill",
     SGL + " --disaggregation-mode decode"),
    ("sglang-pd-kv-dtype", SGL + " --disaggregation-mode prefill",
     SGL.replace("fp8_e4m3", "auto") + " --disaggregation-mode decode"),
    ("sglang-pd-page-size", SGL + " --disaggregation-mode prefill --page-size 32",
     SGL + " --disaggregation-mode decode --page-size 64"),
    ("sglang-pd-allocation-policy", SGL + " --disaggregation-mode prefill",
     SGL + " --disaggregation-mode decode --disaggregation-decode-allocation-policy prefill_complete"),
    ("sglang-pd-model", SGL + " --disaggregation-mode prefill",
     SGL.replace("/models/Kimi-K3", "/models/Kimi-K3-other") + " --disaggregation-mode decode"),
    # the deprecated DP-attention spelling is read as the release reads it (parallel_hook.py:39-61@0.5.23)
    ("sglang-attn-dp-divides-tp", SGL + " --disaggregation-mode prefill",
     SGL.replace("--tp-size 8", "--tp-size 6") + " --dp-size 4 --enable-dp-attention --disaggregation-mode decode"),
])
def test_check_pd_on_sglang_refuses_a_mismatch(rule_id, prefill, decode):
    code, out = sgl(prefill, decode, "--model", "kimi-k3")
    assert code == 1 and rule_id in rules(out), out
    assert all(f["field"].startswith(("prefill", "decode")) for f in json.loads(out)["findings"])


def test_check_pd_on_sglang_multi_node_decode():
    """A decode over 2 nodes, its rank and rendezvous given per pod as the LWS renders them: the node rank's shell
    expression is taken out before the parser reads the int; 2 pods x 8 GPUs hold TP 16."""
    dec = (SGL.replace("--tp-size 8", "--tp-size 16 --attn-dp-size 16 --ep-size 16 --enable-dp-lm-head")
           + " --disaggregation-mode decode --nnodes 2 --node-rank $LWS_WORKER_INDEX "
           "--dist-init-addr $LWS_LEADER_ADDRESS:20000")
    code, out = sgl(SGL + " --disaggregation-mode prefill", dec, "--decode-pods", "2", "--gpus-per-pod", "8")
    assert code == 0 and rules(out) == set(), out
    code, out = sgl(SGL + " --disaggregation-mode prefill", dec, "--decode-pods", "2", "--gpus-per-pod", "4")
    assert code == 1 and "sglang-nnodes-gpus" in rules(out), out


def test_check_pd_on_sglang_unusable_input_is_exit_2():
    code, out = sgl("python3 -m sglang.launch_server --model-path '/m", SGL + " --disaggregation-mode decode")
    assert code == 2, out


def test_a_pair_differing_only_in_what_nixl_does_not_hash_passes():
    """vLLM 0.33.0 hashes neither num_speculative_tokens nor the draft attention backend (nixl/metadata.py:103-142):
    prefill drafting 7 tokens and decode 5 was refused (issue 22)."""
    kimi = "vllm serve /models/Kimi-K3 --tensor-parallel-size 8 -dcp 8 --trust-remote-code --kv-cache-dtype fp8 " \
           "--attention-backend FLASHINFER_MLA --kv-transfer-config " + KV
    def spec(tokens: int, draft: str = "/models/Kimi-K3-DSpark", backend: str = "") -> str:
        extra = f',"attention_backend":"{backend}"' if backend else ""
        return f""" --speculative-config '{{"method":"dspark","model":"{draft}","num_speculative_tokens":{tokens}{extra}}}'"""

    code, out = run(kimi + spec(7, backend="FLASHINFER_MLA"), kimi + spec(5), model="kimi-k3")
    assert "pd-compat-hash" not in rules(out), out
    # the draft model is hashed: a different one is refused
    code, out = run(kimi + spec(7), kimi + spec(7, draft="/d2"), model="kimi-k3")
    assert code == 1 and "pd-compat-hash" in rules(out)


def test_non_eagle_drafts_hash_as_none_and_auto_vs_explicit_only_warns():
    """ngram drafts hash as None on both sides (metadata.py:103-108@0.33.0, use_eagle); an attention backend left
    auto on one side resolves inside the engine (platforms/cuda.py:95-135): a warning, never a refusal."""
    code, out = run(PREFILL + " --speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":3,"
                              "\"prompt_lookup_max\":4}'", DECODE)
    assert "pd-compat-hash" not in rules(out), out
    code, out = run(PREFILL, DECODE + " --attention-backend FLASHINFER_MLA")
    assert "pd-compat-hash" not in rules(out) and "pd-compat-hash-undecided" in rules(out, "warning")


def test_check_pd_reads_kv_role_and_gpus_per_pod_per_side():
    """A producer needs a consumer (issue 23 item 7): prefill kv_consumer is refused (pd-kv-role); kv_both works on
    either side; --prefill-gpus-per-pod / --decode-gpus-per-pod check dpLocal x TP per side."""
    consumer = KV.replace("kv_both", "kv_consumer")
    code, out = run(PREFILL.replace(KV, consumer), DECODE)
    assert code == 1 and "pd-kv-role" in rules(out), out
    code, out = run(PREFILL.replace(KV, KV.replace("kv_both", "kv_producer")), DECODE.replace(KV, consumer))
    assert "pd-kv-role" not in rules(out), out
    code, out = run(PREFILL, DECODE, "--prefill-gpus-per-pod", "2", "--decode-gpus-per-pod", "4")
    assert code == 0, out
    code, out = run(PREFILL, DECODE, "--prefill-gpus-per-pod", "2", "--decode-gpus-per-pod", "8")
    assert code == 1 and "topology-gpus-per-pod" in rules(out)
    assert any(f["field"] == "decode.gpusPerPod" for f in json.loads(out)["findings"])


def test_check_pd_takes_the_models_config(tmp_path):
    """--model-config gives both sides the architecture figures; the resolved dtype then decides the NIXL dtype factor
    (bfloat16 on one side and auto on the other hash equal for a bfloat16 checkpoint, nixl/metadata.py:185@0.33.0)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "num_attention_heads": 64,
                               "num_hidden_layers": 4, "kv_lora_rank": 512, "n_routed_experts": 384,
                               "torch_dtype": "bfloat16"}))
    code, out = run(PREFILL + " --dtype bfloat16", DECODE, "--model-config", str(cfg))
    assert "pd-compat-hash" not in rules(out) and "pd-compat-hash-undecided" not in rules(out, "warning"), out
    code, out = run(PREFILL + " --dtype float16", DECODE, "--model-config", str(cfg))
    assert "pd-compat-hash" in rules(out)
