"""`operator run` as the chart runs it: a separate process with the real flags, the project's own
validation/rendering, a kubeconfig pointing at the emulator (also a separate process), SIGTERM to stop."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import urllib.request

import pytest
import yaml
from kubernetes import client
from operator_helpers import G, P, V, wait_for

from tests.support.k8s_emulator import ADMIN_TOKEN
from tests.support.ports import free_port

pytestmark = pytest.mark.operator
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def emulator_process():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.k8s_emulator"], stdout=subprocess.PIPE,
                            text=True, env=env)
    url = json.loads(proc.stdout.readline())["url"]
    yield url
    proc.terminate()
    proc.wait(10)


def test_operator_run_process_with_kubeconfig_and_sigterm(emulator_process, tmp_path):
    url = emulator_process
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "emu",
        "clusters": [{"name": "emu", "cluster": {"server": url}}],
        "users": [{"name": "emu", "user": {"token": ADMIN_TOKEN}}],   # an unknown token is 401
        "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "emu"}}]}))
    cfg = client.Configuration()
    cfg.host = url
    api = client.ApiClient(cfg)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "llm"}})
    port = free_port()
    code = ("import sys; from gpustack_k3.cli.operator_cmd import operator; "
            "operator(sys.argv[1:], prog_name='gpustack-k3 operator')")
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "--namespace", "llm", "--metrics-port", str(port),
                             "--metrics-host", "127.0.0.1", "--resync", "30", "--leader-elect",
                             "--kubeconfig", str(kubeconfig)],
                            env={**os.environ, "PYTHONPATH": str(ROOT), "POD_NAMESPACE": "llm"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status == 200, timeout=30,
                 what="readyz")
        doc = yaml.safe_load((ROOT / "gpustack_k3/catalog/data/presets/vllm-fixed.yaml").read_text())
        doc["metadata"] = {"name": "kimi", "namespace": "llm"}
        co, apps = client.CustomObjectsApi(api), client.AppsV1Api(api)
        co.create_namespaced_custom_object(G, V, "llm", P, doc)
        wait_for(lambda: apps.read_namespaced_deployment("kimi", "llm"), timeout=30, what="deployment")
        st = wait_for(lambda: co.get_namespaced_custom_object(G, V, "llm", P, "kimi").get("status"), timeout=30,
                      what="status")
        assert st["phase"] == "Deploying"
        lease = client.CoordinationV1Api(api).read_namespaced_lease("gpustack-k3-operator", "llm")
        assert lease.spec.holder_identity
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    released = client.CoordinationV1Api(api).read_namespaced_lease("gpustack-k3-operator", "llm")
    assert released.spec.holder_identity in (None, "")  # released on a clean stop


def test_cli_without_cluster_config_says_how_to_fix(tmp_path):
    code = "import sys; from gpustack_k3.cli.operator_cmd import operator; operator(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-c", code, "run", "--kubeconfig", str(tmp_path / "missing")],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2          # unusable input, as everywhere
    assert "Traceback" not in proc.stderr
    assert "--kubeconfig" in proc.stderr
    garbage = tmp_path / "garbage"
    garbage.write_bytes(bytes(range(256)) * 8)
    proc = subprocess.run([sys.executable, "-c", code, "run", "--kubeconfig", str(garbage)],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "no usable cluster configuration" in proc.stderr
