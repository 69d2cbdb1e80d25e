"""List+watch informers feeding thread-safe local caches (client-go reflector semantics).

A reflector lists (paginated), then watches from the list's resourceVersion; a watch that ends
(server ``timeoutSeconds``) resumes from the last seen resourceVersion (BOOKMARKs advance it);
410 Gone/Expired — as an ERROR event or as an HTTP status — forces a relist, whose diff against
the cache is delivered as ADDED/MODIFIED/DELETED; other failures back off with jitter and resume.

(The official client's ``kubernetes.informer.SharedInformer`` is not used: it reads ``resp.items``
as an attribute, which breaks on the dicts custom-object lists return, and it retries errors with a
fixed sleep or not at all.)
"""
from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Hashable
from typing import Any

from gpustack_k3.core import retry

log = logging.getLogger("gpustack_k3.operator")

ObjKey = tuple[str, str]  # (namespace, name)


def obj_key(obj: dict) -> ObjKey:
    m = obj.get("metadata") or {}
    return (m.get("namespace") or "", m.get("name") or "")


def _rv_int(obj: dict | None) -> int | None:
    try:
        return int((obj or {}).get("metadata", {}).get("resourceVersion"))
    except (TypeError, ValueError):
        return None


class Store:
    """Objects by (namespace, name) plus an optional secondary index (e.g. the owning resource)."""

    TOMBSTONES = 4096   # deletions remembered (newest kept) so a late write result cannot resurrect an object

    def __init__(self, index_fn: Callable[[dict], Hashable | None] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[ObjKey, dict] = {}
        self._deleted: dict[ObjKey, int] = {}   # key -> resourceVersion of its deletion
        self._index_fn = index_fn
        self._index: dict[Hashable, set[ObjKey]] = {}

    def _unindex(self, key: ObjKey, obj: dict) -> None:
        if self._index_fn is not None:
            ik = self._index_fn(obj)
            if ik is not None:
                s = self._index.get(ik)
                if s is not None:
                    s.discard(key)
                    if not s:
                        del self._index[ik]

    def _put(self, key: ObjKey, obj: dict) -> None:
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        if self._index_fn is not None:
            ik = self._index_fn(obj)
            if ik is not None:
                self._index.setdefault(ik, set()).add(key)

    def upsert(self, obj: dict, *, if_newer: bool = False) -> bool:
        """Store ``obj``; with ``if_newer`` keep a cached copy whose resourceVersion is newer or the
        same (our own write results are recorded before the watch echoes them). Returns whether
        the cache changed."""
        key = obj_key(obj)
        with self._lock:
            new = _rv_int(obj)
            if if_newer:
                have = _rv_int(self._items.get(key))
                if have is not None and new is not None and have >= new:
                    return False
                gone = self._deleted.get(key)
                if gone is not None and (new is None or new <= gone):
                    return False   # the answer to a write that the object's deletion already overtook
            if new is not None and self._deleted.get(key, new) < new:
                del self._deleted[key]   # created again after its deletion
            self._put(key, obj)
            return True

    def remove(self, obj: dict) -> None:
        key = obj_key(obj)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            rv = _rv_int(obj) or _rv_int(old)
            if rv is not None:
                self._tombstone(key, rv)

    def _tombstone(self, key: ObjKey, rv: int) -> None:
        self._deleted.pop(key, None)
        self._deleted[key] = rv
        while len(self._deleted) > self.TOMBSTONES:
            del self._deleted[next(iter(self._deleted))]

    def replace(self, namespace: str | None, items: list[dict], rv: str | None = None) -> list[tuple[str, dict]]:
        """Replace the objects of ``namespace`` (None: all) with a list taken at resourceVersion ``rv``;
        return the changes as events. What the list no longer has is remembered as deleted at ``rv``."""
        list_rv = _rv_int({"metadata": {"resourceVersion": rv}})
        fresh = {obj_key(o): o for o in items}
        events: list[tuple[str, dict]] = []
        with self._lock:
            for key in [k for k in self._items if namespace is None or k[0] == namespace]:
                if key not in fresh:
                    old = self._items.pop(key)
                    self._unindex(key, old)
                    events.append(("DELETED", old))
                    if list_rv is not None:
                        self._tombstone(key, list_rv)
            for key, obj in fresh.items():
                old = self._items.get(key)
                if old is None:
                    events.append(("ADDED", obj))
                elif old != obj:
                    events.append(("MODIFIED", obj))
                self._put(key, obj)
        return events

    def get(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            return self._items.get((namespace, name))

    def list_keys(self) -> list[ObjKey]:
        with self._lock:
            return list(self._items)

    def by_index(self, ik: Hashable) -> list[dict]:
        with self._lock:
            return [self._items[k] for k in self._index.get(ik, ()) if k in self._items]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class Informer:
    def __init__(self, kube: Any, api_version: str, kind: str, namespace: str | None, store: Store,
                 on_event: Callable[[str, dict], None], *, label_selector: str | None = None,
                 watch_timeout_s: int = 300, max_backoff_s: float = 30.0,
                 on_relist: Callable[[str], None] | None = None) -> None:
        self.kube, self.api_version, self.kind, self.namespace = kube, api_version, kind, namespace
        self.store, self.on_event, self.label_selector = store, on_event, label_selector
        self.watch_timeout_s, self.max_backoff_s = watch_timeout_s, max_backoff_s
        self.on_relist = on_relist
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}-{namespace or 'all'}", daemon=True)
        self.relists = 0
        self.resource_version: str | None = None

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
            except Exception:  # already closed
                pass

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _emit(self, etype: str, obj: dict) -> None:
        try:
            self.on_event(etype, obj)
        except Exception:
            log.exception("event handler failed for %s %s", self.kind, obj_key(obj))

    def _relist(self) -> None:
        items, rv = self.kube.list(self.api_version, self.kind, self.namespace, label_selector=self.label_selector)
        for etype, obj in self.store.replace(self.namespace, items, rv):
            self._emit(etype, obj)
        self.resource_version = rv
        self.relists += 1
        if self.on_relist is not None:
            self.on_relist(self.kind)
        self.synced.set()

    def _run(self) -> None:
        from kubernetes.client.rest import ApiException
        failures = 0
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self._relist()
                timeout = int(self.watch_timeout_s * random.uniform(1.0, 2.0))
                for ev in self.kube.watch(self.api_version, self.kind, self.namespace,
                                          resource_version=self.resource_version, label_selector=self.label_selector,
                                          timeout_s=timeout, on_response=self._set_resp):
                    if self._stop.is_set():
                        break
                    etype, obj = ev.get("type"), ev.get("object") or {}
                    if etype == "ERROR":
                        code = obj.get("code")
                        if code == 410:
                            log.info("watch %s expired (%s): relisting", self.kind, obj.get("message"))
                            self.resource_version = None
                            break
                        raise ApiException(status=code or 500, reason=obj.get("message") or "watch error")
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if etype == "BOOKMARK":
                        self.resource_version = rv or self.resource_version
                        continue
                    self.resource_version = rv or self.resource_version
                    if etype in ("ADDED", "MODIFIED"):
                        # the controller may already hold this or a newer copy (the answer to its own
                        # write): then the event tells nothing new and triggers nothing
                        if not self.store.upsert(obj, if_newer=True):
                            continue
                    elif etype == "DELETED":
                        self.store.remove(obj)
                    else:
                        continue
                    self._emit(etype, obj)
                failures = 0
            except ApiException as e:
                if self._stop.is_set():
                    break
                if e.status == 410:
                    self.resource_version = None
                    continue
                failures += 1
                self._sleep_backoff(failures, e)
            except Exception as e:
                if self._stop.is_set():
                    break
                failures += 1
                self._sleep_backoff(failures, e)
            finally:
                self._resp = None

    def _set_resp(self, resp: Any) -> None:
        self._resp = resp
        if self._stop.is_set():
            self.stop()

    def _sleep_backoff(self, failures: int, exc: BaseException) -> None:
        delay = retry.delay(failures + 1, base_s=0.1, max_s=self.max_backoff_s)
        log.warning("%s informer (%s): %s; retrying in %.2fs", self.kind, self.namespace or "all namespaces",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__, delay)
        self._stop.wait(delay)
