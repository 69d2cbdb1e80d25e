"""Throughput of the cold-start tracker on two kinds of engine log. Prints JSON.

    python3 bench/coldstart_throughput.py [--lines 3000000] [--engine vllm|sglang] [--dense-repeat 100]
                                          [--backend auto|regex] [--repeat 3]

* ``serving``: a multi-million-line serving-time log (throughput lines, access logs, per-rank debug
  lines, tqdm bars) after the Kimi-K3 start-up log, doctor-relevant lines sprinkled in. Blocks of
  distinct lines are generated up front; the timed part only feeds 1 MiB chunks, as the CLI does.
  Goal: >= 1,500,000 lines/s with flat memory.
* ``dense``: the real start-up log of the CPU preset (``vllm-cpu-smollm2``:
  tests/fixtures/logs/vllm-0.32.0-cpu-eager.log) repeated ``--dense-repeat`` times, as a restart
  loop writes it: nearly every line a marker or a doctor pattern. Goal: >= 150,000 lines/s with flat
  memory (the tracker keeps at most MAX_ATTEMPTS attempts).

Each case runs ``--repeat`` times in this process; the best run is reported (the machine is shared)
with every run's figure alongside. Memory: resident set before and after the timed feed, and samples.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpustack_k3.coldstart import ColdStartTracker

LOGS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs"
STARTUP = {"vllm": "vllm-0.33-kimi-k3-tp8-ready.log", "sglang": "sglang-0.5.23-kimi-k3-tp8-dcp8-ready.log"}
DENSE = "vllm-0.32.0-cpu-eager.log"   # the CPU preset's real start-up log (vllm-0.32.0-cpu.md)
CHUNK = 1 << 20
GOALS = {"serving": 1_500_000, "dense": 150_000}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def serving_block(engine: str, n: int, seed: int) -> bytes:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        h, m, s = 18 + (seed // 60) % 5, seed % 60, i * 60 // n
        r = rng.random()
        if engine == "vllm":
            if r < 0.45:
                out.append(f"(APIServer pid=1) INFO 11-29 {h}:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt "
                           f"throughput: {rng.uniform(0, 9e3):.1f} tokens/s, Avg generation throughput: {rng.uniform(0, 600):.1f} "
                           f"tokens/s, Running: {rng.randint(0, 32)} reqs, Waiting: 0 reqs, GPU KV cache usage: "
                           f"{rng.uniform(0, 90):.1f}%, Prefix cache hit rate: {rng.uniform(0, 50):.1f}%")
            elif r < 0.85:
                out.append(f'(APIServer pid=1) INFO:     10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}:{rng.randint(1024, 65535)} '
                           f'- "POST /v1/chat/completions HTTP/1.1" 200 OK')
            elif r < 0.99995:
                out.append(f"(Worker_TP{rng.randint(0, 7)} pid={400 + rng.randint(0, 7)}) DEBUG 11-29 {h}:{m:02d}:{s:02d} "
                           f"[shm_broadcast.py:{rng.randint(100, 900)}] No available shared memory broadcast block found in 60 second.")
            else:
                out.append(f"(Worker_TP3 pid=403) WARNING 11-29 {h}:{m:02d}:{s:02d} [gpu_model_runner.py:3321] "
                           "Soft OOM: empty_cache and retry (attempt 1/3), needed 4.52 GiB, free 2.67 GiB")
        else:
            if r < 0.5:
                out.append(f"[2026-11-29 {h}:{m:02d}:{s:02d} TP0] Decode batch. #running-req: {rng.randint(0, 39)}, #token: "
                           f"{rng.randint(0, 9e5)}, token usage: {rng.random():.2f}, cuda graph: True, gen throughput "
                           f"(token/s): {rng.uniform(0, 400):.2f}, #queue-req: 0")
            elif r < 0.8:
                out.append(f'[2026-11-29 {h}:{m:02d}:{s:02d}] INFO:     10.0.0.{rng.randint(1, 254)}:{rng.randint(1024, 65535)} - '
                           f'"POST /v1/chat/completions HTTP/1.1" 200 OK')
            else:
                out.append(f"[2026-11-29 {h}:{m:02d}:{s:02d} TP0] Prefill batch. #new-seq: 1, #new-token: {rng.randint(1, 32768)}, "
                           f"#cached-token: {rng.randint(0, 9999)}, token usage: {rng.random():.2f}, #running-req: "
                           f"{rng.randint(0, 39)}, #queue-req: 0")
    return ("\n".join(out) + "\n").encode()


def run_serving(args: argparse.Namespace) -> dict:
    startup = (LOGS / STARTUP[args.engine]).read_bytes()
    blocks = [serving_block(args.engine, args.block_lines, seed) for seed in range(args.blocks)]
    rss_before = rss_mb()
    tracker = ColdStartTracker(engine=None, year=2026, backend=args.backend)
    lines = startup.count(b"\n")
    nbytes = len(startup)
    t0 = time.perf_counter()
    tracker.feed(startup)
    samples = []
    i = 0
    while lines < args.lines:
        block = blocks[i % len(blocks)]
        for off in range(0, len(block), CHUNK):
            tracker.feed(block[off:off + CHUNK])
        lines += args.block_lines
        nbytes += len(block)
        i += 1
        if i % 25 == 0:
            samples.append(rss_mb())
    rep = tracker.finish()
    secs = time.perf_counter() - t0
    return {"lines": lines, "bytes": nbytes, "seconds": round(secs, 3), "lines_per_s": round(lines / secs),
            "mb_per_s": round(nbytes / secs / 1e6, 1), "rss_growth_mb": round(rss_mb() - rss_before, 1),
            "rss_samples_mb": [round(x, 1) for x in samples[:: max(1, len(samples) // 8)]],
            "engine": rep.engine, "status": rep.status, "backend": tracker.scanner.backend}


def run_dense(args: argparse.Namespace) -> dict:
    dense = (LOGS / DENSE).read_bytes() * args.dense_repeat
    lines = dense.count(b"\n")
    rss_before = rss_mb()
    tracker = ColdStartTracker(engine=None, year=2026, backend=args.backend)
    samples = []
    t0 = time.perf_counter()
    for n, off in enumerate(range(0, len(dense), CHUNK)):
        tracker.feed(dense[off:off + CHUNK])
        if n % 4 == 0:
            samples.append(rss_mb())
    rep = tracker.finish()
    secs = time.perf_counter() - t0
    return {"log": f"{DENSE} x {args.dense_repeat}", "lines": lines, "bytes": len(dense), "seconds": round(secs, 3),
            "lines_per_s": round(lines / secs), "rss_growth_mb": round(rss_mb() - rss_before, 1),
            "rss_samples_mb": [round(x, 1) for x in samples[:: max(1, len(samples) // 8)]],
            "attempts_kept": len(rep.attempts), "attempts_dropped": rep.dropped_attempts, "status": rep.status}


def best(runs: list[dict]) -> dict:
    top = dict(max(runs, key=lambda r: r["lines_per_s"]))
    top["runs_lines_per_s"] = [r["lines_per_s"] for r in runs]
    return top


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=3_000_000, help="serving case: lines to feed")
    ap.add_argument("--engine", choices=["vllm", "sglang"], default="vllm", help="serving case: engine")
    ap.add_argument("--dense-repeat", type=int, default=100, help="dense case: times the CPU start-up log is repeated")
    ap.add_argument("--backend", choices=["auto", "regex"], default="auto")
    ap.add_argument("--block-lines", type=int, default=20_000)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the best is reported")
    args = ap.parse_args()
    serving = best([run_serving(args) for _ in range(args.repeat)])
    dense = best([run_dense(args) for _ in range(args.repeat)])
    out = {"serving": serving, "dense": dense, "goal_lines_per_s": GOALS,
           "meets_goal": {k: v["lines_per_s"] >= GOALS[k] for k, v in (("serving", serving), ("dense", dense))},
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "cpu_count": os.cpu_count(), "load_avg": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
