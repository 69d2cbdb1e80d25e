"""The memory family of the spec rules: what the memory planner (core/plan.py, core/plan_moe.py) says about a
resolved document — fixed memory against the budget, one max-length request against the KV capacity, the KV pool
over-committed, concurrency capped by max_model_len — and that the plan could not be formed (plan-unavailable).

Every check reads the plan the runner computes once (``Ctx.plan``); the rules are family ``spec`` (one registry).
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM, GIB
from gpustack_k3.core.rules import log as logrules
from gpustack_k3.core.rules.registry import rule

BOTH = (ENGINE_VLLM, ENGINE_SGLANG)


@rule("fixed-memory-exceeds-budget", checked_by="runtime-only", fails_at="KV-cache sizing after the memory-profiling run, minutes into the start",
      family="spec", severity="error", engines=BOTH, field="spec.memory.fraction",
      title="Fixed memory does not fit inside the memory fraction",
      why="Weights + activations (+ CUDA graphs) exceed fraction x GPU memory: no memory is left for the KV cache "
          "and start-up fails after loading the weights.",
      fix="Raise spec.memory.fraction, add GPUs (spec.parallel.tp), or lower spec.scheduling.maxNumBatchedTokens.",
      source="vllm v1/core/kv_cache_planning.py:50-86@0.33.0 ('No available memory for the cache blocks'); "
             "sglang mem_cache/kv_cache_configurator.py:2990-3060@0.5.23; docs/sources.md#memory-table",
      no_cel="needs the memory planner (weights, activations, CUDA graphs, KV bytes per token) in floating point; "
             "not a schema-level check")
def check_fixed_memory_exceeds_budget(r, c):
    p = c.plan
    if p is None or p.unaccounted:      # a dimension the plan does not account for: plan-unavailable warns instead
        return
    if p.engine == ENGINE_VLLM and not r.spec.memory.kvCacheBytes and p.kv_cache_allocated_gib <= 0:
        yield None, (f"fraction {p.memory_fraction} x {p.visible_gib} GiB = {p.requested_gib:.2f} GiB, but weights + "
                     f"non-torch + activations need {p.requested_gib - p.kv_cache_allocated_gib:.2f} GiB: no KV cache left")
    if p.engine == ENGINE_VLLM and r.spec.memory.kvCacheBytes and p.headroom_gib < 0:
        yield "spec.memory.kvCacheBytes", (f"kvCacheBytes {p.kv_cache_allocated_gib:.2f} GiB + fixed memory exceed the GPU "
                                           f"({p.visible_gib} GiB) by {-p.headroom_gib:.2f} GiB")
    if p.basis == "config.json":
        if not r.spec.memory.kvCacheBytes and p.kv_cache_allocated_gib <= 0:
            big = max(p.weight_terms, key=lambda t: t["gib"]) if p.weight_terms else None
            yield None, (f"fraction {p.memory_fraction} x {p.visible_gib} GiB = {p.requested_gib:.2f} GiB, but the "
                         f"weights of the fullest GPU alone need {p.weights_gib:.2f} GiB (derived from the model's "
                         "config.json" + (f"; the largest term: {big['term']} {big['gib']:.2f} GiB" if big else "")
                         + "): no KV cache left")
        return
    if p.engine == ENGINE_SGLANG and p.kv_cache_budget_gib <= 0:
        yield None, (f"fraction {p.memory_fraction} x {p.visible_gib} GiB = {p.requested_gib:.2f} GiB does not hold the "
                     f"weights ({p.weights_gib:.2f} GiB): no KV pool")


@rule("vllm-max-model-len-exceeds-kv", checked_by="runtime-only", fails_at="KV-cache sizing after the memory-profiling run: max_model_len above the KV capacity",
      family="spec", severity="error", engines=[ENGINE_VLLM],
      field="spec.scheduling.maxModelLen", title="One max-length request does not fit the KV cache",
      why="vLLM refuses to start when the KV cache cannot hold a single request of max_model_len tokens.",
      fix="Lower spec.scheduling.maxModelLen to the business length, or raise the KV pool (fraction, kvCacheBytes, DCP).",
      source="vllm v1/core/kv_cache_planning.py:50-86@0.33.0, v1/core/kv_cache_utils.py:712-725@0.11.0",
      no_cel="needs the planner's KV capacity in tokens (same as fixed-memory-exceeds-budget)")
def check_vllm_max_model_len_exceeds_kv(r, c):
    p = c.plan
    if p and not p.unaccounted and p.kv_cache_tokens > 0 and p.kv_cache_tokens < p.max_model_len:
        yield None, (f"max_model_len {p.max_model_len:,} tokens > KV capacity {p.kv_cache_tokens:,} tokens "
                     f"({p.kv_cache_allocated_gib:.2f} GiB): the engine refuses to start")


@rule("plan-unavailable", checked_by="product", family="spec", severity="warning", engines=BOTH, field="spec.memory",
      title="The memory rules could not run: no figures for this combination, or a dimension the plan does not account for",
      why="The planner needs the model's figures (calibrated from an engine log, or derived from its config.json: "
          "weights per rank, KV bytes per token); without them, or where the layout has a dimension the plan cannot "
          "account for (a draft model whose config.json was not read), the memory rules (fixed memory, KV capacity, "
          "over-commit, concurrency) do not refuse.",
      fix="Give the model's config.json (--model-config FILE or a local model directory), use a KV cache dtype with "
          "figures (see the message), or add the figures to gpustack_k3/catalog/data/models.yaml from an engine log.",
      source="gpustack_k3/core/plan.py (PlanUnavailable); gpustack_k3/catalog/data/models.yaml")
def check_plan_unavailable(r, c):
    p = c.plan
    if p is None and c.plan_error:
        yield None, f"memory not planned: {c.plan_error}"
    elif p is not None and p.unaccounted:
        yield None, ("memory rules not decisive: the plan does not account for " + "; ".join(p.unaccounted)
                     + f" (weights {p.weights_gib:.2f} GiB per GPU without it)")


# ------------------------------------------------------------------ degrading combinations

@rule("vllm-kv-overcommit", checked_by="runtime-only", fails_at="under load: the KV pool counted at start-up is not there (OOM or preemption)",
      family="spec", severity="warning", engines=[ENGINE_VLLM],
      when={"kv_subtracts_cudagraph": [False]}, field="spec.memory.fraction",
      title="The KV pool is over-committed (CUDA graphs not subtracted)",
      why="This build sizes the KV pool without subtracting CUDA-graph memory, so the pool exceeds the engine's own "
          "budget; at run time the allocator retries on soft OOM (32 retries over 8 GPUs in the write-up's 64K run).",
      fix="Set spec.memory.fraction to 0.92, or pin spec.memory.kvCacheBytes to the budget in the message.",
      source="docs/sources.md#kv-overcommit; docs/sources.md#memory-table; vllm v1/worker/gpu_worker.py:1040-1066@0.33.0 "
             "(the 'fit into requested memory' hint the log check reads)",
      log=logrules.kv_overcommit)
def check_vllm_kv_overcommit(r, c):
    p = c.plan
    if p is None or r.spec.memory.kvCacheBytes or p.overcommit_gib <= 0:
        return
    if (r.spec.memory.fraction or 0) > 1:   # more than the GPU: every vLLM release refuses it (vllm-config-bounds),
        return                              # and a budget past the card has no headroom to speak of
    need = r.figures.runtime_headroom_gib or 0.0
    if p.headroom_gib < need:
        pin = int(p.kv_cache_budget_gib * (GIB))
        yield None, (f"KV pool {p.kv_cache_allocated_gib:.2f} GiB exceeds the engine's budget {p.kv_cache_budget_gib:.2f} GiB "
                     f"by {p.overcommit_gib:.2f} GiB (CUDA graphs); {p.headroom_gib:.2f} GiB left per GPU, "
                     f"{need:.2f} GiB needed at run time. Pin kvCacheBytes: {pin} or use fraction 0.92")


@rule("vllm-max-len-caps-concurrency", checked_by="runtime-only", fails_at="under load: concurrency capped by max_model_len (does not fail)",
      family="spec", severity="warning", engines=[ENGINE_VLLM],
      field="spec.scheduling.maxModelLen", title="max_model_len caps concurrency far below max_num_seqs",
      why="scheduler_reserve_full_isl=True (default) reserves a full max_model_len of KV at admission, so at most "
          "pool/max_model_len requests run.",
      fix="Set spec.scheduling.maxModelLen to the real business length.",
      source="docs/sources.md#max-len-concurrency")
def check_vllm_max_len_caps_concurrency(r, c):
    p = c.plan
    seqs = r.value("scheduling.maxNumSeqs")
    if p and p.kv_cache_tokens >= p.max_model_len and seqs and p.max_concurrency < seqs:
        yield None, (f"KV {p.kv_cache_tokens:,} tokens / max_model_len {p.max_model_len:,} = {p.max_concurrency:.2f} "
                     f"concurrent requests, far below max_num_seqs {seqs}")
