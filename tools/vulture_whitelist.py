"""Names vulture reports as unused that are used, each reviewed (issue 35 item 5): read by a framework, by the
API server, or by a documented test seam. tests/architecture/test_tools.py runs vulture over the package with
this file; a new report fails it. Parsed by vulture, never imported."""
# ruff: noqa
_ = ...

# api/v1alpha1/status.py: pydantic fields of the status the operator writes (the CRD schema is generated from them;
# the API server stores them; set by keyword)
_.compileSeconds, _.kv_cache_gib, _.concurrency_len, _.context_len, _.mamba_cache_size, _.kv_cache_blocks
_.compileCacheWarm, _.headroomGiB, _.maxAbsDriftPct, _.notPrinted, _.replicas, _.updatedReplicas
_.leaderColdStartSeconds, _.coldStartPhase

# coldstart/catalog.py: pydantic validators (called by pydantic on model_validate)
_._phase_known, _._version_ok, _._self_check

# coldstart/patterns.py: an option of google-re2 (``re2.Options.log_errors``), read by the library
_.log_errors
# coldstart/patterns.py: LinePattern.search_re, the test seam that checks the re2 backend against Python's re
# on every catalog pattern (tests/coldstart/test_patterns.py)
_.search_re

# core/rules/log.py: log checks registered by the @rule decorator (core/rules/registry.py), called by diagnose
_.check_sglang_device_name_misdetected, _.check_deepgemm_scale_fmt, _.check_vllm_soft_oom_retries
_.check_jit_after_ready, _.check_coldstart_failed

# operator/health.py: http.server.BaseHTTPRequestHandler / ThreadingHTTPServer hooks
_.do_GET, _.log_message, _.daemon_threads

# operator/kube.py: kubernetes.client.Configuration attributes, read by the client
_.retries, _.connection_pool_maxsize

# operator/kvcheck.py: the KVTransfer check (docs/design/010-pd-rollouts.md §4), tested by tests/operator/test_kvcheck.py
# but NOT YET CALLED by the reconciler (the wiring waits for the reconciler's seams): remove these when it is
_.KVTransferCheck, _.metric_samples, _.instance_urls, _.checked_at
