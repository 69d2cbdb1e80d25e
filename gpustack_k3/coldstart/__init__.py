"""Cold-start phase tracker and log doctor for vLLM and SGLang. Re-exports only.

    tracker = ColdStartTracker(engine=None, budgets=None, listeners=[on_transition])
    tracker.platform_event("container_start", started_at, running_at)   # operator / runners
    for chunk in log_stream: tracker.feed(chunk)                          # bytes, any split
    tracker.check_stall(now)                                              # live streams
    tracker.process_exited(code)                                          # the engine ended
    report = tracker.finish()        # or tracker.report() while streaming
    report.to_dict()                 # {"engine","version","status",...,"failure","memory","compile_cache",...}
    tracker.findings()               # log doctor → list[Finding]

Modules: ``framing`` (bytes → lines, timestamps), ``attempts`` (the state machine), ``report`` (timings,
outcome, JSON), ``causes`` (root causes in tracebacks), ``follow`` (the log-follow supervisor every
runner and the operator use), ``plancheck`` (plan vs the engine's own figures), ``patterns`` (regexes
in linear time), ``catalog`` + ``data/*.yaml`` (the markers), ``doctor``.
"""
from .catalog import Catalog, CatalogError, load_catalog
from .doctor import diagnose
from .phases import DEFAULT_BUDGETS, LOG_PHASES, PHASES, PLATFORM_PHASES
from .tracker import (
    AttemptReport,
    ColdStartReport,
    ColdStartTracker,
    PhaseReport,
    PhaseTransition,
)

__all__ = [
    "DEFAULT_BUDGETS",
    "LOG_PHASES",
    "PHASES",
    "PLATFORM_PHASES",
    "AttemptReport",
    "Catalog",
    "CatalogError",
    "ColdStartReport",
    "ColdStartTracker",
    "PhaseReport",
    "PhaseTransition",
    "diagnose",
    "load_catalog",
]
