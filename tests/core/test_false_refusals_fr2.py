"""False refusals (the product refuses what the pinned release accepts), second batch: EPLB config keys the spec
has no field for, a null speculative method, literal env values that name token counts, DSpark without a separate
draft. Each case names the release's source that decides it; each line was judged by the engine oracle
(`python3 -m tools.engine_oracle vllm-0.33.0`, 2026-12-03: accepted).
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.api.v1alpha1.spec import Eplb
from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.main import cli
from gpustack_k3.core.flags import eplb_json, parse_argv
from gpustack_k3.core.rules import validate

from .conftest import preset_doc

CAT = load_catalog()
VLLM = CAT.engine("vllm")

KIMI = ["/models/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code"]
EP = ["--enable-expert-parallel", "--enable-eplb"]


def check_args(engine: str, version: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[int, dict]:
    envs = [a for k, v in (env or {}).items() for a in ("--env", f"{k}={v}")]
    res = CliRunner().invoke(cli, ["check-args", "--engine", engine, "--engine-version", version, "-o", "json",
                                   *envs, "--", *argv], catch_exceptions=False)
    return res.exit_code, json.loads(res.stdout)


def rules(doc: dict, severity: str = "error") -> set[str]:
    return {f["rule"] for f in doc.get("findings") or [] if f["severity"] == severity}


# ------------------------------------------------------------------ --eplb-config keys without a spec field

# EPLBConfig (config/parallel.py:62-109@0.28.0, :67-109@0.33.0, :68-117@0.34.0) takes policy and
# log_balancedness_interval from 0.28.0 and enable_migration_batching from 0.33.0; spec.parallel.eplb has no field
# for them: they were an input error (exit 2). The engine oracle accepts each line on 0.33.0.
@pytest.mark.parametrize("version, cfg", [
    ("0.28.0", {"policy": "default"}),
    ("0.33.0", {"policy": "default"}),
    ("0.34.0", {"policy": "default"}),
    ("0.29.0", {"log_balancedness_interval": 5}),
    ("0.33.0", {"log_balancedness_interval": 5, "window_size": 500}),
    ("0.33.0", {"enable_migration_batching": True}),
    ("0.34.0", {"enable_migration_batching": True}),
])
def test_vllm_eplb_config_keys_without_a_field_pass_through(version, cfg):
    code, doc = check_args("vllm", version, KIMI + EP + ["--eplb-config", json.dumps(cfg)])
    assert code != 2, doc
    assert "argv-refused" not in rules(doc)


def test_vllm_eplb_config_pass_through_round_trips_into_the_rendered_line():
    parsed = parse_argv(VLLM, KIMI + EP + ["--eplb-config", json.dumps(
        {"policy": "default", "enable_migration_batching": True, "window_size": 500})], version=CAT.version("vllm", "0.33.0"))
    assert parsed.refusals == []
    eplb = parsed.spec["parallel"]["eplb"]
    assert eplb["windowSize"] == 500
    assert eplb["extraConfig"] == {"policy": "default", "enable_migration_batching": True}
    assert eplb_json(VLLM, Eplb(**eplb)) == {"window_size": 500, "policy": "default", "enable_migration_batching": True}


def test_vllm_eplb_config_key_the_release_lacks_is_still_refused():
    # 0.28.0's EPLBConfig has no enable_migration_batching (config/parallel.py:62-100@0.28.0, pydantic
    # extra=forbid): the engine oracle refuses ("Unexpected keyword argument"); so does the product
    code, doc = check_args("vllm", "0.28.0", KIMI + EP + ["--eplb-config", '{"enable_migration_batching": true}'])
    assert code == 1, doc
    assert "argv-refused" in rules(doc)


# ------------------------------------------------------------------ speculative method null

# SpeculativeConfig.method is `SpeculativeMethod | None = None` and null means "infer it" (config/speculative.py:
# 1236-1244@0.33.0: a path model is draft_model or a detected type, "ngram" is ngram); the product refused null with
# '"method" must be a string' (exit 1). The oracle accepts both lines on 0.33.0.
@pytest.mark.parametrize("cfg, method", [
    ({"method": None, "model": "/models/Kimi-K3-DSpark", "num_speculative_tokens": 7}, "dspark"),
    ({"method": None, "model": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}, "ngram"),
])
def test_vllm_speculative_method_null_is_inferred(cfg, method):
    code, doc = check_args("vllm", "0.33.0", KIMI + ["--speculative-config", json.dumps(cfg)])
    assert code == 0, doc
    parsed = parse_argv(VLLM, KIMI + ["--speculative-config", json.dumps(cfg)], version=CAT.version("vllm", "0.33.0"))
    assert parsed.spec["speculative"]["method"] == method


def test_vllm_speculative_method_of_wrong_type_is_still_refused():
    code, doc = check_args("vllm", "0.33.0", KIMI + ["--speculative-config", '{"method": 3, "model": "ngram"}'])
    assert code != 0, doc


# ------------------------------------------------------------------ secret-in-env: names of token counts

# SGLang knobs such as SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK (srt/environ.py@0.5.23) are counts of tokens:
# a literal value is what they take. The rule matched the substring TOKEN and refused them.
@pytest.mark.parametrize("name", ["SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "SGLANG_INIT_NEW_TOKEN_RATIO",
                                  "SGLANG_SYNC_TOKEN_IDS_ACROSS_TP", "SGLANG_MAX_NEW_TOKENS_LIMIT"])
def test_sglang_token_count_env_is_not_a_secret(name):
    code, doc = check_args("sglang", "0.5.23", ["--model-path", "/models/Kimi-K3", "--tp", "8", "--trust-remote-code"],
                           env={name: "128"})
    assert "secret-in-env" not in rules(doc), doc


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SESSION_TOKEN", "VLLM_API_KEY",
                                  "S3_SECRET_ACCESS_KEY", "DB_PASSWORD", "hf_token"])
def test_secret_names_are_still_refused(name):
    code, doc = check_args("vllm", "0.33.0", KIMI, env={name: "abc"})
    assert code == 1, doc
    assert "secret-in-env" in rules(doc)


# a document's spec.parallel.eplb.extraConfig goes through the release's parser as the rendered --eplb-config does
def test_vllm_eplb_extra_config_in_a_document_is_checked_by_the_release_parser():
    def rule_ids(version, extra):
        doc = preset_doc("vllm-seed", {"engine": {"version": version},
                                        "parallel": {"expertParallel": True, "eplb": {"extraConfig": extra}}})
        return {f.rule for f in validate(doc)}
    assert "vllm-eplb-config-refused" in rule_ids("0.28.0", {"enable_migration_batching": True})
    assert "vllm-eplb-config-refused" not in rule_ids("0.33.0", {"enable_migration_batching": True})
    assert "vllm-eplb-config-refused" in rule_ids("0.33.0", {"log_balancedness_interval": 0})   # Field(gt=0)


# ------------------------------------------------------------------ DSpark without a separate draft

# vLLM 0.33.0 takes the DSpark draft from the target checkpoint when num_speculative_tokens is given and no model
# (config/speculative.py:1251-1275@0.33.0), 0.34.0 the speculator class's default model (config/speculative.py:
# 1384-1389@0.34.0); the engine oracle accepts both lines (2026-12-03). Without num_speculative_tokens both refuse.
@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_vllm_dspark_without_draft_but_with_num_tokens_is_accepted(version):
    code, doc = check_args("vllm", version, KIMI + ["--speculative-config",
                                                    '{"method": "dspark", "num_speculative_tokens": 7}'])
    assert "spec-draft-missing" not in rules(doc), doc


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_vllm_dspark_without_draft_or_num_tokens_is_still_refused(version):
    code, doc = check_args("vllm", version, KIMI + ["--speculative-config", '{"method": "dspark"}'])
    assert code == 1, doc


# ------------------------------------------------------------------ --max-num-seqs below 0 on vLLM 0.11.0

# 0.11.0's SchedulerConfig.max_num_seqs is SkipValidation[int] (config/scheduler.py:38@0.11.0) and nothing reads a
# negative value at config time: the engine oracle accepts --max-num-seqs=-1 and -5 (2026-12-03); the spec's ge=0
# bound made it an input error (exit 2). From 0.28.0 Field(ge=1) refuses it (rule vllm-config-bounds).
@pytest.mark.parametrize("n", ["-1", "-5"])
def test_vllm_011_negative_max_num_seqs_is_not_an_input_error(n):
    code, doc = check_args("vllm", "0.11.0", ["HuggingFaceTB/SmolLM2-135M-Instruct", f"--max-num-seqs={n}"])
    assert code != 2, doc
    assert "vllm-config-bounds" not in rules(doc)


def test_vllm_033_negative_max_num_seqs_is_refused_by_the_config_bound():
    code, doc = check_args("vllm", "0.33.0", KIMI + ["--max-num-seqs=-1"])
    assert code == 1, doc
    assert "vllm-config-bounds" in rules(doc)
