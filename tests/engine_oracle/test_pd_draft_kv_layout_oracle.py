"""A P/D pair whose prefill drafts with DSpark (the draft's own KV layers) and whose decode drafts with ngram (no draft
KV), both with ``enforce_handshake_compat: false``: the release's handshake does not compare the hashes, and the
connector worker then asserts as many remote KV regions as local ones (nixl/base_worker.py:2953@0.33.0), on the
allocated KV tensors. The oracle cannot run that assert on CPU: the pair is ``not_decidable`` (runtime-layout-check),
not "accepted" (seed 7919's pair that counted pd-pair-identity as a false refusal). With the draft on both sides the
same pair is accepted; with the hash enforced, the draft difference is the release's hash mismatch."""
from __future__ import annotations

import json

import pytest

from tests.support import tiers

pytestmark = pytest.mark.engine_oracle
RELEASE = "vllm-0.33.0"
BASE = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tensor-parallel-size", "1", "--data-parallel-size",
        "2", "--enable-expert-parallel", "--max-model-len", "131072", "--kv-cache-dtype", "fp8"]
DSPARK = ["--speculative-config", json.dumps({"model": "/models/DeepSeek-V4.1-Flash-DSpark",
                                              "num_speculative_tokens": 5, "method": "dspark"})]
NGRAM = ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})]


def _kv(role: str, enforce: bool) -> list[str]:
    cfg = {"kv_connector": "NixlPushConnector", "kv_role": role, "kv_load_failure_policy": "fail"}
    if not enforce:
        cfg["kv_connector_extra_config"] = {"enforce_handshake_compat": False}
    return ["--kv-transfer-config", json.dumps(cfg)]


def _pair(oracles, prefill_spec, decode_spec, enforce):
    tiers.engine_wheel("vllm", "0.33.0")
    return oracles(RELEASE).judge_pair({"argv": [*BASE, *prefill_spec, *_kv("kv_producer", enforce)], "env": {}},
                                       {"argv": [*BASE, *decode_spec, *_kv("kv_consumer", enforce)], "env": {}},
                                       "gb300")


def test_a_draft_kv_on_one_side_is_left_to_the_runtime_layout_check(oracles):
    v = _pair(oracles, DSPARK, NGRAM, enforce=False)
    assert v["verdict"] == "not_decidable" and v["reason"] == "runtime-layout-check", v
    assert "draft_kv_cache" in v["detail"] and "not compared" in v["detail"], v


def test_the_same_draft_on_both_sides_is_accepted(oracles):
    v = _pair(oracles, DSPARK, DSPARK, enforce=False)
    assert v["verdict"] == "accepted", v


def test_with_the_hash_enforced_the_draft_difference_is_a_hash_mismatch(oracles):
    v = _pair(oracles, DSPARK, NGRAM, enforce=True)
    assert v["verdict"] == "refused" and "compatibility hash mismatch" in v["message"], v


def _kv_mode(connector: str, role: str, enforce: bool) -> list[str]:
    cfg = {"kv_connector": connector, "kv_role": role}
    if not enforce:
        cfg["kv_connector_extra_config"] = {"enforce_handshake_compat": False}
    return ["--kv-transfer-config", json.dumps(cfg)]


# which side's enforce_handshake_compat decides: the side that starts a handshake compares hashes. Decode always
# starts one (pull reads, push registrations); prefill only when it pushes (push_worker.py:452-490@0.33.0). The pair
# differs in the KV cache dtype (a hash factor, metadata.py@0.33.0); the product's check-pd must say the same.
SIDES = [
    # connector, prefill enforces, decode enforces, the release refuses
    ("NixlPushConnector", False, True, True),     # seed 48611's pair: decode's registration handshake checks
    ("NixlPushConnector", True, False, True),     # prefill's push handshake checks
    ("NixlConnector", True, False, False),        # pull: prefill starts no handshake, decode does not check
    ("NixlConnector", False, True, True),
]


@pytest.mark.parametrize("connector, p_on, d_on, refused", SIDES, ids=[f"{c}-{p}-{d}" for c, p, d, _ in SIDES])
def test_the_side_that_starts_the_handshake_decides(oracles, connector, p_on, d_on, refused):
    from tools.engine_oracle.product import check_pd

    tiers.engine_wheel("vllm", "0.33.0")
    base = ["/models/Kimi-K3", "--trust-remote-code", "--tensor-parallel-size", "8"]
    prefill = [*base, "--kv-cache-dtype", "fp8", *_kv_mode(connector, "kv_producer", p_on)]
    decode = [*base, "--kv-cache-dtype", "auto", *_kv_mode(connector, "kv_consumer", d_on)]
    v = oracles(RELEASE).judge_pair({"argv": prefill, "env": {}}, {"argv": decode, "env": {}})
    assert (v["verdict"] == "refused") is refused, v
    if refused:
        assert "compatibility hash mismatch" in v["message"], v
    side = {"model": "kimi-k3", "gpu_type": "b300", "gpus": 8, "env": {}}
    pv = check_pd("vllm", "0.33.0", {**side, "argv": prefill}, {**side, "argv": decode})
    assert ("pd-compat-hash" in pv["rules"]) is refused, pv
