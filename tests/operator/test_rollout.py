"""The P/D rollout's pure parts (gpustack_k3/operator/rollout.py; docs/design/010-pd-rollouts.md §2-3) on the real
rendering of the kimi-k3-b300-1p1d preset: what makes a new pair revision, the per-revision objects (a router names
only its own revision's instance Services), and each step of the Surge state machine."""
from __future__ import annotations

import copy
import datetime as dt

import pytest

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import RolloutStatus
from gpustack_k3.catalog import load_catalog
from gpustack_k3.operator import hooks
from gpustack_k3.operator import rollout as pd
from gpustack_k3.operator.desired import object_key

NAME, NS = "kimi", "llm"
NOW = dt.datetime(2026, 12, 3, 15, 0, tzinfo=dt.UTC)
POLICY = pd.Policy(drain_s=60, deadline_s=600)


def doc(**edits) -> dict:
    d = copy.deepcopy(load_catalog().presets["kimi-k3-b300-1p1d"].document)
    d["metadata"] = {"name": NAME, "namespace": NS}
    for path, value in edits.items():
        node = d["spec"]
        *parents, leaf = path.split("__")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        node[leaf] = value
    return d


def rendered(**edits) -> list[dict]:
    return hooks.render(doc(**edits))


@pytest.mark.parametrize("edit", [{"engine__image": "registry.example/vllm:patched"},
                                  {"model__revision": "0123abcd"},
                                  {"roles__1__env": {"VLLM_FOO": "1"}},
                                  {"speculative__draftModel": "Inferact/Kimi-K3-DSpark-v2"}],
                         ids=["image", "model revision", "decode env", "draft model"])
def test_an_engine_change_is_a_new_pair_revision(edit):
    assert pd.revision_of(rendered(**edit)) != pd.revision_of(rendered())


def test_more_instances_of_a_role_is_the_same_revision():
    base, more = rendered(), rendered(roles__1__instances=2)
    assert pd.revision_of(more) == pd.revision_of(base)
    assert pd.is_pd(base) and not pd.is_pd([o for o in base if o["kind"] != "Deployment"])


def test_a_revision_s_router_names_only_that_revision_s_instance_services():
    objs = pd.revisioned(rendered(roles__1__instances=2), "aaaa1111", "bbbb2222", NAME)
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    router = pd.router_of(objs, "aaaa1111")
    assert router["metadata"]["name"] == f"{NAME}-router-aaaa1111"
    routes = pd.routes(router)
    assert len(routes["prefill"]) == 1 and len(routes["decode"]) == 2
    for url in routes["prefill"] + routes["decode"]:
        svc = services[url.split("//", 1)[1].split(".", 1)[0]]
        assert svc["spec"]["selector"][pd.LABEL_REVISION] == "aaaa1111"
    assert services[NAME]["spec"]["selector"][pd.LABEL_REVISION] == "bbbb2222"     # the endpoint: the serving one
    for o in objs:
        if o["kind"] == api.LWS_KIND:
            assert o["metadata"]["name"].endswith("-aaaa1111")
            tpl = o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
            assert tpl[pd.LABEL_REVISION] == "aaaa1111"


def live(objs: list[dict], *, ready: bool) -> dict:
    """Owned objects as the API would show them, with LWS and Deployment statuses."""
    out = {}
    for o in copy.deepcopy(objs):
        if o["kind"] in (api.LWS_KIND, "Deployment"):
            n = o["spec"].get("replicas", 1)
            o["status"] = {"replicas": n, "readyReplicas": n if ready else 0}
        out[object_key(o)] = o
    return out


def pod(rev: str, waiting: str | None = None) -> dict:
    cs = {"name": "engine", "restartCount": 0, "ready": waiting is None,
          "state": {"waiting": {"reason": waiting, "message": "x"}} if waiting else {"running": {}}}
    return {"metadata": {"name": f"p-{rev}", "labels": {pd.LABEL_REVISION: rev}},
            "status": {"phase": "Pending" if waiting else "Running", "containerStatuses": [cs]}}


def test_the_surge_steps_start_switch_drain_and_fail():
    old, new = rendered(), rendered(engine__image="registry.example/vllm:patched")
    s, t = pd.revision_of(old), pd.revision_of(new)
    first = pd.plan(old, {}, [], None, NAME, NOW, POLICY)
    assert (first.status.phase, first.serving) == ("Idle", s)
    owned = live(first.desired, ready=True)

    start = pd.plan(new, owned, [], first.status, NAME, NOW, POLICY)
    assert (start.status.phase, start.serving, start.status.targetRevision) == ("Starting", s, t)
    assert start.keep == frozenset(k for k, o in owned.items() if pd.revision_label(o) == s)
    stable = next(o for o in start.desired if o["metadata"]["name"] == NAME)
    assert stable["spec"]["selector"][pd.LABEL_REVISION] == s and start.surging
    assert [e[1] for e in start.events] == [pd.EVENT_ROLLOUT_STARTED]

    failing = {**owned, **live(start.desired, ready=False)}
    failed = pd.plan(new, failing, [pod(t, "ImagePullBackOff")], start.status, NAME, NOW, POLICY)
    assert (failed.status.phase, failed.serving) == ("Failed", s) and "ImagePullBackOff" in failed.failed
    assert failed.keep == start.keep and [e[1] for e in failed.events] == [pd.REASON_ROLLOUT_FAILED]
    again = pd.plan(new, failing, [pod(t, "ImagePullBackOff")], failed.status, NAME, NOW, POLICY)
    assert again.events == ()                                     # one Event per failure, not per reconcile

    late = NOW + dt.timedelta(seconds=601)
    assert "not ready within 600 s" in pd.plan(new, failing, [], start.status, NAME, late, POLICY).failed

    both = {**owned, **live(start.desired, ready=True)}
    switch = pd.plan(new, both, [pod(t)], start.status, NAME, NOW, POLICY)
    assert (switch.status.phase, switch.serving, switch.status.previousRevision) == ("Draining", t, s)
    stable = next(o for o in switch.desired if o["metadata"]["name"] == NAME)
    assert stable["spec"]["selector"][pd.LABEL_REVISION] == t and switch.requeue_after == 60

    switched = {k: o for k, o in both.items() if k[2] != NAME}
    switched[object_key(stable)] = stable
    draining = pd.plan(new, switched, [], switch.status, NAME, NOW + dt.timedelta(seconds=30), POLICY)
    assert draining.status.phase == "Draining" and draining.keep and draining.requeue_after == 30
    done = pd.plan(new, switched, [], draining.status, NAME, NOW + dt.timedelta(seconds=61), POLICY)
    assert done.status.phase == "Idle" and done.keep == frozenset()     # the previous revision is deleted


def test_a_newer_edit_replaces_the_starting_target_and_keeps_the_serving_one():
    old, mid, new = rendered(), rendered(engine__image="a/b:1"), rendered(engine__image="a/b:2")
    first = pd.plan(old, {}, [], None, NAME, NOW, POLICY)
    owned = live(first.desired, ready=True)
    start = pd.plan(mid, owned, [], first.status, NAME, NOW, POLICY)
    owned = {**owned, **live(start.desired, ready=False)}
    second = pd.plan(new, owned, [], start.status, NAME, NOW, POLICY)
    mid_rev = pd.revision_of(mid)
    assert second.status.targetRevision == pd.revision_of(new) and second.serving == pd.revision_of(old)
    assert not any(pd.revision_label(owned[k]) == mid_rev for k in second.keep)
    assert not any(pd.revision_label(o) == mid_rev for o in second.desired)   # so mid's objects are deleted


def test_a_status_that_lost_the_switch_still_drains():
    old, new = rendered(), rendered(engine__image="a/b:1")
    s_objs = pd.revisioned(old, pd.revision_of(old), pd.revision_of(new), NAME)
    t_objs = pd.revisioned(new, pd.revision_of(new), pd.revision_of(new), NAME)
    owned = {**live(s_objs, ready=True), **live(t_objs, ready=True)}
    stale = RolloutStatus(phase="Starting", servingRevision=pd.revision_of(old), targetRevision=pd.revision_of(new))
    p = pd.plan(new, owned, [], stale, NAME, NOW, POLICY)
    assert p.status.phase == "Draining" and p.keep and p.requeue_after == 60


def test_objects_made_before_pair_revisions_serve_until_the_first_revision_is_ready():
    """An operator upgrade: the P/D objects carry no revision and the endpoint selects none (LEGACY); the first
    revision comes up beside them and the endpoint moves only once it is ready."""
    objs = rendered()
    legacy = live(objs, ready=True)
    rev = pd.revision_of(objs)
    start = pd.plan(objs, legacy, [], None, NAME, NOW, POLICY)
    assert (start.status.phase, start.serving) == ("Starting", pd.LEGACY)
    assert {k[2] for k in start.keep} >= {f"{NAME}-prefill", f"{NAME}-decode", f"{NAME}-router"}
    stable = next(o for o in start.desired if o["metadata"]["name"] == NAME)
    assert pd.LABEL_REVISION not in stable["spec"]["selector"]          # as it was: the legacy router serves
    both = {**legacy, **live(start.desired, ready=True)}
    switch = pd.plan(objs, both, [], start.status, NAME, NOW, POLICY)
    assert (switch.status.phase, switch.serving) == ("Draining", rev)
    assert {k[2] for k in switch.keep} >= {f"{NAME}-prefill", f"{NAME}-router"}


def test_pruning_a_shared_object_does_not_wait_for_a_drain():
    objs = rendered()
    first = pd.plan(objs, {}, [], None, NAME, NOW, POLICY)
    owned = live(first.desired, ready=True)
    stale = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone"}}
    owned[object_key(stale)] = stale
    again = pd.plan(objs, owned, [], first.status, NAME, NOW, POLICY)
    assert again.status.phase == "Idle" and object_key(stale) not in again.keep
