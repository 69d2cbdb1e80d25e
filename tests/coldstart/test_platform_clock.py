"""The platform's clock (sub-second, exact) against the engine's (vLLM stamps whole seconds, truncated).

Root cause of the intermittent tests/docker/test_docker_runner.py::test_live_engine_clock_with_platform_event
(``assert all(p.start >= start ...)``): the runner stamps container_start from time.time() (10:00:05.6
created, 10:00:06.4 started); the retimed replay prints its first lines within that second and vLLM
writes them as 10:00:05. A phase that also ended before the container's start span ended escaped the
no-overlap rule, so it started 0.6 s before the container did. It failed whenever the container
started within the second its first lines were printed in, more often under load, when
``container.start()`` takes longer. These tests rebuild that ordering with fixed times."""
from __future__ import annotations

from datetime import UTC, datetime

from gpustack_k3.coldstart import ColdStartTracker

CREATED = datetime(2026, 11, 30, 10, 0, 5, 600000, tzinfo=UTC).timestamp()
STARTED = datetime(2026, 11, 30, 10, 0, 6, 400000, tzinfo=UTC).timestamp()
LOG = (b"(APIServer pid=1) INFO 11-30 10:00:05 [startup.py:39] vLLM server version 0.33.0, serving model /m\n"
       b"(Worker_TP0 pid=9) INFO 11-30 10:00:05 [gpu_model_runner.py:4980] Starting to load model /m...\n"
       b"(Worker_TP0 pid=9) INFO 11-30 10:00:06 [default_loader.py:509] Loading weights took 0.30 seconds\n"
       b"(EngineCore pid=7) INFO 11-30 10:00:06 [kv_cache_utils.py:1151] GPU KV cache size: 1,000 tokens, "
       b"Maximum concurrency for 100 tokens per request: 10.00x\n"
       b"(EngineCore pid=7) INFO 11-30 10:00:06 [core.py:394] init engine (profile, create kv cache, warmup model) "
       b"took 0.40 s\n"
       b"(APIServer pid=1) INFO 11-30 10:00:07 [entry.py:139] Starting vLLM server on http://127.0.0.1:8000\n"
       b"(APIServer pid=1) INFO:     Application startup complete.\n")


def _ordered(rep) -> None:
    names = [p.name for p in rep.phases]
    assert names[0] == "container_start" and rep.attempts[-1].index == 1 and len(rep.attempts) == 1, names
    start = rep.phases[0].start
    assert all(p.start >= start for p in rep.phases if p.start is not None), [(p.name, p.start) for p in rep.phases]
    assert all(p.end >= start for p in rep.phases if p.end is not None)


def test_runner_order_platform_event_then_log():
    t = ColdStartTracker(engine="vllm", year=2026)
    t.platform_event("container_start", CREATED, STARTED)
    t.feed(LOG)
    rep = t.finish()
    _ordered(rep)
    wl = rep.phase("weights_load")
    assert (wl.start, wl.seconds) == (CREATED, 0.3)   # stamped 10:00:05, printed after 10:00:05.6


def test_platform_event_reported_after_the_first_lines_is_not_a_restart():
    t = ColdStartTracker(engine="vllm", year=2026)
    t.feed(LOG[:LOG.index(b"(EngineCore")])        # the log is read before the runner reports the span
    t.platform_event("container_start", CREATED, STARTED)
    t.feed(LOG[LOG.index(b"(EngineCore"):])
    _ordered(t.finish())


def test_a_clock_difference_beyond_a_second_is_kept():
    """A container whose engine stamps local time west of UTC: its lines read hours before the
    container started. Only the sub-second truncation is corrected, not the difference."""
    t = ColdStartTracker(engine="vllm", year=2026)
    t.platform_event("container_start", CREATED + 5 * 3600, STARTED + 5 * 3600)
    t.feed(LOG)
    wl = t.finish().phase("weights_load")
    assert wl.start == datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC).timestamp() and wl.seconds == 0.3
