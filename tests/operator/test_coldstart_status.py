"""Engine figures, compile cache and the plan check on their way into status and metrics (pure parts);
over HTTP they are checked in test_coldstart_http.py."""
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from gpustack_k3.api.v1alpha1.status import EngineMemory, PlanCheck, PlanSummary
from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.coldstart.catalog import FIGURES
from gpustack_k3.metrics import ColdStartStatusFigures
from gpustack_k3.operator.coldstart_bridge import snapshot_of
from gpustack_k3.operator.conditions import plan_check_of

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def tracked(name: str) -> ColdStartTracker:
    t = ColdStartTracker(year=2026)
    t.feed((LOGS / name).read_bytes())
    t.finish()
    return t


def test_every_engine_figure_has_a_status_field():
    assert set(FIGURES) == set(EngineMemory.model_fields)
    assert all(f.alias for f in EngineMemory.model_fields.values())        # the status names


def test_snapshot_of_a_compiled_cpu_start_is_valid_status():
    snap = snapshot_of(tracked("vllm-0.32.0-cpu-compile-cache-hit.log").report(), "pod-0")
    cold = snap.status.model_dump(by_alias=True, exclude_none=True)
    assert cold["compileCacheWarm"] is True
    assert cold["compileCache"]["state"] == "hit" and cold["compileCache"]["compileSeconds"] == 279.0
    assert cold["memory"] == {"kvCacheGiB": 1.0, "kvCacheTokens": 46592, "maxConcurrency": 45.5, "concurrencyLen": 1024}
    assert snap.status.memory == EngineMemory(kv_cache_gib=1.0, kv_cache_tokens=46592, max_concurrency=45.5,
                                                      concurrency_len=1024)


def test_plan_check_status_compares_what_both_sides_have():
    plan = PlanSummary(engine="vllm", maxModelLen=1024, kvTokens=46603, maxConcurrency=45.51, kvCacheDtype="auto",
                       headroomGiB=2.6, kvCacheGiB=1.0)
    memory = {"kvCacheGiB": 1.0, "kvCacheTokens": 46592, "maxConcurrency": 45.5, "concurrencyLen": 1024}

    def plan_check_status(plan, memory):
        check = plan_check_of(plan, None if memory is None else EngineMemory.model_validate(memory))
        return None if check is None else check.model_dump()

    check = plan_check_status(plan, memory)
    assert check == {"figures": [{"figure": "kvCacheGiB", "planned": 1.0, "engine": 1.0, "driftPct": 0.0},
                                 {"figure": "kvCacheTokens", "planned": 46603, "engine": 46592, "driftPct": -0.02},
                                 {"figure": "maxConcurrency", "planned": 45.51, "engine": 45.5, "driftPct": -0.02}],
                     "maxAbsDriftPct": 0.02, "notPrinted": []}
    assert PlanCheck.model_validate(check).model_dump() == check
    assert plan_check_status(plan, None) is None                          # nothing printed yet
    assert plan_check_status(plan, {"concurrencyLen": 1024}) is None       # nothing comparable
    other_len = plan_check_status(plan, {**memory, "concurrencyLen": 8192})
    assert [r["figure"] for r in other_len["figures"]] == ["kvCacheGiB", "kvCacheTokens"]


class _Store:
    def __init__(self, objs):
        self.objs = objs

    def list_keys(self):
        return list(self.objs)

    def get(self, ns, name):
        return self.objs[(ns, name)]


def test_status_figures_collector():
    reg = CollectorRegistry()
    reg.register(ColdStartStatusFigures(_Store({("llm", "a"): {"status": {
        "coldStart": {"memory": {"kvCacheTokens": 46592}, "compileCache": {"state": "hit", "hits": 1, "misses": 0}},
        "planCheck": {"figures": [{"figure": "kvCacheTokens", "planned": 46603, "engine": 46592, "driftPct": -0.02}]}}},
        ("llm", "b"): {}})))
    body = generate_latest(reg).decode()
    assert 'gpustack_k3_cold_start_engine_memory{figure="kvCacheTokens",name="a",namespace="llm"} 46592.0' in body
    assert 'gpustack_k3_cold_start_plan_drift_percent{figure="kvCacheTokens",name="a",namespace="llm"} -0.02' in body
    assert 'gpustack_k3_cold_start_compile_cache{name="a",namespace="llm",state="hit"} 1.0' in body
    assert 'name="b"' not in body


def test_several_pods_report_the_least_advanced_phase_in_the_canonical_order():
    """A pod in vLLM's profiling run is behind one allocating its KV cache and ahead of one loading weights: the
    resource is as far as its slowest pod, in the phase order of ``coldstart/phases.py`` (the operator keeps no
    order of its own)."""
    from gpustack_k3.api.v1alpha1.status import ColdStart
    from gpustack_k3.operator.coldstart_bridge import combine
    from gpustack_k3.operator.observation import ColdStartObservation

    def at(phase):
        return ColdStartObservation(ColdStart(current=phase))

    snaps = [at("kv_cache"), at("profile_run"), at("cuda_graphs")]
    assert combine(snaps).status.current == "profile_run"
    assert combine(snaps[::-1]).status.current == "profile_run"
    behind = [at("profile_run"), at("weights_load")]
    assert combine(behind).status.current == "weights_load"
    assert combine(behind[::-1]).status.current == "weights_load"


def test_status_phases_add_up_to_the_engine_s_own_init_figure():
    """issue 33: the operator's kv_cache phase showed 0.0 s where the log spends 6 s between the profiling run's end
    (18:24:41) and the KV figure (18:24:47); weights_load carries the engine's 1.71 s, not the 2 s stamp span."""
    rep = tracked("vllm-0.32.0-cpu-compiled.log").report()
    phases = {p.name: p for p in snapshot_of(rep, "pod-0").status.phases}
    assert phases["weights_load"].seconds == 1.71
    assert (phases["kv_cache"].start, phases["kv_cache"].end, phases["kv_cache"].seconds) == (
        "2026-11-29T18:24:41Z", "2026-11-29T18:24:47Z", 6.0)
    init = sum(phases[n].seconds for n in ("compile", "profile_run", "kv_cache"))
    assert abs(init - rep.last.engine_init_seconds) < 1.0     # "init engine ... took 244.55 s", stamps of 1 s
