"""The status table itself (gpustack_k3/operator/status_table.py): every row is reachable, the first that holds
decides, and each row gives the Ready condition one reason (docs/design/009-status-table.md)."""
import pytest

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart
from gpustack_k3.operator import status_table as t
from gpustack_k3.operator.observation import ColdStartObservation, Verdict
from gpustack_k3.operator.podstate import PodSummary

pytestmark = pytest.mark.operator

READY = PodSummary(total=1, scheduled=1, ready=1, running=1)
STARTING = PodSummary(total=1, scheduled=1, running=1)
CRASHED = Verdict(phase="Failed", reason=api.REASON_ENGINE_CRASHED, message="attempt 1: cold start failed in x: y")
STALLED = Verdict(phase="Degraded", reason=api.REASON_PHASE_OVER_BUDGET, message="attempt 1: stalled in x")


def cold(**kw):
    return ColdStartObservation(ColdStart(attempt=1, current="weights_load"), **kw)


# one example per row, in the table's order: (row, facts, phase, Ready reason)
EXAMPLES = [
    ("invalid", t.Facts(pods=STARTING, invalid="[x] spec.y: bad"), api.PHASE_INVALID, api.REASON_PODS_NOT_READY),
    ("render-failed", t.Facts(render_error="KeyError: 'x'"), api.PHASE_FAILED, api.REASON_NO_PODS),
    ("apply-failed", t.Facts(pods=READY, apply_error="HTTP 422", rolling="old template"), api.PHASE_FAILED,
     api.REASON_ROLLING_OUT),
    ("pod-failed", t.Facts(pods=PodSummary(total=1, failed="ImagePullBackOff: p/engine")), api.PHASE_FAILED,
     "ImagePullBackOff"),
    ("coldstart-failed", t.Facts(pods=STARTING, coldstart=cold(verdict=CRASHED)), api.PHASE_FAILED,
     api.REASON_ENGINE_CRASHED),
    ("group-restart-loop", t.Facts(pods=STARTING, coldstart=cold(verdict=STALLED), restart_loop="g 0 (3x)"),
     api.PHASE_DEGRADED, api.REASON_PHASE_OVER_BUDGET),
    ("crash-loop", t.Facts(pods=PodSummary(total=1, scheduled=1, crashing="CrashLoopBackOff: p/engine")),
     api.PHASE_DEGRADED, "CrashLoopBackOff"),
    ("crash-loop-after-restart", t.Facts(pods=PodSummary(total=1, scheduled=1, restarted_after_crash="p/engine"),
                                      coldstart=cold(verdict=CRASHED)), api.PHASE_DEGRADED, api.REASON_ENGINE_CRASHED),
    ("kv-transfer-failed", t.Facts(pods=READY, kv_transfer_failed="decode computed 900 prompt token(s) itself"),
     api.PHASE_DEGRADED, api.REASON_KV_TRANSFER_FAILED),
    ("stalled", t.Facts(pods=STARTING, coldstart=cold(verdict=STALLED)), api.PHASE_DEGRADED,
     api.REASON_PHASE_OVER_BUDGET),
    # P/D: a failed target revision is Degraded while the serving revision's pods say Ready
    ("rollout-failed", t.Facts(pods=READY, rollout_failed="revision ab12cd34 failed: ImagePullBackOff: ...",
                               short_roles="decode 0/1"), api.PHASE_DEGRADED, api.REASON_PODS_READY),
    ("groups-not-ready", t.Facts(pods=READY, short_roles="decode 0/1", rolling="x"), api.PHASE_STARTING,
     api.REASON_GROUPS_NOT_READY),
    ("surging", t.Facts(pods=READY, surging="revision ab12cd34 starting beside revision 0f0f0f0f", rolling="x"),
     api.PHASE_DEPLOYING, api.REASON_PODS_READY),
    ("rolling-out", t.Facts(pods=READY, rolling="Deployment/x: 0/1 pod(s) on the new template"), api.PHASE_DEPLOYING,
     api.REASON_ROLLING_OUT),
    ("warm", t.Facts(pods=READY, coldstart=cold(warm=True, serving=True)), api.PHASE_WARM, api.REASON_PODS_READY),
    ("ready", t.Facts(pods=READY), api.PHASE_READY, api.REASON_PODS_READY),
    ("pending", t.Facts(pods=PodSummary(total=1, unschedulable="p: 0/3 nodes")), api.PHASE_PENDING,
     api.REASON_PODS_NOT_READY),
    ("starting", t.Facts(pods=STARTING, short_roles="decode 0/1"), api.PHASE_STARTING, api.REASON_GROUPS_NOT_READY),
    ("deploying", t.Facts(), api.PHASE_DEPLOYING, api.REASON_NO_PODS),
]


def test_every_row_has_an_example_in_the_table_s_order():
    assert [e[0] for e in EXAMPLES] == [r.name for r in t.ROWS]


@pytest.mark.parametrize("row,facts,phase,ready_reason", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_the_first_row_that_holds_decides_phase_and_ready_together(row, facts, phase, ready_reason):
    out = t.decide(facts)
    assert (out.row, out.phase, out.ready.reason) == (row, phase, ready_reason)
    # Ready is True in Ready and Warm, and where a P/D serving revision answers while its target rolls or failed
    assert out.ready.status is (out.phase in (api.PHASE_READY, api.PHASE_WARM) or row in ("rollout-failed", "surging"))
    assert out.ready.reason in api.CONDITION_REASONS


def test_a_row_above_wins_over_every_row_below_it():
    """Each example also satisfies rows further down (a Ready pod count, a verdict): the order decides."""
    both = t.Facts(pods=READY, coldstart=cold(verdict=CRASHED, warm=True))
    assert t.decide(both).row == "coldstart-failed"
    assert t.decide(t.Facts(pods=READY, invalid="x", apply_error="y")).row == "invalid"


def test_the_table_ends_in_a_row_that_always_holds():
    assert t.ROWS[-1].when(t.Facts()) is True
