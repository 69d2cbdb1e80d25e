"""``gpustack status NAME [--watch]``: a deployment's instances through GPUStack's states, and the
engine's cold-start phases read from the instance logs.

GPUStack instance states (schemas/models.py:1586 ModelInstanceStateEnum @2.3.0; gpustack.md §3.2):
pending → analyzing → scheduled → initializing → downloading → starting → running, any → error,
running ↔ unreachable. They map onto the tracker's platform phases (gpustack_k3.coldstart.phases):

* ``scheduled``       - from the first event until the instance reaches ``scheduled`` (details: worker, GPUs);
* ``image_pull``      - ``initializing`` + ``downloading``: the worker prepares the workload (image, files;
  ``download_progress`` in details);
* ``container_start`` - from ``starting`` until the first log bytes arrive (or ``running``).

Everything after that comes from the engine's own log (``GET /v2/model-instances/{id}/logs?follow=true``)
fed into ``ColdStartTracker``. ``running`` is GPUStack's readiness (``GET {health_check_path}`` = 200).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINES, EXIT_INPUT
from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.gpustack.client import GPUStackClient, GPUStackError
from gpustack_k3.probe.client import run_probe

SCHEDULING = ("pending", "analyzing")
PREPARING = ("initializing", "downloading")
TERMINAL_OK = "running"
TERMINAL_BAD = ("error",)


def find_model(client: GPUStackClient, name: str, cluster: str | None = None,
               missing_hint: str = "apply it first") -> dict:
    """The one deployment named ``name`` (in ``cluster``): not found and a name in several clusters are errors."""
    cluster_id = client.cluster_id(cluster) if cluster else None
    found = client.models_named(name, cluster_id)
    if not found:
        raise GPUStackError("not_found", f"no deployment named {name!r}"
                            + (f" in cluster {cluster!r}" if cluster else "") + f" ({missing_hint})")
    if len(found) > 1:
        raise GPUStackError("conflict", f"{len(found)} deployments named {name!r} in different clusters; "
                            "pass --cluster NAME")
    return found[0]


def instance_summary(mi: dict) -> dict:
    return {"id": mi.get("id"), "name": mi.get("name"), "state": mi.get("state"),
            "worker": mi.get("worker_name"), "worker_ip": mi.get("worker_ip"), "gpu_indexes": mi.get("gpu_indexes") or [],
            "port": mi.get("port"), "download_progress": mi.get("download_progress"),
            "restart_count": mi.get("restart_count") or 0, "state_message": mi.get("state_message") or ""}


def status(client: GPUStackClient, name: str, cluster: str | None = None) -> dict:
    m = find_model(client, name, cluster)
    return {"model": {"name": m.get("name"), "id": m.get("id"), "state": m.get("state"),
                      "ready_replicas": m.get("ready_replicas"), "replicas": m.get("replicas"),
                      "state_message": m.get("state_message") or ""},
            "instances": [instance_summary(i) for i in client.instances(int(m["id"]))]}


class InstancePhases:
    """GPUStack state changes of one instance → platform phases of a ColdStartTracker. Pure apart from
    calling the tracker; ``now`` is injected so tests can drive it."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.first_seen: float | None = None
        self.prep_start: float | None = None
        self.start_at: float | None = None
        self.state: str | None = None
        self.container_closed = False

    def on_state(self, mi: dict, now: float) -> None:
        state = (mi.get("state") or "").lower()
        if self.first_seen is None:
            self.first_seen = now
        if state == self.state:
            return
        prev, self.state = self.state, state
        t = self.tracker
        if state == "scheduled" or (prev in (None, *SCHEDULING) and state not in SCHEDULING):
            t.platform_event("scheduled", self.first_seen, now,
                             {"worker": mi.get("worker_name"), "gpu_indexes": mi.get("gpu_indexes") or []})
        if state in PREPARING and self.prep_start is None:
            self.prep_start = now
            t.platform_event("image_pull", now, None, {"gpustack_state": state})
        if state == "downloading" and mi.get("download_progress") is not None:
            t.platform_event("image_pull", self.prep_start, None, {"download_progress": mi.get("download_progress")})
        if state in ("starting", TERMINAL_OK) and self.prep_start is not None and self.start_at is None:
            t.platform_event("image_pull", self.prep_start, now)
        if state == "starting" and self.start_at is None:
            self.start_at = now
            t.platform_event("container_start", now, None, {"port": mi.get("port")})
        if state == TERMINAL_OK and self.start_at is not None:
            self.close_container(now)

    def close_container(self, now: float) -> None:
        if self.start_at is not None and not self.container_closed:
            self.container_closed = True
            self.tracker.platform_event("container_start", self.start_at, now)


def _tracker(engine: str | None) -> ColdStartTracker:
    return ColdStartTracker(engine=engine)


def watch(client: GPUStackClient, name: str, *, cluster: str | None = None, engine: str | None = None,
          echo: Callable[[str], None] = print, timeout: float | None = None, follow_logs: bool = True,
          clock: Callable[[], float] = time.time) -> dict:
    """Follow the deployment until every instance runs (``ok: true``) or one errors (``ok: false``)."""
    m = find_model(client, name, cluster)
    model_id = int(m["id"])
    engine = engine or _engine_of(m)
    tracker = _tracker(engine)
    lock = threading.Lock()
    phases: dict[int, InstancePhases] = {}
    states: dict[int, str] = {}
    log_threads: dict[int, threading.Thread] = {}
    t0 = clock()

    if tracker is not None:
        def on_transition(tr: Any) -> None:
            secs = f" ({tr.seconds:.1f} s)" if getattr(tr, "seconds", None) is not None else ""
            echo(f"  phase {tr.phase} {tr.event}{secs}")
        tracker.add_listener(on_transition)

    def follow(iid: int) -> None:
        try:
            for chunk in client.follow_logs(iid):
                with lock:
                    p = phases.get(iid)
                    if p is not None:
                        p.close_container(clock())
                    tracker.feed(chunk)
        except GPUStackError as exc:
            echo(f"  logs of instance {iid}: {exc}")

    def handle(mi: dict) -> None:
        iid = int(mi["id"])
        state = (mi.get("state") or "").lower()
        with lock:
            if tracker is not None:
                phases.setdefault(iid, InstancePhases(tracker)).on_state(mi, clock())
        if states.get(iid) != state:
            extra = ""
            if state == "scheduled":
                extra = f" on {mi.get('worker_name')} GPUs {mi.get('gpu_indexes')}"
            elif state == "downloading" and mi.get("download_progress") is not None:
                extra = f" {mi.get('download_progress'):.0f}%"
            elif mi.get("state_message") and state in ("pending", "error"):
                extra = f": {mi.get('state_message')}"
            echo(f"[{clock() - t0:7.1f}s] instance {mi.get('name')}: {states.get(iid, '-')} -> {state}{extra}")
            states[iid] = state
        if (follow_logs and tracker is not None and state in ("starting", TERMINAL_OK)
                and iid not in log_threads and mi.get("worker_id")):
            th = threading.Thread(target=follow, args=(iid,), daemon=True)
            log_threads[iid] = th
            th.start()

    for mi in client.instances(model_id):
        handle(mi)
    if not _done(states):
        deadline = None if timeout is None else t0 + timeout
        for ev in client.watch_instances(model_id):
            if ev.get("type") in (1, 2) and isinstance(ev.get("data"), dict):
                handle(ev["data"])
            elif ev.get("type") == 3 and isinstance(ev.get("data"), dict):
                states.pop(int(ev["data"]["id"]), None)
                echo(f"[{clock() - t0:7.1f}s] instance {ev['data'].get('name')}: deleted")
            if _done(states) or (deadline is not None and clock() > deadline):
                break
    for th in log_threads.values():   # let the log readers catch up (a followed log never ends by itself)
        th.join(timeout=1.0)
    ok = bool(states) and all(s == TERMINAL_OK for s in states.values())
    result: dict[str, Any] = {"model": {"name": name, "id": model_id}, "ok": ok,
                              "instances": {str(k): v for k, v in states.items()}}
    if tracker is not None:
        with lock:
            result["coldstart"] = tracker.report().last.summary()
    return result


def _done(states: dict[int, str]) -> bool:
    return bool(states) and (all(s == TERMINAL_OK for s in states.values())
                             or any(s in TERMINAL_BAD for s in states.values()))


def _engine_of(model: dict) -> str | None:
    backend = (model.get("backend") or "").lower()
    return next((engine for engine in ENGINES if engine in backend), None)


def probe_instances(res: dict, cfg: Any, *, run: Callable[..., Any] | None = None) -> dict:
    """``status --probe``: probe every running instance at its engine (``http://{worker_ip}:{port}``, which
    serves /health, /v1/models and /metrics itself; GPUStack starts it with ``--served-model-name`` = the
    deployment name) with the probe's code. Returns {instance name: probe report}; instances that do not
    run, or have no address yet, are listed with the reason instead."""
    run = run or run_probe
    out: dict[str, dict] = {}
    for i in res["instances"]:
        if i["state"] != TERMINAL_OK or not i.get("worker_ip") or not i.get("port"):
            out[i["name"]] = {"usable": False, "reason": f"not probed: state {i['state']}"
                              + ("" if i.get("worker_ip") and i.get("port") else ", no worker address/port yet"),
                              "exit_code": EXIT_INPUT}
            continue
        host = f"[{i['worker_ip']}]" if ":" in i["worker_ip"] else i["worker_ip"]
        out[i["name"]] = run(f"http://{host}:{i['port']}", cfg.with_(model=cfg.model or res["model"]["name"])).to_dict()
    return out
