"""Throughput of the cold-start tracker on a multi-million-line engine log. Prints JSON.

    python3 bench/coldstart_throughput.py [--lines 3000000] [--engine vllm|sglang] [--backend auto|regex]

The log is a realistic serving-time mix (throughput lines, access logs, per-rank debug lines, tqdm
bars) with the cold-start markers at the start and doctor-relevant lines sprinkled in. Blocks of
distinct lines are generated up front; the timed part only feeds 1 MiB chunks to the tracker,
exactly as the CLI does. Goal (issue 5): >= 1,000,000 lines/s with flat memory. Also timed: a log in
which every line is a marker (the real start-up log repeated, as a restart loop writes it), the worst case.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=3_000_000)
    ap.add_argument("--engine", choices=["vllm", "sglang"], default="vllm")
    ap.add_argument("--backend", choices=["auto", "regex"], default="auto")
    ap.add_argument("--block-lines", type=int, default=20_000)
    ap.add_argument("--blocks", type=int, default=8)
    args = ap.parse_args()

    startup = (LOGS / STARTUP[args.engine]).read_bytes()
    blocks = [serving_block(args.engine, args.block_lines, seed) for seed in range(args.blocks)]
    chunk = 1 << 20
    rss_before = rss_mb()
    tracker = ColdStartTracker(engine=None, year=2026, backend=args.backend)
    lines = startup.count(b"\n")
    nbytes = len(startup)
    t0 = time.perf_counter()
    tracker.feed(startup)
    rss_samples = []
    i = 0
    while lines < args.lines:
        block = blocks[i % len(blocks)]
        for off in range(0, len(block), chunk):
            tracker.feed(block[off:off + chunk])
        lines += args.block_lines
        nbytes += len(block)
        i += 1
        if i % 25 == 0:
            rss_samples.append(rss_mb())
    rep = tracker.finish()
    secs = time.perf_counter() - t0
    rss_after = rss_mb()
    # the worst case: every line a marker (the real start-up log over and over), as a restart loop writes
    dense = startup * max(1, 100_000 // max(1, startup.count(b"\n")))
    worst = ColdStartTracker(engine=None, year=2026, backend=args.backend)
    t1 = time.perf_counter()
    for off in range(0, len(dense), chunk):
        worst.feed(dense[off:off + chunk])
    worst.finish()
    dense_secs = time.perf_counter() - t1
    print(json.dumps({
        "lines": lines,
        "bytes": nbytes,
        "seconds": round(secs, 3),
        "lines_per_s": round(lines / secs),
        "mb_per_s": round(nbytes / secs / 1e6, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_feed_mb": round(rss_before, 1),
        "rss_growth_mb": round(rss_after - rss_before, 1),
        "rss_samples_mb": [round(x, 1) for x in rss_samples[:: max(1, len(rss_samples) // 8)]],
        "dense_marker_lines": dense.count(b"\n"),
        "dense_marker_lines_per_s": round(dense.count(b"\n") / dense_secs),
        "backend": tracker.scanner.backend,
        "engine": rep.engine,
        "status": rep.status,
        "goal_lines_per_s": 1_000_000,
        "meets_goal": lines / secs >= 1_000_000,
    }))


if __name__ == "__main__":
    main()
