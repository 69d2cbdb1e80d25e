"""Issue 33 What 2 (second half): every CLI option of every command either changes the command's answer or is
refused as not applicable (exit 2 naming the option); never silently ignored.

For each offline command h-cli owns, a base invocation that succeeds, and for each option a value that differs from
its default (the option's own choices, a toggled flag, a changed number, or a value from ``VALUES``), optionally on a
base where the option has something to act on (``BASES``). The answer is (exit code, stdout, stderr). An option
whose answer is the base's, without a refusal naming it, is a gap. ``GAPS`` lists today's gaps: the test fails on a
new gap and on a gap that was closed (remove it from the list). Commands that need a server or run a daemon
(gpustack apply|status, probe, run status, operator run) are covered by tests/core/test_cli_options_live.py, and
predict/advise by tests/predict/test_options.py.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import click
import pytest

from gpustack_k3.cli.main import COMMANDS, run

REPO = Path(__file__).resolve().parents[2]
LOG = str(REPO / "tests" / "fixtures" / "logs" / "vllm-0.8.5-tp2-ready.log")
LINE = ["vllm", "serve", "/models/Kimi-K3", "-tp", "8"]
PD = ["--prefill", "vllm serve /models/Kimi-K3 -tp 8", "--decode", "vllm serve /models/Kimi-K3 -tp 8"]

BASE: dict[str, list[str]] = {
    "validate": ["validate", "--preset", "vllm-seed", "-o", "json"],
    "dry-run": ["dry-run", "--preset", "vllm-seed", "-o", "json"],
    "plan": ["plan", "--preset", "vllm-seed", "-o", "json"],
    "render": ["render", "--preset", "vllm-seed", "--target", "all", "-o", "json"],
    "check-args": ["check-args", "--engine", "vllm", "-o", "json", "--", *LINE],
    "import": ["import", "--engine", "vllm", "-o", "json", "--", *LINE],
    "check-pd": ["check-pd", "--engine", "vllm", *PD, "-o", "json"],
    "explain": ["explain", "vllm-dcp-with-dspark"],
    "presets": ["presets"],
    "crd": ["crd"],
    "coldstart": ["coldstart", LOG, "-o", "json"],
    "doctor": ["doctor", LOG, "-o", "json"],
    "run start": ["run", "start", "--preset", "vllm-seed", "--dry-run", "-o", "json"],
}
# options given by the base itself, or that select the answer's format / the gate (covered in test_cli_fail_on.py)
GIVEN = {"--preset", "--engine", "--prefill", "--decode", "--output", "--dry-run", "--help", "--fail-on", "--ack"}

# (command, option) -> the value to give (a list: several tokens; None: a flag)
VALUES: dict[tuple[str, str], list[str] | None] = {
    ("check-args", "--name"): ["other-name"], ("import", "--name"): ["other-name"],
    ("check-args", "--env"): ["VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"], ("import", "--env"): ["VLLM_USE_DEEP_GEMM=0"],
    ("check-args", "--gpus"): ["4"], ("import", "--gpus"): ["4"], ("plan", "--gpus"): ["4"],
    ("check-args", "--gpu-type"): ["h200"], ("import", "--gpu-type"): ["h200"], ("plan", "--gpu-type"): ["h200"],
    ("check-pd", "--gpu-type"): ["h200"],
    ("check-args", "--model"): ["none"], ("import", "--model"): ["none"], ("check-pd", "--model"): ["none"],
    ("check-args", "--engine-version"): ["0.33.0"], ("import", "--engine-version"): ["0.33.0"],
    ("plan", "--engine-version"): ["0.33.0"], ("check-pd", "--engine-version"): ["0.33.0"],
    ("check-pd", "--prefill-env"): ["VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"],
    ("check-pd", "--decode-env"): ["VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"],
    ("check-pd", "--prefill-pods"): ["2"], ("check-pd", "--decode-pods"): ["2"],
    ("check-pd", "--gpus-per-pod"): ["4"], ("check-pd", "--prefill-gpus-per-pod"): ["4"],
    ("check-pd", "--decode-gpus-per-pod"): ["4"],
    ("render", "--target"): ["argv"], ("render", "--namespace"): ["other-ns"], ("render", "--worker"): ["w1"],
    ("render", "--cluster"): ["c2"], ("render", "--lws-form"): ["disaggregatedset"],
    ("presets", "--show"): ["vllm-fixed"],
    ("coldstart", "--engine"): ["sglang"], ("doctor", "--engine"): ["sglang"],
    ("coldstart", "--year"): ["2001"], ("doctor", "--year"): ["2001"],
    ("coldstart", "--spec"): [str(REPO / "tests" / "render" / "fixtures" / "specs" / "emptydir-cache.yaml")],
    ("run start", "--runtime"): ["local"], ("run start", "--host-gpus"): ["--no-host-gpus"],
}
# (command, option) -> a base where the option has something to act on
LONG = "vllm serve /models/Kimi-K3 -tp 8 --max-model-len 4000000"   # beyond the model: an env var allows it
BASES: dict[tuple[str, str], list[str]] = {
    ("check-args", "--env"): ["check-args", "--engine", "vllm", "-o", "json", "--", *LONG.split()],
    ("check-pd", "--prefill-env"): ["check-pd", "--engine", "vllm", "--prefill", LONG, "--decode", PD[3], "-o", "json"],
    ("check-pd", "--decode-env"): ["check-pd", "--engine", "vllm", "--prefill", PD[1], "--decode", LONG, "-o", "json"],
    ("validate", "--strict"): ["validate", "{extra}", "-o", "json"],
    ("dry-run", "--strict"): ["dry-run", "{extra}", "-o", "json"],
    ("render", "--strict"): ["render", "{extra}", "--target", "argv", "-o", "json"],
    ("run start", "--strict"): ["run", "start", "{extra}", "--dry-run", "-o", "json"],
    ("check-args", "--model-config"): ["check-args", "--engine", "vllm", "-o", "json", "--", *LINE],
    ("render", "--lws-form"): ["render", "--preset", "kimi-k3-b300-1p1d", "--target", "kubernetes", "-o", "json"],
    ("render", "--worker"): ["render", "--preset", "vllm-seed", "--target", "gpustack", "-o", "json"],
    ("render", "--cluster"): ["render", "--preset", "vllm-seed", "--target", "gpustack", "-o", "json"],
}

# Today's gaps: options that neither change the answer nor are refused (issue 33; fix them and shorten the list).
GAPS: set[tuple[str, str]] = {
    # the year completes vLLM's year-less timestamps; doctor's findings carry no time, so it never shows
    ("doctor", "--year"),
}


def _commands() -> dict[str, click.Command]:
    out = {}
    for name, target in COMMANDS.items():
        mod, attr = target.split(":")
        cmd = getattr(importlib.import_module(mod), attr)
        if isinstance(cmd, click.Group):
            out.update({f"{name} {k}": v for k, v in cmd.commands.items()})
        else:
            out[name] = cmd
    return out


def _value(cmd: str, opt: click.Option) -> list[str] | None:
    key = (cmd, opt.opts[0])
    if key in VALUES:
        return VALUES[key]
    if opt.is_flag:
        return None
    if isinstance(opt.type, click.Choice):
        other = [c for c in opt.type.choices if c != opt.default]
        return [other[0]]
    return None


def _cases() -> list[tuple[str, str]]:
    cmds = _commands()
    return [(name, p.opts[0]) for name in BASE for p in cmds[name].params
            if isinstance(p, click.Option) and p.opts[0] not in GIVEN]


def _answer(argv: list[str], capsys, tmp_path) -> tuple[int, str, str]:
    code = run(argv)
    out = capsys.readouterr()
    return code, out.out.replace(str(tmp_path), "TMP"), out.err.replace(str(tmp_path), "TMP")


def _with(argv: list[str], tokens: list[str]) -> list[str]:
    cut = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:cut], *tokens, *argv[cut:]]


@pytest.mark.parametrize("cmd,opt", _cases())
def test_every_option_changes_the_answer_or_is_refused(cmd, opt, capsys, tmp_path):
    base = BASES.get((cmd, opt), BASE[cmd])
    if "{extra}" in base:   # a document with a flag the catalog does not know: what --strict refuses
        spec = tmp_path / "extra.yaml"
        capsys.readouterr()
        run(["presets", "--show", "vllm-fixed"])
        spec.write_text(capsys.readouterr().out + "  extraArgs: ['--no-such-flag-k3']\n")
        base = [str(spec) if a == "{extra}" else a for a in base]
    option = next(p for p in _commands()[cmd].params if isinstance(p, click.Option) and p.opts[0] == opt)
    value = _value(cmd, option)
    if (cmd, opt) == ("check-args", "--model-config") or (cmd, opt) == ("validate", "--model-config"):
        cfg = tmp_path / "config.json"
        cfg.write_text('{"model_type": "llama", "num_attention_heads": 7, "num_key_value_heads": 7, '
                       '"hidden_size": 448, "num_hidden_layers": 2, "vocab_size": 1000}')
        value = [str(cfg)]
    if value is not None and value[0].startswith("--"):   # a flag's other spelling (--no-host-gpus)
        tokens = value
    else:
        tokens = [opt] + (value or [])
    before = _answer(base, capsys, tmp_path)
    after = _answer(_with(base, tokens), capsys, tmp_path)
    refused = after[0] == 2 and opt in after[2]
    changed = after != before
    gap = not (changed or refused)
    assert gap == ((cmd, opt) in GAPS), (
        f"{cmd} {opt}: " + ("neither changes the answer nor is refused (exit 2 naming it)" if gap else
                            "no longer a gap: remove it from GAPS") + f"\nbase: {before[0]}\n{before[2][-800:]}")


@pytest.mark.parametrize("argv,where", [
    (["--target", "argv", "--worker", "w1"], "--worker"), (["--target", "kubernetes", "--cluster", "c2"], "--cluster"),
    (["--target", "docker", "--namespace", "ns"], "--namespace"),
    (["--target", "launch", "--lws-form", "disaggregatedset"], "--lws-form"),
    (["--target", "kubernetes", "--lws-form", "disaggregatedset"], "--lws-form"),     # a roleless document
])
def test_render_refuses_a_targets_option_for_another_target(argv, where, capsys):
    import json

    code = run(["render", "--preset", "vllm-seed", *argv, "-o", "json"])
    out = capsys.readouterr().out
    assert code == 2 and json.loads(out)["error"]["where"] == where, out
