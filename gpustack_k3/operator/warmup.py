"""The operator's post-Ready warm-up (``spec.startup.warmup``): once an engine pod is Ready, its warm-up
requests go straight to the pod (``http://<podIP>:<engine port>``), once per container, in a thread of
their own, with the probe's code (``gpustack_k3.probe.warmup``: the same stages and streamed requests as
``gpustack-k3 probe``). The ``warm`` phase goes to the pod's cold-start tracker through the observer's
``report_phase`` (the pod-log bridge shifts it onto the log's clock), the summary (seconds, TTFT/TPOT
p50, failures) to ``status.coldStart.warmup``; every change enqueues the resource.

Level-triggered like the rest: ``observe`` is called by every reconcile and starts what is due; a pod
that went away, or a container that restarted, gets its own warm-up (a restart is a new cold start).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpustack_k3.catalog import load_catalog
from gpustack_k3.operator.coldstart_bridge import container_status, engine_container
from gpustack_k3.operator.seams import ColdStartObserver, Key
from gpustack_k3.api.v1alpha1.spec import Warmup
from gpustack_k3.api.v1alpha1.status import Warmup as WarmupStatus
from gpustack_k3.probe.warmup import warm_up

log = logging.getLogger("gpustack_k3.operator.warmup")

WarmFn = Callable[..., dict]


def warmup_of(cr: Mapping[str, Any]):
    """``spec.startup.warmup`` as the spec model reads it, or None (unset, or invalid: validation reports that)."""
    raw = ((cr.get("spec") or {}).get("startup") or {}).get("warmup")
    if not isinstance(raw, Mapping):
        return None
    from pydantic import ValidationError

    try:
        return Warmup.model_validate(raw)
    except ValidationError:
        return None


def served_name(cr: Mapping[str, Any]) -> str | None:
    """``spec.model.servedModelName``; None when unset (the argv then has no --served-model-name and the engine
    serves its model path: the probe takes the one /v1/models lists)."""
    return ((cr.get("spec") or {}).get("model") or {}).get("servedModelName")


def _default_port(cr: Mapping[str, Any]) -> int | None:
    """The engine's own default port (catalog data: vLLM 8000, SGLang 30000) when the spec names none."""
    engine = load_catalog().engines.get(((cr.get("spec") or {}).get("engine") or {}).get("name"))
    return engine.default_port if engine is not None else None


def pod_url(pod: Mapping[str, Any], cr: Mapping[str, Any]) -> str | None:
    """``http://<podIP>:<port>`` of a pod's engine container (its ``http`` port, else its first, else the
    spec's serving port), or None while the pod has no IP."""
    ip = (pod.get("status") or {}).get("podIP")
    name = engine_container(pod)
    if not ip or name is None:
        return None
    ports: list = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == name:
            ports = c.get("ports") or []
    port = next((p.get("containerPort") for p in ports if p.get("name") == "http"), None)
    port = port or (ports[0].get("containerPort") if ports else None)
    port = port or ((cr.get("spec") or {}).get("serving") or {}).get("port") or _default_port(cr)
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}"


def _ready(pod: Mapping[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


class _Warm:
    def __init__(self, uid: str, cid: str) -> None:
        self.uid, self.cid = uid, cid
        self.summary: dict | None = None
        self.thread: threading.Thread | None = None


class PodWarmup:
    """See the module docstring. ``warm_fn`` is ``gpustack_k3.probe.warmup.warm_up`` (tests may wrap it)."""

    def __init__(self, observer: ColdStartObserver, enqueue: Callable[[Key], None], *, warm_fn: WarmFn = warm_up,
                 max_pods: int = 16) -> None:
        self.observer, self.enqueue, self.warm_fn, self.max_pods = observer, enqueue, warm_fn, max_pods
        self._lock = threading.Lock()
        self._state: dict[Key, dict[tuple[str, str], _Warm]] = {}
        self._closed = False

    def observe(self, key: Key, cr: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict | None:
        """Start the warm-ups that are due; the summary of the most recent one (``running`` while it runs)."""
        warmup = warmup_of(cr)
        if warmup is None or self._closed:
            return None
        live: dict[tuple[str, str], Mapping[str, Any]] = {}
        for pod in pods[:self.max_pods]:
            m = pod.get("metadata") or {}
            name = engine_container(pod)
            cid = container_status(pod, name).get("containerID") if name else None
            if m.get("deletionTimestamp") or not cid or not m.get("uid"):
                continue
            live[(m["uid"], cid)] = pod
        with self._lock:
            state = self._state.setdefault(key, {})
            for k in [k for k in state if k not in live]:
                del state[k]            # the pod or its container is gone: a new one warms up anew
            for k, pod in live.items():
                if k in state or not _ready(pod):
                    continue
                url = pod_url(pod, cr)
                if url is None:
                    continue
                w = state[k] = _Warm(*k)
                w.thread = threading.Thread(target=self._run, args=(key, w, url, warmup, served_name(cr)),
                                            name=f"warmup-{(pod.get('metadata') or {}).get('name')}", daemon=True)
                w.thread.start()
            newest = [w for w in state.values()]
            if not newest:
                return None
            w = newest[-1]
            return dict(w.summary) if w.summary is not None else WarmupStatus(ok=None, running=True).model_dump(
                exclude_unset=True)

    def _run(self, key: Key, w: _Warm, url: str, warmup: Any, model: str | None) -> None:
        report = getattr(self.observer, "report_phase", None)

        def on_phase(start, end, details) -> None:
            if report is not None:
                report(key, w.uid, "warm", start, end, details)
        try:
            res = self.warm_fn(url, warmup, model=model, on_phase=on_phase)
        except Exception as e:  # noqa: BLE001 - never let a warm-up take the operator down
            log.warning("warm-up of %s/%s at %s failed: %s", key[0], key[1], url, e)
            res = WarmupStatus(ok=False, seconds=None, reason=f"{type(e).__name__}: {e}"[:500]).model_dump(
                exclude_unset=True)
        with self._lock:
            w.summary = res
        self.enqueue(key)

    def forget(self, key: Key) -> None:
        with self._lock:
            self._state.pop(key, None)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            threads = [w.thread for s in self._state.values() for w in s.values() if w.thread is not None]
        for t in threads:
            t.join(1.0)
