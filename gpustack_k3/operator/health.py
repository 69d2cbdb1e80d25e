"""``/metrics`` (Prometheus text), ``/healthz`` and ``/readyz`` for the operator.

Operator metrics live in a registry of their own (two operators in one test process do not clash),
together with the cold-start metrics of ``gpustack_k3.metrics`` fed by the pod-log bridge;
``/metrics`` also serves the process-wide default registry (process and platform collectors).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpustack_k3.api.v1alpha1.constants import PHASE_PENDING, PHASES
from gpustack_k3.metrics import ColdStartMetrics

log = logging.getLogger("gpustack_k3.operator")


class OperatorMetrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        self.registry = CollectorRegistry(auto_describe=True)
        p = "gpustack_k3_operator"
        self.reconciles = Counter(f"{p}_reconcile_total", "Reconciles by result (success, error)",
                                  ["result"], registry=self.registry)
        self.errors = Counter(f"{p}_reconcile_errors_total", "Reconcile errors by cause", ["cause"],
                              registry=self.registry)
        self.duration = Histogram(f"{p}_reconcile_duration_seconds", "Time spent in one reconcile",
                                  buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
                                  registry=self.registry)
        self.queue_depth = Gauge(f"{p}_workqueue_depth", "Keys waiting in the work queue", registry=self.registry)
        self.queue_delayed = Gauge(f"{p}_workqueue_delayed", "Keys waiting for a delayed retry (rate-limited requeue)",
                                   registry=self.registry)
        self.queue_idle = Gauge(f"{p}_workqueue_idle", "1 while no key is queued or being reconciled",
                                registry=self.registry)
        self.writes = Counter(f"{p}_api_writes_total", "Writes sent to the API server", ["verb", "kind"],
                              registry=self.registry)
        self.relists = Counter(f"{p}_informer_relists_total", "Full relists by kind", ["kind"], registry=self.registry)
        self.leader = Gauge(f"{p}_leader", "1 while this replica holds the lease", registry=self.registry)
        # P/D: one per KVTransfer decision (docs/design/010-pd-rollouts.md §4)
        self.kv_checks = Counter("gpustack_k3_kv_transfer_checks_total", "KVTransfer checks by their reason",
                                 ["namespace", "name", "reason"], registry=self.registry)


def coldstart_metrics(registry):  # -> gpustack_k3.metrics.ColdStartMetrics
    """``gpustack_k3.metrics.ColdStartMetrics`` on the operator's registry (cold-start phase
    histogram, current phase, failures); the pod-log bridge passes its ``listener`` to every tracker."""
    return ColdStartMetrics(registry=registry)


class ResourcesByPhase:
    """Collector of ``gpustack_k3_operator_resources{phase}``: resources per ``status.phase``, read
    from the informer cache at scrape time (the chart's Grafana dashboard sums it by phase)."""

    def __init__(self, store) -> None:
        self.store = store

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        counts = dict.fromkeys(PHASES, 0)
        for ns, name in self.store.list_keys():
            obj = self.store.get(ns, name) or {}
            phase = (obj.get("status") or {}).get("phase") or PHASE_PENDING
            counts[phase] = counts.get(phase, 0) + 1
        g = GaugeMetricFamily("gpustack_k3_operator_resources", "K3Deployment resources by status.phase",
                              labels=["phase"])
        for phase, n in counts.items():
            g.add_metric([phase], n)
        yield g


class HealthServer:
    def __init__(self, metrics: OperatorMetrics, *, host: str, port: int,
                 healthy: Callable[[], tuple[bool, str]], ready: Callable[[], tuple[bool, str]]) -> None:
        from prometheus_client import REGISTRY, generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body = generate_latest(metrics.registry) + generate_latest(REGISTRY)
                    self._send(200, body, CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok, why = (healthy if path == "/healthz" else ready)()
                    self._send(200 if ok else 503, (why or "ok").encode() + b"\n", "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt: str, *args: object) -> None:
                log.debug("health server: " + fmt, *args)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="operator-health", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
