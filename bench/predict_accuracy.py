"""How far `gpustack-k3 predict` is from the write-up's measured figures (issue 24). Needs the [predict] extra.

    python3 bench/predict_accuracy.py [--markdown]

Predicts the two seed deployments (presets vllm-seed, sglang-seed) under the write-up's benchmark (10 clients,
10 requests, 64K or 200K in, 3K out) with the reported acceptance lengths (mid of each reported range; the range's
ends give the band), and compares:

* decode ms/token per request at 10 streams: measured = 1000 x 10 / the catalog's steady decode tok/s
  (catalog advice.yaml, docs/sources.md#measured); predicted = decode step / tokens per step;
* the 64K/200K crossover between the two engines' configurations (who decodes faster at each length);
* TTFT mean and end-to-end time of the closed loop (scheduler model);
* SGLang's prefill chunk series of one 200K request (seed 001 section 9);
* seed 002's GB300 decode scaling (DeepSeek-V4.1-Flash): reported as not predicted when the estimator has no graph.

Modelling choices (corrections, scheduler policy) were fixed from the issue's description and the engines' code
before any of these points was computed; nothing was changed after looking at them. Bars (issue 24): decode
+-20 %, chunk series +-10 %, TTFT +-30 %, crossover in the right direction. Prints one JSON object (or a
markdown table with --markdown).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument  # noqa: E402
from gpustack_k3.catalog import load_catalog  # noqa: E402
from gpustack_k3.predict.advise import measured  # noqa: E402
from gpustack_k3.predict.model import predict_document  # noqa: E402
from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM  # noqa: E402
from gpustack_k3.predict.types import EngineConfig, PredictError, Workload  # noqa: E402

PRESET = {"vllm": "vllm-seed", "sglang": "sglang-seed"}
BARS = {"decode_ms_per_token": 20.0, "ttft_mean_ms": 30.0, "sglang_chunk_tok_s": 10.0}


def err(pred: float, meas: float) -> float:
    return round((pred / meas - 1) * 100, 1)


def _k(n: int) -> str:
    return f"{n // 1024}K"


def run() -> dict:
    from gpustack_k3.predict.aic import AicEstimator

    t0 = time.process_time()
    cat = load_catalog()
    est = AicEstimator()
    m = measured()
    acc = m["acceptance_length"]
    bench = m["benchmark"]
    rows: list[dict] = []
    decode: dict[tuple, float] = {}
    for row in cat.advice.measurements:
        eng, ctx = row.engine, row.context
        a = next(x for x in acc["rows"] if x["engine"] == eng and x["context"] == ctx)
        doc = DeploymentDocument.model_validate(cat.presets[PRESET[eng]].document)
        preds = {}
        for label, length in (("mid", (a["low"] + a["high"]) / 2), ("low", a["low"]), ("high", a["high"])):
            w = Workload(ctx, bench["output_len"], bench["concurrency"], bench["requests"], acceptance_length=length)
            preds[label] = predict_document(doc, w, est)["roles"][0] if label == "mid" else \
                predict_document_decode_only(doc, w, est)
        r = preds["mid"]
        meas_ms = 1000 * bench["concurrency"] / row.decode_tok_s
        decode[(eng, ctx)] = r["decode"]["tpot_ms"]
        basis = "64K: modelling may look" if ctx == 65536 else "prediction"
        rows.append({"figure": "decode_ms_per_token", "engine": eng, "context": ctx, "acceptance_length":
                     round((a["low"] + a["high"]) / 2, 2), "predicted": r["decode"]["tpot_ms"],
                     "predicted_band": [preds["high"], preds["low"]], "measured": round(meas_ms, 2),
                     "error_pct": err(r["decode"]["tpot_ms"], meas_ms), "bar_pct": BARS["decode_ms_per_token"],
                     "basis": basis, "measured_from": f"catalog advice.yaml decode_tok_s {row.decode_tok_s} (10 streams)",
                     "breakdown_ms": r["decode"]["breakdown_ms"], "step_ms": r["decode"]["step_ms"]})
        rows[-1]["aic_black_box"] = black_box(est, doc, ctx + bench["output_len"] // 2, (a["low"] + a["high"]) / 2,
                                              meas_ms)
        b = r["benchmark"]
        rows.append({"figure": "ttft_mean_ms", "engine": eng, "context": ctx, "predicted": b["ttft_ms"]["mean"],
                     "measured": row.ttft_ms, "error_pct": err(b["ttft_ms"]["mean"], row.ttft_ms),
                     "bar_pct": BARS["ttft_mean_ms"], "basis": basis})
        e2e = next(x["value"] for x in bench["e2e_s"] if x["engine"] == eng and x["context"] == ctx)
        rows.append({"figure": "e2e_s", "engine": eng, "context": ctx, "predicted": b["e2e_s"], "measured": e2e,
                     "error_pct": err(b["e2e_s"], e2e), "bar_pct": None, "basis": basis})
    cross = {}
    for ctx in (65536, 204800):
        pv, ps = decode[("vllm", ctx)], decode[("sglang", ctx)]
        mv = next(1000 * 10 / x.decode_tok_s for x in cat.advice.measurements if x.engine == "vllm" and x.context == ctx)
        ms = next(1000 * 10 / x.decode_tok_s for x in cat.advice.measurements if x.engine == "sglang" and x.context == ctx)
        cross[_k(ctx)] = {"predicted_faster": "vllm" if pv < ps else "sglang",
                          "measured_faster": "vllm" if mv < ms else "sglang"}
    cross["right_direction"] = all(v["predicted_faster"] == v["measured_faster"] for v in cross.values())
    # SGLang chunk series (one 200K request, prefix growing by the chunk budget)
    cs = m["sglang_chunk_series"]
    doc = DeploymentDocument.model_validate(cat.presets[cs["preset"]].document)
    w = Workload(cs["input_len"], 1, 1, acceptance_length=1.0)
    chunks = predict_document(doc, w, est)["roles"][0]["prefill"]["chunks"]
    for i, meas in enumerate(cs["tok_s"]):
        p = chunks[i]
        rows.append({"figure": "sglang_chunk_tok_s", "engine": "sglang", "context": cs["input_len"], "chunk": i + 1,
                     "prefix": p["prefix"], "predicted": p["tok_s"], "measured": meas, "error_pct": err(p["tok_s"], meas),
                     "bar_pct": BARS["sglang_chunk_tok_s"], "basis": "prediction"})
    gb = m["gb300_decode_scaling"]
    try:
        est.model_path(EngineConfig(ENGINE_VLLM, "-", "gb300", gb["model"], 1, 1, 1, 0, "none", "fp8", 1, 1, 0, "ag_rs",
                                    True, False))
        seed002 = {"figure": "gb300_target_forward_ms", "model": gb["model"], "predicted": None,
                   "measured": gb["target_forward_ms"], "not_predicted": "graph present but not wired in this bench"}
    except PredictError as exc:   # NoData: the estimator has no graph for the model (never a stand-in model)
        seed002 = {"figure": "gb300_target_forward_ms", "model": gb["model"], "predicted": None,
                   "measured": gb["target_forward_ms"], "not_predicted": exc.line(), "source": gb["source"]}
    for r in rows:
        if r.get("bar_pct") is not None:
            r["within_bar"] = abs(r["error_pct"]) <= r["bar_pct"]
    return {"estimator": {"name": est.name, "version": est.version}, "rows": rows, "crossover": cross,
            "seed002": seed002, "cpu_s": round(time.process_time() - t0, 1)}


def black_box(est, doc, ctx: int, length: float, meas_ms: float) -> dict:
    """The estimator as a black box: its own graph, every op at batch x (drafts+1), its own MoE rows, no DCP."""
    from gpustack_k3.core.resolve import resolve
    from gpustack_k3.predict import corrections
    from gpustack_k3.predict.model import engine_config, role_arch
    from gpustack_k3.predict.types import StepBreakdown

    r = resolve(doc)
    cfg = engine_config(r, arch=role_arch(r, est))
    cfg.dcp = 1      # the estimator raises NotImplementedError for context parallelism; priced without it
    try:
        ops = corrections.baseline_decode(est.graph(cfg, "generation"), cfg, 10, ctx)
        ms = StepBreakdown(est.price(cfg, ops), []).ms / length
    except PredictError as exc:
        return {"ms_per_token": None, "no_data": exc.message[:200]}
    return {"ms_per_token": round(ms, 2), "error_pct": err(ms, meas_ms), "note": "DCP dropped (the estimator has none)"}


def predict_document_decode_only(doc, w, est) -> float:
    from gpustack_k3.core.resolve import resolve
    from gpustack_k3.predict.model import Predictor, engine_config, role_arch

    r = resolve(doc)
    cfg = engine_config(r, arch=role_arch(r, est))
    r = Predictor(est).predict_role(cfg, w, benchmark=False)
    return r["decode"]["tpot_ms"]


def markdown(d: dict) -> str:
    out = ["| figure | engine | context | predicted | measured | error | bar | basis |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in d["rows"]:
        name = r["figure"] + (f" #{r['chunk']}" if "chunk" in r else "")
        bar = f"±{r['bar_pct']:g} %" if r.get("bar_pct") is not None else "-"
        mark = "" if r.get("within_bar", True) else " **miss**"
        out.append(f"| {name} | {r['engine']} | {_k(r['context'])} | {r['predicted']:,} | {r['measured']:,} | "
                   f"{r['error_pct']:+.1f} %{mark} | {bar} | {r['basis']} |")
    for r in d["rows"]:
        if "aic_black_box" in r:
            bb = r["aic_black_box"]
            out.append(f"\naic black box, decode {r['engine']} {_k(r['context'])}: " +
                       (f"{bb['ms_per_token']} ms/token ({bb['error_pct']:+.1f} %)" if bb["ms_per_token"] else
                        f"no data ({bb['no_data']})"))
    c = d["crossover"]
    out.append(f"\ncrossover: faster decode at 64K predicted {c['64K']['predicted_faster']} (measured "
               f"{c['64K']['measured_faster']}), at 200K predicted {c['200K']['predicted_faster']} (measured "
               f"{c['200K']['measured_faster']}): {'right direction' if c['right_direction'] else 'WRONG direction'}")
    out.append(f"\nseed 002 GB300 decode scaling: not predicted ({d['seed002']['not_predicted']})")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    try:
        d = run()
    except PredictError as exc:
        print(json.dumps({"ok": False, "error": exc.line()}))
        return 2
    print(markdown(d) if a.markdown else json.dumps(d, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
