"""Time of the engine's own verdict on demand (gpustack_k3/oracle, check-args --engine-verdict): the worker's start
(cold: interpreter, release import, module preload) and the warm per-line time (each line judged in a forked child
of the imported release). Prints JSON.

  python3 bench/engine_verdict_latency.py                          # vllm 0.33.0, 30 lines of the corpus (seed 7919)
  python3 bench/engine_verdict_latency.py --engine sglang --version 0.5.23 --lines 20
  python3 bench/engine_verdict_latency.py --preset kimi-k3-b300-1p1d   # also validate --engine-verdict's document time

The lines are tools/engine_oracle/corpus.py ``generate(release, n, seed)``; the figures are wall-clock seconds on this
machine (cpus and load average printed beside them: the CI host's 2 cores are shared).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--lines", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7919)
    ap.add_argument("--preset", default=None,
                    help="also time the document verdict of this preset (gpustack_k3/oracle/document.py: every role's "
                         "line, and a vLLM P/D pair), warm, 3 times, with the preset's version set to --version")
    a = ap.parse_args(argv)
    from gpustack_k3 import oracle
    from tools.engine_oracle.corpus import generate

    release = oracle.release_key(a.engine, a.version)
    if release is None:
        print(json.dumps({"engine": a.engine, "version": a.version, "unavailable": "no release code"}))
        return 2
    lines = generate(release, a.lines, a.seed)
    t0 = time.monotonic()
    try:
        oracle.warm(release)
    except oracle.EngineVerdictUnavailable as exc:
        print(json.dumps({"release": release, "unavailable": str(exc)}))
        return 2
    cold = time.monotonic() - t0
    per, verdicts = [], {}
    for line in lines:
        t = time.monotonic()
        v = oracle.engine_verdict(a.engine, a.version, line["argv"], line["env"], line["gpu_type"], line["gpus"])
        per.append(time.monotonic() - t)
        verdicts[v["verdict"]] = verdicts.get(v["verdict"], 0) + 1
    per_ms = sorted(1000 * x for x in per)
    doc = _document_times(a.preset, a.version) if a.preset else None
    print(json.dumps({
        "release": release, "lines": len(per), "seed": a.seed, "verdicts": verdicts,
        "cold_start_s": round(cold, 1),
        "warm_per_line_ms": {"median": round(statistics.median(per_ms), 1), "p90": round(per_ms[int(0.9 * (len(per_ms) - 1))], 1),
                             "max": round(per_ms[-1], 1), "mean": round(statistics.fmean(per_ms), 1)},
        "how": "wall clock around gpustack_k3.oracle.engine_verdict per line after the worker started (forked child "
               "per line); cold = Oracle start incl. preload",
        **({"document": doc} if doc else {}),
        "cpus": os.cpu_count(), "loadavg": [round(x, 1) for x in os.getloadavg()]}, indent=1))
    return 0


def _document_times(preset: str, version: str) -> dict:
    import copy

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.oracle.document import document_verdict

    data = copy.deepcopy(load_catalog().presets[preset].document)
    data["spec"]["engine"]["version"] = version
    doc = DeploymentDocument.model_validate(data)
    times, v = [], {}
    for _ in range(3):
        t = time.monotonic()
        v = document_verdict(doc)
        times.append(1000 * (time.monotonic() - t))
    return {"preset": preset, "verdict": v.get("verdict"), "lines": len(v.get("lines") or []),
            "pair": "pair" in v, "warm_ms": [round(x, 1) for x in times]}


if __name__ == "__main__":
    raise SystemExit(main())
