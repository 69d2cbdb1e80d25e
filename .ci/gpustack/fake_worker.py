"""A fake 8x B300 GPUStack worker, registered over the API (shared/research/gpustack.md §5.4, VERIFIED there).

Run it inside the server's network namespace (the server probes the worker's /healthz on 127.0.0.1):

  ip netns exec NS python3 fake_worker.py --server http://127.0.0.1:30080 --api-key-file F --cluster-id 1 \
      --name fake-b300 [--gpus 8] [--port 10150] [--serve-log FILE [--log-line-delay S]]

It registers the worker (POST /v2/workers, as an admin key), serves GET /healthz, keeps POSTing
/v2/worker-status and /v2/worker-heartbeat with the worker token, and registers again (while the worker is not ready) once a
heartbeat is stored (the first "Heartbeat lost" state is sticky until then). Prints ``registered <id>`` once
the server reports the worker ready.
Nothing is started: there is no container runtime here; this only makes the scheduler see 8 GPUs.

With ``--serve-log FILE`` it also answers what the server proxies instance logs to,
``GET /serveLogs/{id}?tail=&follow=&model_instance_name=&previous=`` (gpustack 2.3.0
routes/model_instances.py:_build_serve_log_params, server/worker_request.py; routes/worker/logs.py:436 on a real
worker), with the worker token as bearer: FILE's lines (``tail`` honoured), then, with ``follow=true``, the
connection held open as a followed log is. Each request is printed as ``serveLogs <id> <query>``.
"""
from __future__ import annotations

import argparse
import http.server
import json
import select
import socket
import sys
import threading
import time
import uuid

import httpx

GIB = 1 << 30


def gpu(i: int, mem_gib: int) -> dict:
    return {"vendor": "nvidia", "type": "cuda", "index": i, "device_index": i, "name": "NVIDIA B300",
            "uuid": f"GPU-fake-b300-{i}", "compute_capability": "10.3", "arch_family": "blackwell",
            "memory": {"total": mem_gib * GIB, "used": 0, "allocated": 0, "utilization_rate": 0,
                       "is_unified_memory": False},
            "core": {"total": 20480, "utilization_rate": 0}}


def status(gpus: int, mem_gib: int) -> dict:
    return {"cpu": {"total": 224, "utilization_rate": 1.0},
            "memory": {"total": 2048 * GIB, "used": 64 * GIB, "allocated": 0, "utilization_rate": 3.0,
                       "is_unified_memory": False},
            "os": {"name": "Ubuntu", "version": "24.04"},
            "kernel": {"name": "Linux", "release": "6.8.0", "version": "#1 SMP", "architecture": "x86_64"},
            "uptime": {"uptime": 3600.0, "boot_time": "2026-11-29 00:00:00"},
            "filesystem": [],
            "gpu_devices": [gpu(i, mem_gib) for i in range(gpus)]}


class _Health(http.server.BaseHTTPRequestHandler):
    serve_log: str | None = None
    line_delay: float = 0.0
    token: str | None = None

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/serveLogs/") and self.serve_log:
            self._serve_logs()
            return
        code = 200 if self.path.split("?")[0] in ("/healthz", "/") else 404
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}' if code == 200 else b"{}")

    def _serve_logs(self) -> None:
        from urllib.parse import parse_qs, urlsplit

        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        print(f"serveLogs {url.path.rsplit('/', 1)[-1]} {url.query}", flush=True)
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_response(401)
            self.end_headers()
            return
        with open(self.serve_log, "rb") as fh:
            lines = fh.read().splitlines(keepends=True)
        tail = int(q.get("tail", "-1") or -1)
        if tail >= 0:
            lines = lines[len(lines) - tail:] if tail else []
        self.send_response(200)
        self.send_header("content-type", "application/octet-stream")
        self.end_headers()
        try:
            for ln in lines:
                self.wfile.write(ln)
                self.wfile.flush()
                if self.line_delay:
                    time.sleep(self.line_delay)
            while q.get("follow", "").lower() == "true":   # a followed log stays open until the reader leaves
                readable, _, _ = select.select([self.connection], [], [], 0.5)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--api-key-file", required=True)
    ap.add_argument("--cluster-id", type=int, required=True)
    ap.add_argument("--name", default="fake-b300")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--mem-gib", type=int, default=288)
    ap.add_argument("--port", type=int, default=10150)
    ap.add_argument("--interval", type=float, default=3.0)
    ap.add_argument("--token-file", help="write the worker token here (tests drive instance states with it)")
    ap.add_argument("--serve-log", help="answer GET /serveLogs/{id} with this file's lines")
    ap.add_argument("--log-line-delay", type=float, default=0.0, help="seconds between served log lines")
    a = ap.parse_args()
    _Health.serve_log, _Health.line_delay = a.serve_log, a.log_line_delay

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), _Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    key = open(a.api_key_file).read().strip()
    admin = httpx.Client(base_url=a.server, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    wid = str(uuid.uuid5(uuid.NAMESPACE_DNS, a.name))
    st = status(a.gpus, a.mem_gib)
    ident = {"name": a.name, "hostname": socket.gethostname(), "ip": "127.0.0.1", "ifname": "lo",
             "port": a.port, "worker_uuid": wid, "cluster_id": a.cluster_id,
             "system_reserved": {"ram": 0, "vram": 0}}

    def register() -> dict:
        r = admin.post("/v2/workers", json={**ident, "status": st})
        if r.status_code >= 300:
            print(f"register failed: HTTP {r.status_code} {r.text[:300]}", file=sys.stderr, flush=True)
            sys.exit(1)
        return r.json()

    w = register()
    # the server assigns the identity (routes/workers.py @2.3.0); re-registration must echo it back
    ident["worker_uuid"] = w.get("worker_uuid") or wid
    token = w.get("token")
    if not token:
        print(f"no worker token in the registration answer: {json.dumps(w)[:300]}", file=sys.stderr, flush=True)
        return 1
    _Health.token = token
    if a.token_file:
        with open(a.token_file, "w") as fh:
            fh.write(token)
    wc = httpx.Client(base_url=a.server, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    body = {k: v for k, v in ident.items() if k not in ("name", "cluster_id")}
    announced = False
    while True:
        try:
            wc.post("/v2/worker-status", json={**body, "status": st})
            wc.post("/v2/worker-heartbeat")
            # the server flushes heartbeats in batches; once one is stored, a registration clears the sticky
            # first "Heartbeat lost" state (gpustack.md §5.4) - repeat it while the worker is not ready
            cur = admin.get(f"/v2/workers/{w['id']}").json()
            if cur.get("state") != "ready" and cur.get("heartbeat_time"):
                w = register()
            elif cur.get("state") == "ready" and not announced:
                print(f"registered {w.get('id')}", flush=True)
                announced = True
        except httpx.HTTPError as exc:
            print(f"heartbeat error: {exc}", file=sys.stderr, flush=True)
        time.sleep(a.interval)


if __name__ == "__main__":
    sys.exit(main())
