"""HTTP client (retries, error lines), apply/delete decisions and the CLI, against an in-memory GPUStack.

The in-memory server implements only the endpoints apply/delete/status use, with the behaviour the live
2.3.0 server showed (tests/gpustack/test_live.py checks the same flows against the real one): missing
backend name -> HTTP 400 "not found", 409 on a duplicate backend, pagination envelope, null echo of
optional fields.
"""
from __future__ import annotations

import copy
import itertools
import json
import time

import httpx
import pytest
from click.testing import CliRunner

from gpustack_k3.gpustack import apply as A
from gpustack_k3.cli.gpustack_cmd import gpustack
from gpustack_k3.gpustack.client import GPUStackClient, GPUStackError
from gpustack_k3.gpustack.status import InstancePhases
from tests.support.ports import free_port

KEY = "gpustack_test_key"


class FakeGPUStack:
    def __init__(self) -> None:
        self.backends: dict[int, dict] = {}
        self.models: dict[int, dict] = {}
        self.ids = itertools.count(1)
        self.calls: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, str], list[int]] = {}

    def page(self, items):
        return httpx.Response(200, json={"items": items, "pagination": {"page": 1, "perPage": 100,
                                                                        "total": len(items), "totalPage": 1}})

    def __call__(self, req: httpx.Request) -> httpx.Response:
        path, method = req.url.path, req.method
        self.calls.append((method, path))
        if req.headers.get("authorization") != f"Bearer {KEY}":
            return httpx.Response(401, json={"code": 401, "message": "Invalid API key"})
        queued = self.fail.get((method, path))
        if queued:
            return httpx.Response(queued.pop(0), json={"message": "injected"})
        body = json.loads(req.content) if req.content else None
        if path == "/v2/clusters":
            return self.page([{"id": 1, "name": "default"}])
        if path.startswith("/v2/inference-backends/backend_name/"):
            name = path.rsplit("/", 1)[1]
            for b in self.backends.values():
                if b["backend_name"] == name:
                    return httpx.Response(200, json=b)
            return httpx.Response(400, json={"message": f"Inference backend {name} not found"})
        if path == "/v2/inference-backends" and method == "POST":
            if any(b["backend_name"] == body["backend_name"] for b in self.backends.values()):
                return httpx.Response(409, json={"message": "already exists"})
            i = next(self.ids)
            vcs = {k: {"run_command": None, "entrypoint": None, "env": None, **v} for k, v in body["version_configs"].items()}
            self.backends[i] = {**body, "id": i, "icon": None, "version_configs": vcs}
            return httpx.Response(200, json=self.backends[i])
        if path.startswith("/v2/inference-backends/") and method == "PUT":
            i = int(path.rsplit("/", 1)[1])
            self.backends[i] = {**body, "id": i}
            return httpx.Response(200, json=self.backends[i])
        if path == "/v2/models" and method == "GET":
            q = req.url.params
            items = [m for m in self.models.values() if q.get("search", "") in m["name"]
                     and (not q.get("cluster_id") or str(m["cluster_id"]) == q["cluster_id"])]
            return self.page(items)
        if path == "/v2/models" and method == "POST":
            i = next(self.ids)
            self.models[i] = {**body, "id": i, "state": None, "image_name": None,
                              "gpu_selector": {"gpu_ids": None, **body.get("gpu_selector", {})}}
            return httpx.Response(200, json=self.models[i])
        if path.startswith("/v2/models/") and method == "PUT":
            i = int(path.rsplit("/", 1)[1])
            self.models[i] = {**self.models[i], **body}
            return httpx.Response(200, json=self.models[i])
        if path.startswith("/v2/models/") and method == "DELETE":
            self.models.pop(int(path.rsplit("/", 1)[1]))
            return httpx.Response(200)
        if path == "/v2/models/import":
            import yaml

            entry = yaml.safe_load(body["content"])
            cur = [m for m in self.models.values() if m["name"] == entry["name"]]
            action = "create" if not cur else "unchanged"
            return httpx.Response(200, json={"dry_run": body["dry_run"], "valid": "bogus" not in entry,
                                             "entries": [{"index": 0, "name": entry["name"], "action": action,
                                                          "errors": ["unknown field(s): bogus"] if "bogus" in entry else []}]})
        if path == "/v2/model-instances":
            return self.page([])
        return httpx.Response(404, json={"message": "no route"})

    def writes(self):
        return [c for c in self.calls if c[0] != "GET"]


def client_for(fake, **kw) -> GPUStackClient:
    return GPUStackClient("http://gpustack.test", KEY, transport=httpx.MockTransport(fake), backoff=0, **kw)


def files_of(preset="vllm-seed", worker=None, **spec):
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.launch import build_launch
    from gpustack_k3.render.gpustack import model_source_for, render_gpustack

    d = copy.deepcopy(load_catalog().presets[preset].document)
    d["spec"].update(spec)
    doc = DeploymentDocument.model_validate(d)
    launch, _, _ = build_launch(doc)
    return render_gpustack(launch, worker=worker, source=model_source_for(doc))


# ------------------------------------------------------------------ client

@pytest.mark.parametrize("status, kind", [(401, "auth"), (403, "auth"), (409, "conflict"), (422, "invalid"),
                                          (400, "invalid"), (404, "not_found")])
def test_4xx_is_one_clear_error_and_never_retried(status, kind):
    fake = FakeGPUStack()
    fake.fail[("GET", "/v2/clusters")] = [status] * 5
    with pytest.raises(GPUStackError) as ei:
        client_for(fake).clusters()
    assert ei.value.kind == kind and ei.value.status == status
    assert "\n" not in str(ei.value)
    assert fake.calls.count(("GET", "/v2/clusters")) == 1


def test_5xx_is_retried_then_succeeds():
    fake = FakeGPUStack()
    fake.fail[("GET", "/v2/clusters")] = [503, 502]
    assert client_for(fake, attempts=4).clusters()[0]["name"] == "default"
    assert fake.calls.count(("GET", "/v2/clusters")) == 3


def test_5xx_gives_up_after_attempts():
    fake = FakeGPUStack()
    fake.fail[("GET", "/v2/clusters")] = [500] * 9
    with pytest.raises(GPUStackError, match="HTTP 500 after 3 attempt"):
        client_for(fake, attempts=3).clusters()
    assert fake.calls.count(("GET", "/v2/clusters")) == 3


def test_connection_errors_are_retried():
    n = {"calls": 0}

    def handler(req):
        n["calls"] += 1
        if n["calls"] < 3:
            raise httpx.ConnectError("refused", request=req)
        return httpx.Response(200, json={"items": [], "pagination": {"totalPage": 1}})
    c = GPUStackClient("http://x.test", KEY, transport=httpx.MockTransport(handler), backoff=0, attempts=4)
    assert c.clusters() == []
    assert n["calls"] == 3


def test_read_timeouts_are_not_retried():
    n = {"calls": 0}

    def handler(req):
        n["calls"] += 1
        raise httpx.ReadTimeout("slow", request=req)
    c = GPUStackClient("http://x.test", KEY, transport=httpx.MockTransport(handler), backoff=0, attempts=4)
    with pytest.raises(GPUStackError, match="did not answer"):
        c.clusters()
    assert n["calls"] == 1


# ------------------------------------------------------------------ apply decisions

def test_apply_creates_then_is_idempotent_then_updates():
    fake = FakeGPUStack()
    c = client_for(fake)
    files = files_of()
    r1 = A.apply(c, files, cluster="default")
    assert r1["backend"]["action"] == "created" and r1["model"]["action"] == "created"
    n_writes = len(fake.writes())
    r2 = A.apply(c, files, cluster="default")
    assert r2 == {"backend": {"name": "kimi-k3-vllm-custom", "action": "unchanged"},
                  "model": {"name": "kimi-k3-vllm-seed", "id": r1["model"]["id"], "action": "unchanged"}}
    assert len(fake.writes()) == n_writes                       # re-applying changes nothing
    changed = files_of(scheduling={"maxNumBatchedTokens": 32768, "maxModelLen": 1000000, "maxNumSeqs": 16,
                                   "longPrefillTokenThreshold": 4096})
    r3 = A.apply(c, changed, cluster="default")
    assert r3["backend"]["action"] == "updated" and r3["model"]["action"] == "updated"
    assert len(fake.models) == 1 and len(fake.backends) == 1
    m = next(iter(fake.models.values()))
    assert "--max-num-seqs=16" in m["backend_parameters"] and m["cluster_id"] == 1


def test_backend_update_keeps_other_versions():
    current = {"id": 3, "version_configs": {"old": {"image_name": "i:old", "custom_framework": "cuda", "env": None}}}
    desired = json.loads(files_of()["backend.json"])
    action, body = A.backend_change(desired, {**desired, **current})
    assert action == "updated"
    assert body["version_configs"]["old"] == {"image_name": "i:old", "custom_framework": "cuda"}
    assert "kimi-k3" in body["version_configs"]


def test_duplicate_models_are_refused():
    fake = FakeGPUStack()
    c = client_for(fake)
    files = files_of()
    A.apply(c, files, cluster="default")
    m = next(iter(fake.models.values()))
    fake.models[99] = {**m, "id": 99}
    with pytest.raises(GPUStackError, match="2 deployments named"):
        A.apply(c, files, cluster="default")


def test_dry_run_writes_nothing_and_reports_import_verdict():
    fake = FakeGPUStack()
    c = client_for(fake)
    r = A.apply(c, files_of(), cluster="default", dry_run=True)
    assert r["dry_run"] and r["valid"] and r["backend"]["action"] == "created" and r["model"]["action"] == "created"
    assert fake.writes() == [("POST", "/v2/models/import")]
    bad = files_of()
    bad["import.yaml"] += "bogus: 1\n"
    with pytest.raises(GPUStackError, match="unknown field"):
        A.apply(c, bad, cluster="default", dry_run=True)


def test_unknown_cluster_names_known_ones():
    with pytest.raises(GPUStackError, match="known: default"):
        A.apply(client_for(FakeGPUStack()), files_of(), cluster="prod")


def test_delete():
    fake = FakeGPUStack()
    c = client_for(fake)
    A.apply(c, files_of(), cluster="default")
    assert A.delete(c, "kimi-k3-vllm-seed")["model"]["action"] == "deleted"
    with pytest.raises(GPUStackError, match="no deployment named"):
        A.delete(c, "kimi-k3-vllm-seed")


# ------------------------------------------------------------------ CLI exit codes and lines

def test_cli_missing_key_exit_2(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    r = CliRunner().invoke(gpustack, ["apply", "--preset", "vllm-seed", "--server", "http://127.0.0.1:9",
                                      "--api-key-env", "NO_SUCH_KEY_VAR", "-o", "json"])
    assert r.exit_code == 2
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "NO_SUCH_KEY_VAR" in err[0] and "Traceback" not in r.output


def test_cli_unreachable_exit_2(monkeypatch):
    monkeypatch.setenv("K", KEY)
    monkeypatch.setenv("GPUSTACK_K3_HTTP_ATTEMPTS", "2")
    r = CliRunner().invoke(gpustack, ["delete", "x", "--server", f"http://127.0.0.1:{free_port()}",
                                      "--api-key-env", "K"])
    assert r.exit_code == 2
    assert "cannot reach GPUStack" in r.stderr and "after 2 attempt" in r.stderr


def test_cli_refused_spec_exit_1_without_contacting_server(tmp_path, monkeypatch):
    import yaml

    from gpustack_k3.catalog import load_catalog

    d = copy.deepcopy(load_catalog().presets["vllm-seed"].document)
    d["spec"]["extraArgs"] = ["--port", "9000"]
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(d))
    monkeypatch.setenv("K", KEY)
    r = CliRunner().invoke(gpustack, ["apply", str(p), "--server", "http://127.0.0.1:9", "--api-key-env", "K"])
    assert r.exit_code == 1 and "refused" in r.stderr and "nothing was sent" in r.stderr


def test_cli_bad_spec_file_exit_2(tmp_path, monkeypatch):
    p = tmp_path / "spec.yaml"
    p.write_text("kind: [\n")
    monkeypatch.setenv("K", KEY)
    r = CliRunner().invoke(gpustack, ["apply", str(p), "--server", "http://127.0.0.1:9", "--api-key-env", "K"])
    assert r.exit_code == 2 and "invalid YAML" in r.stderr


# ------------------------------------------------------------------ GPUStack states -> platform phases

class RecordingTracker:
    def __init__(self):
        self.events = []

    def platform_event(self, phase, start, end=None, details=None):
        self.events.append((phase, start, end, details or {}))


def test_instance_states_map_to_platform_phases():
    t = RecordingTracker()
    p = InstancePhases(t)
    for now, state, extra in [(0, "pending", {}), (5, "scheduled", {"worker_name": "w", "gpu_indexes": [0, 1]}),
                              (6, "initializing", {}), (8, "downloading", {"download_progress": 50.0}),
                              (20, "starting", {"port": 40000}), (30, "running", {})]:
        p.on_state({"state": state, **extra}, now)
    ends = {(ph, s, e) for ph, s, e, _ in t.events if e is not None}
    assert ("scheduled", 0, 5) in ends
    assert ("image_pull", 6, 20) in ends
    assert ("container_start", 20, 30) in ends


def test_instance_phases_feed_the_real_tracker():
    from gpustack_k3 import coldstart
    tr = coldstart.ColdStartTracker(engine="vllm", budgets={})
    p = InstancePhases(tr)
    base = 1_790_000_000.0
    for dt, state in [(0, "pending"), (4, "scheduled"), (5, "initializing"), (60, "starting")]:
        p.on_state({"state": state, "worker_name": "w", "gpu_indexes": list(range(8))}, base + dt)
    rep = tr.report()
    sched = rep.phase("scheduled")
    assert sched is not None and sched.seconds == pytest.approx(4.0)
    assert rep.phase("image_pull").seconds == pytest.approx(55.0)


def test_watch_follows_states_and_feeds_instance_logs_to_the_tracker():
    """status --watch: instance events (watch=true stream) + the instance log into ColdStartTracker."""
    from pathlib import Path

    import gpustack_k3.coldstart  # noqa: F401 - a test dependency: missing means failed
    from gpustack_k3.gpustack.status import watch

    log = (Path(__file__).resolve().parents[1] / "docker" / "images" / "replay-engine" / "logs"
           / "vllm-0.33-kimi-k3-8xb300.log").read_bytes()
    inst = {"id": 7, "name": "kimi-k3-vllm-seed-abcde", "model_id": 5, "worker_id": 2, "worker_name": "w",
            "gpu_indexes": list(range(8)), "state": "starting", "port": 40000}

    def handler(req: httpx.Request) -> httpx.Response:
        p, q = req.url.path, req.url.params
        if p == "/v2/models":
            return httpx.Response(200, json={"items": [{"id": 5, "name": "kimi-k3-vllm-seed", "backend":
                                                        "kimi-k3-vllm-custom"}], "pagination": {"totalPage": 1}})
        if p == "/v2/model-instances" and q.get("watch") == "true":
            ev = {"type": 2, "data": {**inst, "state": "running"}, "changed_fields": {"state": [["starting"], ["running"]]}}

            def stream():
                time.sleep(0.5)            # let the log reader run first, as a real engine log precedes readiness
                yield b"\n\n"              # heartbeat
                yield json.dumps(ev).encode() + b"\n\n"
            return httpx.Response(200, content=stream())
        if p == "/v2/model-instances":
            return httpx.Response(200, json={"items": [inst], "pagination": {"totalPage": 1}})
        if p == "/v2/model-instances/7/logs":
            assert q.get("follow") == "true"
            return httpx.Response(200, content=iter([log[:5000], log[5000:]]))
        return httpx.Response(404, json={"message": p})

    lines: list[str] = []
    c = GPUStackClient("http://x.test", KEY, transport=httpx.MockTransport(handler), backoff=0)
    res = watch(c, "kimi-k3-vllm-seed", echo=lines.append, timeout=30)
    assert res["ok"] is True and res["instances"] == {"7": "running"}
    phases = set(res["coldstart"]["phases"])
    assert {"container_start", "weights_load", "cuda_graphs", "server_ready"} <= phases, res
    assert any("-> running" in ln for ln in lines) and any("phase weights_load" in ln for ln in lines)


@pytest.mark.parametrize("status, needle", [(409, "conflict (HTTP 409)"), (422, "refused POST /v2/inference-backends (HTTP 422)"),
                                            (401, "rejected the API key"), (503, "HTTP 503 after")])
def test_cli_server_verdicts_are_one_line_exit_2(monkeypatch, status, needle):
    import gpustack_k3.cli.gpustack_cmd as cli_mod

    fake = FakeGPUStack()
    fake.fail[("POST", "/v2/inference-backends")] = [status] * 5
    monkeypatch.setattr(cli_mod, "_client", lambda server, env: client_for(fake, attempts=2))
    r = CliRunner().invoke(gpustack, ["apply", "--preset", "vllm-seed", "--server", "http://x.test", "-o", "json"])
    assert r.exit_code == 2, r.output
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and needle in errs[0], r.stderr
    out = json.loads(r.stdout)   # -o json: the error object on stdout (issue 23)
    assert out["ok"] is False and out["exit_code"] == 2 and needle in out["error"]["message"]
    assert out["error"]["kind"] == "operational" and "Traceback" not in r.stderr


def test_cli_apply_text_and_json(monkeypatch):
    import gpustack_k3.cli.gpustack_cmd as cli_mod

    fake = FakeGPUStack()
    monkeypatch.setattr(cli_mod, "_client", lambda server, env: client_for(fake))
    r = CliRunner().invoke(gpustack, ["apply", "--preset", "sglang-seed", "--server", "http://x.test"])
    assert r.exit_code == 0 and "backend kimi-k3-sglang-custom: created" in r.stdout
    r = CliRunner().invoke(gpustack, ["apply", "--preset", "sglang-seed", "--server", "http://x.test", "-o", "json"])
    assert json.loads(r.stdout)["model"]["action"] == "unchanged"


@pytest.mark.parametrize("server", ["http://[::1", "gpustack:80"])
def test_unusable_server_url_is_one_line_exit_2(monkeypatch, server):
    monkeypatch.setenv("GPUSTACK_API_KEY", KEY)
    r = CliRunner().invoke(gpustack, ["status", "x", "--server", server])
    assert r.exit_code == 2, r.output
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "--server" in errs[0] and "Traceback" not in r.stderr, r.stderr
