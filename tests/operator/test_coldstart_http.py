"""Cold start over HTTP: the operator follows the engine pod log through the pod log API of the
emulator (official client), the test plays the kubelet (pod status + log lines of real recorded
logs). Expected figures are hand readings of the logs, not the tracker's output:

vllm-0.33-kimi-k3-8xb300.log (replay README: container created 17:06:21):
  "Loading weights took 163.80 seconds" (TP0 17:09:42)        → weights_load 163.8 s
  "Graph capturing finished in 87 secs" (17:16:39)             → cuda_graphs 87 s
  "Starting vLLM server on http://0.0.0.0:8000" (17:16:56)     → serving; 17:06:21 → 17:16:56 = 635 s
  first line 17:06:34                                          → process_start starts 13 s after the container
vllm-0.32.0-cpu-eager.log (vllm-0.32.0-cpu.md: first vLLM line ~10 s after start; we start it 18:17:28):
  "Loading weights took 0.51 seconds"                          → weights_load 0.51 s
  "Starting vLLM server on ..." 18:18:15                       → 18:17:28 → 18:18:15 = 47 s
  '"POST /v1/completions HTTP/1.1" 200 OK'                     → first request served: Warm
vllm-0.33-kimi-k3-cuda-graph-oom.tail.log: "WorkerProc hit an exception" 17:15:52 after the last
  "Compile and warming up model for size 8192" (17:15:09, cuda_graphs), "EngineCore failed to start."
"""
import datetime as dt
import threading
import urllib.request

import pytest
from coldstart_kubelet import CPU_LOG, GPU_CRASH_TAIL, GPU_LOG, Kubelet, parse, retime
from operator_helpers import NS, G, P, V, k3, wait_for

from gpustack_k3.coldstart.follow import LogFollower
from gpustack_k3.operator.coldstart_bridge import coldstart_factory as pod_logs
from gpustack_k3.operator.podstate import parse_time
from tests.support.waiting import consistently, reconciles, wait_idle

pytestmark = pytest.mark.operator
AGENT = "gpustack-k3-operator/"
GPU_CREATED = dt.datetime(2026, 11, 27, 17, 6, 21)   # replay README: container created 17:06:21
CPU_FIRST_LINE = dt.datetime(2026, 11, 29, 18, 17, 38)


def status_of(co, name):
    return co.get_namespaced_custom_object(G, V, NS, P, name).get("status") or {}


def cond(status, ctype):
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def phase_row(status, name):
    return next((p for p in (status.get("coldStart") or {}).get("phases") or [] if p["name"] == name), None)


def events_for(core, name):
    evs = [e for e in core.list_namespaced_event(NS).items if e.involved_object.name == name]
    return sorted(evs, key=lambda e: e.metadata.name)


def secs_between(a, b):
    return (parse(b) - parse(a)).total_seconds()


def wait_status(co, name, pred, what, timeout=20):
    return wait_for(lambda: (s := status_of(co, name)) and pred(s) and s, timeout=timeout, what=what)


def followers():
    """The pod-log followers running now (their threads: the public surface, no member of the observer)."""
    return [t for t in threading.enumerate() if isinstance(t, LogFollower) and t.is_alive()]


@pytest.fixture
def cold_operator(start_operator):
    def start(**kw):
        kw["coldstart"] = pod_logs   # the operator's default: follow the engine logs
        return start_operator(**kw)
    return start


def deploy(co, core, emu, name="kimi", wait=True):
    co.create_namespaced_custom_object(G, V, NS, P, k3(name))
    if wait:
        wait_status(co, name, lambda s: s.get("phase") == "Deploying", "Deploying")
    return Kubelet(emu, core, NS, name, f"{name}-0", wait=wait)


def gpu_log(started: dt.datetime) -> list[str]:
    return retime(GPU_LOG.read_text(), GPU_CREATED, started.replace(tzinfo=None)).splitlines(keepends=True)


def test_gpu_log_create_to_ready_and_warm_with_hand_read_timings(emu, kube, cold_operator):
    co, _, core = kube
    op = cold_operator(metrics_port=0, metrics_host="127.0.0.1", resync_s=0.5)
    kl = deploy(co, core, emu)
    sched = kl.created + dt.timedelta(seconds=2)
    started = kl.created + dt.timedelta(seconds=120)
    kl.report("Pending", scheduled=sched, waiting="ContainerCreating")
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("current") == "image_pull", "image_pull")
    assert st["phase"] == "Starting" and phase_row(st, "scheduled")["seconds"] == 2.0
    kl.start_container(started, scheduled=sched)
    lines = gpu_log(started)
    upto = next(i for i, ln in enumerate(lines) if "Loading weights took 163.80" in ln) + 1
    kl.log("".join(lines[:upto]))
    st = wait_status(co, "kimi", lambda s: cond(s, "WeightsLoaded").get("status") == "True", "WeightsLoaded")
    assert "163.8 s" in cond(st, "WeightsLoaded")["message"]
    assert phase_row(st, "image_pull")["seconds"] == 118.0            # scheduled +2 s → started +120 s
    assert cond(st, "GraphsCaptured")["status"] == "False" and st["phase"] == "Starting"
    kl.log("".join(lines[upto:]))
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("totalSeconds") is not None, "serving")
    cs = st["coldStart"]
    assert cs["attempt"] == 1 and cs["totalSeconds"] == 635.0
    assert phase_row(st, "weights_load")["seconds"] == 163.8
    assert phase_row(st, "cuda_graphs")["seconds"] == 87.0
    assert secs_between(phase_row(st, "container_start")["start"], phase_row(st, "process_start")["start"]) == 13.0
    assert cs.get("compileCacheWarm") is None and "compileCache" not in cs   # no compile-cache line in this log
    # the engine's own figures (gpu_worker.py:772 "Available KV cache memory: 43.76 GiB", kv_cache_utils.py:1147
    # "GPU KV cache size: 2,687,776 tokens, Maximum concurrency for 1,000,000 tokens per request: 2.69x")
    assert cs["memory"] == {"kvCacheGiB": 43.76, "kvCacheTokens": 2687776, "maxConcurrency": 2.69,
                            "concurrencyLen": 1000000}
    # against the test plan (operator_fakes.FAKE_PLAN: 1,000,000 tokens; 12.5x at 80,000: not comparable)
    assert st["planCheck"] == {"figures": [{"figure": "kvCacheTokens", "planned": 1000000, "engine": 2687776,
                                            "driftPct": 168.78}], "maxAbsDriftPct": 168.78, "notPrinted": []}
    assert cond(st, "GraphsCaptured")["status"] == "True" and "87 s" in cond(st, "GraphsCaptured")["message"]
    assert st["phase"] == "Starting"                # the engine serves; the pod is not Ready yet
    kl.report("Running", scheduled=sched, running=started, ready=True)
    st = wait_status(co, "kimi", lambda s: s.get("phase") == "Ready", "Ready")
    assert cond(st, "Warm")["status"] == "False"
    kl.log('(APIServer pid=1) INFO:     10.0.0.7:40312 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    st = wait_status(co, "kimi", lambda s: s.get("phase") == "Warm", "Warm")
    assert cond(st, "Warm")["status"] == "True"
    assert wait_idle(op, 15)
    evs = events_for(core, "kimi")
    msgs = [e.message for e in evs if e.reason == "ColdStartPhase"]
    assert len(msgs) == len(set(msgs))             # one Event per transition, never repeated
    assert "attempt 1: weights_load done in 163.8 s" in msgs and "attempt 1: cuda_graphs done in 87 s" in msgs
    assert [e.reason for e in evs if e.reason in ("Deploying", "Starting", "Ready", "Warm")] == [
        "Deploying", "Starting", "Ready", "Warm"]
    # a resync of an unchanged world writes nothing
    emu.reset_counters()
    before = reconciles(op)
    consistently(lambda: emu.writes(agent=AGENT) == 0, until=lambda: reconciles(op) >= before + 3,
                 what="no writes over resyncs of an unchanged world")
    body = urllib.request.urlopen(f"http://127.0.0.1:{op.health.port}/metrics").read().decode()
    assert 'gpustack_k3_cold_start_phase_seconds_count{engine="vllm",phase="weights_load"} 1.0' in body
    assert 'gpustack_k3_cold_start_phase_seconds_sum{engine="vllm",phase="weights_load"} 163.8' in body
    assert 'gpustack_k3_operator_resources{phase="Warm"} 1.0' in body
    assert 'gpustack_k3_operator_resources{phase="Failed"} 0.0' in body
    assert 'gpustack_k3_cold_start_engine_memory{figure="kvCacheTokens",name="kimi",namespace="llm"} 2.687776e+06' in body
    assert 'gpustack_k3_cold_start_plan_drift_percent{figure="kvCacheTokens",name="kimi",namespace="llm"} 168.78' in body


def test_cpu_eager_log_real_vllm_to_warm(emu, kube, cold_operator):
    co, _, core = kube
    cold_operator()
    kl = deploy(co, core, emu)
    sched = kl.created + dt.timedelta(seconds=1)
    started = kl.created + dt.timedelta(seconds=30)
    kl.start_container(started, scheduled=sched)
    first = started + dt.timedelta(seconds=10)     # first vLLM line 10 s after the start (18:17:28 → 18:17:38)
    kl.log(retime(CPU_LOG.read_text(errors="replace"), CPU_FIRST_LINE, first.replace(tzinfo=None)))
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("totalSeconds") is not None, "serving")
    assert st["coldStart"]["totalSeconds"] == 47.0 and st["coldStart"]["engine"] == "vllm"
    assert phase_row(st, "weights_load")["seconds"] == 0.51
    assert phase_row(st, "image_pull")["seconds"] == 29.0
    assert cond(st, "GraphsCaptured")["reason"] == "NotUsed"  # --enforce-eager: no CUDA graphs
    assert st["coldStart"].get("compileCacheWarm") is None        # eager: nothing compiled, nothing loaded
    kl.report("Running", scheduled=sched, running=started, ready=True)
    st = wait_status(co, "kimi", lambda s: s.get("phase") == "Warm", "Warm (the log served a POST)")
    assert cond(st, "Warm")["status"] == "True" and phase_row(st, "warm")["end"]


def test_compile_cache_warm_from_vllm_cache_load_line(emu, kube, cold_operator):
    co, _, core = kube
    cold_operator()
    kl = deploy(co, core, emu)
    started = kl.created + dt.timedelta(seconds=5)
    kl.start_container(started, scheduled=kl.created)
    t = started + dt.timedelta(seconds=3)
    stamp = f"{t:%m-%d %H:%M:%S}"
    # vLLM compilation/backends.py:310-316@0.33.0 (engines.md Part 2)
    kl.log(f"(EngineCore_DP0 pid=7) INFO {stamp} [compilation/backends.py:310] Directly load the compiled "
           "graph(s) for compile range (1, 8192) from the cache, took 4.215 s\n")
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("compileCacheWarm") is True, "cache warm")
    assert st["coldStart"]["attempt"] == 1
    assert st["coldStart"]["compileCache"] == {"state": "hit", "hits": 1, "misses": 0}   # no compile phase seconds


def test_crash_in_cuda_graphs_fails_then_restart_is_attempt_2(emu, kube, cold_operator):
    co, _, core = kube
    op = cold_operator()
    kl = deploy(co, core, emu)
    sched = kl.created + dt.timedelta(seconds=1)
    started = kl.created + dt.timedelta(seconds=60)
    kl.start_container(started, scheduled=sched)
    lines = gpu_log(started)
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("Capturing CUDA graphs"))
    kl.log("".join(lines[:cut]))
    wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("current") == "cuda_graphs", "in cuda_graphs")
    kl.log(retime(GPU_CRASH_TAIL.read_text(), GPU_CREATED, started.replace(tzinfo=None)))
    emu.end_log(NS, kl.pod, container="engine")        # the container exited: its log stream ends
    died = started + dt.timedelta(seconds=572)           # 17:06:21 → 17:15:53
    term = {"reason": "Error", "exitCode": 1, "startedAt": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "finishedAt": died.strftime("%Y-%m-%dT%H:%M:%SZ"), "containerID": kl.container_id}
    kl.report("Running", scheduled=sched, terminated=term)
    st = wait_status(co, "kimi", lambda s: s.get("phase") == "Failed", "Failed")
    cs = st["coldStart"]
    assert cs["failedPhase"] == "cuda_graphs" and cs["attempt"] == 1
    assert "CUDA out of memory" in cs["reason"] or "EngineCore failed" in cs["reason"] or \
        "WorkerProc" in cs["reason"]
    assert cond(st, "GraphsCaptured")["reason"] == "EngineCrashed"
    assert "cuda_graphs" in cond(st, "Ready")["message"]
    ev = wait_for(lambda: [e for e in events_for(core, "kimi") if e.reason == "Failed"], what="Failed event")
    assert len(ev) == 1 and ev[0].type == "Warning" and "cuda_graphs" in ev[0].message
    assert "EngineCrashed" in ev[0].message
    # the kubelet restarts the container: a new container id, restartCount 1 → attempt 2
    emu.restart_container(NS, kl.pod, container="engine")
    kl.restarts = 1
    restarted = died + dt.timedelta(seconds=10)
    kl.start_container(restarted, scheduled=sched, last=term)
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("attempt") == 2, "attempt 2")
    assert st["phase"] == "Starting" and "failedPhase" not in st["coldStart"]
    kl.log("".join(gpu_log(restarted)))
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("totalSeconds") is not None,
                     "attempt 2 serving")
    assert st["coldStart"]["attempt"] == 2 and st["coldStart"]["totalSeconds"] == 635.0
    assert phase_row(st, "weights_load")["seconds"] == 163.8
    assert wait_idle(op, 10)
    reasons = [e.reason for e in events_for(core, "kimi")]
    assert reasons.count("ColdStartAttempt") == 1 and reasons.count("Failed") == 1
    assert sum(1 for e in events_for(core, "kimi") if e.message == "attempt 2: weights_load done in 163.8 s") == 1


def test_phase_over_budget_is_degraded_naming_the_phase(emu, kube, start_operator):
    import functools

    from gpustack_k3.operator.coldstart_bridge import coldstart_factory
    co, _, core = kube
    start_operator(coldstart=functools.partial(coldstart_factory, budgets={"weights_load": 2}),
                   resync_s=0.5)
    kl = deploy(co, core, emu)
    started = kl.created + dt.timedelta(seconds=5)
    kl.start_container(started, scheduled=kl.created)
    lines = gpu_log(started)
    upto = next(i for i, ln in enumerate(lines) if "Starting to load model" in ln) + 1
    kl.log("".join(lines[:upto]))             # weights start loading ... and nothing more is printed
    st = wait_status(co, "kimi", lambda s: s.get("phase") == "Degraded", "Degraded after the budget")
    cs = st["coldStart"]
    assert cs["failedPhase"] == "weights_load" and "budget 2 s" in cs["reason"]
    assert cond(st, "WeightsLoaded")["reason"] == "PhaseOverBudget"
    ev = wait_for(lambda: [e for e in events_for(core, "kimi") if e.reason == "Degraded"], what="Degraded event")
    assert len(ev) == 1 and "weights_load" in ev[0].message and ev[0].type == "Warning"


def test_deletion_stops_following(emu, kube, cold_operator):
    co, _, core = kube
    cold_operator()
    kl = deploy(co, core, emu)
    kl.start_container(kl.created + dt.timedelta(seconds=3), scheduled=kl.created)
    running = wait_for(lambda: followers(), what="a follower")
    assert [f.source.track.container for f in running] == ["engine"]
    co.delete_namespaced_custom_object(G, V, NS, P, "kimi")
    wait_for(lambda: not followers(), what="followers dropped")
    wait_for(lambda: not running[0].is_alive(), what="follower thread ended")


def test_pod_deletion_ends_the_follower(emu, kube, cold_operator):
    co, _, core = kube
    cold_operator()
    kl = deploy(co, core, emu)
    kl.start_container(kl.created + dt.timedelta(seconds=3), scheduled=kl.created)
    f = wait_for(lambda: followers(), what="a follower")[0]
    core.delete_namespaced_pod(kl.pod, NS)
    wait_for(lambda: not f.is_alive(), what="follower ended with its pod")
    wait_for(lambda: not followers(), what="track dropped")


def test_dropped_log_connection_resumes_without_duplicates(emu, kube, cold_operator):
    co, _, core = kube
    cold_operator()
    kl = deploy(co, core, emu)
    started = kl.created + dt.timedelta(seconds=5)
    kl.start_container(started, scheduled=kl.created)
    lines = gpu_log(started)
    half = len(lines) // 2
    kl.log("".join(lines[:half]))
    f = wait_for(lambda: followers(), what="a follower")[0]
    fed = "".join(lines[:half]).encode()
    wait_for(lambda: f.tracker.bytes_seen == len(fed), what="first half fed")
    emu.inject(500, times=2, path=f"/pods/{kl.pod}/log$")   # the reconnects meet API errors first
    # the connection drops mid-stream (an interrupt before the follow stream is open would break nothing: the
    # backlog read may have fed the first half, so drop until the follower saw it)
    wait_for(lambda: f.source.interrupt() or f.reconnects >= 1, what="the stream dropped")
    kl.log("".join(lines[half:]))
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("totalSeconds") is not None, "serving")
    assert f.reconnects >= 1 and f.is_alive()
    assert f.tracker.bytes_seen == len("".join(lines).encode())         # every byte once
    assert st["coldStart"]["attempt"] == 1 and st["coldStart"]["totalSeconds"] == 635.0


def test_faults_and_operator_restart_mid_cold_start_converge(emu, kube, cold_operator):
    co, _, core = kube
    op1 = cold_operator(watch_timeout_s=2)
    kl = deploy(co, core, emu)
    sched = kl.created + dt.timedelta(seconds=1)
    started = kl.created + dt.timedelta(seconds=20)
    kl.start_container(started, scheduled=sched)
    lines = gpu_log(started)
    upto = next(i for i, ln in enumerate(lines) if "Loading weights took 163.80" in ln) + 1
    emu.inject(409, times=2, verb="apply", path="/k3deployments/kimi/status$")
    emu.inject(None, times=2, delay=1.0, path=f"/pods/{kl.pod}/log$")            # slow answers
    kl.log("".join(lines[:upto]))
    wait_status(co, "kimi", lambda s: cond(s, "WeightsLoaded").get("status") == "True", "WeightsLoaded")
    op1.stop()                                       # operator restart mid cold start
    emu.inject(410, times=1, verb="watch", path="/k3deployments$")
    emu.compact()
    emu.inject(500, times=3, verb="apply", path="/k3deployments/kimi/status$")
    op2 = cold_operator(watch_timeout_s=2)
    kl.log("".join(lines[upto:]))
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("totalSeconds") is not None,
                     "serving after restart", timeout=30)
    assert st["coldStart"]["attempt"] == 1 and st["coldStart"]["totalSeconds"] == 635.0
    assert phase_row(st, "weights_load")["seconds"] == 163.8
    assert wait_idle(op2, 15)
    msgs = [e.message for e in events_for(core, "kimi") if e.reason == "ColdStartPhase"]
    assert len(msgs) == len(set(msgs))               # the new operator did not repeat an Event
    assert msgs.count("attempt 1: weights_load done in 163.8 s") == 1
    deps = [o for o in emu.objects("apps/v1/deployments", NS)]
    assert [o["metadata"]["name"] for o in deps] == ["kimi"]


def test_operator_restart_after_container_restart_recovers_attempts(emu, kube, cold_operator):
    """An operator that starts after a container restart reads the previous container's log first."""
    co, _, core = kube
    kl = deploy(co, core, emu, wait=False)      # no operator runs while the container restarts
    started = kl.created + dt.timedelta(seconds=10)
    kl.start_container(started, scheduled=kl.created)
    lines = gpu_log(started)
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("Capturing CUDA graphs"))
    kl.log("".join(lines[:cut]) + retime(GPU_CRASH_TAIL.read_text(), GPU_CREATED, started.replace(tzinfo=None)))
    emu.restart_container(NS, kl.pod, container="engine")
    kl.restarts = 1
    restarted = started + dt.timedelta(seconds=600)
    kl.start_container(restarted, scheduled=kl.created, last={"reason": "Error", "exitCode": 1})
    kl.log("".join(gpu_log(restarted)))
    cold_operator()
    st = wait_status(co, "kimi", lambda s: (s.get("coldStart") or {}).get("totalSeconds") is not None, "serving")
    assert st["coldStart"]["attempt"] == 2 and st["coldStart"]["totalSeconds"] == 635.0
    assert phase_row(st, "weights_load")["seconds"] == 163.8


def test_kubelet_stamps_with_nanoseconds_parse():
    assert parse_time("2026-11-29T10:00:00.123456789Z") == pytest.approx(
        dt.datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=dt.UTC).timestamp())
