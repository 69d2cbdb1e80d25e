"""Tier engine_oracle: a verdict resting on the stand-in's missing remote code is not the release's
(gpustack_k3/oracle/engine_side/doubles.py remote_code_lookups, worker.py's classification; issue 31 item 9).

Kimi-K3 with --model-impl transformers: with --trust-remote-code the release looks the auto_map's
modeling_kimi_k3.py up in the checkpoint, which the oracle's config-only stand-in does not hold; the lookup's failure
is swallowed (try_get_class_from_dynamic_module, warn_on_fail) and model_executor/models/registry.py then refuses
for want of the class. The real checkpoint carries the file: not_decidable (stand-in-file), and the product warns
(vllm-model-impl-transformers-remote-code). Without --trust-remote-code the release refuses before any file lookup
(resolve_trust_remote_code): still refused, as the product does (vllm-model-impl-transformers-unresolvable).
Held-out seed 77351's 0.33.0 line. Needs the wheels (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core.test_checks_table import product
from tests.support import judge_cache

pytestmark = pytest.mark.engine_oracle

LINE = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--max-model-len", "262144", "--model-impl",
        "transformers"]


@pytest.mark.parametrize("release", ["0.28.0", "0.33.0", "0.34.0"])
def test_the_stand_ins_missing_remote_code_is_not_the_releases_refusal(oracles, release):
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), LINE, {})
    assert v["verdict"] == "not_decidable" and v["reason"] == "stand-in-file", v
    assert "modeling_kimi_k3.py" in v["detail"] and v["where"].startswith("vllm/model_executor/models/registry.py"), v
    got = product("vllm", release, LINE, {}, "kimi-k3", None)
    assert got["verdict"] == "pass", got


@pytest.mark.parametrize("release", ["0.28.0", "0.33.0", "0.34.0"])
def test_without_remote_code_the_release_refuses_and_so_does_the_product(oracles, release):
    line = [x for x in LINE if x != "--trust-remote-code"]
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), line, {})
    assert v["verdict"] == "refused" and "Cannot find model module" in v["message"], v
    got = product("vllm", release, line, {}, "kimi-k3", None)
    assert got["verdict"] == "refuse" and "vllm-model-impl-transformers-unresolvable" in got["rules"], got
