"""Reading a command line as the engine's parser does (gpustack_k3/core/argv): the spellings the engines
accept, config files, refusals, and the check-args findings the issue's headline cases must give."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli import main
from gpustack_k3.core.argv import read_argv
from gpustack_k3.core.flags import parse_argv

from .test_flags import SEED_SGLANG, SEED_VLLM

CAT = load_catalog()
VLLM, SGLANG = CAT.engine("vllm"), CAT.engine("sglang")
SPEC = {"method": "dspark", "model": "Inferact/Kimi-K3-DSpark", "num_speculative_tokens": 7}


def parsed(engine, argv, version=None, files=None):
    e = CAT.engine(engine)
    return parse_argv(e, argv, version=CAT.version(engine, version),
                      read_file=(files or {}).__getitem__)


def check_args(engine, *argv, version=None):
    cmd = [sys.executable, "-m", "gpustack_k3", "check-args", "--engine", engine, "-o", "json"]
    cmd += ["--engine-version", version] if version else []
    p = subprocess.run([*cmd, "--", *argv], capture_output=True, text=True, timeout=120, check=False)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip().startswith("{") else None), p.stderr


# ------------------------------------------------------------------ the headline cases (issue #14)

HEADLINE = {
    "aliases + dotted keys": ["-tp", "8", "-dcp", "8", "--speculative-config.method", "dspark",
                              "--speculative-config.model", "Inferact/Kimi-K3-DSpark",
                              "--speculative-config.num_speculative_tokens", "7"],
    "underscores + JSON": ["--tensor_parallel_size", "8", "--decode_context_parallel_size", "8",
                           "--speculative_config", json.dumps(SPEC)],
    "= forms + -sc + dotted =": ["--tensor-parallel-size=8", "--decode-context-parallel-size=8",
                                 "-sc.method=dspark", "-sc.model=Inferact/Kimi-K3-DSpark",
                                 "-sc.num_speculative_tokens=7"],
    "abbreviations + mixed": ["--tensor-parallel=8", "--decode_context_parallel", "8",
                              "--speculative-config", '{"method":"mtp"}', "--speculative-config.method", "dspark",
                              "--speculative-config.model=Inferact/Kimi-K3-DSpark",
                              "--speculative_config.num_speculative_tokens", "7"],
    "vllm serve MODEL": ["vllm", "serve", "/models/Kimi-K3", "-tp", "8", "-dcp", "8", "-sc", json.dumps(SPEC)],
    "--model moved to the positional": ["vllm", "serve", "-tp", "8", "--model", "/models/Kimi-K3", "-dcp", "8",
                                        "-sc", json.dumps(SPEC)],
}


@pytest.mark.parametrize("name", sorted(HEADLINE))
def test_headline_spellings_read_tp_dcp_and_dspark(name):
    p = parsed("vllm", HEADLINE[name])
    assert p.refusals == []
    assert p.spec["parallel"] == {"tp": 8, "dcp": 8}
    assert p.spec["speculative"]["method"] == "dspark"
    assert p.spec["speculative"]["draftModel"] == "Inferact/Kimi-K3-DSpark"
    assert p.spec["speculative"]["numTokens"] == 7
    assert p.extra_args == []


@pytest.mark.parametrize("name", ["aliases + dotted keys", "underscores + JSON", "abbreviations + mixed"])
def test_headline_check_args_gives_the_canonical_finding(name):
    code, out, err = check_args("vllm", *HEADLINE[name])
    assert code == 1, err
    errors = {f["rule"] for f in out["findings"] if f["severity"] == "error"}
    # TP is read as 8, so the weights fit (no fixed-memory-exceeds-budget): the refusal is the real one
    assert errors == {"vllm-dcp-with-dspark"}, out["findings"]


def test_config_file_form_gives_the_same_finding(tmp_path):
    code, out, err = check_args("vllm", *_config_file(tmp_path))
    assert code == 1, err
    assert {f["rule"] for f in out["findings"] if f["severity"] == "error"} == {"vllm-dcp-with-dspark"}


def _config_file(tmp_path):
    cfg = tmp_path / "k3.yaml"
    cfg.write_text("tensor_parallel_size: 8\ndecode-context-parallel-size: 8\n"
                   "speculative-config:\n  method: dspark\n  model: Inferact/Kimi-K3-DSpark\n"
                   "  num_speculative_tokens: 7\n")
    return ["--config", str(cfg)]


# the vLLM versions whose engine refuses DCP + DSpark outright (the rule's `when`), and those that allow it
REFUSING = sorted(k for k, v in VLLM.versions.items() if v.traits.get("dcp_with_spec") == "refuse_dspark")
ALLOWING = sorted(k for k, v in VLLM.versions.items() if v.traits.get("dcp_with_spec") == "dspark_needs_backend")


@pytest.mark.parametrize("version", REFUSING + ALLOWING)
@pytest.mark.parametrize("name", ["aliases + dotted keys", "underscores + JSON", "abbreviations + mixed",
                                  "--config FILE"])
def test_headline_spellings_per_version_through_the_cli(name, version, tmp_path, capsys):
    """The issue's spellings give `vllm-dcp-with-dspark` on every version that refuses DCP + DSpark, and no
    refusal of the command line (nor that finding) on the versions that allow it."""
    argv = _config_file(tmp_path) if name == "--config FILE" else HEADLINE[name]
    rc = main.run(["check-args", "--engine", "vllm", "--engine-version", version, "-o", "json", "--", *argv])
    out = json.loads(capsys.readouterr().out)
    rules = {f["rule"] for f in out["findings"] if f["severity"] == "error"}
    assert "argv-refused" not in rules, out["findings"]
    if version in REFUSING:
        assert rc == 1 and "vllm-dcp-with-dspark" in rules, out["findings"]
    else:
        assert "vllm-dcp-with-dspark" not in rules, out["findings"]


def test_the_headline_rule_applies_to_the_kimi_k3_build_and_a_release():
    assert "kimi-k3" in REFUSING and "0.28.0" in REFUSING and "0.33.0" in ALLOWING


def test_a_missing_config_file_is_unusable_input():
    code, _, err = check_args("vllm", "--config", "/nonexistent/k3.yaml")
    assert code == 2 and "argv --config /nonexistent/k3.yaml" in err and "no such config file" in err


# ------------------------------------------------------------------ vLLM spellings

def test_later_flags_override_earlier_ones_and_dotted_keys_replace_a_json_arg():
    # FlexibleArgumentParser appends the merged dotted object at the end: it replaces --speculative-config {...}
    p = parsed("vllm", ["-tp", "4", "--speculative-config.num_speculative_tokens", "3",
                        "--speculative-config", json.dumps(SPEC), "--tensor-parallel-size", "8"])
    assert p.spec["parallel"]["tp"] == 8
    # the merged object names neither method nor model: it stays as written (vLLM 0.34.0 refuses it:
    # "num_speculative_tokens was provided but without speculative model"; rule vllm-spec-tokens-without-model)
    assert "speculative" not in p.spec
    assert p.extra_args == ["--speculative-config", '{"num_speculative_tokens":3}']


def test_dotted_values_are_json_then_human_readable_then_strings():
    p = parsed("vllm", ["--compilation-config.cudagraph_capture_sizes+", "1,2", "--compilation-config.cudagraph_capture_sizes+=4",
                        "--compilation-config.max_cudagraph_capture_size", "1k", "--compilation-config.mode", "3",
                        "--compilation-config.backend", "inductor"])
    assert p.refusals == []
    i = p.extra_args.index("--compilation-config")
    # the + append gives the strings "1", "2", "4"; the engine's CompilationConfig model (list[int]) converts them
    assert json.loads(p.extra_args[i + 1]) == {"cudagraph_capture_sizes": [1, 2, 4],
                                               "max_cudagraph_capture_size": 1000, "mode": 3, "backend": "inductor"}


@pytest.mark.parametrize("argv,level", [(["-O3"], "3"), (["-O=2"], "2"), (["-O", "1"], "1"), (["-Odecode"], "decode")])
def test_O_shorthands(argv, level):
    p = parsed("vllm", argv, version="0.33.0")
    assert p.refusals == [] and p.extra_args == ["--optimization-level", level]


def test_O_of_0_11_is_the_compilation_config_level():
    p = parsed("vllm", ["-O3"], version="0.11.0")
    assert p.refusals == [] and p.extra_args == ["--compilation-config", '{"level":3}']


def test_enable_disable_pairs_and_no_forms():
    for argv in (["--no-enable-prefix-caching"], ["--disable-prefix-caching"], ["--no_enable_prefix_caching"]):
        assert parsed("vllm", argv, version="0.33.0").spec["scheduling"] == {"prefixCaching": False}, argv
    # 0.28.0 has no --disable-prefix-caching: argparse's prefix rule does not reach it either
    assert [r.flag for r in parsed("vllm", ["--disable-prefix-caching"], version="kimi-k3").refusals] == [
        "--disable-prefix-caching"]


def test_prefix_abbreviation_and_ambiguity():
    p = parsed("vllm", ["--kv-cache-memory=41317885440"])
    assert p.spec["memory"]["kvCacheBytes"] == 41317885440
    amb = parsed("vllm", ["--max-num", "8"]).refusals
    assert len(amb) == 1 and "ambiguous option: --max-num" in amb[0].message


def test_vllm_config_file_is_overridden_by_the_command_line():
    files = {"c.yaml": "tensor-parallel-size: 2\nmax_model_len: 4096\nenable-prefix-caching: true\n"}
    p = parsed("vllm", ["/models/Kimi-K3", "--config", "c.yaml", "-tp", "8"], files=files)
    assert p.refusals == [] and p.spec["parallel"]["tp"] == 8
    assert p.spec["scheduling"] == {"maxModelLen": 4096, "prefixCaching": True}
    assert p.model_path == "/models/Kimi-K3"


def test_vllm_serve_drops_a_false_boolean_from_a_config_file():
    # load_config_file runs on the top-level `vllm` parser, which registers no --no-X: the key is dropped
    p = parsed("vllm", ["--config", "c.yaml"], files={"c.yaml": "enable-prefix-caching: false\n"})
    assert p.refusals == [] and "prefixCaching" not in p.spec.get("scheduling", {})


@pytest.mark.parametrize("files,argv,needle", [
    ({"c.json": "{}"}, ["--config", "c.json"], "must be of a yaml/yml type"),
    ({"c.yaml": "- a\n"}, ["--config", "c.yaml"], "mapping"),
    ({"c.yaml": "bogus-option: 1\n"}, ["--config", "c.yaml"], "unrecognized argument '--bogus-option'"),
    ({}, ["--config", "a.yaml", "--config", "b.yaml"], "More than one config file"),
])
def test_vllm_config_file_refusals(files, argv, needle):
    p = parsed("vllm", argv, files=files)
    assert p.refusals and needle in p.refusals[0].message, p.refusals


def test_config_equals_form_is_not_read_by_vllm():
    p = parsed("vllm", ["--config=c.yaml"])
    assert [r.flag for r in p.refusals] == ["--config"] and "accepted and ignored" in p.refusals[0].message


def test_dotted_key_without_value_is_refused_not_a_crash():
    p = parsed("vllm", ["-tp", "8", "--speculative-config.method"])
    assert p.refusals and "IndexError" in p.refusals[0].message


# ------------------------------------------------------------------ SGLang spellings

def test_sglang_aliases_abbreviations_and_no_underscores():
    p = parsed("sglang", ["--tensor-parallel-size", "8", "--decode-context-parallel-size", "8",
                          "--speculative-algo", "DSPARK", "--speculative-dspark-block-size", "7"])
    assert p.refusals == []
    assert p.spec["parallel"] == {"tp": 8, "dcp": 8}
    assert p.spec["speculative"] == {"method": "dspark", "numTokens": 7}
    assert [r.flag for r in parsed("sglang", ["--tp_size", "8"]).refusals] == ["--tp_size"]


def test_sglang_config_file_comes_first_and_keeps_keys_as_written():
    files = {"s.yaml": "tp-size: 4\ndcp-size: 8\nenable-symm-mem: true\ndisable-radix-cache: false\n"}
    p = parsed("sglang", ["--config", "s.yaml", "--tp-size", "8"], files=files)
    assert p.refusals == []
    assert p.spec["parallel"] == {"tp": 8, "dcp": 8} and p.spec["sglang"] == {"symmMem": True}
    bad = parsed("sglang", ["--config", "s.yaml"], files={"s.yaml": "tp_size: 8\n"})
    assert [r.flag for r in bad.refusals] == ["--tp_size"] and bad.refusals[0].where == "argv --config s.yaml"


def test_sglang_boolean_pair_is_refused_in_a_config_file():
    p = parsed("sglang", ["--config", "s.yaml"], files={"s.yaml": "enable-tf32-matmul: true\n"})
    assert p.refusals and "Unsupported config option 'enable_tf32_matmul'" in p.refusals[0].message


def test_sglang_choices_come_from_the_parser():
    p = parsed("sglang", ["--kv-cache-dtype", "fp8"])
    assert p.refusals and "invalid choice: 'fp8'" in p.refusals[0].message


# ------------------------------------------------------------------ the kimi-k3 builds: the seeds' lines

@pytest.mark.parametrize("engine,argv", [
    ("vllm", ["vllm", "serve", "/models/Kimi-K3", *SEED_VLLM]),
    ("sglang", ["python3", "-m", "sglang.launch_server", *SEED_SGLANG]),
])
def test_seed_command_lines_are_accepted_by_the_kimi_k3_parsers(engine, argv):
    """Evidence for the catalog's choice of nearest release: every flag, value and --attention-config key
    of the seed's command line (seed 001 §4.2, §5.1) is accepted by it."""
    reading = read_argv(CAT.engine(engine), CAT.version(engine, "kimi-k3"), argv)
    assert reading.refusals == []


# ------------------------------------------------------------------ argv-refused: fire and quiet

# rule -> (engine, argv, version where it fires at argv[i], version where it is quiet); test_registry counts these
ARGV_CASES = {"argv-refused": ("vllm", ["-tp", "8", "--moe-backend", "auto"], ("0.11.0", "argv[2]"), "0.33.0")}


@pytest.mark.parametrize("rule_id", sorted(ARGV_CASES))
def test_argv_rule_fires_for_a_flag_of_another_version_and_is_quiet_for_its_own(rule_id):
    engine, argv, (fires_on, where), quiet_on = ARGV_CASES[rule_id]
    code, out, _ = check_args(engine, *argv, version=fires_on)
    refused = [f for f in out["findings"] if f["rule"] == rule_id]
    assert code == 1 and [f["field"] for f in refused] == [where]
    code, out, _ = check_args(engine, *argv, version=quiet_on)
    assert rule_id not in {f["rule"] for f in out["findings"]}


def test_import_of_a_refused_command_line_writes_nothing():
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", "import", "--engine", "vllm", "--", "-tp", "8",
                        "--no-such-flag"], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 1 and p.stdout == "" and "argv-refused" in p.stderr and "argv[2]" in p.stderr


def test_vllm_token_matching_without_regexes_equals_vllms_patterns():
    """core/argv/vllm.py spells vLLM's re.match/re.sub on tokens as string operations (no pattern compiled per
    CLI call); over tokens built from the characters that matter (dashes, underscores, '=', '.', newlines),
    they agree with vLLM's own patterns (argparse_utils.py parse_args@0.33.0)."""
    import itertools
    import re

    from gpustack_k3.core.argv.vllm import _dashed, _matches

    parts = ["", "-", "--", "_", "=", ".", "\n", "x", "model", "config", "served_model-name", "a_b"]
    tokens = {"".join(t) for n in range(1, 4) for t in itertools.product(parts, repeat=n)}
    tokens |= {f"--{name}{tail}" for name in ("model", "config", "served-model-name", "served_model_name",
                                               "served-model_name", "served_model-name")
               for tail in ("", "\n", "=", "=x", "=\n", "=\nx", "x", "==", "=x\n", "\nx")}
    assert len(tokens) > 1400
    for t in tokens:
        assert _dashed(t) == re.sub(r"(?<=--)[^\.]*", lambda m: m.group(0).replace("_", "-"), t, count=1), repr(t)
        assert _matches(t, "--model") == bool(re.match(r"^--model(=.+|$)", t)), repr(t)
        assert _matches(t, "--config") == bool(re.match(r"^--config(=.+|$)", t)), repr(t)
        served = any(_matches(t, f"--served{a}model{b}name") for a in "-_" for b in "-_")
        assert served == bool(re.match(r"^--served[-_]model[-_]name(=.+|$)", t)), repr(t)
