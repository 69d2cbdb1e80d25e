"""Issue 35 item 3: errors carry their exit codes (click's ``ClickException.exit_code`` is the model), one class per
meaning, and one exit path: ``gpustack_k3/cli/main.py`` is the only module of the CLI that exits.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpustack_k3
from gpustack_k3 import errors

PKG = Path(gpustack_k3.__file__).parent
def test_every_error_class_carries_its_exit_code():
    assert errors.GpustackK3Error.exit_code == errors.EXIT_INPUT
    assert errors.RefusedError.exit_code == errors.Refused.exit_code == errors.EXIT_REFUSED == 1
    assert errors.InputError.exit_code == errors.OperationalError.exit_code == errors.EXIT_INPUT == 2
    assert errors.CatalogError.exit_code == 2 and issubclass(errors.CatalogError, errors.OperationalError)
    from gpustack_k3.api.v1alpha1 import constants

    assert (constants.EXIT_OK, constants.EXIT_REFUSED, constants.EXIT_INPUT, constants.EXIT_INTERNAL,
            constants.EXIT_INTERRUPTED) == (errors.EXIT_OK, errors.EXIT_REFUSED, errors.EXIT_INPUT,
                                            errors.EXIT_INTERNAL, errors.EXIT_INTERRUPTED)


def test_an_error_is_one_line_and_one_object():
    e = errors.InputError("spec.memory.fraction", "must be at most 1", "set a fraction of the GPU's memory")
    assert e.stderr_line() == "error: spec.memory.fraction: must be at most 1 (set a fraction of the GPU's memory)"
    assert e.to_object() == {"ok": False, "exit_code": 2, "error": {
        "kind": "input", "where": "spec.memory.fraction", "message": "must be at most 1",
        "fix": "set a fraction of the GPU's memory"}}
    r = errors.Refused("unrecognized argument '--x'", flag="--x")
    assert (r.flag, r.message, r.findings, r.to_object()["exit_code"]) == ("--x", "unrecognized argument '--x'", [], 1)
    assert r.stderr_line() == "refused: unrecognized argument '--x'"


def test_render_error_is_a_refusal():
    from gpustack_k3.render.templates import RenderError

    e = RenderError("target gpustack: spec.secretEnv", "GPUStack cannot carry secretEnv", "use kubernetes")
    assert isinstance(e, errors.RefusedError) and not isinstance(e, errors.OperationalError)
    assert e.exit_code == 1 and e.to_object()["error"]["kind"] == "render"


def _classes() -> dict[str, list[str]]:
    """Exception-like class name -> the modules defining it (private helpers aside)."""
    out: dict[str, list[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and (
                    node.name.endswith(("Error", "Exception")) or node.name in ("Refused", "Unavailable")):
                out.setdefault(node.name, []).append(path.relative_to(PKG).as_posix())
    return out


def test_one_class_per_error_name():
    twice = {name: where for name, where in _classes().items() if len(where) > 1}
    assert not twice, f"one class per meaning (move it to gpustack_k3/errors.py): {twice}"


EXIT_CALLS = {("sys", "exit"), ("os", "_exit")}


def _exits(path: Path) -> list[str]:
    """``sys.exit(...)``, ``os._exit``, ``raise SystemExit`` and ``ctx.exit(...)`` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            if (owner, node.func.attr) in EXIT_CALLS or (node.func.attr == "exit" and owner in ("ctx", "context")):
                found.append(f"{path.name}:{node.lineno} {owner}.{node.func.attr}")
        elif isinstance(node, ast.Raise) and node.exc is not None:
            f = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(f, ast.Name) and f.id == "SystemExit":
                found.append(f"{path.name}:{node.lineno} raise SystemExit")
    return found


def test_only_main_exits():
    cli = PKG / "cli"
    bad = {p.name: _exits(p) for p in sorted(cli.glob("*.py")) if p.name != "main.py"}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"only gpustack_k3/cli/main.py exits; raise an error of gpustack_k3/errors.py or " \
                                f"return the exit code instead: {bad}"
    assert _exits(cli / "main.py"), "main.py is the exit path"


def test_the_guard_sees_each_way_of_exiting(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import sys\ndef f(ctx):\n    sys.exit(1)\n    ctx.exit(2)\n    raise SystemExit(3)\n")
    assert len(_exits(p)) == 3


def _run(*args, input=None):
    return subprocess.run([sys.executable, "-m", "gpustack_k3", *args], check=False, capture_output=True, text=True, input=input,
                          timeout=120)


def test_a_library_validation_error_at_depth_is_exit_2_not_internal(monkeypatch, capsys):
    """Any failure a library raises on outside data (here: pydantic, from a command's depth) ends as exit 2 with
    one ``error:`` line and one JSON object; exit 3 is kept for bugs."""
    from pydantic import BaseModel

    from gpustack_k3.cli import main
    from gpustack_k3.cli import core_cmds

    class M(BaseModel):
        x: int

    def boom(*a, **k):
        M.model_validate({"x": "not a number"})

    monkeypatch.setattr(core_cmds, "load_document", boom)
    code = main.run(["validate", "--preset", "vllm-fixed", "-o", "json"])
    out = capsys.readouterr()
    assert code == 2, out.err
    assert [ln for ln in out.err.splitlines() if ln.startswith("error:")] == [out.err.strip()], out.err
    assert json.loads(out.out)["exit_code"] == 2 and "internal" not in out.err

    def bug(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(core_cmds, "load_document", bug)
    assert main.run(["validate", "--preset", "vllm-fixed"]) == errors.EXIT_INTERNAL
    assert "internal error: ZeroDivisionError" in capsys.readouterr().err


def test_errors_end_a_command_the_same_way_through_clicks_own_main():
    """The handler sits on every command (cli/_click.py Command.invoke): click's standalone main (a test's
    CliRunner, a direct import) gives the same exit code and object as ``gpustack-k3``."""
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import validate

    r = CliRunner().invoke(validate, ["--preset", "nope", "-o", "json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["where"] == "--preset", r.output


@pytest.mark.parametrize("log", [b"hello\nthis is not an engine log\n"])
def test_doctor_and_coldstart_agree_on_a_non_engine_log(log):
    a, b = _run("coldstart", "-", "-o", "json", input=log.decode()), _run("doctor", "-", "-o", "json", input=log.decode())
    assert a.returncode == b.returncode == 2, (a.stderr, b.stderr)
    assert json.loads(a.stdout)["error"]["where"] == json.loads(b.stdout)["error"]["where"] == "LOG"


@pytest.mark.parametrize("argv", [
    ["plan", "--engine", "vllm", "-o", "json", "--", "vllm", "serve", "/models/Kimi-K3", "-tp", "8", "--no-such-flag"],
    ["doctor", "tests/fixtures/logs/sglang-0.5.5-graph-capture-crash.log", "-o", "json"],
])
def test_json_on_exit_1_is_one_result_object(argv):
    p = _run(*argv)
    assert p.returncode == 1, p.stderr
    obj = json.loads(p.stdout)
    assert isinstance(obj, dict) and obj["ok"] is False and obj["findings"], obj
    assert any(f["severity"] == "error" for f in obj["findings"])


def test_a_target_that_cannot_express_a_field_refuses_exit_1(tmp_path, capsys):
    """RenderError (a field the target cannot express) is a refusal: exit 1, ``refused:``, kind render; with or
    without the pending patch (cli/main.py ``_render_refusal`` bridges until it is applied)."""
    from gpustack_k3.cli import main

    spec = tmp_path / "s.yaml"
    spec.write_text(_run("presets", "--show", "vllm-fixed").stdout + "  secretEnv: [{name: HF_TOKEN, secretName: hub, key: token}]\n")
    code = main.run(["render", str(spec), "--target", "gpustack", "-o", "json"])
    out = capsys.readouterr()
    if code == 0:
        pytest.skip("the GPUStack target carries secretEnv now: no field left to refuse here")
    assert code == 1, out.err
    obj = json.loads(out.out)
    assert obj["exit_code"] == 1 and obj["error"]["kind"] == "render" and out.err.splitlines()[-1].startswith("refused:"), (obj, out.err)
    assert obj["error"]["message"].count("secretEnv") <= 2 and obj["error"]["where"], obj
    assert "nothing was written" in out.err


def test_explain_knows_the_ids_probe_prints():
    """Issue 33 (minor): the ids `probe` prints (probe/data/findings.yaml) are explained like the rule catalog's,
    and listed with them."""
    from gpustack_k3.probe.catalog import load_findings

    ids = sorted(load_findings())
    assert ids
    for rid in ids:
        p = _run("explain", rid, "-o", "json")
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        assert d["rule"] == rid and d["family"] == "probe" and d["fix"] and d["source"], d
    listed = {i["rule"] for i in json.loads(_run("explain", "-o", "json").stdout)}
    assert set(ids) <= listed
    text = _run("explain", ids[0])
    assert text.returncode == 0 and ids[0] in text.stdout and "fix:" in text.stdout


def test_a_refused_spec_answers_with_its_findings_in_every_command(tmp_path):
    """The spec's error findings (core/launch.py Refused) reach the user the same way from dry-run, plan, render
    and run: exit 1, the findings in one result object under -o json."""
    spec = tmp_path / "s.yaml"
    spec.write_text(_run("presets", "--show", "vllm-fixed").stdout.replace("fraction: 0.92", "fraction: 1.5"))
    assert "fraction: 1.5" in spec.read_text()
    for argv in (["dry-run", str(spec)], ["plan", str(spec)], ["render", str(spec), "--target", "argv"],
                 ["run", "start", str(spec), "--dry-run"]):
        p = _run(*argv, "-o", "json")
        assert p.returncode == 1, (argv, p.stderr[-1500:])
        obj = json.loads(p.stdout)
        assert obj["ok"] is False and "vllm-config-bounds" in {f["rule"] for f in obj["findings"]}, (argv, obj)


def test_engine_verdict_without_its_tools_is_an_operational_error(tmp_path, monkeypatch):
    """--engine-verdict on a machine without the prepared wheels: the environment failed, not the input (exit 2,
    kind operational, naming --engine-verdict), through the one error path."""
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args

    monkeypatch.setenv("GPUSTACK_K3_CACHE", str(tmp_path))
    res = CliRunner().invoke(check_args, ["--engine", "vllm", "--engine-version", "0.33.0", "--engine-verdict", "-o",
                                          "json", "--", "/models/Kimi-K3", "-tp", "8"])
    assert res.exit_code == 2, res.output
    err = json.loads(res.stdout)["error"]
    assert (err["kind"], err["where"]) == ("operational", "--engine-verdict") and "wheel" in err["message"]
