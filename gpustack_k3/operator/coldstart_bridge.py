"""The pod-log bridge: engine pods of a K3Deployment → ``gpustack_k3.coldstart.ColdStartTracker``.

One tracker per engine pod (attempts accumulate across container restarts), fed from two sides:

* **platform phases from pod state** (``observe``, called by every reconcile with the pods from the
  informer cache): ``scheduled`` = pod creation → ``PodScheduled=True`` (its lastTransitionTime);
  ``image_pull`` = scheduled → the first container start (in progress while the container waits in
  ContainerCreating / ErrImagePull / ImagePullBackOff); ``container_start`` = the container's
  ``state.running.startedAt``. A new ``containerID`` (the kubelet restarted the container,
  ``restartCount`` went up) reports a new ``container_start``, which the tracker turns into a new
  attempt. Each platform event is reported once per (pod, container id).
* **the engine container's log** through the pod log API
  (``CoreV1Api.read_namespaced_pod_log(follow=True, timestamps=True, _preload_content=False)``),
  streamed by one worker thread per followed container. Kubelet timestamps are stripped before the
  tracker sees a line (the engine's own stamps are the timeline); they serve to resume after a
  dropped connection: the client has no ``sinceTime``, so the follower reconnects with
  ``sinceSeconds`` (plus a margin) and drops every line stamped before, or at, the last line it
  already fed (counting lines that share one stamp). A follow that ends is not resumed when the
  pod is gone or its container changed/terminated: ``observe`` starts a follower for the new
  container. Memory is bounded: the tracker is bounded, a partial line is capped at 1 MiB, and a
  CR follows at most ``max_pods`` pods.

Level-triggered: tracker transitions only ``enqueue(key)``; ``reconcile`` calls ``observe`` and
decides from the snapshot, never from the event. Phase budgets (``check_stall``) are checked in
``observe`` on the log's clock (wall clock shifted by the engine-stamp/kubelet-stamp offset of the
latest line), so a stall shows up at the latest at the next resync.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpustack_k3.operator.podstate import parse_time
from gpustack_k3.operator.seams import ColdStartSnapshot, Key

log = logging.getLogger("gpustack_k3.operator.coldstart")

MAX_PARTIAL = 1 << 20       # a log "line" without newline longer than this is passed on in pieces
RESUME_MARGIN_S = 5         # extra seconds asked for on reconnect (clock skew); duplicates are dropped
READ_TIMEOUT_S = 900        # a silent follow is re-opened after this long (dead connections)
ENGINE_CONTAINER = "engine"

# Catalog marker ids that tell whether compiled graphs came from the compile cache (vLLM
# compilation/backends.py:310-316@0.33.0 "Directly load the compiled graph(s) ... from the cache")
# or were compiled (backends.py:416-421 "Compiling a graph for ...", decorators.py:743@0.32.0
# "saved AOT compiled function"). The keys are read from the catalog, not repeated here.
CACHE_HIT_MARKERS = ("vllm-compile-cache-hit",)
CACHE_MISS_MARKERS = ("vllm-compiling-graph", "vllm-aot-saved")


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


class LineDedup:
    """Split a kubelet-stamped stream (``<RFC3339> <text>\\n``) into text, dropping lines already
    fed before a reconnect: everything stamped before the last fed stamp, and as many lines stamped
    exactly at it as were fed. Pure and bounded (one partial line)."""

    def __init__(self) -> None:
        self.last_stamp: str | None = None
        self.last_ts: float | None = None
        self.at_last = 0           # lines fed with stamp == last_stamp
        self._skip_same = 0        # after a reconnect: lines at last_stamp still to drop
        self._partial = b""

    def reconnect(self) -> None:
        self._partial = b""
        self._skip_same = self.at_last

    def feed(self, chunk: bytes) -> bytes:
        data = self._partial + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > MAX_PARTIAL:  # an endless line: pass it on without its stamp logic
                self._partial = b""
                return data
            self._partial = data
            return b""
        self._partial = data[cut + 1:]
        out = []
        for line in data[:cut + 1].splitlines(keepends=True):
            stamp, sep, text = line.partition(b" ")
            s = stamp.decode("ascii", "replace")
            ts = parse_time(s) if sep else None
            if ts is None:  # not stamped (should not happen with timestamps=true): keep it
                out.append(line)
                continue
            if self.last_ts is not None:
                if ts < self.last_ts:
                    continue
                if s == self.last_stamp and self._skip_same > 0:
                    self._skip_same -= 1
                    continue
            if s == self.last_stamp:
                self.at_last += 1
            else:
                self.last_stamp, self.last_ts, self.at_last, self._skip_same = s, ts, 1, 0
            out.append(text)
        return b"".join(out)


class _PodTrack:
    def __init__(self, tracker: Any, namespace: str, name: str, uid: str, container: str) -> None:
        self.tracker = tracker
        self.namespace, self.name, self.uid, self.container = namespace, name, uid, container
        self.lock = threading.RLock()
        self.emitted: set[tuple[str, str]] = set()
        self.follower: _Follower | None = None
        self.followed_id: str | None = None
        self.cache: dict[int, bool] = {}        # attempt → compile cache warm (True) / compiled (False)
        self.offset: float | None = None         # engine stamp − kubelet stamp of the latest line
        self.previous_read = False
        self.caught_up = threading.Event()   # the current container's log backlog has been read


class _Follower(threading.Thread):
    def __init__(self, bridge: PodLogColdStart, key: Key, track: _PodTrack, container_id: str) -> None:
        super().__init__(name=f"podlog-{track.name}", daemon=True)
        self.bridge, self.key, self.track, self.container_id = bridge, key, track, container_id
        self.stop_event = threading.Event()
        self.dedup = LineDedup()
        self.ended = threading.Event()
        self._resp: Any = None
        self.reconnects = 0

    def stop(self) -> None:
        self.stop_event.set()
        resp = self._resp
        if resp is not None:
            self.abort(resp)

    @staticmethod
    def abort(resp: Any) -> None:
        """Break a blocked read from another thread (``close`` would wait for the reader's lock)."""
        try:
            if hasattr(resp, "shutdown"):   # urllib3 >= 2.3
                resp.shutdown()
            else:
                sock = getattr(getattr(resp, "_connection", None), "sock", None)
                if sock is not None:
                    import socket
                    sock.shutdown(socket.SHUT_RDWR)
        except Exception as e:  # already closed
            log.debug("closing a log stream: %s", e)

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # never let a log follower take the operator down
            log.exception("log follower of %s/%s failed", self.track.namespace, self.track.name)
        finally:
            self.ended.set()

    def _run(self) -> None:
        from kubernetes.client.rest import ApiException
        failures = 0
        while not self.track.caught_up.is_set() and not self.stop_event.is_set():
            try:  # the backlog first (an operator restart): until it is read the status stands
                self._stream(None, follow=False)
                self.track.caught_up.set()
                self.bridge.enqueue(self.key)
            except Exception as e:
                if self.stop_event.is_set() or not self._still_current():
                    self.track.caught_up.set()
                    self.bridge.enqueue(self.key)
                    return
                failures += 1
                log.debug("log backlog of %s/%s: %s", self.track.namespace, self.track.name, e)
                self.stop_event.wait(min(10.0, 0.2 * 2 ** min(failures, 6)))
        failures = 0
        while not self.stop_event.is_set():
            try:
                self._stream(None)
                failures = 0
            except ApiException as e:
                if e.status in (400, 404) and not self._still_current():  # pod or container gone
                    return
                failures += 1
            except Exception as e:  # connection dropped, read timeout
                if self.stop_event.is_set():
                    return
                log.debug("log stream of %s/%s broke: %s", self.track.namespace, self.track.name, e)
                failures += 1
            if self.stop_event.is_set() or not self._still_current():
                return
            self.reconnects += 1
            self.stop_event.wait(min(10.0, 0.2 * 2 ** min(failures, 6)))

    def _stream(self, since: int | None, follow: bool = True) -> None:
        if since is None and self.dedup.last_ts is not None:
            since = max(1, math.ceil(time.time() - self.dedup.last_ts) + RESUME_MARGIN_S)
            self.dedup.reconnect()
        kw: dict[str, Any] = {"container": self.track.container, "follow": follow, "timestamps": True,
                              "_preload_content": False, "_request_timeout": (10, READ_TIMEOUT_S)}
        if since is not None:
            kw["since_seconds"] = since
        resp = self.bridge.core.read_namespaced_pod_log(self.track.name, self.track.namespace, **kw)
        self._resp = resp
        try:
            for chunk in resp.stream(65536, decode_content=True):
                if self.stop_event.is_set():
                    return
                text = self.dedup.feed(chunk)
                if text:
                    self.bridge._feed(self.key, self.track, text, self.dedup.last_ts)
        finally:
            self._resp = None
            resp.release_conn()

    def _still_current(self) -> bool:
        """Resume only while the same container of the same pod is running."""
        from kubernetes.client.rest import ApiException
        try:
            pod = self.bridge.core.read_namespaced_pod(self.track.name, self.track.namespace,
                                                       _preload_content=False, _request_timeout=(10, 30))
            import json
            doc = json.loads(pod.data)
        except ApiException as e:
            return e.status not in (404, 410)  # API trouble: try again later
        except Exception:
            return True
        if (doc.get("metadata") or {}).get("uid") != self.track.uid or (doc.get("metadata") or {}).get(
                "deletionTimestamp"):
            return False
        cs = container_status(doc, self.track.container)
        if cs.get("containerID") != self.container_id:
            return False
        return "running" in (cs.get("state") or {}) and bool((cs.get("state") or {}).get("running"))


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
        from gpustack_k3.coldstart import load_catalog
        cat = load_catalog()
        by_id = {m.id: m for m in cat.markers}
        self._hit_keys = tuple(by_id[i].key.encode() for i in CACHE_HIT_MARKERS if i in by_id)
        self._miss_keys = tuple(by_id[i].key.encode() for i in CACHE_MISS_MARKERS if i in by_id)

    # ------------------------------------------------------------------ the seam
    def observe(self, key: Key, pods: Sequence[Mapping[str, Any]]) -> ColdStartSnapshot | None:
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
        return _combine(snaps)

    def report_phase(self, key: Key, pod_uid: str, phase: str, start: float | None, end: float | None,
                     details: dict | None = None) -> bool:
        """A phase someone else observed for one pod (the post-Ready warm-up: ``warm``), in wall-clock
        seconds; shifted onto the log's clock by the pod's engine-stamp offset. False: pod not followed."""
        with self._lock:
            track = self._tracks.get(key, {}).get(pod_uid)
        if track is None:
            return False
        with track.lock:
            off = track.offset or 0.0
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
    def followers(self) -> list[_Follower]:
        with self._lock:
            return [t.follower for ts in self._tracks.values() for t in ts.values() if t.follower is not None]

    def _new_track(self, key: Key, pod: Mapping[str, Any]) -> _PodTrack:
        from gpustack_k3.coldstart import ColdStartTracker
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
        created = parse_time(m.get("creationTimestamp"))
        sched = conds.get("PodScheduled") or {}
        scheduled_at = parse_time(sched.get("lastTransitionTime")) if sched.get("status") == "True" else None
        cs = container_status(pod, track.container)
        state = cs.get("state") or {}
        cid = cs.get("containerID") or ""
        started = _started_at(cs)
        t = track.tracker
        with track.lock:
            def once(tag: tuple[str, str], fn: Callable[[], None]) -> None:
                if tag not in track.emitted:
                    track.emitted.add(tag)
                    fn()
            if created is not None and ("scheduled", "end") not in track.emitted:
                once(("scheduled", "start"), lambda: t.platform_event("scheduled", created))
            if scheduled_at is not None:
                once(("scheduled", "end"), lambda: t.platform_event("scheduled", created or scheduled_at, scheduled_at))
                waiting = (state.get("waiting") or {}).get("reason")
                if started is None and ("image_pull", "end") not in track.emitted:
                    once(("image_pull", "start"), lambda: t.platform_event(
                        "image_pull", scheduled_at, None, {"waiting": waiting} if waiting else None))
            if started is not None and cid:
                first_container = int(cs.get("restartCount") or 0) == 0
                if (scheduled_at is not None and first_container) or ("image_pull", "start") in track.emitted:
                    # pulled and created by the first start (a restart's startedAt says nothing of the pull)
                    first_start = started
                    once(("image_pull", "end"), lambda: t.platform_event(
                        "image_pull", scheduled_at or first_start, first_start))
                if not track.previous_read and int(cs.get("restartCount") or 0) > 0 and not track.emitted - {
                        ("scheduled", "start"), ("scheduled", "end")}:
                    track.previous_read = True
                    self._read_previous(key, track)  # an operator restart: recover the earlier attempt
                track.previous_read = True
                once(("container_start", cid), lambda: t.platform_event(
                    "container_start", started, started,
                    {"containerID": cid, "restartCount": int(cs.get("restartCount") or 0)}))

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
            self._feed(key, track, data + (b"" if data.endswith(b"\n") else b"\n"), None)

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
                track.caught_up.set()   # a new container: its log starts empty, nothing to catch up
            track.followed_id = cid
            track.follower = _Follower(self, key, track, cid)
            track.follower.start()

    def _feed(self, key: Key, track: _PodTrack, text: bytes, kubelet_ts: float | None) -> None:
        with track.lock:
            t = track.tracker
            t.feed(text)
            att = t.attempts[-1].index
            before = track.cache.get(att)
            if self._miss_keys and any(k in text for k in self._miss_keys):
                track.cache[att] = False       # it compiled (a cache hit elsewhere does not make it warm)
            elif self._hit_keys and before is None and any(k in text for k in self._hit_keys):
                track.cache[att] = True
            if track.cache.get(att) != before:
                self.enqueue(key)
            if kubelet_ts is not None:
                last = t.report().last
                if last.status == "in-progress" and last.end is not None:
                    track.offset = last.end - kubelet_ts

    def _snapshot(self, track: _PodTrack) -> ColdStartSnapshot:
        with track.lock:
            t = track.tracker
            if track.offset is not None and t.budgets:
                t.check_stall(self.clock() + track.offset)
            snap = snapshot_of(t.report(), track.cache.get(t.attempts[-1].index), track.name)
            if track.follower is not None and not track.caught_up.is_set():
                snap["syncing"] = True
            return snap


def _iso_z(v: Any) -> str | None:
    from gpustack_k3.coldstart.tracker import iso
    s = iso(v) if isinstance(v, (int, float)) else v
    return f"{s}Z" if s and not s.endswith("Z") else s


def snapshot_of(rep: Any, cache_warm: bool | None, pod: str | None = None) -> ColdStartSnapshot:
    """A tracker report → the snapshot ``decide`` reads (pure). Times are RFC 3339 UTC strings;
    ``totalSeconds`` is container start → serving of the current attempt (null until serving)."""
    last = rep.last
    by = {p.name: p for p in last.phases}
    phases = []
    for p in last.phases:
        phases.append({"name": p.name, "start": _iso_z(p.start), "end": _iso_z(p.end),
                       "seconds": None if p.seconds is None else round(p.seconds, 3)})
    ready = by.get("server_ready")
    serving = last.status == "ready" or (ready is not None and ready.end is not None)
    total = None
    if serving and ready is not None and ready.end is not None:
        origin = by.get("container_start")
        start = origin.start if origin is not None and origin.start is not None else last.start
        total = round(ready.end - start, 3) if start is not None else None
    warm = by.get("warm")
    verdict = None
    if last.status == "failed":
        stalled = (last.reason or "").startswith("stalled in ")
        verdict = {"phase": "Degraded" if stalled else "Failed",
                   "reason": "PhaseOverBudget" if stalled else "EngineCrashed",
                   "message": f"attempt {last.index}: cold start failed in {last.failed_phase or 'an unknown phase'}: "
                              f"{last.reason or 'no reason printed'}"}
    done = {p.name for p in last.phases if p.end is not None and not (p.details or {}).get("failed")}
    snap: ColdStartSnapshot = {
        "attempt": last.index, "cacheWarm": cache_warm, "phases": phases,
        "current": last.current_phase if last.status == "in-progress" else None,
        "totalSeconds": total,
        "weightsLoaded": "weights_load" in done,
        "graphsCaptured": "cuda_graphs" in done,
        "graphsSkipped": serving and "cuda_graphs" not in by,  # eager engines capture no graphs
        "serving": serving, "warm": warm is not None and warm.end is not None, "verdict": verdict,
    }
    if last.status == "failed":
        snap["failedPhase"] = last.failed_phase
        snap["reason"] = last.reason
    if rep.engine:
        snap["engine"] = rep.engine
    if pod:
        snap["pod"] = pod
    return snap


_ORDER = ("scheduled", "image_pull", "container_start", "process_start", "weights_download", "weights_load",
          "compile", "kv_cache", "cuda_graphs", "server_ready", "warm")


def _combine(snaps: list[ColdStartSnapshot]) -> ColdStartSnapshot:
    """One resource, several engine pods: a failed pod speaks first, then the least advanced one
    (the resource is as far as its slowest pod); among serving pods the slowest cold start."""
    if len(snaps) == 1:
        return snaps[0]
    if any(s.get("syncing") for s in snaps):
        return {**snaps[0], "syncing": True}
    failed = [s for s in snaps if s.get("verdict")]
    if failed:
        return failed[0]
    starting = [s for s in snaps if not s.get("serving")]
    if starting:
        return min(starting, key=lambda s: _ORDER.index(s["current"]) if s.get("current") in _ORDER else -1)
    return max(snaps, key=lambda s: s.get("totalSeconds") or 0.0)


def coldstart_factory(api_client: Any, enqueue: Callable[[Key], None], metrics: Any = None,
                      **kw: Any) -> PodLogColdStart:
    """The operator's default ``ColdStartFactory``."""
    return PodLogColdStart(api_client, enqueue, metrics, **kw)
