"""check-pd with a release per side (issue 32; issue 34 item 2): the pair rules compare the releases and their NIXL
connector versions (nixl/metadata.py:55,188-189@0.33.0: the hash covers vllm_version and NIXL_CONNECTOR_VERSION)."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.main import cli

KV = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''
LINE = f"vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --kv-transfer-config {KV}"
ENV = ("--prefill-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "--decode-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2")


def check_pd(*extra: str) -> tuple[int, list[dict]]:
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "vllm", "--model", "kimi-k3", "--prefill", LINE,
                                   "--decode", LINE, "-o", "json", *ENV, *extra], catch_exceptions=False)
    return res.exit_code, json.loads(res.output)["findings"]


def test_sides_of_two_releases_are_refused_naming_their_connector_versions():
    code, findings = check_pd("--prefill-engine-version", "0.29.0", "--decode-engine-version", "0.33.0")
    assert code == 1
    (f,) = [f for f in findings if f["rule"] == "pd-compat-hash" and "engine version" in f["message"]]
    assert "0.29.0 (connector 9)" in f["message"] and "0.33.0 (connector 15)" in f["message"], f


def test_one_release_on_both_sides_passes_that_check():
    code, findings = check_pd("--prefill-engine-version", "0.33.0", "--engine-version", "0.33.0")
    assert not [f for f in findings if f["rule"] in ("pd-compat-hash", "pd-pair-identity") and "engine" in f["message"]]
