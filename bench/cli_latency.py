"""Cold-process latency of the CLI on the seed configs (issue: median <= 0.25 s on 2 cores).

Runs each command N times as a fresh process and prints one JSON object with the figures.
Usage: python3 bench/cli_latency.py [--runs 15]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SEED_VLLM = ["--trust-remote-code", "--load-format", "fastsafetensors", "--moe-backend", "auto",
             "--gpu-memory-utilization", "0.95", "--tensor-parallel-size", "8", "--max-model-len", "1000000",
             "--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "32768", "--enable-prefix-caching",
             "--max-num-seqs", "32", "--speculative-config",
             '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark"}']

CASES = {
    "validate_preset_vllm_seed": ["validate", "--preset", "vllm-seed", "-o", "json"],
    "validate_preset_sglang_seed": ["validate", "--preset", "sglang-seed", "-o", "json"],
    "check_args_vllm_seed": ["check-args", "--engine", "vllm", "-o", "json", "--", *SEED_VLLM],
    "help": ["--help"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    exe = [sys.executable, "-m", "gpustack_k3"]
    out = {"runs": a.runs, "cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0], "commands": {}}
    for name, args in CASES.items():
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            subprocess.run([*exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times.append(time.perf_counter() - t0)
        out["commands"][name] = {"median_s": round(statistics.median(times), 4), "min_s": round(min(times), 4),
                                 "max_s": round(max(times), 4)}
    # Baselines: what the interpreter (with this machine's site .pth files) and the libraries cost alone.
    for name, code in (("python_baseline", "pass"), ("import_pydantic_yaml_click", "import pydantic, yaml, click")):
        times = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=False)
            times.append(time.perf_counter() - t0)
        out[name + "_median_s"] = round(statistics.median(times), 4)
    out["goal_median_s"] = 0.25
    out["meets_goal"] = all(v["median_s"] <= 0.25 for k, v in out["commands"].items() if k != "help")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
