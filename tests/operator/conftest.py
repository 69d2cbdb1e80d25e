import contextlib

import pytest
from kubernetes import client
from operator_fakes import fake_plan, fake_render, fake_validate
from operator_helpers import NS

from gpustack_k3.operator.controller import Operator
from tests.support.k8s_emulator import K8sEmulator


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
        kw.setdefault("coldstart_factory", None)  # log following is tested in test_coldstart_http.py
        op = Operator(emu.api_client(), **kw).start()
        started.append(op)
        return op

    yield start
    for op in started:
        with contextlib.suppress(Exception):
            op.stop()
