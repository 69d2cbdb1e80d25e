import dataclasses
import contextlib
import pathlib

import pytest
import yaml
from kubernetes import client
from operator_fakes import fake_plan, fake_render, fake_validate
from operator_helpers import NS

from gpustack_k3.operator import hooks
from gpustack_k3.operator.controller import Options, new_operator
from tests.support.k8s_emulator import K8sEmulator

INSTALL = pathlib.Path(__file__).resolve().parents[2] / "manifests" / "install.yaml"


def install_documents() -> list[dict]:
    return [d for d in yaml.safe_load_all(INSTALL.read_text()) if d]


@pytest.fixture
def emu():
    """The API emulator with the namespace of the tests and the RBAC of manifests/install.yaml (the chart's
    default install): its ClusterRole, ClusterRoleBinding and ServiceAccount."""
    with K8sEmulator() as e:
        e.create_namespace(NS)
        e.install(install_documents())
        yield e


@pytest.fixture
def operator_token(emu) -> str:
    """A token of the operator's ServiceAccount of manifests/install.yaml: RBAC applies to its requests."""
    sa = next(d for d in install_documents() if d["kind"] == "ServiceAccount")
    return emu.service_account_token(sa["metadata"]["namespace"], sa["metadata"]["name"])


@pytest.fixture
def kube(emu):
    api = emu.api_client("test-client/1")
    yield client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    api.close()


@pytest.fixture
def start_operator(emu, operator_token):
    """Start an Operator as the ServiceAccount of manifests/install.yaml (a request its RBAC does not grant
    is 403, as in a cluster). ``rbac=False``: as the admin, for leader election, whose Lease permissions the
    chart grants only with operator.leaderElect=true (tests/helm checks the operator under that RBAC)."""
    started = []

    def start(rbac: bool = True, **kw):
        kw.setdefault("namespaces", [NS])
        kw.setdefault("validate", fake_validate)
        kw.setdefault("render", fake_render)
        kw.setdefault("plan", fake_plan)
        kw.setdefault("resync_s", 60)
        kw.setdefault("watch_timeout_s", 5)
        kw.setdefault("workers", 2)
        kw.setdefault("coldstart", None)  # log following is tested in test_coldstart_http.py
        kw.setdefault("kv_fetch", None)   # the KVTransfer check reads fake engines: test_pd_rollout_http.py
        options = Options(**{f.name: kw.pop(f.name) for f in dataclasses.fields(Options) if f.name in kw})
        op = new_operator(emu.api_client(token=operator_token if rbac else None), options, **kw).start()
        started.append(op)
        return op

    yield start
    for op in started:
        with contextlib.suppress(Exception):
            op.stop()


@pytest.fixture
def project_operator(start_operator):
    """The operator with the project's own validation, rendering and plan (gpustack_k3.operator.hooks)."""
    return lambda **kw: start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, **kw)
