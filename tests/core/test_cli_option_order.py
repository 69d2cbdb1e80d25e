"""Every command that takes SPEC accepts its options before or after it (`plan SPEC -o json` exited 2 with
"unexpected arguments" while `validate SPEC -o json` worked), through the real entry point."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import click
import pytest

from gpustack_k3.cli import main

SPEC = str(Path(__file__).resolve().parents[2] / "gpustack_k3" / "catalog" / "data" / "presets" / "vllm-fixed.yaml")
CLOSED = "http://127.0.0.1:9"     # the discard port: nothing listens, the connection is refused at once

# command path -> options (the outcome must depend on them: JSON output, a dry run, a server URL)
CASES = {
    ("validate",): ["-o", "json", "--strict"],
    ("plan",): ["-o", "json"],
    ("dry-run",): ["-o", "json"],
    ("render",): ["--target", "argv", "-o", "json"],   # --namespace: Kubernetes' option, refused for argv
    ("run", "start"): ["--dry-run", "--runtime", "local"],
    ("gpustack", "apply"): ["--server", CLOSED, "--dry-run", "-o", "json"],
    ("predict",): ["--input-len", "1024", "--output-len", "64", "--acceptance-length", "3", "-o", "json"],
}


def commands_taking_spec() -> set[tuple[str, ...]]:
    found = set()

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(click.Context(cmd)):
                walk(cmd.get_command(click.Context(cmd), name), (*path, name))
        elif any(isinstance(p, click.Argument) and p.name == "spec" for p in cmd.params):   # `--spec` options are order-free
            found.add(path)
    walk(main.cli, ())
    return found


if ("advise",) in commands_taking_spec():   # advise with a SPEC (h-predict's branch)
    CASES[("advise",)] = ["--context", "4096", "--concurrency", "4", "-o", "json"]


def test_every_command_taking_spec_is_covered():
    assert commands_taking_spec() == set(CASES)


def invoke(capsys, argv: list[str]) -> tuple[int, str, str]:
    rc = main.run(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("path", sorted(CASES), ids=" ".join)
def test_options_before_and_after_spec_mean_the_same(path, capsys, monkeypatch):
    monkeypatch.setenv("GPUSTACK_API_KEY", "k3-test-key")
    opts = CASES[path]
    before = invoke(capsys, [*path, *opts, SPEC])
    after = invoke(capsys, [*path, SPEC, *opts])
    assert after == before
    rc, out, err = after
    if path == ("advise",):   # where advise takes a SPEC (h-predict): the same answer either way is the claim
        assert rc in (0, 1, 2), err
        return
    if path == ("gpustack", "apply"):
        assert rc == 2 and "127.0.0.1:9" in err, err          # --server reached the client
        return
    if path == ("predict",) and importlib.util.find_spec("aiconfigurator_core") is None:
        assert rc == 2 and "gpustack-k3[predict]" in err, err  # without the extra: the same answer either way
        return
    assert rc == 0, err
    doc = json.loads(out)                                     # -o json / --dry-run took effect
    if path == ("run", "start"):
        assert doc["argv"][:2] == ["vllm", "serve"]
    if path == ("render",):
        assert doc["command"] == ["vllm", "serve"]


def test_run_without_the_start_subcommand_takes_options_after_spec(capsys):
    rc, out, err = invoke(capsys, ["run", SPEC, "--dry-run", "--runtime", "local"])
    assert rc == 0, err
    assert json.loads(out)["argv"][:2] == ["vllm", "serve"]


def test_plan_keeps_engine_argv_after_the_separator(capsys):
    argv = ["/models/Kimi-K3", "--tensor-parallel-size", "8", "--max-model-len", "131072", "-o", "x"]
    rc, out, err = invoke(capsys, ["plan", "--engine", "vllm", "-o", "json", "--", *argv[:5]])
    assert rc == 0, err
    assert json.loads(out)["max_model_len"] == 131072
    # after --, even a token that looks like plan's own option belongs to the engine's command line
    rc, out, err = invoke(capsys, ["plan", "--engine", "vllm", "--", *argv])
    # the text plan, and the engine's parser (not plan's) refused `-o`: vLLM has no such option
    assert rc == 1 and "\nengine " in f"\n{out}" and "argv-refused (argv[5])" in err, (out, err)


def test_plan_refuses_stray_arguments_after_spec(capsys):
    rc, _, err = invoke(capsys, ["plan", SPEC, "extra", "-o", "json"])
    assert rc == 2 and "unexpected arguments 'extra'" in err, err
