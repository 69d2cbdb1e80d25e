"""The NIXL compatibility hash of vLLM 0.34.0 no longer covers parallel_drafting (nixl/metadata.py:137-146@0.34.0;
0.33.0 hashed it, :133-144@0.33.0): a P/D pair whose sides differ only there handshakes on 0.34.0, not on 0.33.0."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.main import cli

KV = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''
BASE = "vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --kv-transfer-config " + KV
SPEC = {"method": "dspark", "model": "/models/Kimi-K3-DSpark", "num_speculative_tokens": 3}
ENV = ("--prefill-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "--decode-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2")


def line(spec: dict) -> str:
    return f"{BASE} --speculative-config '{json.dumps(spec)}'"


@pytest.mark.parametrize("version,refused", [("0.33.0", True), ("0.34.0", False)])
def test_parallel_drafting_on_one_side_only(version, refused):
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "vllm", "--model", "kimi-k3", "--engine-version", version,
                                   "--prefill", line({**SPEC, "parallel_drafting": True}), "--decode", line(SPEC),
                                   "-o", "json", *ENV], catch_exceptions=False)
    hits = [f for f in json.loads(res.output)["findings"]
            if f["rule"] == "pd-compat-hash" and f["severity"] == "error" and "speculative config" in f["message"]]
    assert bool(hits) is refused, hits
