import contextlib
import time

import pytest
from kubernetes import client

from gpustack_k3.operator.controller import Operator
from gpustack_k3.testing.k8s_emulator import K8sEmulator
from operator_fakes import fake_plan, fake_render, fake_validate

G, V, P = "k3.gpustack.ai", "v1alpha1", "k3deployments"
NS = "llm"


def wait_for(fn, timeout=15.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # not there yet
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


def k3(name, generation_spec=None, **spec):
    return {"apiVersion": f"{G}/{V}", "kind": "K3Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"engine": {"name": "vllm"}, **spec}}


@pytest.fixture
def emu():
    with K8sEmulator() as e:
        e.create_namespace(NS)
        yield e


@pytest.fixture
def kube(emu):
    api = emu.api_client("test-client/1")
    yield client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    api.close()


@pytest.fixture
def start_operator(emu):
    started = []

    def start(**kw):
        kw.setdefault("namespaces", [NS])
        kw.setdefault("validate", fake_validate)
        kw.setdefault("render", fake_render)
        kw.setdefault("plan", fake_plan)
        kw.setdefault("resync_s", 60)
        kw.setdefault("watch_timeout_s", 5)
        kw.setdefault("workers", 2)
        op = Operator(emu.api_client(), **kw).start()
        started.append(op)
        return op

    yield start
    for op in started:
        with contextlib.suppress(Exception):
            op.stop()
