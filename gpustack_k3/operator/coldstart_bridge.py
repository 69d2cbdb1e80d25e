"""The pod-log bridge: engine pods of a K3Deployment → ``gpustack_k3.coldstart.ColdStartTracker``.

One tracker per engine pod (attempts accumulate across container restarts), fed from two sides:

* **platform phases from pod state** (``observe``, called by every reconcile with the pods from the
  informer cache): ``scheduled`` = pod creation → ``PodScheduled=True`` (its lastTransitionTime);
  ``image_pull`` = scheduled → the first container start (in progress while the container waits in
  ContainerCreating / ErrImagePull / ImagePullBackOff); ``container_start`` = the container's
  ``state.running.startedAt``. A new ``containerID`` (the kubelet restarted the container,
  ``restartCount`` went up) reports a new ``container_start``, which the tracker turns into a new
  attempt; a terminated container reports its exit (``process_exited``). Each platform event is
  reported once per (pod, container id).
* **the engine container's log** through the pod log API
  (``CoreV1Api.read_namespaced_pod_log(follow=True, timestamps=True, _preload_content=False)``),
  followed by the cold-start log-follow supervisor (``gpustack_k3.coldstart.follow.LogFollower``, the
  same one the Docker and local runners use): the backlog first (after an operator restart the status
  stands until it is read: ``syncing``), then the stream, reconnecting with backoff and resuming with
  ``sinceSeconds`` while the same container runs; kubelet stamps are stripped before the tracker sees a
  line and drop what was already fed. A follow that ends is not resumed when the pod is gone or its
  container changed/terminated: ``observe`` starts a follower for the new container. Memory is bounded:
  the tracker is bounded, a partial line is capped at 1 MiB, and a CR follows at most ``max_pods`` pods.

Level-triggered: tracker transitions and changes of what the snapshot shows (attempt, failure cause,
engine memory figures, compile cache) only ``enqueue(key)``; ``reconcile`` calls ``observe`` and decides
from the snapshot, never from the event. Phase budgets are checked in ``observe`` on the log's clock
(``LogFollower.check_stall``), so a stall shows up at the latest at the next resync.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart, ColdStartPhase, CompileCache, EngineMemory
from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.coldstart.follow import LogFollower, ceil_seconds_since
from gpustack_k3.coldstart.phases import PHASE_INDEX
from gpustack_k3.coldstart.scanner import iso
from gpustack_k3.operator.podstate import parse_time
from gpustack_k3.operator.observation import ColdStartObservation, Verdict, coldstart_model
from gpustack_k3.operator.seams import Key

log = logging.getLogger("gpustack_k3.operator.coldstart")

READ_TIMEOUT_S = 900        # a silent follow is re-opened after this long (dead connections)
ENGINE_CONTAINER = "engine"


def engine_container(pod: Mapping[str, Any]) -> str | None:
    """The engine container: the one named ``engine`` if any, else the first (the renderer puts the
    engine first, ``render/kubernetes.py``)."""
    names = [c.get("name") for c in ((pod.get("spec") or {}).get("containers") or []) if c.get("name")]
    if ENGINE_CONTAINER in names:
        return ENGINE_CONTAINER
    return names[0] if names else None


def container_status(pod: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == name:
            return c
    return {}


def _started_at(cs: Mapping[str, Any]) -> float | None:
    state = cs.get("state") or {}
    return parse_time((state.get("running") or {}).get("startedAt")
                      or (state.get("terminated") or {}).get("startedAt"))


class _PodTrack:
    def __init__(self, tracker: Any, namespace: str, name: str, uid: str, container: str) -> None:
        self.tracker = tracker
        self.namespace, self.name, self.uid, self.container = namespace, name, uid, container
        self.lock = threading.RLock()      # shared with the follower: platform events, feeding, snapshots
        self.emitted: set[tuple[str, str]] = set()
        self.follower: LogFollower | None = None
        self.followed_id: str | None = None
        self.previous_read = False
        self.shown: tuple | None = None     # what the last snapshot was built from (enqueue on change)

    def once(self, tag: tuple[str, str], fn: Callable[[], None]) -> None:
        """Report a platform event once per (event, pod/container) tag (the caller holds ``lock``)."""
        if tag not in self.emitted:
            self.emitted.add(tag)
            fn()

    def exited(self, term: Mapping[str, Any], container_id: str) -> None:
        """A terminated container's exit, once per container id."""
        if container_id and isinstance(term.get("exitCode"), int):
            self.once(("exited", container_id), lambda: self.tracker.process_exited(
                term["exitCode"], parse_time(term.get("finishedAt"))))


class PodLogSource:
    """One engine container's log through the pod log API (``LogSource`` of the follow supervisor)."""

    stamped = True

    def __init__(self, core: Any, track: _PodTrack, container_id: str) -> None:
        self.core, self.track, self.container_id = core, track, container_id
        self._resp: Any = None

    def open(self, since: float | None, follow: bool) -> Iterator[bytes]:
        kw: dict[str, Any] = {"container": self.track.container, "follow": follow, "timestamps": True,
                              "_preload_content": False, "_request_timeout": (10, READ_TIMEOUT_S)}
        if since is not None:
            kw["since_seconds"] = ceil_seconds_since(since)
        resp = self.core.read_namespaced_pod_log(self.track.name, self.track.namespace, **kw)
        self._resp = resp   # opened eagerly: a stop during the request sees it before the first read
        return self._chunks(resp)

    def _chunks(self, resp: Any) -> Iterator[bytes]:
        try:
            yield from resp.stream(65536, decode_content=True)
        finally:
            self._resp = None
            resp.release_conn()

    def interrupt(self) -> None:
        """Break a blocked read from another thread (``close`` would wait for the reader's lock)."""
        resp = self._resp
        if resp is None:
            return
        try:
            if hasattr(resp, "shutdown"):   # urllib3 >= 2.3
                resp.shutdown()
            else:
                sock = getattr(getattr(resp, "_connection", None), "sock", None)
                if sock is not None:
                    import socket
                    sock.shutdown(socket.SHUT_RDWR)
        except (OSError, RuntimeError, ValueError) as e:   # already released or closed
            log.debug("closing a log stream: %s", e)

    def alive(self) -> bool:
        """Resume only while the same container of the same pod is running."""
        from kubernetes.client.rest import ApiException
        try:
            pod = self.core.read_namespaced_pod(self.track.name, self.track.namespace,
                                                _preload_content=False, _request_timeout=(10, 30))
            doc = json.loads(pod.data)
        except ApiException as e:
            return e.status not in (404, 410)  # API trouble: try again later
        except Exception:  # noqa: BLE001 - connection trouble: try again later
            return True
        meta = doc.get("metadata") or {}
        if meta.get("uid") != self.track.uid or meta.get("deletionTimestamp"):
            return False
        cs = container_status(doc, self.track.container)
        if cs.get("containerID") != self.container_id:
            return False
        return bool((cs.get("state") or {}).get("running"))


class PodLogColdStart:
    """``ColdStartObserver`` following engine pod logs (see the module docstring)."""

    def __init__(self, api_client: Any, enqueue: Callable[[Key], None], metrics: Any = None, *,
                 budgets: Mapping[str, float] | None = None, max_pods: int = 16,
                 clock: Callable[[], float] = time.time) -> None:
        from kubernetes import client
        self.core = client.CoreV1Api(api_client)
        self.enqueue = enqueue
        self.metrics = metrics
        self.budgets = dict(budgets) if budgets is not None else None
        self.max_pods = max_pods
        self.clock = clock
        self._lock = threading.Lock()
        self._tracks: dict[Key, dict[str, _PodTrack]] = {}
        self._closed = False

    # ------------------------------------------------------------------ the seam
    def observe(self, key: Key, pods: Sequence[Mapping[str, Any]]) -> ColdStartObservation | None:
        if self._closed:
            return None
        live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")
                and engine_container(p) is not None]
        live.sort(key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "",
                                 (p.get("metadata") or {}).get("name") or ""))
        live = live[:self.max_pods]
        with self._lock:
            tracks = self._tracks.setdefault(key, {})
            uids = {(p.get("metadata") or {}).get("uid") for p in live}
            for uid in [u for u in tracks if u not in uids]:
                self._drop(tracks.pop(uid))
            for p in live:
                m = p.get("metadata") or {}
                if m.get("uid") not in tracks:
                    tracks[m.get("uid")] = self._new_track(key, p)
            current = [tracks[(p.get("metadata") or {}).get("uid")] for p in live]
        if not live:
            return None
        snaps = []
        for pod, track in zip(live, current):
            self._platform(key, track, pod)
            self._follow(key, track, pod)
            snaps.append(self._snapshot(track))
        roles = role_phases(live, snaps)
        return dataclasses.replace(combine(snaps), roles=roles)

    def report_phase(self, key: Key, pod_uid: str, phase: str, start: float | None, end: float | None,
                     details: dict | None = None) -> bool:
        """A phase someone else observed for one pod (the post-Ready warm-up: ``warm``), in wall-clock
        seconds; shifted onto the log's clock by the pod's engine-stamp offset. False: pod not followed."""
        with self._lock:
            track = self._tracks.get(key, {}).get(pod_uid)
        if track is None:
            return False
        with track.lock:
            off = (track.follower.offset if track.follower is not None else None) or 0.0
            track.tracker.platform_event(phase, None if start is None else start + off,
                                         None if end is None else end + off, details)
        self.enqueue(key)
        return True

    def forget(self, key: Key) -> None:
        with self._lock:
            tracks = self._tracks.pop(key, {})
        for t in tracks.values():
            self._drop(t)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            all_tracks = [t for ts in self._tracks.values() for t in ts.values()]
            self._tracks.clear()
        for t in all_tracks:
            self._drop(t)
        for t in all_tracks:
            if t.follower is not None:
                t.follower.join(5)

    # ------------------------------------------------------------------ internals
    def _new_track(self, key: Key, pod: Mapping[str, Any]) -> _PodTrack:
        m = pod.get("metadata") or {}
        created = parse_time(m.get("creationTimestamp")) or self.clock()
        year = dt.datetime.fromtimestamp(created, dt.UTC).year  # vLLM stamps carry no year
        listeners: list[Callable] = [lambda ev, k=key: self.enqueue(k)]
        if self.metrics is not None:
            listeners.append(self.metrics.listener)
        tracker = ColdStartTracker(budgets=self.budgets, year=year, listeners=listeners)
        return _PodTrack(tracker, m.get("namespace") or key[0], m.get("name") or "", m.get("uid") or "",
                         engine_container(pod) or "")

    def _drop(self, track: _PodTrack) -> None:
        if track.follower is not None:
            track.follower.stop()

    def _platform(self, key: Key, track: _PodTrack, pod: Mapping[str, Any]) -> None:
        """Report platform phases once each, in order, from what the kubelet says."""
        m, status = pod.get("metadata") or {}, pod.get("status") or {}
        conds = {c.get("type"): c for c in status.get("conditions") or []}
        sched = conds.get("PodScheduled") or {}
        scheduled_at = parse_time(sched.get("lastTransitionTime")) if sched.get("status") == "True" else None
        cs = container_status(pod, track.container)
        cid = cs.get("containerID") or ""
        started = _started_at(cs)
        with track.lock:
            self._scheduling(track, parse_time(m.get("creationTimestamp")), scheduled_at, started,
                             ((cs.get("state") or {}).get("waiting") or {}).get("reason"))
            if started is not None and cid:
                self._container_start(key, track, cs, cid, started, scheduled_at)
            track.exited((cs.get("state") or {}).get("terminated") or {}, cid)

    @staticmethod
    def _scheduling(track: _PodTrack, created: float | None, scheduled_at: float | None, started: float | None,
                    waiting: str | None) -> None:
        """``scheduled`` = creation → PodScheduled; ``image_pull`` begins when scheduled (while it waits)."""
        t = track.tracker
        if created is not None and ("scheduled", "end") not in track.emitted:
            track.once(("scheduled", "start"), lambda: t.platform_event("scheduled", created))
        if scheduled_at is None:
            return
        track.once(("scheduled", "end"), lambda: t.platform_event("scheduled", created or scheduled_at, scheduled_at))
        if started is None and ("image_pull", "end") not in track.emitted:
            track.once(("image_pull", "start"), lambda: t.platform_event(
                "image_pull", scheduled_at, None, {"waiting": waiting} if waiting else None))

    def _container_start(self, key: Key, track: _PodTrack, cs: Mapping[str, Any], cid: str, started: float,
                         scheduled_at: float | None) -> None:
        """The pull ends at the first start; a restart's start (a new container id) begins a new attempt, after the
        previous container's exit."""
        t = track.tracker
        restarts = int(cs.get("restartCount") or 0)
        if (scheduled_at is not None and restarts == 0) or ("image_pull", "start") in track.emitted:
            # pulled and created by the first start (a restart's startedAt says nothing of the pull)
            track.once(("image_pull", "end"), lambda: t.platform_event("image_pull", scheduled_at or started, started))
        if not track.previous_read and restarts > 0 and not track.emitted - {
                ("scheduled", "start"), ("scheduled", "end")}:
            track.previous_read = True
            self._read_previous(key, track)  # an operator restart: recover the earlier attempt
        track.previous_read = True
        last = (cs.get("lastState") or {}).get("terminated") or {}
        track.exited(last, last.get("containerID") or "")   # the previous container's end, before the new start
        track.once(("container_start", cid), lambda: t.platform_event(
            "container_start", started, started, {"containerID": cid, "restartCount": restarts}))

    def _read_previous(self, key: Key, track: _PodTrack) -> None:
        from kubernetes.client.rest import ApiException
        try:
            resp = self.core.read_namespaced_pod_log(track.name, track.namespace, container=track.container,
                                                     previous=True, _preload_content=False,
                                                     _request_timeout=(10, 60))
            data = resp.data
        except ApiException:
            return
        except Exception as e:
            log.debug("previous log of %s/%s unavailable: %s", track.namespace, track.name, e)
            return
        if data:
            with track.lock:
                track.tracker.feed(data + (b"" if data.endswith(b"\n") else b"\n"))
            self._changed(key, track)

    def _follow(self, key: Key, track: _PodTrack, pod: Mapping[str, Any]) -> None:
        cs = container_status(pod, track.container)
        cid = cs.get("containerID") or ""
        if not cid or _started_at(cs) is None:
            return  # nothing to read yet (waiting for image / creation)
        with track.lock:
            f = track.follower
            if f is not None and track.followed_id == cid:
                return  # following it, or it ended with this container (terminated): nothing new
            if f is not None:
                f.stop()
            track.followed_id = cid
            # the first container of a track read by this operator: its backlog first (a restarted
            # operator keeps its status meanwhile); a new container's log starts empty
            track.follower = LogFollower(
                PodLogSource(self.core, track, cid), track.tracker, name=f"podlog-{track.name}", lock=track.lock,
                catch_up=f is None, clock=self.clock, on_fed=[lambda _f, k=key, tr=track: self._changed(k, tr)],
                on_end=[lambda _f, k=key: self.enqueue(k)])
            track.follower.start()

    def _changed(self, key: Key, track: _PodTrack) -> None:
        """Enqueue when what a snapshot shows changed beyond phase transitions (the tracker's listener
        enqueues those): a cause or context of a failure, engine memory figures, compile-cache lines."""
        with track.lock:
            att = track.tracker.attempts[-1]
            shown = (att.index, len(att.causes), len(att.figures), att.cache["hit"], att.cache["miss"],
                     track.follower is not None and track.follower.caught_up.is_set())
            if shown == track.shown:
                return
            track.shown = shown
        self.enqueue(key)

    def _snapshot(self, track: _PodTrack) -> ColdStartObservation:
        with track.lock:
            if track.follower is not None:
                track.follower.check_stall(self.clock())
            snap = snapshot_of(track.tracker.report(), track.name)
            if track.follower is not None and not track.follower.caught_up.is_set():
                return dataclasses.replace(snap, syncing=True)
            return snap


def snapshot_of(rep: Any, pod: str | None = None) -> ColdStartObservation:
    """A tracker report → the observation ``decide`` reads (pure). Times are RFC 3339 UTC strings;
    ``totalSeconds`` is container start → serving of the current attempt (null until serving);
    ``compileCacheWarm`` is True when compiled graphs came from the cache only, False when the engine compiled."""
    last = rep.last
    by = {p.name: p for p in last.phases}
    ready = by.get("server_ready")
    serving = last.status == "ready" or (ready is not None and ready.end is not None)
    failed = last.status == "failed"
    done = {p.name for p in last.phases if p.end is not None and not (p.details or {}).get("failed")}
    warm = by.get("warm")
    return ColdStartObservation(
        status=_status_of(rep, pod, serving),
        weights_loaded="weights_load" in done, graphs_captured="cuda_graphs" in done,
        graphs_skipped=serving and "cuda_graphs" not in by,  # eager engines capture no graphs
        serving=serving, warm=warm is not None and warm.end is not None,
        verdict=Verdict.of_attempt(stalled=last.stalled, index=last.index, failed_phase=last.failed_phase,
                                   reason=last.reason) if failed else None)


def _status_of(rep: Any, pod: str | None, serving: bool) -> ColdStart:
    last = rep.last
    by = {p.name: p for p in last.phases}
    ready = by.get("server_ready")
    total = None
    if serving and ready is not None and ready.end is not None:
        origin = by.get("container_start")
        start = origin.start if origin is not None and origin.start is not None else last.start
        total = round(ready.end - start, 3) if start is not None else None
    cache = last.compile_cache
    failed = last.status == "failed"
    status = ColdStart(
        attempt=last.index, compileCacheWarm=None if cache is None else cache["state"] == "hit",
        phases=[ColdStartPhase(name=p.name, start=iso(p.start, z=True), end=iso(p.end, z=True),
                               seconds=None if p.seconds is None else round(p.seconds, 3)) for p in last.phases],
        current=last.current_phase if last.status == "in-progress" else None, totalSeconds=total,
        failedPhase=last.failed_phase if failed else None, reason=last.reason if failed else None,
        compileCache=None if cache is None else CompileCache(state=cache["state"], hits=cache["hits"],
                                                             misses=cache["misses"],
                                                             compileSeconds=cache["compile_seconds"]),
        memory=EngineMemory.model_validate(last.memory) if last.memory else None,
        engine=rep.engine or None, pod=pod or None)
    # under its status names with the unknowns left out: what the status writes (and compares) is what was known
    return coldstart_model(status.model_dump(by_alias=True, exclude_none=True))


def combine(snaps: list[ColdStartObservation]) -> ColdStartObservation:
    """One resource, several engine pods: a failed pod speaks first, then the least advanced one
    (the resource is as far as its slowest pod); among serving pods the slowest cold start."""
    if len(snaps) == 1:
        return snaps[0]
    if any(s.syncing for s in snaps):
        return dataclasses.replace(snaps[0], syncing=True)
    failed = [s for s in snaps if s.verdict is not None]
    if failed:
        return failed[0]
    starting = [s for s in snaps if not s.serving]
    if starting:
        return min(starting, key=lambda s: PHASE_INDEX.get(s.status.current, -1))
    return max(snaps, key=lambda s: s.status.totalSeconds or 0.0)


def role_phases(pods: Sequence[Mapping[str, Any]], snaps: Sequence[ColdStartObservation]) -> dict[str, str]:
    """Per role of a topology (the pods' role label): where its cold start is, read from its own pods' engine
    logs (a P/D prefill may be serving while its decode still captures graphs). {} for pods without roles."""
    by_role: dict[str, list[ColdStartObservation]] = {}
    for pod, snap in zip(pods, snaps):
        role = ((pod.get("metadata") or {}).get("labels") or {}).get(api.LABEL_ROLE)
        if role:
            by_role.setdefault(role, []).append(snap)
    combined = {role: combine(s) for role, s in sorted(by_role.items())}
    return {role: c.phase_word for role, c in combined.items() if not c.syncing}


def coldstart_factory(api_client: Any, enqueue: Callable[[Key], None], metrics: Any = None,
                      **kw: Any) -> PodLogColdStart:
    """The operator's default ``ColdStartFactory``."""
    return PodLogColdStart(api_client, enqueue, metrics, **kw)
