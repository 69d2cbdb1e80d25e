"""Doctor findings on logs that contain the write-up's §15/§16 problems, and silence on logs that don't. The log
checks are rules of the registry (gpustack_k3/core/rules); the patterns are coldstart data keyed by rule id."""
from __future__ import annotations

import pytest

from gpustack_k3.core.findings import Finding
from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.registry import log_evidence

from .conftest import track

VLLM_K3 = "vllm-0.33-kimi-k3-tp8-ready.log"
SGLANG_K3 = "sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log"
# every rule with a log check -> (a log that fires it, a log of the same engine that does not)
LOG_CASES = {
    "fp8-kv-no-scales": (VLLM_K3, "vllm-0.8.5-tp2-ready.log"),
    "slow-tokenizer": (SGLANG_K3, "sglang-0.4.6-tp2-ready.log"),
    "vllm-kv-overcommit": (VLLM_K3, "vllm-0.11-restart-kv-then-ready.log"),
    "vllm-compile-mode-none": (VLLM_K3, "vllm-0.33-compose-ansi-ready.log"),
    "jit-after-ready": (VLLM_K3, "vllm-0.8.5-tp2-ready.log"),
    "vllm-soft-oom-retries": (VLLM_K3, "vllm-0.33-compose-ansi-ready.log"),
    "sglang-device-name-misdetected": (SGLANG_K3, "sglang-0.3.6-ready.log"),
    "deepgemm-scale-fmt": (SGLANG_K3, "sglang-0.4.6-tp2-ready.log"),
    "sglang-kda-verify-triton-fallback": (SGLANG_K3, "sglang-0.3.6-ready.log"),
    "sglang-kv-pool-below-context": (SGLANG_K3, "sglang-0.4.6-tp2-ready.log"),
    "coldstart-failed": ("vllm-0.11-tp2-oom-cuda-graphs.log", "vllm-0.11-restart-kv-then-ready.log"),
}


def test_every_log_check_has_cases():
    assert set(LOG_CASES) == {r.id for r in log_evidence()}


@pytest.mark.parametrize("rule_id", sorted(LOG_CASES))
def test_log_rule_fires_and_stays_quiet(rule_id):
    fires, quiet = LOG_CASES[rule_id]
    f = by_rule(fires)
    assert rule_id in f
    r = RULES[rule_id]
    assert f[rule_id].severity == r.severity and f[rule_id].source == r.source_for(track(fires).engine, None)
    assert rule_id not in by_rule(quiet)


def by_rule(name: str, **kw) -> dict[str, Finding]:
    return {f.rule: f for f in track(name, **kw).findings()}


def test_vllm_kimi_log_reveals_seed_15_warnings():
    f = by_rule("vllm-0.33-kimi-k3-tp8-ready.log")
    assert set(f) == {"fp8-kv-no-scales", "slow-tokenizer", "vllm-kv-overcommit", "vllm-compile-mode-none",
                      "jit-after-ready", "vllm-soft-oom-retries"}
    # severities match the rule catalog where ids overlap (gpustack_k3/catalog/data/rules.yaml)
    assert {k for k, x in f.items() if x.severity == "info"} == {"slow-tokenizer", "vllm-compile-mode-none"}
    assert all(x.severity == "warning" for k, x in f.items() if k not in ("slow-tokenizer", "vllm-compile-mode-none"))
    over = f["vllm-kv-overcommit"]
    assert over.field == "kv_cache"
    assert "43.76 GiB allocated" in over.message and "38.48 GiB" in over.message   # docs/sources.md#kv-overcommit
    assert "41317885440" in over.fix
    assert "norm_quant" in f["vllm-compile-mode-none"].message
    assert f["vllm-compile-mode-none"].field == "compile"
    jit = f["jit-after-ready"]
    assert jit.field == "warm" and "4 line(s)" in jit.message       # 4 JIT lines after 17:16:56
    assert "2026-11-29T17:18:12" in jit.message
    assert f["vllm-soft-oom-retries"].message.startswith("2 ")
    assert f["fp8-kv-no-scales"].field == "weights_load" and "8 line(s)" in f["fp8-kv-no-scales"].message
    for x in f.values():
        assert "docs/sources.md#" in x.source or "@0." in x.source


def test_sglang_kimi_log_reveals_seed_15_and_16_warnings():
    f = by_rule("sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log")
    assert set(f) == {"fp8-kv-no-scales", "slow-tokenizer", "sglang-device-name-misdetected",
                      "deepgemm-scale-fmt", "sglang-kda-verify-triton-fallback", "sglang-kv-pool-below-context"}
    assert "L20D" in f["sglang-device-name-misdetected"].message
    assert "B300" in f["sglang-device-name-misdetected"].message
    kv = f["sglang-kv-pool-below-context"]
    assert "916,672" in kv.message and "1,000,000" in kv.message and "8.3%" in kv.message
    assert "TritonKDAKernel" in f["sglang-kda-verify-triton-fallback"].message


def test_kv_pool_below_context_computed_from_scheduler_summary():
    # no explicit "KV pool holds" warning in 0.5.5: max_total_num_tokens=150000 < context_len=163840
    f = by_rule("sglang-0.5.5-dp-attention-ready.log")
    assert set(f) == {"sglang-kv-pool-below-context"}
    assert "150,000" in f["sglang-kv-pool-below-context"].message


@pytest.mark.parametrize("name", ["vllm-0.8.5-tp2-ready.log", "vllm-0.33-compose-ansi-ready.log",
                                  "sglang-0.4.6-tp2-ready.log", "sglang-0.3.6-ready.log",
                                  "vllm-0.11-restart-kv-then-ready.log"])
def test_clean_logs_have_no_findings(name):
    assert track(name).findings() == []


def test_failed_start_is_an_error_finding():
    f = by_rule("vllm-0.11-tp2-oom-cuda-graphs.log")
    assert f["coldstart-failed"].severity == "error"
    assert f["coldstart-failed"].field == "cuda_graphs"
    assert "CUDA out of memory" in f["coldstart-failed"].message


def test_same_device_family_is_not_misdetection():
    from gpustack_k3.coldstart import ColdStartTracker
    t = ColdStartTracker(engine="sglang", year=2026)
    t.feed(b"[2026-01-01 00:00:01 TP0] server_args=ServerArgs(tp_size=1)\n"
           b"[2026-01-01 00:00:02 TP0] Using configuration from /c/device_name=NVIDIA_B300.json for MoE layer.\n"
           b"[2026-01-01 00:00:03 TP1] GPU 1: NVIDIA GB300 (sm_103)\n")
    t.finish()
    assert [x.rule for x in t.findings()] == []


def test_kv_hint_within_allocation_is_not_overcommit():
    from gpustack_k3.coldstart import ColdStartTracker
    t = ColdStartTracker(engine="vllm", year=2026)
    t.feed(b"(Worker_TP0 pid=1) INFO 01-01 00:00:01 [gpu_worker.py:775] Available KV cache memory: 21.40 GiB\n"
           b"(Worker_TP0 pid=1) INFO 01-01 00:00:02 [gpu_worker.py:1066] Replace gpu_memory_utilization config "
           b"with `--kv-cache-memory=22976439705` (21.4 GiB) to fit into requested memory, or "
           b"`--kv-cache-memory=27692338176` (25.79 GiB) to fully utilize gpu memory.\n")
    t.finish()
    assert "vllm-kv-overcommit" not in {x.rule for x in t.findings()}


def test_doctor_patterns_are_keyed_by_the_registrys_log_rules():
    """doctor.yaml holds patterns only, 1:1 with the registry's log checks (metadata lives in the one definition)."""
    from gpustack_k3.coldstart import load_catalog

    ids = [r.id for r in load_catalog().rules]
    assert len(ids) == len(set(ids))
    assert set(ids) == {r.id for r in log_evidence()}
    shared = {r.id for r in log_evidence() if r.family != "log"}
    assert {"fp8-kv-no-scales", "vllm-kv-overcommit", "sglang-kv-pool-below-context"} <= shared
