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
    code, out = check_args(*KIMI.split(), "--served-model-name", "a", "b")
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
