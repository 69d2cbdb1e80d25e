"""argv target: the seeds' argv/env come back exactly; the shell line survives hostile values."""
from __future__ import annotations

import hashlib
import json
import re
import shlex
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpustack_k3.core.launch_types import Arg
from gpustack_k3.render.argv import argv_document, shell_command
from tests.render.conftest import FIXTURES, REPO, launch_of, preset_data

DOMAIN = Path("shared") / "domain" / "kimi-k3-on-8xb300.md"   # outside the repository (a CI clone has none)


def _section2(text: str) -> str:
    start = text.index("## 2. The launch specs as deployed")
    end = text.find("## 3.", start)
    return text[start:end if end >= 0 else len(text)]


# The SGLang seed names its paths by placeholder; the sglang-seed preset puts them here.
PLACEHOLDERS = {"<Kimi-K3 path>": "/models/Kimi-K3", "<Kimi-K3-DSpark path>": "/models/sglang-Kimi-K3-DSpark"}


def seed_launches() -> dict[str, dict]:
    """Parse domain §2 (fixture copy): env and argv of both seeds, placeholders filled in."""
    sec = _section2((FIXTURES / "domain_s2.md").read_text())
    blocks = re.findall(r"```\n(.*?)```", sec, re.DOTALL)
    for ph, path in PLACEHOLDERS.items():
        blocks = [b.replace(ph, path) for b in blocks]
    env_text = re.search(r"vLLM environment:\n(.*?)\n\nvLLM arguments", sec, re.DOTALL).group(1)
    env = dict(kv.split("=", 1) for kv in re.findall(r"`([A-Z0-9_]+=[^`]*)`", env_text))
    return {"vllm": {"env": env, "args": shlex.split(blocks[0])},
            "sglang": {"env": {}, "args": shlex.split(blocks[1])}}


def _norm(tokens: list[str]) -> list:
    """JSON-valued tokens compared as JSON (whitespace and line breaks inside them do not matter)."""
    out = []
    for t in tokens:
        if t.startswith("{"):
            out.append(("json", json.loads(t)))
        else:
            out.append(t)
    return out


def test_fixture_is_the_recorded_copy_of_the_domain_section():
    """The copy's section 2 hashes to the sum recorded in its header when it was copied (so it cannot drift
    from the domain file unnoticed, also where that file is absent), and equals the domain file itself in
    every checkout that has it next to the repository."""
    fixture = (FIXTURES / "domain_s2.md").read_text()
    recorded = re.search(r"section's sha256 was ([0-9a-f]{64})", fixture)
    assert recorded, "the fixture's header must record the sha256 of the section it copies"
    assert hashlib.sha256(_section2(fixture).encode()).hexdigest() == recorded.group(1)
    for domain in [d / DOMAIN for d in REPO.parents if (d / DOMAIN).is_file()]:
        assert _section2(domain.read_text()) == _section2(fixture), f"{domain} changed: copy its section 2 again"


def _expected_env(name: str, seed_env: dict) -> dict:
    from gpustack_k3.core.launch import production_env
    from gpustack_k3.core.resolve import resolve
    from tests.render.conftest import doc_of

    doc = doc_of(preset_data(name))
    launch = launch_of(preset_data(name))
    return {**production_env(resolve(doc), launch.startup_budget_s), **seed_env}


def test_vllm_seed_argv_and_env_equal_the_seed():
    seed = seed_launches()["vllm"]
    data = preset_data("vllm-seed")
    doc = argv_document(launch_of(data))
    assert doc["command"] == ["vllm", "serve"]
    assert doc["args"][0] == data["spec"]["model"]["path"]        # vllm serve <model>
    assert _norm(doc["args"][1:]) == _norm(seed["args"])
    assert doc["env"] == _expected_env("vllm-seed", seed["env"])
    # The seed's own READY timeout (3600) wins over the derived budget: the spec's env is explicit.
    assert doc["env"]["VLLM_ENGINE_READY_TIMEOUT_S"] == "3600"


def test_sglang_seed_argv_and_env_equal_the_seed():
    seed = seed_launches()["sglang"]
    data = preset_data("sglang-seed")
    assert data["spec"]["model"]["path"] == PLACEHOLDERS["<Kimi-K3 path>"]
    assert data["spec"]["speculative"]["draftModel"] == PLACEHOLDERS["<Kimi-K3-DSpark path>"]
    doc = argv_document(launch_of(data))
    assert doc["command"] == ["python3", "-m", "sglang.launch_server"]
    assert _norm(doc["args"]) == _norm(seed["args"])
    env = _expected_env("sglang-seed", seed["env"])
    assert doc["env"] == env
    assert env["SGLANG_RAGGED_VERIFY_MODE"] == "static"      # DCP 8 + DSPARK (overrides.py:356-362)


def test_cli_argv_json_shape():
    from gpustack_k3.cli.render_cmd import render

    res = CliRunner().invoke(render, ["--preset", "vllm-seed", "--target", "argv", "--output", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert list(out) == ["image", "command", "args", "env", "secret_env"]
    assert out["image"] == "vllm/vllm-openai:kimi-k3"
    assert all(isinstance(a, str) for a in out["command"] + out["args"])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_import_of_seed_command_line_renders_back_the_seed(engine, tmp_path):
    """`import` of the seed command line, then `render --target argv`: flags and env come back."""
    from gpustack_k3.cli.core_cmds import import_
    from gpustack_k3.cli.render_cmd import render

    seed = seed_launches()[engine]
    argv = (["/models/Kimi-K3"] if engine == "vllm" else []) + seed["args"]
    imp = CliRunner().invoke(import_, ["--engine", engine, "--name", f"imp-{engine}",
                                       *[a for k, v in seed["env"].items() for a in ("--env", f"{k}={v}")],
                                       "--", *argv])
    assert imp.exit_code == 0, imp.output
    spec = tmp_path / "imported.yaml"
    spec.write_text(imp.stdout)
    res = CliRunner().invoke(render, [str(spec), "--target", "argv", "--output", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert _norm(out["args"]) == _norm(argv)
    assert {k: out["env"][k] for k in seed["env"]} == seed["env"]


# ------------------------------------------------------------------ shell quoting

def _corpus(tmp: Path) -> list[str]:
    canary = tmp / "PWNED"
    return [
        f"a; touch {canary}",
        f"$(touch {canary})",
        f"`touch {canary}`",
        "line1\nline2\n",
        "it's \"double\" and 'single'",
        '{"k": "v\'$(x)", "n": 1, "nested": {"q": "\\"`"}}',
        "spaces   and\ttabs",
        "glob * ? [a-z] ~ ~root",
        "redir > /dev/null < /etc/passwd 2>&1 | cat &",
        "${HOME} $PATH %s \\n \\\\",
        "-dash-leading",
        "",
        "ünïcödé ✓",
        "!history !!",
    ]


def _fake_exe(bindir: Path, name: str) -> None:
    p = bindir / name
    p.write_text('#!/bin/bash\nfor a in "$0" "$@"; do printf \'%s\\0\' "$a"; done > "$ARGV_OUT"\n'
                 'env -0 > "$ENV_OUT"\n')
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def run_shell_line(line: str, tmp: Path, exe: str) -> tuple[list[str], dict[str, str]]:
    """Run a printed line with bash; `exe` is replaced by a script that dumps argv and env."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    _fake_exe(bindir, exe)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "ARGV_OUT": str(tmp / "argv.bin"), "ENV_OUT": str(tmp / "env.bin"),
           "HOME": str(tmp)}
    proc = subprocess.run(["bash", "-c", line], env=env, check=False, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp / "argv.bin").read_bytes().decode().split("\0")[:-1]
    envd = dict(e.split("=", 1) for e in (tmp / "env.bin").read_bytes().decode().split("\0")[:-1])
    return argv, envd


def test_shell_line_survives_injection_corpus(tmp_path):
    base = launch_of(preset_data("vllm-fixed"))
    corpus = _corpus(tmp_path)
    args = []
    for i, value in enumerate(corpus):
        args += [f"--flag-{i}", value]
    env = {**base.env, **{f"EVIL_{i}": v for i, v in enumerate(corpus)}}
    launch = replace(base, arguments=[base.arguments[0], Arg("extraArgs", args)], env=env,
                     image="img:\n$(touch " + str(tmp_path / "PWNED") + ")")
    line = shell_command(launch)
    argv, got_env = run_shell_line(line, tmp_path, "vllm")
    assert argv[1:] == launch.argv[1:]
    for k, v in env.items():
        assert got_env[k] == v, k
    assert not (tmp_path / "PWNED").exists()


def test_cli_shell_output_of_a_hostile_spec(tmp_path):
    """Hostile values in a real spec (model path, env, JSON config, draft, served name): the printed
    line, run by bash, gives exactly the launch argv/env and executes nothing else."""
    import yaml

    from gpustack_k3.cli.render_cmd import render

    evil = f"it's a \"q\" $(touch {tmp_path}/PWNED) `touch {tmp_path}/PWNED`; rm -rf x\nnext & | > <"
    d = preset_data("vllm-fixed")
    d["spec"]["model"]["path"] = f"/models/{evil}/Kimi-K3"
    d["spec"]["model"]["servedModelName"] = evil
    d["spec"]["env"]["EVIL"] = evil
    # JSON config: the draft's path inside --speculative-config (a key the release's config class has: an unknown
    # key such as attentionConfig "note" is refused by vllm-config-field-bounds, as the engine refuses it)
    d["spec"]["speculative"]["draftModel"] = f"/models/{evil}"
    # a Secret key is refused unless Kubernetes accepts it (spec.py SecretEnv.key), so no newline reaches the comment
    d["spec"]["secretEnv"] = [{"name": "HF_TOKEN", "secretName": "hub", "key": "hf.token"}]
    spec = tmp_path / "evil.yaml"
    spec.write_text(yaml.safe_dump(d, sort_keys=False))
    res = CliRunner().invoke(render, [str(spec), "--target", "argv", "--output", "shell"])
    assert res.exit_code == 0, res.output
    launch = launch_of(d)
    argv, env = run_shell_line(res.stdout, tmp_path, "vllm")
    assert argv[1:] == launch.argv[1:]
    assert json.loads(argv[argv.index("--speculative-config") + 1])["model"] == f"/models/{evil}"
    assert {k: env[k] for k in launch.env} == launch.env
    assert not (tmp_path / "PWNED").exists()


def test_shell_line_round_trips_arbitrary_text(tmp_path):
    """Property: any text (minus NUL, which no argv can hold) survives quoting + bash unchanged."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    base = launch_of(preset_data("vllm-fixed"))
    text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(values=st.lists(text, min_size=1, max_size=4), env_value=text)
    def check(values, env_value):
        launch = replace(base, arguments=[base.arguments[0], Arg("extraArgs", list(values))],
                         env={**base.env, "ANY": env_value})
        argv, env = run_shell_line(shell_command(launch), tmp_path, "vllm")
        assert argv[1:] == launch.argv[1:]
        assert env["ANY"] == env_value

    check()
