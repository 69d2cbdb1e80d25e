"""Issue 33 (minor): ``memory.fraction: 1.5`` on vLLM is the engine's refusal (rule vllm-config-bounds, exit 1: every
release refuses a utilization above 1.0, and the spec schema keeps SGLang's and the releases' own bounds), named
by the field, without a plan of a pool past the card ("-138.97 GiB left") beside it."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.main import cli


def test_a_fraction_above_one_is_refused_naming_the_field_and_nothing_else_about_it(tmp_path):
    spec = tmp_path / "s.yaml"
    r = CliRunner().invoke(cli, ["presets", "--show", "vllm-fixed"])
    spec.write_text(r.stdout.replace("fraction: 0.92", "fraction: 1.5"))
    r = CliRunner().invoke(cli, ["validate", str(spec), "-o", "json"])
    assert r.exit_code == 1, r.output
    found = json.loads(r.stdout)["findings"]
    errors = [(f["rule"], f["field"]) for f in found if f["severity"] == "error"]
    assert errors == [("vllm-config-bounds", "spec.memory.fraction")], errors
    assert not [f for f in found if "GiB left" in f["message"]], [f["message"] for f in found]
