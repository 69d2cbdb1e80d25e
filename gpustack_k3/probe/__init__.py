"""`gpustack-k3 probe`: measure a live OpenAI-compatible endpoint honestly.

Pure core: ``core`` (configuration, request plan, percentiles), ``stream`` (SSE → per-request timings),
``metrics`` (Prometheus text → counters), ``report`` (figures, goodput, invariants, findings), ``catalog``
(the engine metrics and finding texts, data validated on load). Thin edge: ``client`` (httpx).

    from gpustack_k3.probe.client import run_probe
    from gpustack_k3.probe.core import ProbeConfig
    report = run_probe("http://127.0.0.1:8000", ProbeConfig(requests=32, concurrency=8))
    report.to_dict(), report.exit_code      # 0 ok, 1 SLO/invariant failed, 2 unusable endpoint
"""
