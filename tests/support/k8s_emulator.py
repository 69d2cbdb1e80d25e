"""A Kubernetes API emulator over real HTTP for tests and benchmarks, built on kmock 0.8.

kmock provides the HTTP server (``kmock.Server``, aiohttp on 127.0.0.1:random), the request
journal (``kmock.Request``), API discovery (``kmock.KubernetesScaffold`` serving ``/api``,
``/apis``, ``/apis/G/V`` from declared ``kmock.ResourceInfo``) and the Status error shape.
kmock's own ``KubernetesEmulator`` store merges dicts blindly and has none of what a controller
relies on (see shared/research/testinfra.md §2), so the object store here is our own:

* server metadata: uid, numeric resourceVersion (one global counter), generation bumped on
  changes outside metadata/status only, creationTimestamp, generateName; 201 on create,
  409 AlreadyExists, 404 NotFound, 422 on PUT without resourceVersion, namespaces must exist;
* label/field selectors on list and watch; list kind ``XList``; ``limit``/``continue``;
* watch: initial ADDED for "now" (no/0 resourceVersion), resume from a resourceVersion out of a
  bounded event history, ``ERROR`` 410 Expired for a compacted version, ``timeoutSeconds``,
  BOOKMARK at the end when ``allowWatchBookmarks``; objects moving out of a label selector arrive
  as DELETED (as the real watch cache does);
* ``/status`` subresource isolation (spec writes ignore status, status writes ignore the rest);
* PUT replace with resourceVersion conflict 409; PATCH as JSON patch, merge patch, strategic merge
  (built-ins only; 415 for custom resources, as the API does) and server-side apply
  (``application/apply-patch+yaml``, fieldManager required, ``force``, conflicts → 409, fields the
  manager stopped applying are removed), resourceVersion preconditions → 409; no-op writes do not
  bump the resourceVersion nor emit watch events;
* DELETE with finalizers (deletionTimestamp), preconditions, ``propagationPolicy`` Orphan or
  cascading ownerReferences garbage collection; deletecollection; namespace deletion;
* Events, coordination.k8s.io Leases, and any declared resource, generically;
* pod logs ``/api/v1/namespaces/NS/pods/NAME/log`` (container, follow, previous, tailLines,
  timestamps) fed by the test (``append_log``) — the test plays the kubelet;
* fault injection (next N matching requests answer a status and/or are delayed) and a write
  counter per (user agent, verb, resource) for benchmarks;
* objects stored as the real server stores them: built-in kinds get the server's defaults (Deployment
  strategy and limits, pod spec and container defaults, Service cluster IP and protocol, ...), resource
  quantities in canonical form ("1024Mi" -> "1Gi", 0.5 -> "500m"; 422 for a non-quantity), and workload
  status counts that are 0 left out where the Go types say ``omitempty``; custom resources of a CRD with a
  schema (ours: gpustack_k3.crd.manifest) are pruned to it, defaulted and type-checked (422 Invalid);
* authentication by bearer token and RBAC authorization from the Role/ClusterRole(Binding) objects in the
  store (``install``, ``service_account_token``): a request without a token is the test harness, an admin,
  as is the kubeconfig user ``emulator``; a 403 Forbidden is worded as the API server words it.

Use ``K8sEmulator`` (a context manager running the server in a background thread) from sync code,
or run ``python -m tests.support.k8s_emulator`` for a separate process (prints its URL as one
JSON line; ``GET /_emulator/writes`` returns the counters).
"""
from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import itertools
import json
import re
import threading
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp.web
import kmock
import yaml

from tests.support import k8s_semantics as sem

CRD_GROUP = "k3.gpustack.ai"
CRD_VERSION = "v1alpha1"
CRD_PLURAL = "k3deployments"
CRD_KIND = "K3Deployment"
# LeaderWorkerSet names (api/leaderworkerset/v1/leaderworkerset_types.go@v0.10.0:37-60); spelled here because the
# emulator is the cluster, not our product
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_KIND = "LeaderWorkerSet"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
LWS_LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"

VERSION_INFO = {"major": "1", "minor": "31", "gitVersion": "v1.31.0", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2024-08-13T07:28:49Z", "goVersion": "go1.22.5",
                "compiler": "gc", "platform": "linux/amd64"}

ALL_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
APPLY_CT = "application/apply-patch+yaml"
SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
               "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")
# Resources for which DELETE answers the deleted object rather than a Status (as the API does).
RETURNS_DELETED_OBJECT = {"pods", "namespaces"}


@dataclasses.dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    subresources: frozenset[str] = frozenset()
    shortnames: tuple[str, ...] = ()
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.api_version}/{self.plural}"


DEFAULT_RESOURCES = [
    Resource("", "v1", "namespaces", "Namespace", namespaced=False, subresources=frozenset({"status"})),
    Resource("", "v1", "pods", "Pod", subresources=frozenset({"status", "log"}), shortnames=("po",)),
    Resource("", "v1", "services", "Service", subresources=frozenset({"status"}), shortnames=("svc",)),
    Resource("", "v1", "configmaps", "ConfigMap", shortnames=("cm",)),
    Resource("", "v1", "secrets", "Secret"),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", shortnames=("sa",)),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", subresources=frozenset({"status"})),
    Resource("", "v1", "events", "Event", shortnames=("ev",)),
    Resource("apps", "v1", "deployments", "Deployment", subresources=frozenset({"status", "scale"}),
             shortnames=("deploy",)),
    Resource("apps", "v1", "statefulsets", "StatefulSet", subresources=frozenset({"status", "scale"}),
             shortnames=("sts",)),
    Resource("apps", "v1", "replicasets", "ReplicaSet", subresources=frozenset({"status"}), shortnames=("rs",)),
    Resource("batch", "v1", "jobs", "Job", subresources=frozenset({"status"})),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", subresources=frozenset({"status"})),
    Resource("coordination.k8s.io", "v1", "leases", "Lease"),
    Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", shortnames=("netpol",)),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    Resource("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", custom=True),
    Resource("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor", custom=True),
    Resource("events.k8s.io", "v1", "events", "Event"),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
             namespaced=False, subresources=frozenset({"status"}), shortnames=("crd",)),
    Resource(LWS_GROUP, "v1", "leaderworkersets", LWS_KIND,
             subresources=frozenset({"status", "scale"}), shortnames=("lws",), custom=True),
    Resource(CRD_GROUP, CRD_VERSION, CRD_PLURAL, CRD_KIND, subresources=frozenset({"status"}),
             shortnames=("k3dep",), custom=True),
    # NVIDIA DRA driver v25.12.0 (resource.nvidia.com_computedomains.yaml) and GAIE v1.6.0
    # (inference.networking.k8s.io_inferencepools.yaml): served without a controller of their own
    Resource("resource.nvidia.com", "v1beta1", "computedomains", "ComputeDomain", subresources=frozenset({"status"}),
             custom=True),
    Resource("inference.networking.k8s.io", "v1", "inferencepools", "InferencePool",
             subresources=frozenset({"status"}), custom=True),
]
DEFAULT_NAMESPACES = ("default", "kube-system")
ADMIN = sem.User("kubernetes-admin", ("system:masters", "system:authenticated"))
ADMIN_TOKEN = "emulator"     # the kubeconfig user of write_kubeconfig()


def _crd_schemas() -> dict[str, dict]:
    """Resource key -> openAPIV3Schema of the CRDs the emulator serves with a schema (ours)."""
    from gpustack_k3.crd.manifest import crd_manifest

    crd = crd_manifest()
    out = {}
    for v in crd["spec"]["versions"]:
        out[f"{crd['spec']['group']}/{v['name']}/{crd['spec']['names']['plural']}"] = v["schema"]["openAPIV3Schema"]
    return out


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers = details, headers

    def status(self) -> dict[str, Any]:
        out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            out["details"] = self.details
        return out


@dataclasses.dataclass
class Fault:
    """Answer the next ``times`` matching requests with ``status`` (None: serve normally) after
    sleeping ``delay`` seconds. ``times=None`` never runs out. Matching: method (GET, PATCH, ...),
    verb (get, list, watch, create, update, patch, apply, delete, deletecollection), regex on the path."""
    status: int | None = None
    times: int | None = 1
    delay: float = 0.0
    method: str | None = None
    verb: str | None = None
    path: str | None = None
    hits: int = 0

    def matches(self, method: str, verb: str, path: str) -> bool:
        return ((self.method is None or self.method.upper() == method)
                and (self.verb is None or self.verb == verb)
                and (self.path is None or re.search(self.path, path) is not None))

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times


@dataclasses.dataclass
class _Target:
    res: Resource | None
    namespace: str | None
    name: str | None
    subresource: str | None
    group: str | None
    version: str | None
    unknown: bool = False  # a resource path whose resource is not served


class _Watcher:
    def __init__(self, res: Resource, namespace: str | None, labels: str | None, fields: str | None):
        self.res, self.namespace, self.labels, self.fields = res, namespace, labels, fields
        self.queue: asyncio.Queue[dict] = asyncio.Queue()

    def sees(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        return sem.matches(obj, self.labels, self.fields)

    def translate(self, etype: str, obj: dict, old: dict | None) -> dict | None:
        now, before = self.sees(obj), self.sees(old)
        if etype == "MODIFIED":
            if now and not before:
                etype = "ADDED"
            elif before and not now:
                etype = "DELETED"
            elif not now:
                return None
        elif not now:
            return None
        return {"type": etype, "object": obj}


class _LogBuffer:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []  # (timestamp, text chunk)
        self.previous: list[tuple[str, str]] | None = None
        self.closed = False
        self.changed = asyncio.Event()

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EmulatorHandler(kmock.KubernetesScaffold):
    """The aiohttp handler: kmock's scaffold (discovery, errors, journal) + our object store.

    All state lives on the server's event loop; use ``K8sEmulator`` for thread-safe access."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback["get /version/"] << VERSION_INFO
        self.resources_by_key: dict[str, Resource] = {}
        self.store: dict[str, dict[tuple[str | None, str], dict]] = {}
        self.owners: dict[tuple[str, str | None, str], dict[str, set]] = {}
        self.rv = 0
        self.history: deque[tuple[int, str, str, dict, dict | None]] = deque(maxlen=10_000)
        self.compacted_rv = 0
        self.watchers: dict[str, set[_Watcher]] = {}
        self.logs: dict[tuple[str, str, str], _LogBuffer] = {}
        self.faults: list[Fault] = []
        self.write_counter: Counter[tuple[str, str, str]] = Counter()
        self.change_count = 0
        self.journal_enabled = True
        self._uids: dict[str, tuple[str, str | None, str]] = {}
        self._dependents: dict[str, set[tuple[str, str | None, str]]] = {}
        self._names = itertools.count(1)
        self._cluster_ips = itertools.count(10)
        self.schemas: dict[str, dict] = _crd_schemas()
        self.tokens: dict[str, sem.User] = {ADMIN_TOKEN: ADMIN}
        self.field_validation = "Warn"    # of the request being served (?fieldValidation=Strict|Warn|Ignore)
        self.warnings: list[str] = []     # Warning headers of the request being served
        for res in DEFAULT_RESOURCES:
            self.add_resource(res)
        for ns in DEFAULT_NAMESPACES:
            self.create_object(self.resources_by_key["v1/namespaces"], None,
                               {"metadata": {"name": ns}}, manager="emulator")

    # ------------------------------------------------------------------ registry
    def add_resource(self, res: Resource) -> None:
        self.resources_by_key[res.key] = res
        self.store.setdefault(res.key, {})
        self.resources[res.key] = kmock.ResourceInfo(
            kind=res.kind, namespaced=res.namespaced, singular=res.kind.lower(),
            verbs=set(ALL_VERBS), shortnames=set(res.shortnames),
            subresources=set(res.subresources) - {"log"})

    async def _serve_version(self, request: Any) -> Any:
        """kmock's APIResourceList, corrected: subresources carry no short names or categories
        (kubectl otherwise warns that ``k3dep`` could also mean ``k3deployments/status``)."""
        doc = await super()._serve_version(request)
        for entry in doc.get("resources", []):
            if "/" in entry.get("name", ""):
                entry["shortNames"], entry["categories"] = [], []
                entry["verbs"] = ["get", "patch", "update"]
        return doc

    def _resource(self, group: str, version: str, plural: str) -> Resource | None:
        key = f"{group}/{version}/{plural}" if group else f"{version}/{plural}"
        return self.resources_by_key.get(key)

    # ------------------------------------------------------------------ HTTP entry
    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw.read()
        target = self._parse_path(raw.path)
        data: Any = None
        if body:
            try:
                data = json.loads(body)
            except ValueError:
                data = None
        req = kmock.Request(
            id=len(self._requests), raw_request=raw, url=raw.url, method=raw.method,
            params=dict(raw.query), headers=dict(raw.headers), body=body,
            text=body.decode("utf-8", "replace"), data=data,
            resource=(kmock.resource(group=target.group, version=target.version,
                                     plural=target.res.plural if target.res else None)
                      if target.group is not None else None),
            namespace=target.namespace, name=target.name, subresource=target.subresource)
        if self.journal_enabled:
            self._requests.append(req)
        try:
            if raw.path.startswith("/_emulator/"):
                return await self._serve_control(raw)
            verb = self._verb(raw, target)
            fault = self._take_fault(raw.method, verb, raw.path)
            if raw.method in ("POST", "PUT", "PATCH", "DELETE") and target.res is not None:
                agent = raw.headers.get("User-Agent", "")
                label = target.res.plural + (f"/{target.subresource}" if target.subresource else "")
                self.write_counter[(agent, verb, label)] += 1
            if fault is not None:
                if fault.delay:
                    await asyncio.sleep(fault.delay)
                if fault.status is not None:
                    return await self._fault_response(raw, verb, fault.status)
            user = self._authenticate(raw)
            if target.res is None:
                if target.unknown:
                    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")
                parts = [p for p in raw.path.split("/") if p]
                if len(parts) == 3 and parts[0] == "apis" and not any(
                        r.group == parts[1] and r.version == parts[2] for r in self.resources_by_key.values()):
                    # a group/version no CRD serves (e.g. LWS not installed): 404, as the API server answers
                    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")
                return await self._discovery(req)   # every authenticated user may read it
            self._authorize(user, target, verb)
            return await self._dispatch(raw, target, verb, body)
        except ApiError as e:
            return aiohttp.web.json_response(e.status(), status=e.code, headers=e.headers)
        except Exception as e:  # an emulator bug: answer like the API would, with the trace for debugging
            return aiohttp.web.json_response(
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
                 "reason": "InternalError", "message": f"emulator error: {e!r}",
                 "details": {"causes": [{"message": traceback.format_exc()}]}}, status=500)

    async def _discovery(self, req: kmock.Request) -> aiohttp.web.StreamResponse:
        """kmock's discovery reactions. They match only requests in kmock's journal (``request in
        payload._source`` filters the journal), so without ``journal_enabled`` the request is journalled for
        the time of the answer and dropped again (else every discovery request answered 500)."""
        if self.journal_enabled:
            return await super()._handle(req)
        self._requests.append(req)
        try:
            return await super()._handle(req)
        finally:
            self._requests.remove(req)

    def _parse_path(self, path: str) -> _Target:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        elif len(parts) == 2 and parts[0] == "apis":
            return _Target(None, None, None, None, parts[1], None)
        else:
            return _Target(None, None, None, None, None, None)
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and not (
                group == "" and len(rest) == 3 and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return _Target(None, None, None, None, group, version)
        res = self._resource(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = "/".join(rest[2:]) or None
        if res is None:
            return _Target(None, namespace, name, sub, group, version, unknown=True)
        return _Target(res, namespace, name, sub, group, version)

    @staticmethod
    def _verb(raw: aiohttp.web.BaseRequest, t: _Target) -> str:
        m = raw.method
        if m == "GET":
            return "watch" if raw.query.get("watch") in ("true", "1") else ("get" if t.name else "list")
        if m == "POST":
            return "create"
        if m == "PUT":
            return "update"
        if m == "PATCH":
            return "apply" if raw.headers.get("Content-Type", "").startswith(APPLY_CT) else "patch"
        if m == "DELETE":
            return "delete" if t.name else "deletecollection"
        return m.lower()

    def _authenticate(self, raw: aiohttp.web.BaseRequest) -> sem.User:
        header = raw.headers.get("Authorization", "")
        if not header:
            return ADMIN          # the test harness
        token = header.removeprefix("Bearer ").strip()
        user = self.tokens.get(token)
        if user is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return user

    def _authorize(self, user: sem.User, t: _Target, verb: str) -> None:
        res = t.res
        assert res is not None
        attrs = sem.Attributes("patch" if verb == "apply" else verb, res.group, res.plural, t.subresource,
                               t.namespace if res.namespaced else None, t.name)
        if user.admin:
            return
        roles = {(m["metadata"].get("namespace"), m["metadata"]["name"]): m
                 for key in ("rbac.authorization.k8s.io/v1/roles", "rbac.authorization.k8s.io/v1/clusterroles")
                 for m in self.store[key].values()}
        bindings = [b for key in ("rbac.authorization.k8s.io/v1/rolebindings",
                                  "rbac.authorization.k8s.io/v1/clusterrolebindings")
                    for b in self.store[key].values()]
        if not sem.rbac_allows(user, attrs, roles, bindings):
            raise ApiError(403, "Forbidden", sem.forbidden_message(user, attrs),
                           {"name": t.name, "group": res.group, "kind": res.plural})

    def _take_fault(self, method: str, verb: str, path: str) -> Fault | None:
        for f in list(self.faults):
            if f.matches(method, verb, path):
                f.hits += 1
                if f.exhausted:
                    self.faults.remove(f)
                return f
        return None

    async def _fault_response(self, raw: aiohttp.web.BaseRequest, verb: str, code: int) -> aiohttp.web.StreamResponse:
        reasons = {409: "Conflict", 410: "Expired", 429: "TooManyRequests", 500: "InternalError",
                   503: "ServiceUnavailable", 504: "Timeout", 404: "NotFound", 403: "Forbidden"}
        err = ApiError(code, reasons.get(code, "Unknown"), f"injected fault: {code} for {raw.method} {raw.path}",
                       headers={"Retry-After": "1"} if code == 429 else None)
        if verb == "watch" and code == 410:
            # The API answers an expired watch with 200 and an ERROR event carrying the 410 Status.
            resp = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await resp.prepare(raw)
            await resp.write(json.dumps({"type": "ERROR", "object": err.status()}).encode() + b"\n")
            await resp.write_eof()
            return resp
        return aiohttp.web.json_response(err.status(), status=code, headers=err.headers)

    async def _serve_control(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if raw.path == "/_emulator/writes":
            return aiohttp.web.json_response({"writes": self.writes_table(), "resourceVersion": self.rv,
                                              "changes": self.change_count})
        if raw.path == "/_emulator/reset" and raw.method == "POST":
            self.write_counter.clear()
            self.change_count = 0
            self._requests.clear()
            return aiohttp.web.json_response({"ok": True})
        raise ApiError(404, "NotFound", f"unknown emulator control path {raw.path}")

    def writes_table(self) -> list[dict[str, Any]]:
        return [{"agent": a, "verb": v, "resource": r, "count": n}
                for (a, v, r), n in sorted(self.write_counter.items())]

    # ------------------------------------------------------------------ dispatch
    async def _dispatch(self, raw: aiohttp.web.BaseRequest, t: _Target, verb: str, body: bytes) -> aiohttp.web.StreamResponse:
        res = t.res
        assert res is not None
        q = raw.query
        if res.namespaced is False and t.namespace is not None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")
        if t.subresource and t.subresource not in res.subresources:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({raw.path})")
        manager = q.get("fieldManager") or raw.headers.get("User-Agent", "unknown").split("/")[0] or "unknown"
        self.field_validation, self.warnings = q.get("fieldValidation") or "Warn", []
        if t.subresource == "log":
            return await self._serve_log(raw, t)
        if verb == "watch":
            return await self._serve_watch(raw, res, t.namespace, q)
        if verb == "list":
            return self._json(self.list_objects(res, t.namespace, q.get("labelSelector"), q.get("fieldSelector"),
                                                limit=int(q["limit"]) if q.get("limit") else None,
                                                cont=q.get("continue")))
        if verb == "get":
            return self._json(self.get_object(res, t.namespace, t.name))
        if verb == "create":
            obj = self._body_dict(body)
            return self._json(self.create_object(res, t.namespace, obj, manager=manager), 201)
        if verb == "update":
            obj = self._body_dict(body)
            return self._json(self.replace_object(res, t.namespace, t.name, obj, t.subresource, manager))
        if verb == "apply":
            if not q.get("fieldManager"):
                raise ApiError(400, "BadRequest", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                                  "Required value: is required for apply patch")
            try:  # clients send JSON (valid YAML) almost always: take the fast path first
                cfg = json.loads(body)
            except ValueError:
                try:
                    cfg = yaml.load(body.decode(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                except yaml.YAMLError as e:
                    raise ApiError(400, "BadRequest", f"error decoding YAML: {e}") from None
            if not isinstance(cfg, dict):
                raise ApiError(400, "BadRequest", "apply patch must be an object")
            obj, created = self.apply_object(res, t.namespace, t.name, cfg, t.subresource, q["fieldManager"],
                                             force=q.get("force") in ("true", "1"))
            return self._json(obj, 201 if created else 200)
        if verb == "patch":
            ctype = raw.headers.get("Content-Type", "application/merge-patch+json").split(";")[0].strip()
            try:
                patch = json.loads(body) if body else None
            except ValueError as e:
                raise ApiError(400, "BadRequest", f"error decoding patch: {e}") from None
            return self._json(self.patch_object(res, t.namespace, t.name, patch, ctype, t.subresource, manager))
        if verb == "delete":
            opts = self._body_dict(body) if body else {}
            policy = q.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
            return self._json(self.delete_object(res, t.namespace, t.name, policy, opts.get("preconditions") or {}))
        if verb == "deletecollection":
            items = self.list_objects(res, t.namespace, q.get("labelSelector"), q.get("fieldSelector"))["items"]
            for o in items:
                self.delete_object(res, o["metadata"].get("namespace"), o["metadata"]["name"],
                                   q.get("propagationPolicy") or "Background", {})
            return self._json({**self.list_objects(res, t.namespace, "", "", limit=0), "items": items})
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {raw.path}")

    def _json(self, obj: Any, status: int = 200) -> aiohttp.web.Response:
        resp = aiohttp.web.Response(body=json.dumps(obj).encode(), status=status, content_type="application/json")
        for w in self.warnings:   # as the API server warns: 299 - "text"
            resp.headers.add("Warning", f'299 - {json.dumps(w)}')
        self.warnings = []
        return resp

    @staticmethod
    def _body_dict(body: bytes) -> dict:
        try:
            obj = json.loads(body) if body else None
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"error decoding body: {e}") from None
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "request body must be a JSON object")
        return obj

    # ------------------------------------------------------------------ store primitives
    def _not_found(self, res: Resource, name: str | None) -> ApiError:
        return ApiError(404, "NotFound", f'{res.plural}{"." + res.group if res.group else ""} "{name}" not found',
                        {"name": name, "group": res.group, "kind": res.plural})

    def _check_ns(self, res: Resource, namespace: str | None) -> None:
        if res.namespaced and namespace is None:
            raise ApiError(400, "BadRequest", f"the namespace of the {res.kind} is not set")
        if res.namespaced and (None, namespace) not in self.store["v1/namespaces"]:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                           {"name": namespace, "kind": "namespaces"})

    def _lookup(self, res: Resource, namespace: str | None, name: str | None) -> dict:
        obj = self.store[res.key].get((namespace if res.namespaced else None, name or ""))
        if obj is None:
            raise self._not_found(res, name)
        return obj

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _emit(self, res: Resource, etype: str, obj: dict, old: dict | None) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        if len(self.history) == self.history.maxlen:
            self.compacted_rv = self.history[0][0]
        self.history.append((rv, res.key, etype, obj, old))
        for w in list(self.watchers.get(res.key, ())):
            ev = w.translate(etype, obj, old)
            if ev is not None:
                w.queue.put_nowait(ev)

    def compact(self) -> None:
        """Forget the event history: any watch from an older resourceVersion gets 410 Expired."""
        self.history.clear()
        self.compacted_rv = self.rv

    def _owner_meta(self, obj: dict, owners: dict[str, set]) -> None:
        obj["metadata"]["managedFields"] = [
            {"manager": m, "operation": "Apply" if m.startswith("apply:") else "Update",
             "apiVersion": obj.get("apiVersion", ""), "fieldsType": "FieldsV1", "fieldsV1": sem.fields_v1(p)}
            for m, p in sorted(owners.items())]
        for entry in obj["metadata"]["managedFields"]:
            entry["manager"] = entry["manager"].removeprefix("apply:")

    @staticmethod
    def _user_view(obj: dict) -> dict:
        view = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        meta = {k: v for k, v in (obj.get("metadata") or {}).items()
                if k not in SERVER_META and k not in ("name", "namespace", "generateName")}
        view["metadata"] = meta
        if not meta:
            view.pop("metadata")
        return view

    def _index(self, res: Resource, old: dict | None, new: dict | None) -> None:
        key = None
        for o in (old, new):
            if o is not None:
                m = o["metadata"]
                key = (res.key, m.get("namespace"), m["name"])
        if old is not None:
            for ref in old["metadata"].get("ownerReferences") or []:
                self._dependents.get(ref.get("uid"), set()).discard(key)
            self._uids.pop(old["metadata"]["uid"], None)
        if new is not None:
            for ref in new["metadata"].get("ownerReferences") or []:
                self._dependents.setdefault(ref.get("uid"), set()).add(key)
            self._uids[new["metadata"]["uid"]] = key

    def _as_stored(self, res: Resource, obj: dict) -> dict:
        """The object as the API server stores it (see the module docstring); 422 when it cannot be."""
        name = (obj.get("metadata") or {}).get("name")
        if res.custom:
            schema = self.schemas.get(res.key)
            if schema is None:
                return obj
            try:
                stored, pruned = sem.structural(schema, obj)
            except sem.SchemaError as e:
                raise ApiError(422, "Invalid", f'{res.kind}.{res.group} "{name}" is invalid: {e}',
                               {"name": name, "group": res.group, "kind": res.kind,
                                "causes": [{"reason": "FieldValueTypeInvalid", "field": f, "message": m}
                                           for f, m in e.causes]}) from None
            if pruned and self.field_validation == "Strict":
                raise ApiError(400, "BadRequest", f'{res.kind} in version "{res.version}" cannot be handled as a '
                                                  f'{res.kind}: strict decoding error: '
                               + ", ".join(f'unknown field "{p}"' for p in pruned))
            if self.field_validation != "Ignore":
                self.warnings += [f'unknown field "{p}"' for p in pruned]
            return stored
        try:
            obj = sem.canonicalize_quantities(obj)
        except sem.QuantityError as e:
            raise ApiError(422, "Invalid", f'{res.kind} "{name}" is invalid: {e}', {"name": name, "kind": res.plural}) \
                from None
        obj = sem.apply_defaults(res.kind, obj, cluster_ip=lambda: f"10.96.0.{next(self._cluster_ips)}")
        return sem.encode_status(res.kind, obj)

    def _store_put(self, res: Resource, old: dict | None, new: dict, owners: dict[str, set] | None) -> dict:
        """Persist ``new`` (a fresh dict we own) unless it equals ``old``: bump rv, emit, index."""
        new = self._as_stored(res, new)
        m = new["metadata"]
        key = (m.get("namespace") if res.namespaced else None, m["name"])
        okey = (res.key, key[0], key[1])
        if owners is not None:
            self._owner_meta(new, owners)
        if old is not None:
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                return old
            changed_content = {k: v for k, v in new.items() if k not in ("metadata", "status")} != \
                {k: v for k, v in old.items() if k not in ("metadata", "status")}
            gen = old["metadata"].get("generation", 1)
            if changed_content or (m.get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp")):
                gen += 1
            m["generation"] = gen
        m["resourceVersion"] = self._next_rv()
        if owners is not None:
            self.owners[okey] = owners
        self.store[res.key][key] = new
        self.change_count += 1
        self._index(res, old, new)
        self._emit(res, "ADDED" if old is None else "MODIFIED", new, old)
        if m.get("deletionTimestamp") and not m.get("finalizers"):
            self._remove(res, new, "Background")
            return new
        if res.kind == LWS_KIND and (old is None or old.get("spec") != new.get("spec")):
            self._lws_sync(new, recreate_all=old is not None)
        elif res.plural == "pods" and LWS_NAME in (m.get("labels") or {}):
            self._lws_pod_changed(new, old)
        return new

    # ------------------------------------------------------------------ the LeaderWorkerSet controller
    # What LWS v0.10.0 does that a controller of ours can observe, without its StatefulSets: a group's pods
    # ``<lws>-<g>`` (leader) and ``<lws>-<g>-<w>`` (workers) from the leader/worker templates
    # (leaderworkerset_types.go:101-110), with its labels/annotations (:37-60; pod_controller.go:400-418) and
    # its env in every container (pkg/utils/pod/pod_utils.go:132-178: LWS_LEADER_ADDRESS =
    # <lws>-<g>.<subdomain>.<ns>, the subdomain being the LWS name under the default Shared policy),
    # readyReplicas = groups whose pods are all running and ready (leaderworkerset_controller.go:438-486), and
    # RecreateGroupOnPodRestart / RecreateGroupAfterStart: a container restart recreates the whole group, with
    # AfterStart only once no pod of the group is Pending (pod_controller.go:204-230). Simplifications: a
    # template change recreates every group at once (no rolling update); pods are owned by the LWS directly.
    def _lws_res(self) -> Resource:
        return self.resources_by_key[f"{LWS_GROUP}/v1/leaderworkersets"]

    def _lws_group_pods(self, ns: str, lws: str, group: int | None = None) -> list[dict]:
        return [p for (pns, _n), p in self.store["v1/pods"].items() if pns == ns
                and p["metadata"].get("labels", {}).get(LWS_NAME) == lws
                and (group is None or p["metadata"]["labels"].get(LWS_GROUP_INDEX) == str(group))]

    def _lws_pod(self, lws: dict, group: int, worker: int) -> dict:
        meta, spec = lws["metadata"], lws["spec"]
        lwt = spec["leaderWorkerTemplate"]
        tpl = sem.clone(lwt.get("leaderTemplate") if worker == 0 and lwt.get("leaderTemplate") else lwt["workerTemplate"])
        name, ns, size = meta["name"], meta["namespace"], int(lwt.get("size", 1))
        leader = f"{name}-{group}"
        pod_name = leader if worker == 0 else f"{leader}-{worker}"
        tm = tpl.get("metadata") or {}
        labels = {**(tm.get("labels") or {}), LWS_NAME: name, LWS_GROUP_INDEX: str(group),
                  LWS_WORKER_INDEX: str(worker), LWS_GROUP_KEY: uuid.uuid5(uuid.NAMESPACE_URL, f"{ns}/{leader}").hex}
        annotations = {**(tm.get("annotations") or {}), LWS_SIZE: str(size)}
        if worker:
            annotations[LWS_LEADER_NAME] = leader
        pod_spec = tpl.get("spec") or {}
        pod_spec.setdefault("subdomain", name)
        pod_spec.setdefault("hostname", pod_name)
        env = {"LWS_LEADER_ADDRESS": f"{leader}.{pod_spec['subdomain']}.{ns}", "LWS_GROUP_SIZE": str(size),
               "LWS_WORKER_INDEX": str(worker)}
        for c in [*pod_spec.get("containers", []), *pod_spec.get("initContainers", [])]:
            have = {e.get("name") for e in c.get("env") or []}
            c["env"] = [*({"name": k, "value": v} for k, v in env.items() if k not in have), *(c.get("env") or [])]
        owner = {"apiVersion": lws["apiVersion"], "kind": LWS_KIND, "name": name, "uid": meta["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name, "namespace": ns, "labels": labels,
                "annotations": annotations, "ownerReferences": [owner]}, "spec": pod_spec}

    def _lws_sync(self, lws: dict, *, recreate_all: bool = False) -> None:
        pods_res = self.resources_by_key["v1/pods"]
        ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
        replicas = int(lws["spec"].get("replicas", 1))
        size = int(lws["spec"]["leaderWorkerTemplate"].get("size", 1))
        for p in self._lws_group_pods(ns, name):
            g, w = int(p["metadata"]["labels"][LWS_GROUP_INDEX]), int(p["metadata"]["labels"][LWS_WORKER_INDEX])
            if recreate_all or g >= replicas or w >= size:
                if (ns, p["metadata"]["name"]) in self.store["v1/pods"]:
                    self._remove(pods_res, p, "Background")
        for g in range(replicas):
            for w in range(size):
                pod = self._lws_pod(lws, g, w)
                if (ns, pod["metadata"]["name"]) not in self.store["v1/pods"]:
                    self.create_object(pods_res, ns, pod, manager="lws-controller")
        self._lws_status(ns, name)

    def _lws_status(self, ns: str, name: str) -> None:
        res = self._lws_res()
        lws = self.store[res.key].get((ns, name))
        if lws is None:
            return
        replicas = int(lws["spec"].get("replicas", 1))
        size = int(lws["spec"]["leaderWorkerTemplate"].get("size", 1))
        pods = self._lws_group_pods(ns, name)
        groups = {int(p["metadata"]["labels"][LWS_GROUP_INDEX]) for p in pods
                  if p["metadata"]["labels"].get(LWS_WORKER_INDEX) == "0"}

        def ready(p: dict) -> bool:
            st = p.get("status") or {}
            return st.get("phase") == "Running" and any(c.get("type") == "Ready" and c.get("status") == "True"
                                                        for c in st.get("conditions") or [])
        ready_groups = sum(1 for g in groups if len(grp := self._lws_group_pods(ns, name, g)) == size
                           and all(ready(p) for p in grp))
        ctype = "Available" if ready_groups >= replicas else "Progressing"
        old = lws.get("status") or {}
        before = next((c for c in old.get("conditions") or [] if c.get("type") == ctype), None)
        cond = before if before and before.get("status") == "True" else {
            "type": ctype, "status": "True", "reason": "AllGroupsReady" if ctype == "Available" else "GroupsProgressing",
            "message": f"{ready_groups}/{replicas} group(s) ready", "lastTransitionTime": _now()}
        status = {"replicas": len(groups), "readyReplicas": ready_groups, "updatedReplicas": len(groups),
                  "observedGeneration": lws["metadata"].get("generation", 1), "conditions": [cond],
                  "hpaPodSelector": f"{LWS_NAME}={name},{LWS_WORKER_INDEX}=0"}
        status = {k: v for k, v in status.items() if v != 0}      # int32 fields are omitempty (:371-391)
        if status != old:
            new = sem.clone(lws)
            new["status"] = status
            self._store_put(res, lws, new, self.owners.get((res.key, ns, name)))

    def _lws_pod_changed(self, pod: dict, old: dict | None) -> None:
        labels = pod["metadata"]["labels"]
        ns, name, group = pod["metadata"]["namespace"], labels[LWS_NAME], int(labels[LWS_GROUP_INDEX])
        lws = self.store[self._lws_res().key].get((ns, name))
        if lws is None:
            return
        restarts = lambda p: sum(c.get("restartCount", 0) for c in ((p or {}).get("status") or {}).get(
            "containerStatuses") or [])
        policy = lws["spec"]["leaderWorkerTemplate"].get("restartPolicy", "RecreateGroupOnPodRestart")
        if old is not None and restarts(pod) > restarts(old) and policy in ("RecreateGroupOnPodRestart",
                                                                            "RecreateGroupAfterStart"):
            group_pods = self._lws_group_pods(ns, name, group)
            pending = any((p.get("status") or {}).get("phase", "Pending") == "Pending" for p in group_pods)
            if not (pending and policy == "RecreateGroupAfterStart"):
                pods_res = self.resources_by_key["v1/pods"]
                for p in group_pods:
                    self._remove(pods_res, p, "Background")
                size = int(lws["spec"]["leaderWorkerTemplate"].get("size", 1))
                for w in range(size):
                    self.create_object(pods_res, ns, self._lws_pod(lws, group, w), manager="lws-controller")
        self._lws_status(ns, name)

    def _remove(self, res: Resource, obj: dict, policy: str) -> dict:
        m = obj["metadata"]
        key = (m.get("namespace") if res.namespaced else None, m["name"])
        gone = self.store[res.key].pop(key)
        self.owners.pop((res.key, key[0], key[1]), None)
        final = sem.clone(gone)
        final["metadata"]["resourceVersion"] = self._next_rv()
        self.change_count += 1
        self._index(res, gone, None)
        self._emit(res, "DELETED", final, gone)
        if res.plural == "pods":
            for (ns, pod, _c), buf in self.logs.items():
                if ns == m.get("namespace") and pod == m["name"]:
                    buf.closed = True
                    buf.notify()
        if res.key == "v1/namespaces":
            for rkey, objs in self.store.items():
                r = self.resources_by_key[rkey]
                if r.namespaced:
                    for (ns, _n), o in list(objs.items()):
                        if ns == m["name"] and (ns, _n) in objs:
                            self._remove(r, o, policy)
        self._collect_garbage(m["uid"], policy)
        return final

    def _collect_garbage(self, owner_uid: str, policy: str) -> None:
        for dep_key in sorted(self._dependents.pop(owner_uid, set())):
            rkey, ns, name = dep_key
            res = self.resources_by_key[rkey]
            dep = self.store[rkey].get((ns, name))
            if dep is None:
                continue
            refs = dep["metadata"].get("ownerReferences") or []
            if policy == "Orphan":
                new = sem.clone(dep)
                new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid] or None
                if new["metadata"]["ownerReferences"] is None:
                    del new["metadata"]["ownerReferences"]
                self._store_put(res, dep, new, self.owners.get(dep_key))
            elif all(r.get("uid") not in self._uids for r in refs):
                self._delete_or_mark(res, dep, "Background")

    def _delete_or_mark(self, res: Resource, obj: dict, policy: str) -> dict:
        if obj["metadata"].get("finalizers"):
            if obj["metadata"].get("deletionTimestamp"):
                return obj
            new = sem.clone(obj)
            new["metadata"]["deletionTimestamp"] = _now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._store_put(res, obj, new, self.owners.get((res.key, obj["metadata"].get("namespace"),
                                                                    obj["metadata"]["name"])))
        return self._remove(res, obj, policy)

    # ------------------------------------------------------------------ verbs
    def list_objects(self, res: Resource, namespace: str | None, labels: str | None = None,
                     fields: str | None = None, limit: int | None = None, cont: str | None = None) -> dict:
        try:
            items = [o for (ns, _n), o in sorted(self.store[res.key].items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
                     if (namespace is None or ns == namespace) and sem.matches(o, labels, fields)]
        except sem.SelectorError as e:
            raise ApiError(400, "BadRequest", str(e)) from None
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        start = 0
        if cont:
            try:
                start = int(json.loads(base64.b64decode(cont))["start"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "BadRequest", "invalid continue token") from None
        if limit:
            if start + limit < len(items):
                meta["continue"] = base64.b64encode(json.dumps({"start": start + limit}).encode()).decode()
                meta["remainingItemCount"] = len(items) - start - limit
            items = items[start:start + limit]
        elif start:
            items = items[start:]
        if not res.custom:
            # as a real API server does for built-in kinds (kubernetes/kubernetes#3030): list items carry no
            # apiVersion/kind, only the list itself says what they are
            items = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items]
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": items}

    def get_object(self, res: Resource, namespace: str | None, name: str | None) -> dict:
        return self._lookup(res, namespace, name)

    def create_object(self, res: Resource, namespace: str | None, body: dict, *, manager: str) -> dict:
        obj = sem.clone(body)
        meta = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = meta
        ns = (namespace or meta.get("namespace") or None) if res.namespaced else None
        if res.namespaced and namespace and meta.get("namespace") not in (None, namespace):
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                                              "sent on the request")
        self._check_ns(res, ns)
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            else:
                raise ApiError(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value: name or "
                                               "generateName is required", {"kind": res.kind})
        if (ns, meta["name"]) in self.store[res.key]:
            raise ApiError(409, "AlreadyExists",
                           f'{res.plural}{"." + res.group if res.group else ""} "{meta["name"]}" already exists',
                           {"name": meta["name"], "group": res.group, "kind": res.plural})
        if "status" in res.subresources:
            obj.pop("status", None)
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        for k in SERVER_META:
            meta.pop(k, None)
        if res.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        meta.update(uid=str(uuid.uuid4()), generation=1, creationTimestamp=_now())
        owners = sem.record_update(None, self._user_view(obj), {}, manager)
        return self._store_put(res, None, obj, owners)

    def _precondition(self, current: dict, rv: str | None) -> None:
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict",
                           f'Operation cannot be fulfilled on {current["kind"].lower()}s "{current["metadata"]["name"]}": '
                           "the object has been modified; please apply your changes to the latest version and try again",
                           {"name": current["metadata"]["name"], "kind": current["kind"]})

    def _scoped(self, res: Resource, current: dict, proposed: dict, subresource: str | None) -> dict:
        """Status isolation: /status writes change status only, main writes keep the stored status."""
        if subresource == "status":
            new = sem.clone(current)
            if "status" in proposed:
                new["status"] = proposed["status"]
            else:
                new.pop("status", None)
            return new
        new = sem.clone(proposed)
        new["apiVersion"], new["kind"] = current["apiVersion"], current["kind"]
        meta = new.setdefault("metadata", {}) or {}
        new["metadata"] = meta
        for k in SERVER_META:
            meta.pop(k, None)
        cm = current["metadata"]
        for k in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if k in cm:
                meta[k] = cm[k]
        meta["name"] = cm["name"]
        if "namespace" in cm:
            meta["namespace"] = cm["namespace"]
        if "status" in res.subresources:
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        return new

    def _finish_write(self, res: Resource, current: dict, new: dict, manager: str, owners: dict | None = None) -> dict:
        okey = (res.key, current["metadata"].get("namespace"), current["metadata"]["name"])
        if owners is None:
            owners = sem.record_update(self._user_view(current), self._user_view(new), self.owners.get(okey, {}),
                                       manager)
        return self._store_put(res, current, new, owners)

    def replace_object(self, res: Resource, namespace: str | None, name: str | None, body: dict,
                       subresource: str | None, manager: str) -> dict:
        current = self._lookup(res, namespace, name)
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        rv = meta.get("resourceVersion")
        if not rv:
            raise ApiError(422, "Invalid", f'{res.kind} "{name}" is invalid: metadata.resourceVersion: Invalid value: '
                                           '0x0: must be specified for an update')
        self._precondition(current, str(rv))
        new = self._scoped(res, current, body, subresource)
        return self._finish_write(res, current, new, manager)

    def patch_object(self, res: Resource, namespace: str | None, name: str | None, patch: Any, ctype: str,
                     subresource: str | None, manager: str) -> dict:
        current = self._lookup(res, namespace, name)
        if ctype == "application/json-patch+json":
            import jsonpatch
            if not isinstance(patch, list):
                raise ApiError(400, "BadRequest", "json patch must be a list of operations")
            try:
                proposed = jsonpatch.apply_patch(current, patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {e}") from None
        elif ctype == "application/merge-patch+json":
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "merge patch must be a JSON object")
            self._precondition(current, (patch.get("metadata") or {}).get("resourceVersion"))
            proposed = sem.merge_patch(current, patch)
        elif ctype == "application/strategic-merge-patch+json":
            if res.custom:
                raise ApiError(415, "UnsupportedMediaType",
                               f"the body of the request was in an unknown format - accepted media types include: "
                               f"application/json-patch+json, application/merge-patch+json, {APPLY_CT}")
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "strategic merge patch must be a JSON object")
            self._precondition(current, (patch.get("metadata") or {}).get("resourceVersion"))
            proposed = sem.strategic_merge(current, patch)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch content type {ctype!r}")
        new = self._scoped(res, current, proposed, subresource)
        return self._finish_write(res, current, new, manager)

    def apply_object(self, res: Resource, namespace: str | None, name: str | None, cfg: dict,
                     subresource: str | None, manager: str, *, force: bool) -> tuple[dict, bool]:
        meta = cfg.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        if cfg.get("kind") not in (None, res.kind) or cfg.get("apiVersion") not in (None, res.api_version):
            raise ApiError(400, "BadRequest", f"apply: kind/apiVersion {cfg.get('apiVersion')}/{cfg.get('kind')} does "
                                              f"not match {res.api_version}/{res.kind}")
        key = (namespace if res.namespaced else None, name or "")
        current = self.store[res.key].get(key)
        mkey = f"apply:{manager}"
        if current is None:
            if subresource:
                raise self._not_found(res, name)
            body = sem.clone(cfg)
            body.setdefault("metadata", {})["name"] = name
            return self.create_object(res, namespace, body, manager=mkey), True
        self._precondition(current, meta.get("resourceVersion"))
        user_cfg = self._user_view(cfg)
        cur_view = self._user_view(current)
        okey = (res.key, current["metadata"].get("namespace"), current["metadata"]["name"])
        owners = self.owners.get(okey, {})
        if subresource == "status" or "status" in res.subresources:
            # Each endpoint applies only its own part of the object.
            if subresource == "status":
                user_cfg = {"status": user_cfg["status"]} if "status" in user_cfg else {}
                scope = lambda p: p[:1] == ("status",)
            else:
                user_cfg.pop("status", None)
                scope = lambda p: p[:1] != ("status",)
            scoped_owners = {m: {p for p in ps if scope(p)} for m, ps in owners.items()}
            rest_owners = {m: {p for p in ps if not scope(p)} for m, ps in owners.items()}
        else:
            scoped_owners, rest_owners = owners, {}
        try:
            merged_view, new_scoped = sem.apply(cur_view, user_cfg, scoped_owners, mkey, force=force)
        except sem.ApplyConflict as e:
            raise ApiError(409, "Conflict", f"Apply failed with {len(e.conflicts)} conflict(s): {e}",
                           {"causes": [{"reason": "FieldManagerConflict", "message": f'conflict with "{m}"',
                                        "field": sem.render_path(p)} for m, p in e.conflicts]}) from None
        new_owners = {m: new_scoped.get(m, set()) | rest_owners.get(m, set())
                      for m in set(new_scoped) | set(rest_owners)}
        new_owners = {m: p for m, p in new_owners.items() if p}
        new = sem.clone(current)
        for k in [k for k in new if k not in ("apiVersion", "kind", "metadata")]:
            del new[k]
        for k, v in merged_view.items():
            if k == "metadata":
                server = {mk: mv for mk, mv in current["metadata"].items() if mk in SERVER_META or mk in ("name", "namespace")}
                new["metadata"] = {**v, **server}
            else:
                new[k] = v
        if "metadata" not in merged_view:
            new["metadata"] = {mk: mv for mk, mv in current["metadata"].items() if mk in SERVER_META or mk in ("name", "namespace")}
        return self._finish_write(res, current, new, manager, owners=new_owners), False

    def delete_object(self, res: Resource, namespace: str | None, name: str | None, policy: str,
                      preconditions: dict) -> dict:
        current = self._lookup(res, namespace, name)
        if preconditions.get("uid") and preconditions["uid"] != current["metadata"]["uid"]:
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition does not match")
        self._precondition(current, preconditions.get("resourceVersion"))
        result = self._delete_or_mark(res, current, policy)
        if result["metadata"].get("deletionTimestamp") and (
                (namespace if res.namespaced else None, name or "") in self.store[res.key]):
            return result
        if res.plural in RETURNS_DELETED_OBJECT or res.custom:
            return result
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": res.group, "kind": res.plural, "uid": current["metadata"]["uid"]}}

    # ------------------------------------------------------------------ watch
    async def _serve_watch(self, raw: aiohttp.web.BaseRequest, res: Resource, namespace: str | None,
                           q: Any) -> aiohttp.web.StreamResponse:
        labels, fields = q.get("labelSelector"), q.get("fieldSelector")
        try:
            sem.matches({"metadata": {}}, labels, fields)
        except sem.SelectorError as e:
            raise ApiError(400, "BadRequest", str(e)) from None
        rv_param = q.get("resourceVersion") or ""
        timeout = float(q.get("timeoutSeconds") or 0) or None
        watcher = _Watcher(res, namespace, labels, fields)
        initial: list[dict] = []
        expired = None
        if rv_param in ("", "0"):
            for (_ns, _n), o in sorted(self.store[res.key].items(), key=lambda kv: int(kv[1]["metadata"]["resourceVersion"])):
                if watcher.sees(o):
                    initial.append({"type": "ADDED", "object": o})
        else:
            try:
                since = int(rv_param)
            except ValueError:
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {rv_param!r}") from None
            if since < self.compacted_rv:
                expired = ApiError(410, "Expired", f"too old resource version: {since} ({self.compacted_rv})")
            else:
                for rv, rkey, etype, obj, old in self.history:
                    if rv > since and rkey == res.key:
                        ev = watcher.translate(etype, obj, old)
                        if ev is not None:
                            initial.append(ev)
        self.watchers.setdefault(res.key, set()).add(watcher)  # registered before any await: no gap
        resp = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        try:
            await resp.prepare(raw)
            if expired is not None:
                await resp.write(json.dumps({"type": "ERROR", "object": expired.status()}).encode() + b"\n")
                return resp
            if initial:
                await resp.write(b"".join(json.dumps(ev).encode() + b"\n" for ev in initial))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout if timeout else None
            while True:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    ev = await asyncio.wait_for(watcher.queue.get(), remaining)
                except TimeoutError:
                    break
                batch = [ev]
                while not watcher.queue.empty():
                    batch.append(watcher.queue.get_nowait())
                await resp.write(b"".join(json.dumps(e).encode() + b"\n" for e in batch))
            if q.get("allowWatchBookmarks") in ("true", "1"):
                await resp.write(json.dumps({"type": "BOOKMARK", "object": {
                    "kind": res.kind, "apiVersion": res.api_version,
                    "metadata": {"resourceVersion": str(self.rv)}}}).encode() + b"\n")
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.watchers.get(res.key, set()).discard(watcher)
        return resp

    # ------------------------------------------------------------------ pod logs
    def _log_buffer(self, ns: str, pod: str, container: str) -> _LogBuffer:
        return self.logs.setdefault((ns, pod, container), _LogBuffer())

    def _container_for(self, pod: dict, container: str | None) -> str:
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if container:
            if container not in names:
                raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {pod['metadata']['name']}")
            return container
        if len(names) == 1:
            return names[0]
        raise ApiError(400, "BadRequest", f"a container name must be specified for pod {pod['metadata']['name']}, "
                                          f"choose one of: {names}")

    async def _serve_log(self, raw: aiohttp.web.BaseRequest, t: _Target) -> aiohttp.web.StreamResponse:
        res = t.res
        assert res is not None and t.namespace is not None
        pod = self._lookup(res, t.namespace, t.name)
        container = self._container_for(pod, raw.query.get("container"))
        buf = self._log_buffer(t.namespace, t.name or "", container)
        q = raw.query
        stamps = q.get("timestamps") in ("true", "1")
        if q.get("previous") in ("true", "1"):
            if buf.previous is None:
                raise ApiError(400, "BadRequest", f'previous terminated container "{container}" in pod '
                                                  f'"{t.name}" not found')
            lines, follow = buf.previous, False
        else:
            lines, follow = buf.lines, q.get("follow") in ("true", "1")
        chunks = list(lines)
        try:
            since = None
            if q.get("sinceTime"):
                since = dt.datetime.fromisoformat(q["sinceTime"].replace("Z", "+00:00"))
            elif q.get("sinceSeconds"):
                since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=int(q["sinceSeconds"]))
            if since is not None:
                chunks = [c for c in chunks if dt.datetime.fromisoformat(c[0].replace("Z", "+00:00")) >= since]
            if q.get("tailLines"):
                chunks = chunks[-int(q["tailLines"]):] if int(q["tailLines"]) else []
            limit = int(q["limitBytes"]) if q.get("limitBytes") else None
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"invalid log option: {e}") from None

        def render(items: Iterable[tuple[str, str]]) -> bytes:
            return "".join(f"{ts} {text}" if stamps else text for ts, text in items).encode()

        if not follow:
            body = render(chunks)
            return aiohttp.web.Response(body=body[:limit] if limit is not None else body, content_type="text/plain")
        resp = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        await resp.prepare(raw)
        try:
            await resp.write(render(chunks))
            sent = len(lines)
            current = lines
            while True:
                if buf.lines is not current:  # the container restarted: a follow ends with its container
                    break
                if sent < len(buf.lines):
                    await resp.write(render(buf.lines[sent:]))
                    sent = len(buf.lines)
                    continue
                if buf.closed:
                    break
                await buf.changed.wait()
            await resp.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            pass
        return resp

    def append_log(self, ns: str, pod: str, text: str, container: str | None = None) -> None:
        p = self._lookup(self.resources_by_key["v1/pods"], ns, pod)
        buf = self._log_buffer(ns, pod, self._container_for(p, container))
        stamp = _now_micro()
        for line in text.splitlines(keepends=True):
            buf.lines.append((stamp, line))
        buf.notify()

    def end_log(self, ns: str, pod: str, container: str | None = None) -> None:
        p = self._lookup(self.resources_by_key["v1/pods"], ns, pod)
        buf = self._log_buffer(ns, pod, self._container_for(p, container))
        buf.closed = True
        buf.notify()

    def restart_container(self, ns: str, pod: str, container: str | None = None) -> None:
        p = self._lookup(self.resources_by_key["v1/pods"], ns, pod)
        buf = self._log_buffer(ns, pod, self._container_for(p, container))
        buf.previous, buf.lines, buf.closed = buf.lines, [], False
        buf.notify()


class K8sEmulator:
    """Run ``EmulatorHandler`` behind ``kmock.Server`` on 127.0.0.1:random in a background thread.

    Every method is thread-safe: it runs on the server's event loop and returns the result.
    Resources are addressed as ``"apps/v1/deployments"`` or ``"v1/pods"``."""

    def __init__(self, *, history: int = 10_000, journal: bool = True) -> None:
        self._history, self._journal = history, journal
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._thread_main, name="k8s-emulator", daemon=True)
        self._error: BaseException | None = None
        self.url = ""
        self.handler: EmulatorHandler

    # ---------------------------------------------------------------- lifecycle
    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # surfaced by start()
            self._error = e
            self._ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with EmulatorHandler() as handler, kmock.Server(handler) as server:
            handler.history = deque(handler.history, maxlen=self._history)
            handler.journal_enabled = self._journal
            self.handler, self.url = handler, str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def start(self) -> K8sEmulator:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"the API emulator did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)

    def __enter__(self) -> K8sEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args)`` on the server loop (where the store lives) and return its result."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)

        async def run() -> Any:
            return fn(*args, **kwargs)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    # ---------------------------------------------------------------- clients
    def configuration(self) -> Any:
        from kubernetes import client
        cfg = client.Configuration()
        cfg.host = self.url
        return cfg

    def api_client(self, user_agent: str | None = None, *, token: str | None = None) -> Any:
        """An official client; ``token``: authenticate as that identity (else the admin test harness)."""
        from kubernetes import client
        cfg = self.configuration()
        if token:
            cfg.api_key = {"authorization": token}
            cfg.api_key_prefix = {"authorization": "Bearer"}
        api = client.ApiClient(cfg)
        if user_agent:
            api.user_agent = user_agent
        return api

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token of ServiceAccount ``namespace/name`` (RBAC applies to it)."""
        token = f"sa-{namespace}-{name}-{uuid.uuid4().hex[:8]}"
        user = sem.User(f"system:serviceaccount:{namespace}:{name}",
                        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))
        self.call(self.handler.tokens.__setitem__, token, user)
        return token

    def install(self, documents: Iterable[dict]) -> list[dict]:
        """Create the namespaces, service accounts and RBAC objects among ``documents`` (e.g. the documents of
        manifests/install.yaml) as the admin; other kinds are left out. Returns what was created."""
        wanted = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
        by_kind = {r.kind: r for r in DEFAULT_RESOURCES if r.group in ("", "rbac.authorization.k8s.io")}

        def fn() -> list[dict]:
            out = []
            for kind in wanted:
                for doc in documents_of_kind:
                    if doc.get("kind") != kind:
                        continue
                    res = self.handler.resources_by_key[by_kind[kind].key]
                    ns = (doc.get("metadata") or {}).get("namespace") if res.namespaced else None
                    if ns and (None, ns) not in self.handler.store["v1/namespaces"]:
                        self.handler.create_object(self.handler.resources_by_key["v1/namespaces"], None,
                                                   {"metadata": {"name": ns}}, manager="emulator")
                    if (ns, doc["metadata"]["name"]) not in self.handler.store[res.key]:
                        out.append(self.handler.create_object(res, ns, sem.clone(doc), manager="install"))
            return out
        documents_of_kind = [d for d in documents if d and d.get("kind") in wanted]
        return self.call(fn)

    def write_kubeconfig(self, path: str, namespace: str = "default", token: str = ADMIN_TOKEN) -> str:
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "emulator",
               "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
               "users": [{"name": "emulator", "user": {"token": token}}],
               "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "emulator",
                                                             "namespace": namespace}}]}
        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(doc, fh)
        return path

    # ---------------------------------------------------------------- direct store access (tests)
    def _res(self, resource: str) -> Resource:
        try:
            return self.handler.resources_by_key[resource]
        except KeyError:
            raise KeyError(f"unknown resource {resource!r}; known: {sorted(self.handler.resources_by_key)}") from None

    def objects(self, resource: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        """Copies of the stored objects (the store itself is never handed out)."""
        return self.call(lambda: sem.clone(
            self.handler.list_objects(self._res(resource), namespace, label_selector)["items"]))

    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        def fn() -> dict | None:
            res = self._res(resource)
            return sem.clone(self.handler.store[res.key].get((namespace if res.namespaced else None, name)))
        return self.call(fn)

    def create_namespace(self, name: str) -> dict:
        def fn() -> dict:
            res = self._res("v1/namespaces")
            existing = self.handler.store[res.key].get((None, name))
            return existing or self.handler.create_object(res, None, {"metadata": {"name": name}}, manager="emulator")
        return self.call(fn)

    def add_resource(self, res: Resource) -> None:
        self.call(self.handler.add_resource, res)

    # ---------------------------------------------------------------- faults & counters
    def inject(self, status: int | None = None, *, times: int | None = 1, delay: float = 0.0,
               method: str | None = None, verb: str | None = None, path: str | None = None) -> Fault:
        fault = Fault(status=status, times=times, delay=delay, method=method, verb=verb, path=path)
        self.call(self.handler.faults.append, fault)
        return fault

    def clear_faults(self) -> None:
        self.call(self.handler.faults.clear)

    def compact(self) -> None:
        self.call(self.handler.compact)

    def writes(self, *, agent: str | None = None, verb: str | None = None, resource: str | None = None) -> int:
        """Write requests received (POST/PUT/PATCH/DELETE on resources), filtered by user-agent
        prefix, verb (create/update/patch/apply/delete/deletecollection) and resource label
        (``deployments`` or ``k3deployments/status``)."""
        def fn() -> int:
            return sum(n for (a, v, r), n in self.handler.write_counter.items()
                       if (agent is None or a.startswith(agent)) and (verb is None or v == verb)
                       and (resource is None or r == resource))
        return self.call(fn)

    def writes_table(self) -> list[dict[str, Any]]:
        return self.call(self.handler.writes_table)

    def reset_counters(self) -> None:
        def fn() -> None:
            self.handler.write_counter.clear()
            self.handler.change_count = 0
        self.call(fn)

    @property
    def requests(self) -> list[Any]:
        return self.call(lambda: list(self.handler._requests))

    # ---------------------------------------------------------------- pod logs (the test is the kubelet)
    def append_log(self, namespace: str, pod: str, text: str, container: str | None = None) -> None:
        self.call(self.handler.append_log, namespace, pod, text, container)

    def end_log(self, namespace: str, pod: str, container: str | None = None) -> None:
        self.call(self.handler.end_log, namespace, pod, container)

    def restart_container(self, namespace: str, pod: str, container: str | None = None) -> None:
        self.call(self.handler.restart_container, namespace, pod, container)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.k8s_emulator [--port P] [--history N] [--no-journal]``:
    serve until SIGTERM/SIGINT, printing ``{"url": ...}`` once listening."""
    import argparse
    import signal
    import sys

    ap = argparse.ArgumentParser(prog="python -m tests.support.k8s_emulator")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--history", type=int, default=10_000)
    ap.add_argument("--no-journal", action="store_true", help="do not keep every request in memory")
    args = ap.parse_args(argv)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with EmulatorHandler() as handler, kmock.Server(handler, port=args.port or None) as server:
            handler.history = deque(handler.history, maxlen=args.history)
            handler.journal_enabled = not args.no_journal
            print(json.dumps({"url": str(server.url).rstrip("/")}), flush=True)
            await stop.wait()

    asyncio.run(serve())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
