"""Rule model-config-checks-skipped names the engine-check table entries that read the model when no config.json
(nor a catalog block) describes it (core/rules/spec.py, core/rules/checks.py)."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.main import cli


def skipped(argv: list[str]) -> str:
    res = CliRunner().invoke(cli, ["check-args", "--engine", "sglang", "--engine-version", "0.5.23", "-o", "json", "--",
                                   *argv], catch_exceptions=False)
    found = [f for f in json.loads(res.output)["findings"] if f["rule"] == "model-config-checks-skipped"]
    return found[0]["message"] if found else ""


def test_model_reading_entries_are_listed_as_not_run_without_a_model_config():
    msg = skipped(["--model-path", "/models/Unknown", "--tp-size", "8", "--enable-layernorm-sp"])
    assert "sglang-layernorm-sp-architecture" in msg and "sglang-encoder-swa-replay-needs-dsv41" in msg


def test_they_run_on_a_catalogued_model():
    msg = skipped(["--model-path", "/models/Kimi-K3", "--tp-size", "8"])
    assert "sglang-layernorm-sp-architecture" not in msg
