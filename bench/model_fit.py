"""What the per-rank plan derives from every config.json aiconfigurator-core ships, per family.

    python3 bench/model_fit.py            # needs the [predict] extra (.ci/setup_predict.sh): aiconfigurator-core 0.12.0

Reads ``aiconfigurator_core/model_configs/*_config.json`` from the installed package (with the
``*_hf_quant_config.json`` beside a ModelOpt checkpoint) through the one reader (core.model_config) and, per
model_type, prints one JSON object: the configs, which of them yield weights per GPU at TP 8 and KV bytes per token
(derived), the parameter counts, the bytes per parameter read per part, and what is unknown with the reason. Nothing
is calibrated here: every figure comes from the config alone.
"""
from __future__ import annotations

import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def configs() -> list[tuple[str, dict, dict | None]]:
    import aiconfigurator_core

    d = pathlib.Path(aiconfigurator_core.__file__).parent / "model_configs"
    out = []
    for f in sorted(d.glob("*_config.json")):
        if f.name.endswith("_hf_quant_config.json"):
            continue
        hq = f.with_name(f.name[: -len("config.json")] + "hf_quant_config.json")
        out.append((f.name[: -len("_config.json")], json.loads(f.read_text()),
                    json.loads(hq.read_text()) if hq.exists() else None))
    return out


def main() -> dict:
    from gpustack_k3.core.model_config import arch_from_config
    from gpustack_k3.core.plan_moe import kv_bytes_per_token, part_bytes, rank_weights, total_params

    t0 = time.perf_counter()
    fams: dict[str, dict] = {}
    for name, cfg, hq in configs():
        a = arch_from_config(cfg, name, hq)
        fam = fams.setdefault(str(a.model_type), {"configs": 0, "derived": [], "unknown": {}})
        fam["configs"] += 1
        w = rank_weights(a, tp=8)
        bpt, why = kv_bytes_per_token(a, "auto", 8)
        unknown = list(w["unknown"]) + ([f"KV bytes per token: {why}"] if bpt is None else [])
        if unknown:
            fam["unknown"][name] = unknown
            continue
        bpp, _ = part_bytes(a)
        fam["derived"].append({"config": name, "params_b": round(total_params(a) / 1e9, 2),
                               "weights_gib_per_gpu_tp8": w["gib"], "kv_bytes_per_token_tp8": bpt,
                               "bytes_per_param": {k: round(v[0], 4) for k, v in bpp.items() if v[0] is not None}})
    n = sum(f["configs"] for f in fams.values())
    derived = sum(len(f["derived"]) for f in fams.values())
    return {"configs": n, "derived": derived, "unknown": n - derived, "families": fams,
            "seconds": round(time.perf_counter() - t0, 2)}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
