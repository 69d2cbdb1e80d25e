"""Thin HTTP edge to a GPUStack 2.3.0 server (REST API of the 2.3.0 wheel, gpustack/routes/routes.py: /v2 routes; checked against a live 2.3.0 server in tests/gpustack).

httpx with explicit timeouts; tenacity retries **only** connection errors and 5xx answers (a 4xx is the
server's verdict and is never retried). Every failure becomes a ``GPUStackError`` carrying one line that
names what failed and the way out; the CLI maps it to exit code 2.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx

from gpustack_k3.core import retry
from gpustack_k3.errors import OperationalError

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
WATCH_TIMEOUT = httpx.Timeout(connect=5.0, read=None, write=30.0, pool=5.0)


class GPUStackError(OperationalError):
    """A failure talking to GPUStack. ``kind``: auth | unreachable | conflict | invalid | not_found | server."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        self.kind, self.status = kind, status
        super().__init__(message)


class _Retryable(Exception):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        super().__init__(f"HTTP {response.status_code}")


def _detail(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text.strip()[:300] or r.reason_phrase
    if isinstance(body, dict):
        d = body.get("message") or body.get("detail") or body.get("error") or body
        if isinstance(d, list):   # FastAPI 422: [{loc, msg}]
            return "; ".join(f"{'.'.join(str(x) for x in e.get('loc', []))}: {e.get('msg')}" for e in d[:5]
                             if isinstance(e, dict)) or json.dumps(d)[:300]
        return d if isinstance(d, str) else json.dumps(d)[:300]
    return json.dumps(body)[:300]


class GPUStackClient:
    def __init__(self, server: str, api_key: str, *, timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
                 attempts: int = 4, backoff: float = 0.5, transport: httpx.BaseTransport | None = None) -> None:
        if not server.startswith(("http://", "https://")):
            raise GPUStackError("unreachable", f"--server {server!r} is not an http(s) URL; give e.g. http://gpustack:80")
        self.server = server.rstrip("/")
        self.attempts, self.backoff = max(1, attempts), backoff
        try:
            self._http = httpx.Client(base_url=self.server, timeout=timeout, transport=transport,
                                      headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"})
        except (httpx.InvalidURL, ValueError, UnicodeError) as exc:   # e.g. http://[::1 or a non-ASCII key
            raise GPUStackError("unreachable", f"--server {server!r} or the API key is unusable: {exc}") from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GPUStackClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ core request with retries
    def request(self, method: str, path: str, *, ok_404: bool = False, **kw: Any) -> Any:
        import tenacity

        def once() -> httpx.Response:
            r = self._http.request(method, path, **kw)
            if r.status_code >= 500:
                raise _Retryable(r)
            return r

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=retry.wait(self.backoff, 8.0),   # the one retry policy (gpustack_k3.core.retry)
            retry=tenacity.retry_if_exception_type((httpx.ConnectError, httpx.ConnectTimeout, _Retryable)),
            reraise=True,
        )
        try:
            r = retrying(once)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise GPUStackError("unreachable", f"cannot reach GPUStack at {self.server} after {self.attempts} "
                                f"attempt(s): {exc or type(exc).__name__} (check --server and that the server runs)") from None
        except httpx.TimeoutException:
            raise GPUStackError("unreachable", f"GPUStack at {self.server} did not answer {method} {path} in time "
                                "(server overloaded or wrong port)") from None
        except httpx.HTTPError as exc:
            raise GPUStackError("unreachable", f"HTTP error talking to {self.server}: {exc}") from None
        except _Retryable as exc:
            r = exc.response
            raise GPUStackError("server", f"GPUStack {method} {path} failed with HTTP {r.status_code} after "
                                f"{self.attempts} attempt(s): {_detail(r)}", r.status_code) from None
        return self._result(method, path, r, ok_404)

    def _result(self, method: str, path: str, r: httpx.Response, ok_404: bool) -> Any:
        code = r.status_code
        if code in (401, 403):
            raise GPUStackError("auth", f"GPUStack rejected the API key (HTTP {code} on {method} {path}): "
                                f"{_detail(r)} (create a key in GPUStack under API Keys; it needs admin rights)", code)
        if code == 404 and ok_404:
            return None
        if code == 404:
            raise GPUStackError("not_found", f"{method} {path}: not found (HTTP 404): {_detail(r)}", code)
        if code == 409:
            raise GPUStackError("conflict", f"{method} {path}: conflict (HTTP 409): {_detail(r)}", code)
        if code in (400, 422):
            raise GPUStackError("invalid", f"GPUStack refused {method} {path} (HTTP {code}): {_detail(r)}", code)
        if code >= 300:
            raise GPUStackError("server", f"{method} {path}: unexpected HTTP {code}: {_detail(r)}", code)
        if not r.content:
            return None
        try:
            return r.json()
        except ValueError:   # a login page, a proxy's error page, a truncated answer: not GPUStack's API
            raise GPUStackError("server", f"{method} {path}: HTTP {code} with a body that is not JSON "
                                f"({r.headers.get('content-type') or 'no content type'}: "
                                f"{r.text.strip()[:120]!r}); is {self.server} the GPUStack server?", code) from None

    # ------------------------------------------------------------------ resources
    def _all(self, path: str, **params: Any) -> list[dict]:
        items: list[dict] = []
        page = 1
        while True:
            body = self.request("GET", path, params={**params, "page": page, "perPage": 100})
            pg = body.get("pagination") if isinstance(body, dict) else None
            got = body.get("items", []) if isinstance(body, dict) else None
            try:
                last = page >= int((pg if isinstance(pg, dict) else {}).get("totalPage") or 1)
            except (TypeError, ValueError):
                last = None
            if not isinstance(got, list) or not all(isinstance(x, dict) for x in got) or last is None:
                raise GPUStackError("server", f"GET {path}: the answer is not a GPUStack page "
                                    f"({{items: [...], pagination: {{totalPage}}}}): {str(body)[:120]!r}")
            items += got
            if last or not got:   # an empty page ends the listing whatever totalPage says
                return items
            page += 1

    def clusters(self) -> list[dict]:
        return self._all("/v2/clusters")

    def cluster_id(self, name: str) -> int:
        found = [c for c in self.clusters() if c.get("name") == name]
        if not found:
            known = ", ".join(sorted(c.get("name", "?") for c in self.clusters())) or "none"
            raise GPUStackError("not_found", f"cluster {name!r} not found on {self.server} (known: {known}; "
                                "pass --cluster NAME)")
        return int(found[0]["id"])

    def backend_by_name(self, name: str) -> dict | None:
        # 2.3.0 answers a missing name with HTTP 400 "Inference backend X not found" (VERIFIED), not 404
        try:
            return self.request("GET", f"/v2/inference-backends/backend_name/{quote(name, safe='')}", ok_404=True)
        except GPUStackError as exc:
            if exc.status == 400 and "not found" in str(exc).lower():
                return None
            raise

    def create_backend(self, body: dict) -> dict:
        return self.request("POST", "/v2/inference-backends", json=body)

    def update_backend(self, backend_id: int, body: dict) -> dict:
        return self.request("PUT", f"/v2/inference-backends/{backend_id}", json=body)

    def models_named(self, name: str, cluster_id: int | None = None) -> list[dict]:
        params: dict[str, Any] = {"search": name}
        if cluster_id is not None:
            params["cluster_id"] = cluster_id
        return [m for m in self._all("/v2/models", **params) if m.get("name") == name]

    def create_model(self, body: dict) -> dict:
        return self.request("POST", "/v2/models", json=body)

    def update_model(self, model_id: int, body: dict) -> dict:
        return self.request("PUT", f"/v2/models/{model_id}", json=body)

    def get_model(self, model_id: int) -> dict:
        return self.request("GET", f"/v2/models/{model_id}")

    def delete_model(self, model_id: int) -> None:
        self.request("DELETE", f"/v2/models/{model_id}")

    def import_models(self, content: str, *, dry_run: bool, overwrite: list[str] | None = None) -> dict:
        return self.request("POST", "/v2/models/import",
                            json={"content": content, "dry_run": dry_run, "overwrite": overwrite or []})

    def instances(self, model_id: int) -> list[dict]:
        return self._all("/v2/model-instances", model_id=model_id)

    def watch_instances(self, model_id: int) -> Iterator[dict]:
        """Events of ``GET /v2/model-instances?model_id=X&watch=true``: newline-delimited JSON separated by
        blank lines; type 1 CREATED, 2 UPDATED, 3 DELETED, 5 HEARTBEAT (server/coordinator/base.py @2.3.0)."""
        try:
            with self._http.stream("GET", "/v2/model-instances", params={"model_id": model_id, "watch": "true"},
                                   timeout=WATCH_TIMEOUT) as r:
                if r.status_code >= 300:
                    r.read()
                    self._result("GET", "/v2/model-instances?watch=true", r, False)
                for line in r.iter_lines():
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(ev, dict):
                        yield ev
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise GPUStackError("unreachable", f"cannot reach GPUStack at {self.server}: {exc}") from None
        except httpx.RemoteProtocolError as exc:
            raise GPUStackError("unreachable", f"watch stream from {self.server} broke: {exc}") from None

    def follow_logs(self, instance_id: int, *, tail: int = -1) -> Iterator[bytes]:
        """Raw bytes of ``GET /v2/model-instances/{id}/logs?follow=true`` (proxied from the worker)."""
        params: dict[str, Any] = {"follow": "true"}
        if tail >= 0:
            params["tail"] = tail
        try:
            with self._http.stream("GET", f"/v2/model-instances/{instance_id}/logs", params=params,
                                   timeout=WATCH_TIMEOUT) as r:
                if r.status_code >= 300:
                    r.read()
                    self._result("GET", f"/v2/model-instances/{instance_id}/logs", r, False)
                yield from r.iter_bytes()
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise GPUStackError("unreachable", f"log stream of instance {instance_id} broke: {exc}") from None
