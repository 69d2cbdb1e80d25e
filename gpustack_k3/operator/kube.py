"""The operator's thin edge to the API server, on the official ``kubernetes`` client's transport
(``ApiClient.param_serialize``/``call_api``: kubeconfig or in-cluster auth, TLS, proxies) with JSON
in and out (no model deserialisation: custom resources are dicts anyway and the operator compares
dicts). Transient failures (5xx, 429, connection errors) are retried with tenacity; everything
else is raised as ``kubernetes.client.rest.ApiException`` for the controller to handle.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.operator.kinds import CHILD_KINDS
from gpustack_k3.core import retry


def kube_time(t: dt.datetime, *, micro: bool = False) -> str:
    """A time as the API serialises it: RFC 3339 in UTC, metav1.Time in whole seconds (conditions, Events),
    metav1.MicroTime with microseconds (``micro``: a Lease's acquire/renew times)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")

log = logging.getLogger("gpustack_k3.operator")

APPLY_CT = "application/apply-patch+yaml"

# apiVersion/kind -> (plural, namespaced): the child kinds (kinds.CHILD_KINDS) and what else the operator reads
# or writes; other kinds are found through discovery.
KNOWN: dict[tuple[str, str], tuple[str, bool]] = {
    **{k.key: (k.plural, True) for k in CHILD_KINDS},
    ("v1", "Pod"): ("pods", True),
    ("v1", "Secret"): ("secrets", True), ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True), ("v1", "Event"): ("events", True),
    ("v1", "Namespace"): ("namespaces", False),
    ("apps/v1", "DaemonSet"): ("daemonsets", True), ("batch/v1", "Job"): ("jobs", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("coordination.k8s.io/v1", "Lease"): ("leases", True),
    (api.API_VERSION, api.KIND): (api.PLURAL, True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ("servicemonitors", True),
    ("monitoring.coreos.com/v1", "PodMonitor"): ("podmonitors", True),
}


def is_transient(exc: BaseException) -> bool:
    import urllib3
    from kubernetes.client.rest import ApiException
    if isinstance(exc, ApiException):
        return exc.status is not None and (exc.status >= 500 or exc.status == 429 or exc.status == 0)
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


def without_transport_retries(api_client: Any) -> Any:
    """A client like ``api_client`` whose urllib3 pool never retries by itself: the operator's own retry
    policy (tenacity, or none for lease calls) is then the only one, and a call's time is bounded by its
    timeout (urllib3's default Retry(3) would repeat a timed-out GET/PUT up to three more times)."""
    import copy

    from kubernetes import client
    cfg = copy.deepcopy(api_client.configuration)
    cfg.retries = False
    out = client.ApiClient(cfg)
    out.user_agent = api_client.user_agent
    return out


def api_client_from(kubeconfig: str | None = None, *, host: str | None = None, pool: int = 32) -> Any:
    """An ``ApiClient`` for ``host``, else the kubeconfig file, else in-cluster, else ~/.kube/config."""
    from kubernetes import client, config
    cfg = client.Configuration()
    if host:
        cfg.host = host
    elif kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException:
            config.load_kube_config(client_configuration=cfg)
    cfg.connection_pool_maxsize = pool
    return client.ApiClient(cfg)


class Kube:
    def __init__(self, api_client: Any, *, user_agent: str, field_manager: str,
                 attempts: int = 5, max_wait: float = 2.0, timeout: Any = None) -> None:
        self.api = api_client
        self.api.user_agent = user_agent
        self.field_manager = field_manager
        self.timeout = timeout  # urllib3 (connect, read) seconds for every non-watch request
        self._discovered: dict[tuple[str, str], tuple[str, bool]] = {}
        self._lock = threading.Lock()
        import tenacity
        self._retry = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            wait=retry.wait(0.05, max_wait),
            stop=tenacity.stop_after_attempt(attempts), reraise=True,
            before_sleep=lambda rs: log.info("retrying API call after %s", rs.outcome.exception()))

    # -------------------------------------------------------------- paths
    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves ``kind`` (asks discovery even for a known kind: a CRD that is not
        installed answers 404)."""
        from kubernetes.client.rest import ApiException
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        try:
            doc = self._request("GET", base)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return any(r.get("kind") == kind and "/" not in r.get("name", "") for r in (doc or {}).get("resources") or [])

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        key = (api_version, kind)
        if key in KNOWN:
            return KNOWN[key]
        with self._lock:
            if key in self._discovered:
                return self._discovered[key]
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        doc = self._request("GET", base)
        for r in doc.get("resources") or []:
            if r.get("kind") == kind and "/" not in r.get("name", ""):
                found = (r["name"], bool(r.get("namespaced")))
                with self._lock:
                    self._discovered[key] = found
                return found
        from kubernetes.client.rest import ApiException
        raise ApiException(status=404, reason=f"kind {kind} not served by {api_version}")

    def path(self, api_version: str, kind: str, namespace: str | None, name: str | None = None,
             subresource: str | None = None) -> str:
        plural, namespaced = self.resource(api_version, kind)
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base

    # -------------------------------------------------------------- transport
    def _raw(self, method: str, path: str, *, query: list[tuple[str, Any]] | None = None, body: Any = None,
             content_type: str | None = None, timeout: Any = None, stream: bool = False) -> Any:
        from kubernetes.client.rest import ApiException
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        req = self.api.param_serialize(method, path, query_params=query or [], header_params=headers, body=body,
                                       auth_settings=["BearerToken"])
        resp = self.api.call_api(*req, _request_timeout=timeout or self.timeout)
        if stream:
            if not 200 <= resp.status <= 299:
                resp.read()
                raise ApiException.from_response(http_resp=resp, body=resp.data.decode("utf-8", "replace"), data=None)
            return resp.response
        resp.read()
        if not 200 <= resp.status <= 299:
            raise ApiException.from_response(http_resp=resp, body=resp.data.decode("utf-8", "replace"), data=None)
        return json.loads(resp.data) if resp.data else None

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        return self._retry(self._raw, method, path, **kw)

    # -------------------------------------------------------------- verbs
    def get(self, api_version: str, kind: str, namespace: str | None, name: str, *,
            timeout: Any = None) -> dict | None:
        from kubernetes.client.rest import ApiException
        try:
            return self._request("GET", self.path(api_version, kind, namespace, name), timeout=timeout)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None, *, label_selector: str | None = None,
             page: int = 500) -> tuple[list[dict], str]:
        items: list[dict] = []
        cont = None
        while True:
            q: list[tuple[str, Any]] = [("limit", page)]
            if label_selector:
                q.append(("labelSelector", label_selector))
            if cont:
                q.append(("continue", cont))
            doc = self._request("GET", self.path(api_version, kind, namespace), query=q)
            # a real API server leaves apiVersion/kind off the items of built-in kinds (kubernetes#3030):
            # put them back, so a listed object compares equal to the same object read or applied
            items += [{"apiVersion": api_version, "kind": kind, **o} for o in doc.get("items") or []
                      if isinstance(o, dict)]
            meta = doc.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, meta.get("resourceVersion", "")

    def watch(self, api_version: str, kind: str, namespace: str | None, *, resource_version: str,
              label_selector: str | None = None, timeout_s: int = 300,
              on_response: Any = None) -> Iterator[dict]:
        """Raw watch events (dicts). Not retried: the informer decides (resume or relist)."""
        from kubernetes.watch.watch import iter_resp_lines
        q: list[tuple[str, Any]] = [("watch", "true"), ("resourceVersion", resource_version),
                                    ("timeoutSeconds", timeout_s), ("allowWatchBookmarks", "true")]
        if label_selector:
            q.append(("labelSelector", label_selector))
        resp = self._raw("GET", self.path(api_version, kind, namespace), query=q, stream=True,
                         timeout=(10, timeout_s + 30))
        if on_response is not None:
            on_response(resp)
        try:
            for line in iter_resp_lines(resp):
                yield json.loads(line)
        finally:
            resp.release_conn()

    def apply(self, obj: Mapping[str, Any], *, subresource: str | None = None, force: bool = True,
              resource_version: str | None = None) -> dict:
        body = dict(obj)
        meta = dict(body.get("metadata") or {})
        if resource_version:
            meta["resourceVersion"] = resource_version
        body["metadata"] = meta
        path = self.path(body["apiVersion"], body["kind"], meta.get("namespace"), meta["name"], subresource)
        q = [("fieldManager", self.field_manager), ("force", "true" if force else "false")]
        # JSON is YAML: sent pre-serialised, the client passes strings through untouched
        return self._request("PATCH", path, query=q, body=json.dumps(body, separators=(",", ":")),
                             content_type=APPLY_CT)

    def create(self, obj: Mapping[str, Any], *, timeout: Any = None, retry: bool = True) -> dict:
        """POST; ``retry=False`` for what must not be sent twice (an Event: a retried POST whose first
        answer was lost creates a duplicate)."""
        meta = obj.get("metadata") or {}
        send = self._request if retry else self._raw
        return send("POST", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace")),
                    query=[("fieldManager", self.field_manager)], body=dict(obj), timeout=timeout)

    def replace(self, obj: Mapping[str, Any], *, timeout: Any = None) -> dict:
        meta = obj.get("metadata") or {}
        return self._request("PUT", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]),
                             query=[("fieldManager", self.field_manager)], body=dict(obj), timeout=timeout)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str, *, uid: str | None = None) -> bool:
        from kubernetes.client.rest import ApiException
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._request("DELETE", self.path(api_version, kind, namespace, name), body=body)
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise
