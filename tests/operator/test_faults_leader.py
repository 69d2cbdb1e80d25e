"""Injected API faults and leader election: the operator converges without duplicates."""
import threading
import time

import pytest
from operator_helpers import NS, G, P, V, k3, wait_for

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.operator.manager import LeaderElection
from tests.support.waiting import consistently, reconciles, wait_idle

pytestmark = pytest.mark.operator
AGENT = "gpustack-k3-operator/"


def status_of(co, name):
    return co.get_namespaced_custom_object(G, V, NS, P, name).get("status") or {}


def owned_names(emu, res):
    return sorted(o["metadata"]["name"] for o in emu.objects(res, NS)
                  if api.LABEL_DEPLOYMENT in (o["metadata"].get("labels") or {}))


def converged(co, emu, names):
    wait_for(lambda: all(status_of(co, n).get("phase") == "Deploying" for n in names), what=f"{names} Deploying")
    assert owned_names(emu, "apps/v1/deployments") == sorted(names)
    assert owned_names(emu, "v1/services") == sorted(names)
    assert owned_names(emu, "v1/configmaps") == sorted(f"{n}-config" for n in names)


def test_500s_are_retried_then_requeued_with_backoff(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator()
    emu.inject(500, times=3, verb="apply", path="/deployments/a$")   # absorbed by the client retries
    emu.inject(500, times=12, verb="apply", path="/services/b$")     # outlasts them: reconcile fails, requeued
    co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
    co.create_namespaced_custom_object(G, V, NS, P, k3("b"))
    converged(co, emu, ["a", "b"])
    assert wait_idle(op, 15)
    errors = op.metrics.errors.labels(cause="http_500")._value.get()
    assert errors >= 1
    assert emu.writes(agent=AGENT, verb="apply", resource="deployments") == 2 + 3


def test_409_on_status_write_rereads_and_converges(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator()
    fault = emu.inject(409, times=2, verb="apply", path="/k3deployments/a/status$")
    co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
    converged(co, emu, ["a"])
    assert fault.hits == 2 and wait_idle(op, 10)
    assert op.metrics.errors.labels(cause="conflict_reread")._value.get() == 2


def test_stale_resource_version_conflict_is_real(emu, kube, start_operator):
    """A user edit racing the status write: the emulator answers a real 409, the operator re-reads."""
    co, _, _ = kube
    op = start_operator()
    emu.inject(None, times=1, delay=0.4, verb="apply", path="/k3deployments/a/status$")
    co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
    wait_for(lambda: any(r.method == "PATCH" and r.url.path.endswith(f"/{P}/a/status") for r in emu.requests),
             what="the status write in flight")                     # held 0.4 s by the emulator
    co.patch_namespaced_custom_object(G, V, NS, P, "a", {"metadata": {"labels": {"edited": "yes"}}})
    converged(co, emu, ["a"])
    assert wait_idle(op, 10)
    assert status_of(co, "a")["observedGeneration"] == 1
    assert op.metrics.errors.labels(cause="conflict_reread")._value.get() >= 1


def test_410_on_watch_relists_and_keeps_working(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator(watch_timeout_s=1)
    co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
    converged(co, emu, ["a"])
    relists = op.metrics.relists.labels(kind="K3Deployment")._value.get()
    emu.inject(410, times=1, verb="watch", path="/k3deployments$")
    emu.compact()  # every informer's next watch from its old resourceVersion is Expired
    wait_for(lambda: op.metrics.relists.labels(kind="K3Deployment")._value.get() >= relists + 1, timeout=10,
             what="relist after 410")
    co.create_namespaced_custom_object(G, V, NS, P, k3("b"))
    converged(co, emu, ["a", "b"])


def test_slow_answers_converge_without_duplicates(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator()
    emu.inject(None, times=None, delay=0.25, method="PATCH")
    for n in ("a", "b", "c"):
        co.create_namespaced_custom_object(G, V, NS, P, k3(n))
    converged(co, emu, ["a", "b", "c"])
    emu.clear_faults()
    assert wait_idle(op, 15)
    assert emu.writes(agent=AGENT, verb="apply") == 3 * 4


def test_operator_restart_mid_reconcile(emu, kube, start_operator):
    co, _, _ = kube
    first = start_operator()
    emu.inject(500, times=None, verb="apply", path="/k3deployments/a/status$")  # status never lands
    co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
    wait_for(lambda: first.metrics.errors.labels(cause="http_500")._value.get() >= 1, what="failed status write")
    assert owned_names(emu, "apps/v1/deployments") == ["a"]
    first.stop()
    emu.clear_faults()
    emu.reset_counters()
    second = start_operator()
    converged(co, emu, ["a"])
    assert wait_idle(second, 10)
    # the workload survived the restart: only the status was written, objects were not re-applied
    assert emu.writes(agent=AGENT, verb="apply", resource="deployments") == 0
    assert emu.writes(agent=AGENT, verb="apply", resource="k3deployments/status") == 1
    second.stop()
    emu.reset_counters()
    third = start_operator()
    assert wait_idle(third, 10)     # every resource reconciled once, no retry pending
    assert reconciles(third) >= 1 and emu.writes(agent=AGENT) == 0  # status kept: nothing to do


def test_leader_election_two_replicas_never_both_act(emu, kube, start_operator):
    co, _, _ = kube
    timing = dict(rbac=False, leader_election=LeaderElection(lease_duration=1.5, renew_deadline=1.0,
                                                             retry_period=0.2))
    a = start_operator(identity="replica-a", **timing)
    b = start_operator(identity="replica-b", **timing)
    both = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            if a.leading and b.leading:
                both.append(time.monotonic())
            time.sleep(0.005)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        leader = wait_for(lambda: a if a.leading else (b if b.leading else None), what="a leader")
        standby = b if leader is a else a
        consistently(lambda: not standby.leading, for_s=0.6, what="one leader")
        from kubernetes import client
        lease = client.CoordinationV1Api(emu.api_client()).read_namespaced_lease("gpustack-k3-operator", NS)
        assert lease.spec.holder_identity == leader.identity
        co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
        converged(co, emu, ["a"])
        assert emu.writes(agent=AGENT) > 0
        assert sum(r["count"] for r in emu.writes_table() if standby.identity in r["agent"]
                   and r["resource"] != "leases") == 0
        leader.stop()  # releases the lease: the standby takes over
        wait_for(lambda: standby.leading, timeout=5, what="standby takes over")
        co.create_namespaced_custom_object(G, V, NS, P, k3("b"))
        converged(co, emu, ["a", "b"])
        assert any(standby.identity in r["agent"] and r["resource"] == "deployments" for r in emu.writes_table())
    finally:
        stop.set()
        sampler.join()
    assert both == []


def test_leader_that_cannot_renew_steps_down_before_the_lease_expires(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator(identity="solo", rbac=False, metrics_port=0, metrics_host="127.0.0.1",
                        leader_election=LeaderElection(lease_duration=3.0, renew_deadline=1.0, retry_period=0.2))
    wait_for(lambda: op.leading, what="leading")
    emu.inject(500, times=None, path="/leases")
    t0 = time.monotonic()
    wait_for(lambda: op.lost_leadership, timeout=5, what="step down")
    assert time.monotonic() - t0 < 3.0  # about renew_deadline (+ one retry period): before the lease expires
    assert not op.leading
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{op.health.port}/healthz")
    assert e.value.code == 503
    emu.reset_counters()
    co.create_namespaced_custom_object(G, V, NS, P, k3("late"))
    consistently(lambda: emu.writes(agent=AGENT) == 0, for_s=0.5,   # a replica that lost its lease does not act
                 what="no writes after losing the lease")


def _never_both(a, b, seconds):
    both, t_end = [], time.monotonic() + seconds
    while time.monotonic() < t_end:
        if a.leading and b.leading:
            both.append(time.monotonic())
        time.sleep(0.005)
    return both


def test_a_slow_cache_sync_does_not_stop_the_renewals(emu, kube, start_operator):
    """The new leader's first list is slow (3 s > lease 1.5 s): it keeps renewing meanwhile, so the
    standby never takes the lease and the two never act together."""
    co, _, _ = kube
    timing = dict(rbac=False, leader_election=LeaderElection(lease_duration=1.5, renew_deadline=1.0,
                                                             retry_period=0.2))
    emu.inject(None, times=1, delay=3.0, verb="list", path="/pods$")
    a = start_operator(identity="replica-a", **timing)
    wait_for(lambda: a.leading, what="a leads")
    b = start_operator(identity="replica-b", **timing)
    assert _never_both(a, b, 4.0) == []
    assert a.leading and not b.leading
    co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
    converged(co, emu, ["a"])
    assert sum(r["count"] for r in emu.writes_table() if "replica-b" in r["agent"] and r["resource"] != "leases") == 0


def test_a_hanging_renewal_still_steps_down_before_the_lease_expires(emu, kube, start_operator):
    """Lease calls that hang (no answer for 5 s) are cut at the renew deadline: no transport retries
    stretch one attempt past the lease."""
    op = start_operator(identity="solo", rbac=False,
                        leader_election=LeaderElection(lease_duration=3.0, renew_deadline=1.0, retry_period=0.2))
    wait_for(lambda: op.leading, what="leading")
    emu.inject(None, times=None, delay=5.0, path="/leases")
    t0 = time.monotonic()
    wait_for(lambda: op.lost_leadership, timeout=6, what="step down")
    assert time.monotonic() - t0 < 2.0, time.monotonic() - t0   # ~ renew_deadline, well before 3 s
    emu.clear_faults()


def test_a_hanging_api_call_is_cut_by_its_timeout_and_retried(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator(request_timeout=(1.0, 1.0))
    emu.inject(None, times=1, delay=4.0, verb="apply", path="/deployments/a$")
    t0 = time.monotonic()
    co.create_namespaced_custom_object(G, V, NS, P, k3("a"))
    converged(co, emu, ["a"])
    assert time.monotonic() - t0 < 4.0       # did not wait for the hung answer
    assert wait_idle(op, 10)
