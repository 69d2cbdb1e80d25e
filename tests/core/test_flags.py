"""Spec <-> argv: the seed command lines round-trip through import and render."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.flags import parse_argv, render_args
from gpustack_k3.core.resolve import resolve

from .conftest import preset_doc

# Seed 001 §4.2 / §5.1 (domain §2), typed here from the write-up, not from our renderer.
SEED_VLLM = [
    "--trust-remote-code", "--load-format", "fastsafetensors", "--moe-backend", "auto",
    "--gpu-memory-utilization", "0.95", "--tensor-parallel-size", "8", "--max-model-len", "1000000",
    "--kv-cache-dtype", "fp8",
    "--attention-config", '{"mla_prefill_backend":"TRTLLM_RAGGED","use_prefill_query_quantization":true}',
    "--max-num-batched-tokens", "32768", "--enable-prefix-caching", "--enable-auto-tool-choice",
    "--tool-call-parser", "kimi_k3", "--reasoning-parser", "kimi_k3", "--max-num-seqs", "32",
    "--speculative-config", '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark",'
    '"attention_backend":"FLASHINFER_MLA","draft_sample_method":"probabilistic","rejection_sample_method":"block"}',
]
SEED_SGLANG = [
    "--trust-remote-code", "--model-path", "/models/Kimi-K3", "--tp-size", "8", "--dcp-size", "8",
    "--disable-custom-all-reduce", "--enable-symm-mem", "--mem-fraction-static", "0.85",
    "--reasoning-parser", "kimi_k3", "--tool-call-parser", "kimi_k3", "--mamba-full-memory-ratio", "0.86",
    "--host", "0.0.0.0", "--port", "30000", "--speculative-algorithm", "DSPARK",
    "--speculative-draft-model-path", "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size", "7",
    "--enable-linear-replayssm-spec", "--chunked-prefill-size", "32768", "--max-prefill-tokens", "32768",
    "--context-length", "1000000", "--kv-cache-dtype", "fp8_e4m3",
]


def as_pairs(argv):
    """Flags with JSON values compared as JSON."""
    out = []
    for t in argv:
        try:
            v = json.loads(t)
            out.append(v if isinstance(v, dict) else t)
        except ValueError:
            out.append(t)
    return out


def tokens(args, *, platform: bool = True) -> list[str]:
    return [t for a in args if platform or not a.platform for t in a.tokens]


def test_seed_vllm_preset_renders_seed_argv():
    r = resolve(preset_doc("vllm-seed"))
    ra = render_args(r)
    assert as_pairs(tokens(ra, platform=False)) == as_pairs(SEED_VLLM)
    assert tokens(ra) == ["/models/Kimi-K3", *tokens(ra, platform=False)]
    assert [a.field for a in ra if a.platform] == ["model.path"]


def test_seed_sglang_preset_renders_seed_argv():
    ra = render_args(resolve(preset_doc("sglang-seed")))
    assert tokens(ra) == SEED_SGLANG
    assert "--host" not in tokens(ra, platform=False) and "--model-path" not in tokens(ra, platform=False)
    assert {a.field for a in ra if a.platform} == {"model.path", "serving.host", "serving.port"}


@pytest.mark.parametrize("engine,argv,prefix", [
    ("vllm", SEED_VLLM, ["vllm", "serve", "/models/Kimi-K3"]),
    ("sglang", SEED_SGLANG, ["python3", "-m", "sglang.launch_server"]),
])
def test_import_then_render_gives_back_the_seed(engine, argv, prefix):
    cat = load_catalog()
    parsed = parse_argv(cat.engine(engine), prefix + argv)
    spec = {**parsed.spec, "engine": {"name": engine}}
    doc = DeploymentDocument.model_validate({"metadata": {"name": "x"}, "spec": spec})
    ra = tokens(render_args(resolve(doc)))
    tail = ra[1:] if engine == "vllm" else ra
    assert as_pairs(tail) == as_pairs(argv)


def test_equals_form_and_aliases():
    e = load_catalog().engine("vllm")
    p = parse_argv(e, ["-tp=4", "--decode-context-parallel-size=2", "--no-enable-prefix-caching", "--max-model-len", "8192"])
    assert p.spec["parallel"] == {"tp": 4, "dcp": 2}
    assert p.spec["scheduling"] == {"prefixCaching": False, "maxModelLen": 8192}
    assert p.refusals == []


def test_unknown_flags_are_refused_known_ones_kept_canonical():
    """An option the engine has but the spec does not model is an extra arg in the parser's canonical
    spelling and order; an option the engine does not have is a refusal, never an extra arg."""
    e = load_catalog().engine("vllm")
    p = parse_argv(e, ["--seed=3", "--async_scheduling", "--tensor-parallel-size", "8", "--foo=bar"])
    assert p.extra_args == ["--seed", "3", "--async-scheduling"]
    assert [(r.where, r.flag) for r in p.refusals] == [("argv[4]", "--foo")]


@pytest.mark.parametrize("argv,where,needle", [
    (["--tensor-parallel-size"], "argv[0]", "expected one argument"),
    (["--tensor-parallel-size", "eight"], "argv[0]", "invalid int value: 'eight'"),
    (["--speculative-config", "{not json"], "argv[0]", "--speculative-config"),
    (["--speculative-config", "[1]"], "argv[0]", "must be a JSON object"),
    (["/m", "stray"], "argv[1]", "unrecognized argument 'stray'"),
])
def test_bad_argv_names_the_token(argv, where, needle):
    p = parse_argv(load_catalog().engine("vllm"), argv)
    assert [r.where for r in p.refusals] == [where] and needle in p.refusals[0].message, p.refusals


def test_sglang_negative_value_is_a_value():
    # SGLang's "-1 disables chunking" (memory_hook.py:88-167): -1 is read as the flag's value, not a flag
    p = parse_argv(load_catalog().engine("sglang"), ["--chunked-prefill-size", "-1", "--tp-size", "8"])
    assert p.spec["scheduling"]["maxNumBatchedTokens"] == -1
    assert p.spec["parallel"]["tp"] == 8


def test_extra_flags_reads_as_argparse_would_for_the_last_occurrence():
    from types import SimpleNamespace

    from gpustack_k3.core.flags import extra_flags
    from gpustack_k3.core.rules.args import extra_arg
    from gpustack_k3.core.topology import flag_values

    tokens = ["--block-size", "16", "--enforce-eager", "-cc", '{"mode":0}', "--max-num-seqs=8",
              "--block-size=32", "--offset", "-1", "--seed", "--trust-remote-code"]
    flags = extra_flags(tokens)
    assert {k: flags[k] for k in ("--block-size", "--max-num-seqs", "-cc", "--offset", "--seed",
                                  "--trust-remote-code")} == {
        "--block-size": (6, "32"), "--max-num-seqs": (5, "8"), "-cc": (3, '{"mode":0}'), "--offset": (7, "-1"),
        "--seed": (9, None), "--trust-remote-code": (10, None)}
    # -cc after a bare flag is still a flag (the bare flag's "value" is a guess no rule reads)
    assert flag_values(tokens)["--block-size"] == "32" and flag_values(tokens)["--seed"] is None
    r = SimpleNamespace(spec=SimpleNamespace(extraArgs=tokens))   # extra_arg reads only spec.extraArgs
    assert extra_arg(r, "--compilation-config", "-cc") == (3, '{"mode":0}')
    assert extra_arg(r, "--block-size", "--enforce-eager") == (6, "32")   # the later of the two names
    assert extra_arg(r, "--mamba-cache-dtype") is None


def test_sglang_draft_options_of_an_unmodelled_algorithm_stay_as_written():
    # DFLASH is no spec method: its --speculative-draft-model-path must reach the engine as written, not become
    # spec.speculative.draftModel (rendered only with a modelled method) and leave sglang-dflash-needs-draft-model
    # refusing a line SGLang accepts (speculative_hook.py:287-300@0.5.23: the draft path is what DFLASH needs)
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args

    argv = ["--model-path", "/models/m", "--tp-size", "8", "--speculative-algorithm", "DFLASH",
            "--speculative-draft-model-path", "/models/d", "--speculative-num-draft-tokens", "8"]
    p = parse_argv(load_catalog().engine("sglang"), argv)
    assert "draftModel" not in (p.spec.get("speculative") or {}), p.spec
    assert p.extra_args[-6:] == argv[-6:], p.extra_args
    res = CliRunner().invoke(check_args, ["--engine", "sglang", "--engine-version", "0.5.23", "--model",
                                          "kimi-k3", "-o", "json", "--", *argv])
    errors = [f["rule"] for f in json.loads(res.output)["findings"] if f["severity"] == "error"]
    assert res.exit_code == 0 and errors == [], res.output
    # without the draft path the release refuses, and so does the product
    res = CliRunner().invoke(check_args, ["--engine", "sglang", "--engine-version", "0.5.23", "--model",
                                          "kimi-k3", "-o", "json", "--", *argv[:6]])
    assert res.exit_code == 1 and "sglang-dflash-needs-draft-model" in res.output, res.output
