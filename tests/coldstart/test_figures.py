"""The engine's own memory figures and the compile cache, read off the logs by hand."""
from __future__ import annotations

from gpustack_k3.coldstart import ColdStartTracker

from .conftest import track


def test_vllm_gpu_figures_take_the_tightest_rank():
    # "Available KV cache memory: 2.10 GiB" (TP0) and "2.08 GiB" (TP1); one EngineCore capacity line pair
    mem = track("vllm-0.11-tp2-oom-cuda-graphs.log").report().to_dict()["memory"]
    assert mem == {"kv_cache_gib": 2.08, "kv_cache_tokens": 18224, "max_concurrency": 2.22, "concurrency_len": 8192}


def test_vllm_cpu_figures():
    # cpu_worker.py:260 "Explicitly set (1.0/11.09) GiB for KV cache"; kv_cache_utils.py:2327 one line
    mem = track("vllm-0.32.0-cpu-eager.log").report().to_dict()["memory"]
    assert mem == {"kv_cache_gib": 1.0, "kv_cache_tokens": 46592, "max_concurrency": 45.5, "concurrency_len": 1024}


def test_sglang_figures_full_attention_pool_and_scheduler():
    # "KV Cache is allocated ... #tokens: 916672, KV size: 11.80 GB" (the draft MHA pool is labelled: not
    # the KV pool) and "max_total_num_tokens=916672, ..., max_running_requests=39, context_len=1000000"
    d = track("sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log").report().to_dict()
    assert d["memory"] == {"kv_cache_gib": 11.8, "kv_cache_tokens": 916672, "max_running_requests": 39,
                           "context_len": 1000000}
    pools = next(p for p in d["phases"] if p["name"] == "kv_cache")["details"]["pools"]
    assert pools["draft MHA"] == 7333376


def test_sglang_mamba_state_pool():
    t = ColdStartTracker(engine="sglang", year=2026)
    t.feed(b"[2026-11-29 18:04:39 TP0] Mamba Cache is allocated. max_mamba_cache_size: 96, conv_state size: 0.41GB, "
           b"ssm_state size: 20.25GB \n"
           b"[2026-11-29 18:04:40 TP0] KV Cache is allocated. K size: 1 GB\n")
    assert t.finish().to_dict()["memory"] == {"mamba_cache_size": 96, "mamba_state_gib": 20.66}


def test_compile_cache_states():
    assert track("vllm-0.32.0-cpu-eager.log").report().to_dict()["compile_cache"] is None   # --enforce-eager
    miss = track("vllm-0.32.0-cpu-compile-cache-miss.log").report().to_dict()["compile_cache"]
    hit = track("vllm-0.32.0-cpu-compile-cache-hit.log").report().to_dict()["compile_cache"]
    assert (miss["state"], miss["hits"], miss["misses"], miss["compile_seconds"]) == ("miss", 0, 1, 618.0)
    assert (hit["state"], hit["hits"], hit["misses"], hit["compile_seconds"]) == ("hit", 1, 0, 279.0)
    # AOT on (the default): the artefact is saved, then fails to reload: the engine compiled both times
    aot = track("vllm-0.32.0-cpu-compiled-warm.log").report().to_dict()["compile_cache"]
    assert aot["state"] == "miss" and "Compiling model again due to a load failure" in aot["evidence"][0]
    # vLLM GPU builds: compiled graphs loaded from the cache, and one range compiled anew
    t = ColdStartTracker(engine="vllm", year=2026)
    t.feed(b"(Worker_TP0 pid=1) INFO 11-29 17:10:00 [backends.py:310] Directly load the compiled graph(s) for "
           b"compile range (1, 8192) from the cache, took 4.215 s\n"
           b"(Worker_TP0 pid=1) INFO 11-29 17:10:30 [backends.py:421] Compiling a graph for compile range "
           b"(8193, 32768) takes 21.30 s\n")
    assert t.finish().to_dict()["compile_cache"]["state"] == "partial"
    assert [a["compile_cache"] for a in t.report().to_dict()["attempts"]] == ["partial"]
