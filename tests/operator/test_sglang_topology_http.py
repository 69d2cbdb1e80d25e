"""The SGLang P/D presets through the operator on the API emulator, with the official client: the real validation
and rendering, one LeaderWorkerSet per role beside the SGLang router's Deployment and Services, the emulator's LWS
controller making the pods, the test playing the kubelet and printing SGLang 0.5.23's own log lines in each pod;
status per role, each role's cold-start phase read from its own pods' logs (coldstart/data/sglang.yaml names
every line's file:line), then Ready."""
from __future__ import annotations

import copy
import datetime as dt

import pytest
from operator_helpers import NS, G, P, V, router_ready, wait_for

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.catalog import load_catalog
from gpustack_k3.operator import hooks
from gpustack_k3.operator.coldstart_bridge import coldstart_factory as pod_logs
from gpustack_k3.operator.rollout import LABEL_REVISION
from gpustack_k3.render.router import sglang_router_pin

pytestmark = pytest.mark.operator


def status_of(co, name) -> dict:
    return co.get_namespaced_custom_object(G, V, NS, P, name).get("status") or {}


def cond(status, ctype):
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def kubelet(core, pod: str, *, ready: bool, started: dt.datetime) -> None:
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(started)},
             {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": rfc3339(started)}]
    cs = {"name": "engine", "image": "lmsysorg/sglang:v0.5.23", "imageID": "", "ready": ready, "restartCount": 0,
          "containerID": f"containerd://{pod}", "state": {"running": {"startedAt": rfc3339(started)}}}
    core.patch_namespaced_pod_status(pod, NS, {"status": {"phase": "Running", "conditions": conds,
                                                          "containerStatuses": [cs]}})


def sglang_log(mode: str, start: dt.datetime, upto: int | None = None) -> str:
    """A start of SGLang 0.5.23 in P/D ``mode`` in its own words (the texts of coldstart/data/sglang.yaml)."""
    lines = [f"server_args={{'model_path': '/models/Kimi-K3', 'tp_size': 8, 'disaggregation_mode': '{mode}'}}",
             *(["CommonKVBootstrapServer started successfully on 0.0.0.0:8998"] if mode == "prefill"
               else ["Radix cache is disabled for decode server"]),
             "Load weight begin. avail mem=265.42 GB",
             "Load weight end. elapsed=141.03 s, type=KimiK3ForConditionalGeneration, avail mem=69.56 GB",
             "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 916672, KV size: 11.80 GB",
             "NIXL KVManager initialized with backend: UCX",
             "Start of pd disaggregation warmup ...", "End of disaggregation warmup",
             "The server is fired up and ready to roll!"]
    return "".join(f"[{start + dt.timedelta(seconds=10 * i):%Y-%m-%d %H:%M:%S}] {m}\n"
                   for i, m in enumerate(lines[:upto]))


@pytest.fixture
def sglang_pd(emu, kube, start_operator):
    def make(preset: str, name: str):
        co, _apps, core = kube
        op = start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, resync_s=0.5,
                            coldstart=pod_logs)
        doc = copy.deepcopy(load_catalog().presets[preset].document)
        doc["metadata"] = {"name": name, "namespace": NS}
        co.create_namespaced_custom_object(G, V, NS, P, doc)
        return op, co, core
    return make


def revision(co) -> str:
    """The pair revision the operator gave the engine objects (docs/design/010-pd-rollouts.md §2)."""
    sets = wait_for(lambda: co.list_namespaced_custom_object(api.LWS_GROUP, "v1", NS, api.LWS_PLURAL)["items"],
                    what="the LeaderWorkerSets")
    return sets[0]["metadata"]["labels"][LABEL_REVISION]


@pytest.mark.parametrize("preset", ["kimi-k3-b300-1p1d-sglang", "dsv41-flash-gb300-8p1d-sglang"])
def test_sglang_presets_reconcile_to_an_lws_per_role_and_the_sglang_router(emu, kube, sglang_pd, preset):
    _op, co, core = sglang_pd(preset, "sgl")
    roles = {r["name"]: r for r in load_catalog().presets[preset].document["spec"]["roles"]}
    rev = revision(co)
    for role in roles:
        lws = wait_for(lambda r=role: co.get_namespaced_custom_object(api.LWS_GROUP, "v1", NS, api.LWS_PLURAL,
                                                                       f"sgl-{r}-{rev}"), what=f"the {role} LWS")
        assert lws["spec"]["replicas"] == roles[role].get("instances", 1)
        assert lws["metadata"]["ownerReferences"][0]["kind"] == api.KIND
    _apps = kube[1]
    router = wait_for(lambda: _apps.read_namespaced_deployment(f"sgl-router-{rev}", NS), what="the SGLang router")
    c = router.spec.template.spec.containers[0]
    assert c.image == sglang_router_pin().image and c.command == sglang_router_pin().command
    assert c.args[0] == "--pd-disaggregation" and c.args.count("--prefill") == roles["prefill"].get("instances", 1)
    svc = core.read_namespaced_service(f"sgl-prefill-{rev}-0", NS)
    assert "bootstrap" in {p.name for p in svc.spec.ports}
    st = wait_for(lambda: (s := status_of(co, "sgl")).get("roles") and s, what="role status")
    assert sorted(r["name"] for r in st["roles"]) == sorted(roles)
    assert st["endpoint"] == f"http://sgl.{NS}.svc:8000"                  # the router's Service


def test_each_sglang_role_shows_its_own_cold_start_then_the_pair_is_ready(emu, kube, sglang_pd):
    _op, co, core = sglang_pd("kimi-k3-b300-1p1d-sglang", "sgl")
    rev = revision(co)
    prefill, decode = (f"sgl-{role}-{rev}-0" for role in ("prefill", "decode"))
    router_ready(kube[1], f"sgl-router-{rev}")
    for pod in (prefill, decode):
        wait_for(lambda p=pod: core.read_namespaced_pod(p, NS), what=f"pod {pod} made by the LWS controller")
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=10)
    kubelet(core, prefill, ready=True, started=t0)
    kubelet(core, decode, ready=False, started=t0)
    emu.append_log(NS, prefill, sglang_log("prefill", t0), container="engine")
    emu.append_log(NS, decode, sglang_log("decode", t0, upto=3), container="engine")   # loading weights
    st = wait_for(lambda: "(weights_load)" in cond(s := status_of(co, "sgl"), api.CONDITION_READY).get("message", "")
                  and s, what="the decode named with its cold-start phase")
    assert cond(st, api.CONDITION_READY)["message"] == "ready groups per role: decode 0/1 (weights_load)"
    assert st["phase"] != api.PHASE_READY
    emu.append_log(NS, decode, sglang_log("decode", t0)[len(sglang_log("decode", t0, upto=3)):],
                   container="engine")
    kubelet(core, decode, ready=True, started=t0)
    st = wait_for(lambda: (s := status_of(co, "sgl")).get("phase") == api.PHASE_READY and s, what="Ready")
    assert {r["name"]: r["readyReplicas"] for r in st["roles"]} == {"prefill": 1, "decode": 1}
    assert st["coldStart"]["engine"] == "sglang"
