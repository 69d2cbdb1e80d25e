"""Failure reasons are root causes: the first causal error (the exception message), with the wrapper
lines as context. Real public logs (tests/fixtures/logs/public, sources in tests/fixtures/logs/README.md)
and the real vLLM 0.32 CPU failure; expectations are read off the logs by hand."""
from __future__ import annotations

import pytest

from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.coldstart.causes import Tracebacks

from .conftest import LOGS, track

PUBLIC = LOGS / "public"


def public(name: str) -> dict:
    t = ColdStartTracker(year=2026)
    t.feed((PUBLIC / name).read_bytes())
    return t.finish().to_dict()


def test_vllm_worker_cuda_error_out_of_memory_is_the_reason():
    # vllm-project/vllm#24814: "(Worker_TP3 ...) torch.AcceleratorError: CUDA error: out of memory" in
    # capture_end() during CUDA-graph capture; the EngineCore's own traceback follows
    d = public("vllm-0.10-tp8-cuda-graph-oom.vllm-issue-24814.log")
    assert d["status"] == "failed"
    assert d["reason"] == "CUDA error: out of memory"
    assert d["failure"]["error"] == "torch.AcceleratorError" and d["failure"]["rank"] == "Worker_TP3"


def test_vllm_v1_worker_oom_not_the_workerproc_wrappers():
    # vllm-project/vllm#17939 (0.8.x V1, TP2): rank 1 raises the RuntimeError, both ranks print
    # "WorkerProc hit an exception."
    d = public("vllm-0.8-tp2-sampler-oom.vllm-issue-17939.log")
    assert d["engine"] == "vllm" and d["status"] == "failed"
    assert d["reason"].startswith("CUDA out of memory occurred when warming up sampler with 256 dummy requests.")
    f = d["failure"]
    assert (f["error"], f["rank"]) == ("RuntimeError", "rank1")
    assert f["context"] == ["[rank1] WorkerProc hit an exception.", "[rank0] WorkerProc hit an exception."]
    assert "cuda_graphs" in [p["name"] for p in d["phases"]]   # "Graph capturing finished in 113 secs"


def test_vllm_free_memory_short_in_enginecore():
    # vllm-project/vllm#25837: ValueError from gpu_worker.py init_device, then "Process EngineCore_DP0:"
    d = public("vllm-0.10-free-memory-short.vllm-issue-25837.log")
    assert d["status"] == "failed" and d["failed_phase"] == "kv_cache"   # the marker's phase
    assert d["reason"].startswith("Free memory on device (3.22/4.0 GiB) on startup is less than desired GPU memory "
                                  "utilization (0.9, 3.6 GiB).")


def test_sglang_scheduler_exception_reports_the_cuda_error():
    # sgl-project/sglang#3713: "Scheduler hit an exception: Traceback ..." (wrapper) → RuntimeError
    d = public("sglang-0.4-illegal-memory-access.sglang-issue-3713.log")
    assert d["engine"] == "sglang" and d["status"] == "failed"
    assert d["reason"] == "CUDA error: an illegal memory access was encountered"
    f = d["failure"]
    assert (f["error"], f["rank"]) == ("RuntimeError", "TP0")
    assert f["context"] == ["[TP0] Scheduler hit an exception: Traceback (most recent call last):"]


def test_sglang_oom_then_sigquit():
    # sgl-project/sglang#5576: the OOM line, then the launcher's "Received sigquit from a child process"
    d = public("sglang-0.4-startup-oom.sglang-issue-5576.log")
    assert d["status"] == "failed"
    assert d["reason"].startswith("CUDA out of memory. Tried to allocate 226.00 MiB. GPU 0 has a total capacity of 15.58 GiB")
    assert d["failure"]["context"] == ["Received sigquit from a child process. It usually means the child failed."]


def test_real_vllm_cpu_failure_names_the_value_error_with_wrappers_as_context():
    d = track("vllm-0.32.0-cpu-failed.log").report().to_dict()
    assert d["reason"].startswith("To serve at least one request with the model's max seq len (8192)")
    f = d["failure"]
    assert f["error"] == "ValueError" and f["at"] == "2026-11-29T18:27:32"
    assert f["context"] == ["EngineCore failed to start.",
                            "Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}"]


WORKER = "(Worker_TP{r} pid=9{r}) ERROR 11-30 00:00:12 [multiproc_executor.py:671] "
CORE = "(EngineCore_DP0 pid=77) ERROR 11-30 00:00:13 [core.py:708] "


def _frames(prefix: str) -> str:
    return (f"{prefix}Traceback (most recent call last):\n"
            f'{prefix}  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 1, in f\n'
            f"{prefix}    torch.cuda.set_device(self.device)\n"
            f"{prefix}    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n")


def test_interleaved_worker_tracebacks_first_causal_error_wins():
    w0, w1 = WORKER.format(r=0), WORKER.format(r=1)
    log = (f"{w1}WorkerProc failed to start.\n" + f"{w0}WorkerProc failed to start.\n"
           + _frames(w1) + _frames(w0)
           + f"{w1}torch.AcceleratorError: CUDA error: out of memory\n"
           + f"{w0}torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, remote process exited\n"
           + f"{CORE}EngineCore failed to start.\n" + _frames(CORE)
           + f"{CORE}Exception: WorkerProc initialization failed due to an exception in a background process. "
             "See stack trace for root cause.\n"
           + "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    for chunk in (None, 1, 13):
        t = ColdStartTracker(engine="vllm", year=2026)
        data = log.encode()
        if chunk is None:
            t.feed(data)
        else:
            for i in range(0, len(data), chunk):
                t.feed(data[i:i + chunk])
        d = t.finish().to_dict()
        assert d["reason"] == "CUDA error: out of memory", chunk
        f = d["failure"]
        assert (f["error"], f["rank"]) == ("torch.AcceleratorError", "Worker_TP1")
        assert "NCCL error in: ProcessGroupNCCL.cpp:1, remote process exited" in " ".join(f["context"])
        assert f["context"][0] == "[Worker_TP1] WorkerProc failed to start."


def test_a_traceback_that_ends_the_log_fails_the_attempt_at_the_end_of_input():
    t = ColdStartTracker(engine="vllm", year=2026)
    t.feed(b"(APIServer pid=1) INFO 11-30 10:00:00 [startup.py:39] vLLM server version 0.33.0, serving model /m\n"
           b"(APIServer pid=1) Traceback (most recent call last):\n"
           b'(APIServer pid=1)   File "/usr/lib/python3.12/site-packages/transformers/utils/hub.py", line 1, in x\n'
           b"(APIServer pid=1) OSError: /models/m does not appear to have a file named config.json.\n")
    assert t.report().status == "in-progress"   # live: the process may still be alive
    d = t.finish().to_dict()
    assert d["status"] == "failed" and d["failed_phase"] == "process_start"
    assert d["reason"] == "/models/m does not appear to have a file named config.json."
    assert d["failure"]["error"] == "OSError"


def test_a_survived_traceback_before_progress_is_no_cause():
    t = ColdStartTracker(engine="vllm", year=2026)
    t.feed(b"(Worker_TP0 pid=9) WARNING 11-30 10:00:00 [x.py:1] Traceback (most recent call last):\n"
           b"(Worker_TP0 pid=9) WARNING 11-30 10:00:00 [x.py:1] ImportError: optional kernel missing\n"
           b"(Worker_TP0 pid=9) INFO 11-30 10:00:01 [gpu_model_runner.py:4980] Starting to load model /m...\n")
    assert t.finish().status == "in-progress"


def test_argparse_error_and_process_exit():
    t = ColdStartTracker(engine="vllm", year=2026)
    t.feed(b"usage: vllm serve [model_tag] [options]\n"
           b"vllm serve: error: unrecognized arguments: --kv-cache-memory-byte 1\n")
    t.process_exited(2)
    d = t.report().to_dict()
    assert d["status"] == "failed" and d["reason"] == "unrecognized arguments: --kv-cache-memory-byte 1"
    quiet = ColdStartTracker(engine="vllm", year=2026)
    quiet.feed(b"INFO 11-30 10:00:00 [startup.py:39] vLLM server version 0.33.0, serving model /m\n")
    quiet.process_exited(137)
    assert quiet.report().last.reason == "the engine process exited with code 137 and printed no error"
    clean = ColdStartTracker(engine="vllm", year=2026)
    clean.process_exited(0)
    assert clean.report().status == "in-progress"


@pytest.mark.parametrize("line, error, message", [
    ("torch.AcceleratorError: CUDA error: out of memory", "torch.AcceleratorError", "CUDA error: out of memory"),
    ("Exception: Capture cuda graph failed", "Exception", "Capture cuda graph failed"),
    ("KeyboardInterrupt", "KeyboardInterrupt", ""),
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
     "pydantic_core._pydantic_core.ValidationError", "1 validation error for ModelConfig"),
])
def test_exception_lines(line, error, message):
    tb = Tracebacks()
    assert tb.line("Traceback (most recent call last):") is None and tb.active
    assert tb.line('  File "x.py", line 1, in f') is None
    assert tb.line("Loading safetensors checkpoint shards: 100% Completed | 1/1") is None   # printed meanwhile
    exc = tb.line(line)
    assert (exc.error, exc.message) == (error, message) and not tb.active
