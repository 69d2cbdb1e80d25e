"""Orchestration: a resolved spec role -> what its engine runs -> decode step, prefill chunks, a benchmark run.

Pure apart from the estimator, which is passed in (tests pass a double).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.core.plan import PlanUnavailable, plan
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.topology import role_views
from gpustack_k3.probe.core import percentile
from gpustack_k3.predict import acceptance, corrections, scheduler
from gpustack_k3.predict.estimator import Estimator, settings
from gpustack_k3.predict.types import (INLINE_PREFIX, MAX_SIM_REQUESTS, MAX_SIM_WORK, EngineConfig, PredictError,
                                       StepBreakdown, Workload)

# progress of a long computation: (what, done, total); the CLI shows it past ~2 s
Progress = Callable[[str, int, int], None]

CTX_BUCKET = 2048          # decode steps are priced at the context rounded up to this (cache granularity)
PREFIX_BUCKET = 2048


def mla_geometry(arch) -> tuple[int, int, int, int] | None:
    """(heads, kv_lora_rank, qk_rope_head_dim, q head dim) of a multi-head-latent-attention model, from its
    config.json figures (core.model_config.ModelArch); None without MLA or without those figures."""
    if arch is None or not arch.mla or None in (arch.heads, arch.qk_rope_head_dim, arch.qk_nope_head_dim):
        return None
    return (arch.heads, arch.kv_lora_rank, arch.qk_rope_head_dim, arch.qk_nope_head_dim + arch.qk_rope_head_dim)


def config_ref(arch) -> str | None:
    """What the op graph is built from (EngineConfig.model_config): the config.json file the figures were read from,
    or, for a config the document carries inline (spec.model.configJSON), ``inline:`` + its JSON text, which the
    estimator writes out as a config.json of its own (predict/aic.py); None without a config."""
    if arch is None:
        return None
    import os

    if os.path.isfile(arch.source) or arch.raw is None:
        return arch.source
    import json

    return INLINE_PREFIX + json.dumps(arch.raw, sort_keys=True)


def role_arch(r, estimator: Estimator, arch=None):
    """The model's figures: the user's config.json (``arch``), else the estimator's config of the catalog model."""
    return arch if arch is not None else estimator.catalog_arch(r.spec.model.name)


def engine_config(r, role: str = "serve", instances: int = 1, arch=None, model_config: str | None = None
                  ) -> EngineConfig:
    """What the engine of one resolved (effective, single-engine) document runs. ``arch``: the model's figures
    (core.model_config.ModelArch); ``model_config``: the user's config.json the op graph is built from (None: the
    estimator's config of the catalog model)."""
    spec = r.spec
    engine = r.engine.engine
    drafts = int(spec.speculative.numTokens or 0) if spec.speculative.method != "none" else 0
    if spec.speculative.method not in ("none", "dspark"):
        raise PredictError("spec.speculative.method", f"{spec.speculative.method!r} is not modelled",
                           "predictions cover DSpark (dspark) or no speculation")
    kv = str(r.value("memory.kvCacheDtype") or "auto")
    ep = 1
    if engine == ENGINE_SGLANG and spec.parallel.ep:
        ep = int(spec.parallel.ep)
    elif engine == ENGINE_VLLM and spec.parallel.expertParallel:
        ep = r.tp
    budget = r.value("scheduling.maxNumBatchedTokens")
    if budget in (None, -1):
        budget = 8192 if engine == ENGINE_VLLM else 16384
    seqs = r.value("scheduling.maxNumSeqs") or (256 if engine == ENGINE_VLLM else 48)
    lpt = r.value("scheduling.longPrefillTokenThreshold")
    if lpt is None:
        lpt = r.trait("long_prefill_threshold_default", 0)
    custom_ar = not (engine == ENGINE_SGLANG and spec.sglang.customAllReduce is False)
    return EngineConfig(
        engine=engine, version=r.version.key if r.version else str(spec.engine.version), gpu=spec.hardware.gpuType,
        model=spec.model.name, tp=r.tp, dcp=r.dcp, ep=ep, drafts=drafts, spec_method=spec.speculative.method,
        kv_dtype="fp8" if "fp8" in kv else "bfloat16", max_num_seqs=int(seqs), max_batched_tokens=int(budget),
        long_prefill_threshold=int(lpt), dcp_comm=spec.parallel.dcpCommBackend or settings()["dcp_comm_default"][engine],
        custom_allreduce=custom_ar,
        static_verify=bool(r.trait("dspark_dcp_static_verify", False)) and r.dcp > 1 and drafts > 0,
        role=role, instances=instances,
        model_config=model_config, mla=mla_geometry(arch))


class Predictor:
    def __init__(self, estimator: Estimator, progress: Progress | None = None) -> None:
        self.est = estimator
        self.progress = progress
        self._graphs: dict[tuple, list[dict]] = {}
        self._decode: dict[tuple, StepBreakdown] = {}
        self._prefill: dict[tuple, StepBreakdown] = {}

    def _graph(self, cfg: EngineConfig, phase: str) -> list[dict]:
        key = (cfg.engine, cfg.gpu, cfg.model, cfg.tp, cfg.ep, cfg.drafts, cfg.kv_dtype, phase)
        if key not in self._graphs:
            self._graphs[key] = self.est.graph(cfg, phase)
        return self._graphs[key]

    def decode_step(self, cfg: EngineConfig, batch: int, context: int) -> StepBreakdown:
        ctx = int(math.ceil(context / CTX_BUCKET) * CTX_BUCKET)
        key = (tuple(sorted(cfg.to_dict().items())), batch, ctx)
        if key not in self._decode:
            ops, names = corrections.corrected_decode(self._graph(cfg, "generation"), cfg, batch, ctx)
            self._decode[key] = StepBreakdown(self.est.price(cfg, ops), names)
        return self._decode[key]

    def prefill_chunk(self, cfg: EngineConfig, tokens: int, prefix: int) -> StepBreakdown:
        pre = int(round(prefix / PREFIX_BUCKET) * PREFIX_BUCKET)
        key = (tuple(sorted(cfg.to_dict().items())), tokens, pre)
        if key not in self._prefill:
            ops, names = corrections.corrected_prefill(self._graph(cfg, "context"), cfg, tokens, pre)
            self._prefill[key] = StepBreakdown(self.est.price(cfg, ops), names)
        return self._prefill[key]

    def request_prefill(self, cfg: EngineConfig, input_len: int) -> list[tuple[int, int, StepBreakdown]]:
        """One prompt alone: its chunks of the engine's budget, as (tokens, prefix, priced chunk)."""
        out = []
        prefix = 0
        while prefix < input_len:
            n = min(cfg.max_batched_tokens, input_len - prefix)
            out.append((n, prefix, self.prefill_chunk(cfg, n, prefix)))
            prefix += n
        return out

    # ------------------------------------------------------------------ one role
    def predict_role(self, cfg: EngineConfig, w: Workload, *, admission_cap: int | None = None,
                     benchmark: bool = True, measured_at_drafts: int | None = None) -> dict[str, Any]:
        tps = acceptance.tokens_per_step(cfg.drafts, length=w.acceptance_length, rate=w.acceptance_rate,
                                         at_drafts=measured_at_drafts)
        steady_ctx = w.input_len + w.output_len // 2
        if w.rate:
            # open loop: the decode batch from Little's law, requests in decode = rate x decode time (3 rounds)
            limit = min(cfg.max_num_seqs, admission_cap or cfg.max_num_seqs)
            steady_batch = 1
            for _ in range(3):
                dec_s = w.output_len / tps * self.decode_step(cfg, steady_batch, steady_ctx).ms / 1000
                steady_batch = max(1, min(limit, math.ceil(w.rate * dec_s)))
        else:
            steady_batch = max(1, min(w.clients, cfg.max_num_seqs, admission_cap or w.clients))
        step = self.decode_step(cfg, steady_batch, steady_ctx)
        step_ms = step.ms
        decode = {
            "batch": steady_batch, "context": steady_ctx, "tokens_per_step": round(tps, 4),
            **step.to_dict(),
            "itl_ms": round(step_ms, 3), "tpot_ms": round(step_ms / tps, 3),
            "per_request_tok_s": round(1000 * tps / step_ms, 2),
            "decode_tok_s": round(1000 * tps * steady_batch / step_ms, 1),
        }
        priced = self.request_prefill(cfg, w.input_len)
        chunks = [{"tokens": n, "prefix": pre, "ms": round(c.ms, 2), "tok_s": round(1000 * n / c.ms, 0)}
                  for n, pre, c in priced]
        pf_ms = sum(c["ms"] for c in chunks)
        prefill = {"chunk_budget": cfg.max_batched_tokens, "chunks": chunks, "request_prefill_ms": round(pf_ms, 1),
                   "tok_s": round(1000 * w.input_len / pf_ms, 0) if pf_ms else None,
                   "assumptions": priced[0][2].assumptions if priced else []}
        out: dict[str, Any] = {"role": cfg.role, "instances": cfg.instances, "engine": cfg.to_dict(),
                               "decode": decode, "prefill": prefill,
                               "band": band(cfg, w, step, [c for _, _, c in priced], steady_batch, measured_at_drafts)}
        assumptions = {n: corrections.ASSUMPTIONS[n] for n in step.assumptions + prefill["assumptions"]}
        if cfg.drafts:
            assumptions["acceptance"] = acceptance.ASSUMPTION
        if w.varies:
            assumptions["length-dist"] = ("the decode and prefill figures are at the mean lengths; the benchmark runs "
                                          "each request of a seeded sample at its own lengths (each length's exact "
                                          "share of the requests, shuffled; input and output drawn independently)")
        if w.rate:
            assumptions["open-loop-batch"] = "open loop: the decode figures' batch = rate x decode time (Little's law)"
        if benchmark and cfg.role == "serve":
            out["benchmark"] = self.benchmark(cfg, w, tps, admission_cap)
            for k in ("vllm-budget" if cfg.engine == ENGINE_VLLM else "sglang-prefill-first", "first-delta-after-decode",
                      "multi-request-chunk"):
                assumptions[k] = scheduler.ASSUMPTIONS[k]
        out["bottleneck"] = bottleneck(out)
        out["assumptions"] = assumptions
        return out

    def benchmark(self, cfg: EngineConfig, w: Workload, tps: float, admission_cap: int | None) -> dict[str, Any]:
        seqs = min(cfg.max_num_seqs, admission_cap) if admission_cap else cfg.max_num_seqs
        if seqs < 1:
            raise PredictError("--input-len", f"the KV pool holds no request of {w.input_len + w.output_len:,} tokens",
                               "shorten the request or raise the KV pool (memory fraction, max-model-len)")
        pol = scheduler.Policy(cfg.engine, cfg.max_batched_tokens, cfg.long_prefill_threshold, seqs, cfg.drafts, tps)
        lengths = bounded_lengths(w, cfg, tps)
        res = scheduler.simulate(
            pol, lengths=lengths, concurrency=w.concurrency, rate=w.rate,
            decode_ms=lambda b, ctx: self.decode_step(cfg, b, ctx).ms,
            prefill_ms=lambda n, p: self.prefill_chunk(cfg, n, p).ms,
            on_progress=(lambda done, total: self.progress(f"role {cfg.role}", done, total)) if self.progress else None)
        if len(res.requests) < len(lengths):
            raise PredictError(w.requests_option, f"the simulation stopped after {res.steps:,} steps with "
                               f"{len(res.requests):,} of {len(lengths):,} requests done",
                               "lower the requests or the output length")
        ttft = [x * 1000 for x in res.ttfts()]
        lat = [x * 1000 for x in res.latencies()]
        tpot = [(lt - tt) / max(1, r.output_len - 1) for lt, tt, r in zip(lat, ttft, res.requests)]
        steady = res.steady_decode_step_ms
        out = {
            "requests": len(lengths), "concurrency": w.concurrency, "rate": w.rate, "running_cap": seqs,
            "ttft_ms": dist(ttft), "latency_ms": dist(lat), "tpot_ms": dist(tpot),
            "e2e_s": round(res.end_s, 2), "steps": res.steps,
            "steady_decode_tok_s": round(1000 * tps * min(w.clients, seqs) / steady, 1) if steady else None,
            "output_tok_s": round(sum(o for _, o in lengths) / res.end_s, 1) if res.end_s else None,
        }
        if w.varies:
            out["sample"] = {"input_len": dist([float(i) for i, _ in lengths]),
                             "output_len": dist([float(o) for _, o in lengths]), "seed": w.seed}
        return out


def _shares(steps: list[StepBreakdown]) -> dict[str, float]:
    total = sum(s.ms for s in steps)
    out: dict[str, float] = {}
    for s in steps:
        for k, v in s.source_shares().items():
            out[k] = out.get(k, 0.0) + v * s.ms
    return {k: round(v / total, 4) if total else 0.0 for k, v in sorted(out.items())}


def band(cfg: EngineConfig, w: Workload, step: StepBreakdown, chunks: list[StepBreakdown], batch: int,
         measured_at_drafts: int | None) -> dict[str, Any]:
    """How firm the point figures are: the share of the decode step's and the prefill's time priced from measured
    table rows (``silicon``) against the estimator's empirical / speed-of-light models, and the spread of TPOT and
    decode throughput over the acceptance range (a range given as LOW-HIGH; the point is its middle)."""
    out: dict[str, Any] = {"decode_step_sources": step.source_shares(), "prefill_sources": _shares(chunks)}
    out["decode_step_measured_share"] = out["decode_step_sources"].get("silicon", 0.0)
    out["prefill_measured_share"] = out["prefill_sources"].get("silicon", 0.0)
    if not cfg.drafts:
        out["acceptance"] = {"spread": None, "why": "no speculative decoding: one token per step"}
        return out
    if w.acceptance_range is None:
        out["acceptance"] = {"spread": None, "why": "a point acceptance figure: give LOW-HIGH for its spread"}
        return out
    kind = "length" if w.acceptance_length is not None else "rate"
    tps = [acceptance.tokens_per_step(cfg.drafts, at_drafts=measured_at_drafts, **{kind: x})
           for x in w.acceptance_range]
    lo, hi = min(tps), max(tps)
    out["acceptance"] = {"spread": {kind: list(w.acceptance_range), "tokens_per_step": [round(lo, 4), round(hi, 4)],
                                    "tpot_ms": [round(step.ms / hi, 3), round(step.ms / lo, 3)],
                                    "decode_tok_s": [round(1000 * lo * batch / step.ms, 1),
                                                     round(1000 * hi * batch / step.ms, 1)]}}
    return out


def bounded_lengths(w: Workload, cfg: EngineConfig, tps: float) -> list[tuple[int, int]]:
    """The benchmark's per-request lengths, refused (exit 2, naming the option that sized them) beyond the
    documented bounds: ``MAX_SIM_REQUESTS`` requests, ``MAX_SIM_WORK`` request-steps (the simulation's time is
    linear in them)."""
    opt = w.requests_option
    if w.total_requests > MAX_SIM_REQUESTS:
        raise PredictError(opt, f"{w.total_requests:,} requests: the benchmark simulates at most "
                           f"{MAX_SIM_REQUESTS:,}", "give fewer --requests (the figures settle after a few hundred)")
    lengths = w.request_lengths()
    steps = scheduler.work(lengths, cfg.max_batched_tokens, tps)
    if steps > MAX_SIM_WORK:
        raise PredictError(opt, f"{len(lengths):,} requests of {w.output_len:,} output tokens at {tps:.2f} tokens "
                           f"per step are {steps:,} request-steps to simulate: over the bound of {MAX_SIM_WORK:,}",
                           "give fewer --requests or a shorter --output-len")
    return lengths


def dist(xs: list[float]) -> dict[str, float]:
    """Mean, p50, p90 of per-request figures, percentiles as the probe measures them (``probe.core.percentile``:
    linear interpolation, what ``vllm bench serve`` reports), so plan and actual compare like for like."""
    if not xs:
        return {}
    s = sorted(xs)
    return {"mean": round(statistics.fmean(s), 1), "p50": round(percentile(s, 50), 1),
            "p90": round(percentile(s, 90), 1)}


def bottleneck(role: dict[str, Any]) -> dict[str, Any]:
    """What dominates: the largest share of the decode step, or prefill when TTFT is most of a request."""
    bd = role["decode"]["breakdown_ms"]
    total = sum(bd.values()) or 1.0
    top = max(bd, key=bd.get)
    out = {"decode_step": top, "share": round(bd[top] / total, 3)}
    b = role.get("benchmark")
    if b and b["latency_ms"].get("mean"):
        share = b["ttft_ms"]["mean"] / b["latency_ms"]["mean"]
        out["request"] = "prefill (TTFT)" if share > 0.5 else "decode"
        out["ttft_share_of_latency"] = round(share, 3)
    return out


def plan_or_none(r):
    """The product's memory plan of a resolved document, None where it has none (no KV figures)."""
    try:
        return plan(r)
    except PlanUnavailable:
        return None


def admission_cap(r, plan, w: Workload) -> int | None:
    """Requests of this length the KV pool holds at once (the product's memory plan)."""
    if plan is None:
        return None
    tokens = plan.kv_cache_tokens * (r.dcp if r.engine.engine == ENGINE_SGLANG else 1)
    cap = tokens // max(1, w.input_len + w.output_len)
    if plan.max_running_requests:
        cap = min(cap, plan.max_running_requests)
    return int(cap)


def predict_document(doc, w: Workload, estimator: Estimator, *, measured_at_drafts: int | None = None,
                     progress: Progress | None = None, arch=None) -> dict:
    """Every role of a deployment document predicted under the workload. ``arch``: the model's figures from its
    config.json (core.model_config.ModelArch), which also builds the op graph of a model the catalog lacks."""
    p = Predictor(estimator, progress)
    planned = []
    for view in role_views(doc):
        r = resolve(view.document, arch=arch)
        if r.version is None or r.hardware is None or (r.model is None and arch is None):
            raise PredictError("spec", "the document names an engine version, model or GPU the catalog lacks",
                               "run `gpustack-k3 validate` first; a model the catalog lacks needs its config.json "
                               "(--model-config FILE, or a local model directory as spec.model.path)")
        max_len = int(r.value("scheduling.maxModelLen") or 0)
        if max_len and w.input.max + w.output.max > max_len:
            where = "--input-len-dist" if w.input.varies else "--output-len-dist" if w.output.varies else "--input-len"
            raise PredictError(where, f"{w.input.max:,} + {w.output.max:,} tokens exceed the max model length "
                               f"{max_len:,}", "shorten the request or raise scheduling.maxModelLen")
        model_arch = role_arch(r, estimator, arch)
        cfg = engine_config(r, view.role.role, view.role.instances, model_arch, config_ref(arch))
        family = estimator.family(cfg, model_arch)
        planned.append((r, cfg, family, model_arch.source if model_arch is not None else None))
    given = "--acceptance-length" if w.acceptance_length is not None else \
        "--acceptance-rate" if w.acceptance_rate is not None else None
    if given and not any(cfg.drafts for _, cfg, _, _ in planned):
        raise PredictError(given, "not applicable: the document runs no speculative decoding (spec.speculative)",
                           f"drop {given}, or predict a document with speculative decoding")
    roles = []
    for r, cfg, family, source in planned:
        role = p.predict_role(cfg, w, admission_cap=admission_cap(r, plan_or_none(r), w),
                              measured_at_drafts=measured_at_drafts)
        role["model"] = {"name": cfg.model, "family": family, "config": source}
        roles.append(role)
    out = {"workload": w.to_dict(), "roles": roles}
    if len(roles) > 1:
        out["pd"] = pd_balance(roles, w)
    return out


def pd_balance(roles: list[dict], w: Workload) -> dict:
    """Requests/s each side can carry: prefill instances x prefill rate vs decode instances x decode rate."""
    pre = [x for x in roles if x["role"] == "prefill"]
    dec = [x for x in roles if x["role"] == "decode"]
    if not pre or not dec:
        return {}
    pre_rps = sum(x["instances"] * 1000 / x["prefill"]["request_prefill_ms"] for x in pre)
    dec_rps = sum(x["instances"] * x["decode"]["decode_tok_s"] / w.output_len for x in dec)
    return {"prefill_req_s": round(pre_rps, 3), "decode_req_s": round(dec_rps, 3),
            "limited_by": "prefill" if pre_rps < dec_rps else "decode"}
