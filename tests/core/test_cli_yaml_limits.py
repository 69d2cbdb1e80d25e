"""Issue 33 item 5 and its minors: YAML that would crash or mislead the reader.

* nesting deep enough to overflow libyaml's (recursive) composer is unusable input (exit 2 with a message), in every
  command that reads a SPEC and in ``check-args --config`` — never a segmentation fault (exit 139);
* a large document without a single alias is not refused as an alias bomb (a real bomb still is);
* ``plan SPEC --engine E -- ARGV`` names both inputs and refuses (exit 2) instead of silently using one.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpustack_k3.cli.common import MAX_YAML_DEPTH, parse_yaml
from gpustack_k3.errors import InputError

DEEP = {   # each ~60 KB, ~30,000 levels: the size that crashed the C loader (exit 139)
    "flow": "a: " + "[" * 30000 + "]" * 30000 + "\n",
    "flow-map": "a: " + "{a: " * 15000 + "1" + "}" * 15000 + "\n",
    "block-seq": "- " * 30000 + "x\n",
}


def _run(*args, input=None):
    return subprocess.run([sys.executable, "-m", "gpustack_k3", *args], check=False, capture_output=True, text=True, input=input,
                          timeout=120)


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_deep_nesting_is_refused_in_the_reader(shape):
    with pytest.raises(InputError) as ei:
        parse_yaml(DEEP[shape], "d.yaml")
    assert "nested" in ei.value.message and str(MAX_YAML_DEPTH) in ei.value.message


@pytest.mark.parametrize("argv", [
    ["validate", "{f}"], ["dry-run", "{f}"], ["plan", "{f}"], ["render", "{f}"], ["run", "start", "{f}", "--dry-run"],
    ["predict", "{f}", "--input-len", "10", "--output-len", "10"],
    ["coldstart", "-", "--spec", "{f}"],
    ["gpustack", "apply", "{f}", "--server", "http://127.0.0.1:9", "--dry-run"],
    ["check-args", "--engine", "vllm", "--", "vllm", "serve", "/models/x", "--config", "{f}"],
])
def test_deep_nesting_exits_2_in_every_reader_of_a_spec(tmp_path, argv):
    f = tmp_path / "deep.yaml"
    f.write_text(DEEP["flow"])
    argv = [a.replace("{f}", str(f)) for a in argv]
    cut = argv.index("--") if "--" in argv else len(argv)
    p = _run(*argv[:cut], "-o", "json", *argv[cut:], input="")
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "nested" in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert json.loads(p.stdout)["exit_code"] == 2


def test_deep_nesting_from_stdin_exits_2():
    p = _run("validate", "-", input=DEEP["block-seq"])
    assert p.returncode == 2 and "nested" in p.stderr, (p.returncode, p.stderr[-2000:])


def test_moderate_nesting_still_reads():
    depth = MAX_YAML_DEPTH - 2
    assert parse_yaml("a: " + "[" * depth + "]" * depth + "\n", "d.yaml") is not None


def test_a_large_alias_free_document_is_not_an_alias_bomb():
    text = "a: [" + ", ".join(["1"] * 150_000) + "]\n"   # 150,001 nodes, no alias; under the 1 MiB cap
    assert len(parse_yaml(text, "d.yaml")["a"]) == 150_000


def test_an_alias_bomb_is_still_refused():
    lines = ["a0: &a0 [x,x,x,x,x,x,x,x,x,x]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    with pytest.raises(InputError) as ei:
        parse_yaml("\n".join(lines) + "\n", "d.yaml")
    assert "aliases expand it" in ei.value.message


def test_plan_with_spec_and_argv_names_both(tmp_path):
    p = _run("plan", "--preset", "vllm-seed", "-o", "json")
    assert p.returncode in (0, 1), p.stderr
    spec = tmp_path / "s.yaml"
    spec.write_text(_run("presets", "--show", "vllm-seed").stdout)
    for argv in (["plan", str(spec), "--engine", "vllm", "-o", "json", "--", "vllm", "serve", "/models/x", "-tp", "8"],
                 ["plan", "--preset", "vllm-seed", "--engine", "vllm", "-o", "json", "--", "vllm", "serve", "/models/x"]):
        p = _run(*argv)
        assert p.returncode == 2, (argv, p.returncode, p.stderr)
        assert "ARGV" in p.stderr and ("SPEC" in p.stderr or "--preset" in p.stderr), p.stderr
        assert json.loads(p.stdout)["exit_code"] == 2
    # the command line alone still plans
    p = _run("plan", "--engine", "vllm", "-o", "json", "--", "vllm", "serve", "/models/Kimi-K3", "-tp", "8")
    assert p.returncode in (0, 1) and "engine" in json.loads(p.stdout), p.stderr
