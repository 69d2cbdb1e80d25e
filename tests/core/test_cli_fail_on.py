"""issue 23 item 6: `--fail-on warning|error` (a CI gate) on validate, check-args, check-pd, dry-run and render: with
`warning` a run whose findings hold a warning exits 1 and its JSON says `"ok": false`; errors always fail."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.cli.main import run

PD = ["check-pd", "--engine", "vllm", "--prefill", "vllm serve m -tp 8", "--decode", "vllm serve m -tp 8"]


def _run(capsys, argv):
    code = run(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv", [
    ["validate", "--preset", "vllm-seed"],
    ["dry-run", "--preset", "vllm-seed"],
    ["render", "--preset", "vllm-seed", "--target", "argv"],
    ["check-args", "--engine", "vllm", "--", "vllm", "serve", "m", "--max-model-len", "1000000", "-tp", "8"],
])
def test_warnings_fail_only_when_asked(capsys, argv):
    cut = argv.index("--") if "--" in argv else len(argv)
    code, out, _ = _run(capsys, argv[:cut] + ["-o", "json"] + argv[cut:])
    assert code == 0 and json.loads(out)
    assert _run(capsys, argv[:cut] + ["--fail-on", "error"] + argv[cut:])[0] == 0
    code, out, err = _run(capsys, argv[:cut] + ["--fail-on", "warning", "-o", "json"] + argv[cut:])
    assert code == 1 and "--fail-on warning" in err
    assert json.loads(out)["ok"] is False


def test_check_pd_takes_the_gate(capsys):
    code, out, _ = _run(capsys, [*PD, "--fail-on", "warning", "-o", "json"])
    warned = any(f["severity"] == "warning" for f in json.loads(out)["findings"])
    errors = any(f["severity"] == "error" for f in json.loads(out)["findings"])
    assert code == (1 if warned or errors else 0)


def test_a_clean_run_passes_the_warning_gate(capsys):
    code, out, _ = _run(capsys, ["explain", "-o", "json"])
    assert code == 0
    code, _, _ = _run(capsys, ["validate", "--preset", "vllm-cpu-smollm2", "--fail-on", "warning"])
    findings = json.loads(_run(capsys, ["validate", "--preset", "vllm-cpu-smollm2", "-o", "json"])[1])["findings"]
    assert code == (1 if any(f["severity"] in ("warning", "error") for f in findings) else 0)


def test_bad_gate_value_is_usage_exit_2_with_json(capsys):
    code, out, _ = _run(capsys, ["validate", "--preset", "vllm-seed", "--fail-on", "info", "-o", "json"])
    assert code == 2 and json.loads(out)["exit_code"] == 2


@pytest.mark.parametrize("argv", [
    ["validate", "--preset", "vllm-seed"],
    ["dry-run", "--preset", "vllm-seed"],
    ["render", "--preset", "vllm-seed", "--target", "argv"],
])
def test_an_acknowledged_warning_passes_the_gate(capsys, argv):
    """Issue 33 (minor): `--fail-on warning` failed on every preset with no way to accept a known warning.
    `--ack RULE` (repeatable) accepts that rule's warnings; the others still fail; an unknown id is exit 2."""
    code, out, _ = _run(capsys, ["validate", *argv[1:3], "-o", "json"] if argv[0] != "validate" else [*argv, "-o", "json"])
    warned = sorted({f["rule"] for f in json.loads(out)["findings"] if f["severity"] == "warning"})
    assert len(warned) >= 2, warned
    acks = [a for rule in warned for a in ("--ack", rule)]
    code, out, err = _run(capsys, [*argv, "--fail-on", "warning", *acks[:-2]])
    assert code == 1 and warned[-1] in err and warned[0] not in err.splitlines()[-1], err
    code, out, err = _run(capsys, [*argv, "--fail-on", "warning", *acks])
    assert code == 0, err
    assert warned[0] in err or warned[0] in out     # acknowledged, still shown
    code, out, err = _run(capsys, [*argv, "--fail-on", "warning", "--ack", "no-such-rule", "-o", "json"])
    assert code == 2 and json.loads(out)["error"]["where"] == "--ack", err
