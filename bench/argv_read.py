"""What reading a command line with an engine version's parser costs (gpustack_k3/core/argv), in process.

    python3 bench/argv_read.py [--runs 20]

Per catalog version: loading its parser dump (JSON), rebuilding the argparse parser from it, and reading the
seed's command line (first read, then warm). Each figure is the median over ``--runs`` fresh loads (the caches
are cleared between runs), in milliseconds of CPU time (``time.process_time``: a loaded machine stretches wall
time, not the work done). ``repeated_flags``: the vLLM seed's model and ``-tp 8`` followed by ``--flags``
(default 20,000) repeated ``--seed 1`` (issue 23: <= 1 s), best of up to 5 reads in CPU and wall ms, beside
2,000 flags (near-linear growth: 10x the flags, about 10x the time) and 2,000 flags read without the collapse
of overridden repeats (``read_argv(collapse=False)``: what argparse alone costs). Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from gpustack_k3.catalog import load_catalog  # noqa: E402
from gpustack_k3.core.argv import dumps, parser, read  # noqa: E402

SEED = {
    "vllm": ["vllm", "serve", "/models/Kimi-K3", "--trust-remote-code", "--load-format", "fastsafetensors",
             "--gpu-memory-utilization", "0.95", "--tensor-parallel-size", "8", "--max-model-len", "1000000",
             "--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "32768", "--enable-prefix-caching",
             "--max-num-seqs", "32", "--speculative-config",
             '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark"}'],
    "sglang": ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K3", "--tp-size", "8",
               "--dcp-size", "8", "--mem-fraction-static", "0.85", "--speculative-algorithm", "DSPARK",
               "--speculative-dspark-block-size", "7", "--context-length", "1000000", "--kv-cache-dtype", "fp8_e4m3"],
}


def _ms(fn) -> float:
    t = time.process_time()
    fn()
    return (time.process_time() - t) * 1000


def _best(fn, runs: int) -> tuple[float, float]:
    """(CPU ms, wall ms), the best of ``runs`` calls."""
    cpu = wall = float("inf")
    for _ in range(runs):
        t, w = time.process_time(), time.perf_counter()
        fn()
        cpu, wall = min(cpu, (time.process_time() - t) * 1000), min(wall, (time.perf_counter() - w) * 1000)
    return round(cpu, 1), round(wall, 1)


def _repeated(cat, n: int, runs: int) -> dict:
    entry = cat.engine("vllm")
    v = cat.version("vllm", "kimi-k3")
    line = lambda k: ["/models/Kimi-K3", "-tp", "8", *(["--seed", "1"] * k)]   # noqa: E731
    big, small = line(n), line(2000)
    assert read.read_argv(entry, v, big).accepted
    cpu, wall = _best(lambda: read.read_argv(entry, v, big), runs)
    cpu_small, wall_small = _best(lambda: read.read_argv(entry, v, small), runs)
    cpu_argparse, _ = _best(lambda: read.read_argv(entry, v, small, collapse=False), 1)
    return {"line": f"vllm {v.key}: /models/Kimi-K3 -tp 8 + {n} x --seed 1", "flags": n,
            "cpu_ms": cpu, "wall_ms": wall, "cpu_ms_2000": cpu_small, "wall_ms_2000": wall_small,
            "growth_per_10x": round(cpu / max(cpu_small, 0.1) * 2000 / n * 10, 1),
            "uncollapsed_cpu_ms_2000": cpu_argparse, "budget_ms": 1000, "within_budget": cpu <= 1000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--flags", type=int, default=20000)
    opts = ap.parse_args()
    runs = opts.runs
    cat = load_catalog()
    out: dict = {"runs": runs, "unit": "ms of CPU time, median", "versions": {}}
    for eng, entry in cat.engines.items():
        for key, v in entry.versions.items():
            figs: dict[str, list[float]] = {"load_dump": [], "build_parser": [], "first_read": [], "warm_read": []}
            if v.command and v.command[:2] != ["vllm", "serve"]:
                argv = [*v.command, *SEED[eng][3:]]   # the entry-module form
            else:
                argv = SEED[eng]
            for _ in range(runs):
                dumps.load_dump.cache_clear()
                parser._build_parser.cache_clear()
                figs["load_dump"].append(_ms(lambda: dumps.load_dump(v.parser.dump)))
                figs["build_parser"].append(_ms(lambda: parser.build_parser(dumps.load_dump(v.parser.dump))))
                figs["first_read"].append(_ms(lambda: read.read_argv(entry, v, argv)))
                figs["warm_read"].append(_ms(lambda: read.read_argv(entry, v, argv)))
            out["versions"][f"{eng} {key}"] = {k: round(statistics.median(x), 2) for k, x in figs.items()}
    out["repeated_flags"] = _repeated(cat, opts.flags, min(runs, 5))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
