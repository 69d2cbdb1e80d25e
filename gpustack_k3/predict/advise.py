"""advise from predictions: enumerate candidate launches, drop what the rules refuse or what has no KV room,
rank by the objective, explain the winner, find the crossover context (docs/design/003-predict.md#advise)."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.findings import Finding, has_errors
from gpustack_k3.core.advise import beyond_context
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules import validate
from gpustack_k3.core.topology import role_views
from gpustack_k3.predict import acceptance
from gpustack_k3.predict.estimator import Estimator
from gpustack_k3.predict.model import Predictor, admission_cap, config_ref, engine_config, plan_or_none, role_arch
from gpustack_k3.predict.types import NoData, PredictError, Workload

DCP_SIZES = (1, 2, 4, 8)
DRAFTS = tuple(range(0, 9))
FRACTIONS = {ENGINE_VLLM: (0.90, 0.92), ENGINE_SGLANG: (0.85, 0.88)}


@dataclass
class AdviseRequest:
    context: int
    concurrency: int
    output_len: int = 3000
    objective: str = "throughput"
    slo_tpot_ms: float | None = None
    slo_ttft_ms: float | None = None
    acceptance_rate: float | None = None
    engine: str | None = None
    top: int = 5
    # the user's document (SPEC) the candidates vary, and its model's figures (core.model_config.ModelArch) from
    # its config.json; None: the catalog's Kimi-K3 presets
    base: dict | None = None
    arch: Any = None


@cache
def measured() -> dict:
    return yaml.safe_load(resources.files("gpustack_k3.predict").joinpath("data/measured.yaml").read_text())


def default_rate(engine: str, context: int) -> tuple[float, str]:
    """Per-draft-token acceptance from the write-up's measured acceptance length nearest the context."""
    acc = measured()["acceptance_length"]
    rows = [r for r in acc["rows"] if r["engine"] == engine]
    row = min(rows, key=lambda r: abs(math.log(r["context"]) - math.log(context)))
    length = (row["low"] + row["high"]) / 2
    rate = acceptance.rate_from_length(length, acc["drafts"])
    return rate, (f"measured acceptance length {length:.2f} at {row['context']:,} tokens, {acc['drafts']} drafts "
                  f"(random dataset; {acc['source']}) -> rate {rate:.3f}; give --acceptance-rate for your traffic")


def acceptance_of(req: AdviseRequest, engine: str) -> tuple[float, str]:
    """The per-draft-token acceptance the candidates of ``engine`` are priced at, and where it comes from."""
    if req.acceptance_rate is not None:
        return req.acceptance_rate, "given --acceptance-rate"
    return default_rate(engine, req.context)


def _fit_len(n: int) -> int:
    return int(math.ceil(n / 32768) * 32768)


def candidates(cat, req: AdviseRequest) -> list[dict]:
    """(engine, base preset, knobs, document) for every combination; the rules judge them later."""
    out = []
    engines = [req.base["spec"]["engine"]["name"]] if req.base else [req.engine] if req.engine else \
        list(cat.advice.presets)
    for eng in engines:
        if req.base is not None:
            base_name, base = "SPEC", req.base
            sp = base["spec"].get("speculative") or {}
            spec_base = sp if sp.get("method", "none") != "none" else None
        else:
            base_name = cat.advice.presets[eng][0]
            base = cat.presets[base_name].document
            spec_base = next((cat.presets[n].document["spec"]["speculative"] for n in cat.advice.presets[eng]
                              if cat.presets[n].document["spec"].get("speculative", {}).get("method", "none")
                              != "none"), None)
        # DCP shards the MLA latent KV (the dcp correction): a model without MLA runs DCP 1 only
        dcps = DCP_SIZES if req.arch is None or req.arch.mla else (1,)
        # GPU releases of the engine (a CPU build serves no Kimi-K3); the rules decide which combinations each takes
        versions = [v for v, entry in cat.engines[eng].versions.items() if not entry.traits.get("cpu")]
        mml = _fit_len(req.context + req.output_len)   # the smallest length that serves the request
        for version in versions:
            for dcp in dcps:
                for drafts in DRAFTS:
                    if drafts and spec_base is None:
                        continue
                    for frac in FRACTIONS[eng]:
                        doc = copy.deepcopy(base)
                        s = doc["spec"]
                        s["engine"] = {**s["engine"], "version": version}
                        s["parallel"] = {**s.get("parallel", {}), "dcp": dcp} if dcp > 1 else \
                            {k: v for k, v in s.get("parallel", {}).items() if k != "dcp"}
                        s["speculative"] = {**spec_base, "numTokens": drafts} if drafts else {"method": "none"}
                        s["memory"] = {**s.get("memory", {}), "fraction": frac}
                        s["scheduling"] = {**s.get("scheduling", {}), "maxModelLen": mml}
                        knobs = {"version": version, "dcp": dcp, "drafts": drafts, "memory_fraction": frac,
                                 "max_model_len": mml}
                        name = f"{eng} {version} dcp{dcp} drafts{drafts} mem{frac}"
                        out.append({"engine": eng, "preset": base_name, "knobs": knobs, "name": name, "doc": doc})
    return out


def refused(doc: DeploymentDocument, counts: dict[str, int], refusals: dict[str, int],
            examples: dict[str, Finding] | None = None, arch: Any = None) -> bool:
    """The product's rule engine judges a candidate: refused (errors) is counted, by rule; ``examples`` keeps
    each refusing rule's first finding (what a refusal of every candidate shows)."""
    findings = validate(doc, arch=arch)
    if not has_errors(findings):
        return False
    counts["refused"] += 1
    for f in findings:
        if f.severity == "error":
            refusals[f.rule] = refusals.get(f.rule, 0) + 1
            if examples is not None:
                examples.setdefault(f.rule, f)
    return True


def slo_miss(f: dict, req: AdviseRequest) -> float:
    """How far figures are from the SLO: the largest ratio of a figure to its bound (<= 1: met)."""
    return max(([f["tpot_ms"] / req.slo_tpot_ms] if req.slo_tpot_ms is not None else []) +
               ([f["ttft_ms"] / req.slo_ttft_ms] if req.slo_ttft_ms is not None else []), default=0.0)


def slo_text(req: AdviseRequest) -> str:
    parts = ([f"TPOT <= {req.slo_tpot_ms:g} ms"] if req.slo_tpot_ms is not None else []) + \
        ([f"TTFT <= {req.slo_ttft_ms:g} ms"] if req.slo_ttft_ms is not None else [])
    return " and ".join(parts)


def advise(req: AdviseRequest, estimator: Estimator) -> dict[str, Any]:
    cat = load_catalog()
    model = req.base["spec"]["model"]["name"] if req.base else "kimi-k3"
    longest = (req.arch.max_positions if req.arch is not None else None) or \
        (cat.models[model].max_context if model in cat.models else None)
    base = {"basis": "predicted", "objective": req.objective, "context": req.context,
            "concurrency": req.concurrency, "output_len": req.output_len}
    if longest and req.context + req.output_len > longest:
        return {**base, "preset": None, "engine": None,
                "reason": f"no preset: {req.context:,} + {req.output_len:,} tokens is beyond {model}'s context of "
                          f"{longest:,}; shorten the input",
                "findings": beyond_context(req.context + req.output_len) if req.base is None else []}
    if req.objective == "goodput" and req.slo_tpot_ms is None and req.slo_ttft_ms is None:
        raise PredictError("--objective", "goodput needs an SLO", "give --slo-tpot-ms and/or --slo-ttft-ms")
    pred = Predictor(estimator)
    rates: dict[str, tuple[float, str]] = {}
    counts = {"total": 0, "refused": 0, "no_room": 0, "no_data": 0}
    no_data: dict[str, str] = {}      # what the estimator could not price, one message per kind
    family = None
    refusals: dict[str, int] = {}
    examples: dict[str, Finding] = {}
    ranked = []
    for c in candidates(cat, req):
        counts["total"] += 1
        doc = DeploymentDocument.model_validate(c["doc"])
        if refused(doc, counts, refusals, examples, req.arch):
            continue
        r = resolve(doc, arch=req.arch)
        cap = admission_cap(r, plan_or_none(r), Workload(req.context, req.output_len, req.concurrency))
        cfg = engine_config(r, arch=role_arch(r, estimator, req.arch),
                            model_config=config_ref(req.arch))
        if cap is not None and min(cap, cfg.max_num_seqs) < req.concurrency:
            counts["no_room"] += 1
            continue
        if family is None:            # a family the estimator does not model: exit 2 naming it, before pricing
            family = estimator.family(cfg, role_arch(r, estimator, req.arch))
        if c["engine"] not in rates:
            rates[c["engine"]] = acceptance_of(req, c["engine"])
        rate = rates[c["engine"]][0]
        try:
            c["figures"], c["breakdown"] = figures(pred, cfg, req, rate)
        except NoData as exc:         # the estimator has no rows for this candidate: said, not guessed
            counts["no_data"] += 1
            no_data.setdefault(exc.message[:120], exc.line())
            continue
        c["cap"], c["cfg"] = cap, cfg
        ranked.append(c)
    if not ranked:
        return {**base, "preset": None, "engine": None, "candidates": counts, "refusals": refusals,
                "no_data": list(no_data.values()),
                "reason": f"no preset holds {req.concurrency} concurrent requests of {req.context:,} tokens on one node "
                          f"({counts['refused']} candidates refused by the rules, {counts['no_room']} without KV room, "
                          f"{counts['no_data']} without the estimator's data); lower the concurrency or the context",
                "findings": [f.to_dict() for f in examples.values()] if not counts["no_room"] else []}
    # ties (memory fraction and max-model-len change room, not speed): more KV room first
    ranked.sort(key=lambda c: (score(c["figures"], req), c["cap"] or 0), reverse=True)
    win = ranked[0]
    # one line per (engine, DCP, drafts): releases that take it and price it the same are listed together
    distinct, seen = [], {}
    for c in ranked:
        key = (c["engine"], c["knobs"]["dcp"], c["knobs"]["drafts"])
        if key not in seen:
            seen[key] = c
            c["releases"] = [c["knobs"]["version"]]
            distinct.append(c)
        elif c["knobs"]["version"] not in seen[key]["releases"]:
            seen[key]["releases"].append(c["knobs"]["version"])
    other = next((c for c in ranked if c["engine"] != win["engine"]), None) or \
        next((c for c in ranked if (c["knobs"]["dcp"], c["knobs"]["drafts"]) !=
              (win["knobs"]["dcp"], win["knobs"]["drafts"])), None)
    if not win["figures"]["meets_slo"]:
        near = min(ranked, key=lambda c: slo_miss(c["figures"], req))
        f = near["figures"]
        return {**base, "preset": None, "engine": None, "candidates": counts, "refusals": refusals, "findings": [],
                "slo": {"tpot_ms": req.slo_tpot_ms, "ttft_ms": req.slo_ttft_ms},
                "closest": _public(near), "top": [_public(c) for c in distinct[:req.top]],
                "reason": f"no candidate meets the SLO ({slo_text(req)}): of {len(ranked)} candidates the rules take "
                          f"and the KV pool holds, the closest, {near['name']}, runs TPOT {f['tpot_ms']:.1f} ms and "
                          f"unloaded TTFT {f['ttft_ms']:.0f} ms; relax the SLO, lower the concurrency or the context"}
    out = {**base, "preset": win["preset"], "engine": win["engine"],
           "winner": _public(win), "reason": why(win, other, req),
           "top": [_public(c) for c in distinct[:req.top]],
           "candidates": counts, "refusals": refusals, "no_data": list(no_data.values()),
           "acceptance": {e: {"rate": round(v[0], 4), "basis": v[1]} for e, v in rates.items()}}
    if other is not None:
        out["crossover"] = crossover(pred, win, other, req, rates)
    return out


def figures(pred: Predictor, cfg, req: AdviseRequest, rate: float) -> tuple[dict, dict]:
    tps = acceptance.length_from_rate(rate, cfg.drafts)
    batch = min(req.concurrency, cfg.max_num_seqs)
    step = pred.decode_step(cfg, batch, req.context + req.output_len // 2)
    pre = sum(c.ms for _, _, c in pred.request_prefill(cfg, req.context))
    ttft = pre + step.ms            # unloaded: the request's own prefill chunks + its first decode step
    dec = 1000 * tps * batch / step.ms
    tpot = step.ms / tps
    good = (req.slo_tpot_ms is None or tpot <= req.slo_tpot_ms) and (req.slo_ttft_ms is None or ttft <= req.slo_ttft_ms)
    f = {"decode_tok_s": round(dec, 1), "tpot_ms": round(tpot, 2), "ttft_ms": round(ttft, 1),
         "step_ms": round(step.ms, 2), "tokens_per_step": round(tps, 3),
         "goodput_req_s": round(dec / req.output_len, 4) if good else 0.0, "meets_slo": good}
    return f, {k: round(v, 3) for k, v in step.by_category().items()}


def score(f: dict, req: AdviseRequest) -> tuple:
    if req.objective == "throughput":
        return (f["meets_slo"], f["decode_tok_s"])
    if req.objective == "tpot":
        return (f["meets_slo"], -f["tpot_ms"]) if req.slo_tpot_ms is None else (f["meets_slo"], f["decode_tok_s"])
    if req.objective == "ttft":
        return (f["meets_slo"], -f["ttft_ms"]) if req.slo_ttft_ms is None else (f["meets_slo"], f["decode_tok_s"])
    return (f["goodput_req_s"], f["decode_tok_s"])


def _public(c: dict) -> dict:
    return {"name": c["name"], "engine": c["engine"], "preset": c["preset"], "knobs": c["knobs"],
            "figures": c["figures"], "breakdown_ms": c["breakdown"], "kv_room_requests": c["cap"],
            "releases": c.get("releases", [c["knobs"]["version"]])}


def why(win: dict, other: dict | None, req: AdviseRequest) -> str:
    f = win["figures"]
    head = (f"{win['name']}: {f['decode_tok_s']:.0f} tok/s decode for {req.concurrency} requests at "
            f"{req.context:,} tokens, TPOT {f['tpot_ms']:.1f} ms, unloaded TTFT {f['ttft_ms'] / 1000:.1f} s")
    if other is None:
        return head
    o = other["figures"]
    diffs = {k: other["breakdown"][k] / o["tokens_per_step"] - win["breakdown"][k] / f["tokens_per_step"]
             for k in win["breakdown"]}
    k = max(diffs, key=lambda x: diffs[x])
    return (f"{head}; vs {other['name']} ({o['decode_tok_s']:.0f} tok/s, TPOT {o['tpot_ms']:.1f} ms): the largest "
            f"difference per committed token is {k} ({win['breakdown'][k] / f['tokens_per_step']:.1f} vs "
            f"{other['breakdown'][k] / o['tokens_per_step']:.1f} ms; tokens/step {f['tokens_per_step']:.2f} vs "
            f"{o['tokens_per_step']:.2f})")


def crossover(pred: Predictor, a: dict, b: dict, req: AdviseRequest, rates: dict) -> dict:
    """The context where b's decode speed overtakes a's (or a's overtakes b's) at the same concurrency."""
    cfgs = [a["cfg"], b["cfg"]]
    tpss = [acceptance.length_from_rate(rates[c["engine"]][0], cfg.drafts) for c, cfg in zip((a, b), cfgs)]

    def diff(ctx: int) -> float:
        v = [1000 * tps * min(req.concurrency, cfg.max_num_seqs) / pred.decode_step(cfg, min(req.concurrency,
             cfg.max_num_seqs), ctx).ms for cfg, tps in zip(cfgs, tpss)]
        return v[0] - v[1]

    points = [8192 * 2 ** i for i in range(0, 8)]
    points = [p for p in points if p < 1_000_000] + [1_000_000 - req.output_len]
    vals = [(p, diff(p)) for p in points]
    for (p0, d0), (p1, d1) in zip(vals, vals[1:]):
        if (d0 > 0) != (d1 > 0):
            lo, hi = p0, p1
            for _ in range(8):
                mid = (lo + hi) // 2
                if (diff(mid) > 0) == (d0 > 0):
                    lo = mid
                else:
                    hi = mid
            lead, trail = (a, b) if d0 > 0 else (b, a)
            return {"context": hi, "before": lead["name"], "after": trail["name"],
                    "text": f"{lead['name']} decodes faster below ~{hi:,} tokens, {trail['name']} above "
                            f"(at {req.concurrency} requests, same acceptance)"}
    lead = a if vals[0][1] > 0 else b
    return {"context": None, "before": lead["name"], "after": None,
            "text": f"no crossover between 8K and 1M tokens: {lead['name']} decodes faster throughout"}


MAX_PD_DECODE = 1024   # decode-instance counts the P:D search judges at most (linear: one split per count)
PD_ASSUMPTIONS = [
    "a prefill instance runs one prompt's chunks at a time",
    ("the concurrency spreads evenly over the decode instances (at most one request per instance: more instances "
     "than requests stay idle, as do more prefill instances than requests)"),
    ("for a decode-instance count, the split with the fewest prefill instances that keep up with decode wins (more "
     "prefill instances add GPUs, not requests/s); a split the rules refuse is searched for the largest prefill "
     "count they take (bisection: refusals assumed monotone in the prefill instances)"),
]


@dataclass
class _PdSearch:
    """The P:D search's preset document, its pricing, and what the rules said about the splits judged."""
    base: dict
    pred: Predictor
    counts: dict[str, int]
    refusals: dict[str, int]
    examples: dict[str, Finding]

    def judged(self, p: int, d: int) -> bool:
        """The rules take the split (p prefill, d decode instances)."""
        doc_d = copy.deepcopy(self.base)
        for r in doc_d["spec"]["roles"]:
            r["instances"] = p if r["role"] == "prefill" else d
        self.counts["judged"] += 1
        return not refused(DeploymentDocument.model_validate(doc_d), self.counts, self.refusals, self.examples)

    def largest_taken(self, hi: int, d: int) -> int:
        """The largest p <= hi the rules take with d decode instances (0: none), by bisection."""
        if self.judged(hi, d):
            return hi
        if hi == 1 or not self.judged(1, d):
            return 0
        lo = 1                       # taken
        while hi - lo > 1:           # hi refused
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.judged(mid, d) else (lo, mid)
        return lo


def advise_pd(req: AdviseRequest, topology: str, gpu_budget: int, estimator: Estimator,
              progress=None) -> dict[str, Any]:
    """P:D ratio within a GPU budget for a prefill/decode topology preset, ranked by the requests/s the slower side
    carries, the rules judging every split recommended (topology rules included). Linear in the decode-instance
    counts searched (min(budget / decode GPUs, concurrency), at most ``MAX_PD_DECODE``): per count, the fewest
    prefill instances that keep up is the only split worth judging (``PD_ASSUMPTIONS``)."""
    cat = load_catalog()
    if topology not in cat.presets:
        raise PredictError("--topology", f"unknown preset {topology!r}", f"known: {', '.join(cat.presets)}")
    base = cat.presets[topology].document
    kinds = {r["role"]: r for r in base["spec"].get("roles") or []}
    if set(kinds) != {"prefill", "decode"}:
        raise PredictError("--topology", f"preset {topology!r} has no prefill and decode roles",
                           "give a P/D preset, e.g. kimi-k3-b300-1p1d")
    per = {k: r["gpusPerPod"] * r.get("podsPerInstance", 1) for k, r in kinds.items()}
    d_top = min((gpu_budget - per["prefill"]) // per["decode"], req.concurrency)
    if d_top > MAX_PD_DECODE:
        raise PredictError("--gpu-budget", f"{gpu_budget:,} GPUs for {req.concurrency:,} requests allow up to "
                           f"{d_top:,} decode instances of {per['decode']} GPUs: the search covers at most "
                           f"{MAX_PD_DECODE:,}", f"give --gpu-budget of at most "
                           f"{per['prefill'] + MAX_PD_DECODE * per['decode']:,} (or fewer --concurrency)")
    search = _PdSearch(base, Predictor(estimator),
                       {"total": sum(max(0, (gpu_budget - d * per["decode"]) // per["prefill"])
                                     for d in range(1, gpu_budget // per["decode"] + 1)),
                        "judged": 0, "refused": 0}, {}, {})
    cfgs = {}
    for v in role_views(DeploymentDocument.model_validate(base)):
        r = resolve(v.document)
        cfgs[v.role.role] = engine_config(r, v.role.role, v.role.instances, role_arch(r, estimator))
    rate, rate_note = acceptance_of(req, cfgs["decode"].engine)
    prefill_ms = sum(c.ms for _, _, c in search.pred.request_prefill(cfgs["prefill"], req.context))
    per_prefill_rps = 1000 / max(1e-9, prefill_ms)
    ranked = []
    for d in range(1, max(0, d_top) + 1):
        if progress:
            progress("P:D search", d - 1, d_top)
        busy = min(d, req.concurrency)
        batch = max(1, min(cfgs["decode"].max_num_seqs, math.ceil(req.concurrency / d)))
        dec, _ = figures(search.pred, cfgs["decode"], AdviseRequest(req.context, batch, req.output_len), rate)
        dec_rps = busy * dec["decode_tok_s"] / req.output_len
        p_room = min((gpu_budget - d * per["decode"]) // per["prefill"], req.concurrency)
        p = search.largest_taken(max(1, min(p_room, math.ceil(dec_rps / per_prefill_rps))), d) if p_room >= 1 else 0
        if not p:
            continue
        pre_rps = min(p, req.concurrency) * per_prefill_rps
        ranked.append({"prefill_instances": p, "decode_instances": d,
                       "gpus": p * per["prefill"] + d * per["decode"],
                       "prefill_req_s": round(pre_rps, 4), "decode_req_s": round(dec_rps, 4),
                       "req_s": round(min(pre_rps, dec_rps), 4),
                       "limited_by": "prefill" if pre_rps < dec_rps else "decode",
                       "decode_tpot_ms": dec["tpot_ms"]})
    base_out = {"basis": "predicted", "topology": topology, "gpu_budget": gpu_budget, "context": req.context,
                "concurrency": req.concurrency, "output_len": req.output_len, "candidates": search.counts,
                "refusals": search.refusals, "acceptance": rate_note, "assumptions": PD_ASSUMPTIONS}
    if not ranked:
        return {**base_out, "preset": None, "engine": None,
                "reason": f"no P:D split of {topology} fits {gpu_budget} GPUs and passes the rules",
                "findings": [f.to_dict() for f in search.examples.values()]}
    ranked.sort(key=lambda c: (c["req_s"], -c["gpus"]), reverse=True)
    w = ranked[0]
    reason = (f"{w['prefill_instances']}P:{w['decode_instances']}D on {w['gpus']} GPUs carries {w['req_s']} req/s "
              f"(prefill {w['prefill_req_s']}, decode {w['decode_req_s']}: limited by {w['limited_by']})")
    return {**base_out, "preset": topology, "engine": base["spec"]["engine"]["name"], "winner": w, "reason": reason,
            "top": ranked[:req.top]}
