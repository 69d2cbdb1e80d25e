"""The operator under the RBAC the chart renders, enforced by the API emulator, for the values that change it:
namespace-scoped Roles in each watched namespace, and the leader-election Role for Leases in the release
namespace (operator.leaderElect=true). The unit tier runs the operator under manifests/install.yaml (default
values); these renders need helm."""
from __future__ import annotations

import pathlib

import pytest
import yaml
from kubernetes import client

from gpustack_k3.operator.controller import Options, new_operator
from gpustack_k3.operator.manager import LeaderElection
from tests.support.k8s_emulator import K8sEmulator
from tests.support.waiting import wait_for
from tools.chart import CHART_DIR, helm_template

pytestmark = [pytest.mark.helm, pytest.mark.operator]
RELEASE_NS = "k3"
PRESET = pathlib.Path(__file__).resolve().parents[2] / "gpustack_k3/catalog/data/presets/vllm-fixed.yaml"


def test_operator_runs_under_the_namespace_scoped_rbac_with_leader_election(helm_bin):
    values = yaml.safe_load((CHART_DIR / "ci" / "namespace-scope-values.yaml").read_text())
    watched = values["operator"]["watchNamespaces"]
    assert values["rbac"]["scope"] == "namespace" and values["operator"]["leaderElect"] is True
    docs = [d for d in yaml.safe_load_all(helm_template(
        CHART_DIR, values_files=[CHART_DIR / "ci" / "namespace-scope-values.yaml"], namespace=RELEASE_NS,
        include_crds=False)) if d]
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    with K8sEmulator() as emu:
        for ns in [RELEASE_NS, *watched]:
            emu.create_namespace(ns)
        created = emu.install(docs)
        assert {o["kind"] for o in created} >= {"Role", "RoleBinding", "ServiceAccount"}
        token = emu.service_account_token(sa["namespace"], sa["name"])
        op = new_operator(emu.api_client(token=token), Options(), namespaces=watched, watch_timeout_s=5,
                          leader_election=LeaderElection(lease_namespace=RELEASE_NS, lease_duration=3.0,
                                                         renew_deadline=2.0, retry_period=0.2))
        op.start()
        try:
            assert wait_for(lambda: op.leading, timeout=30.0, what="leadership")
            admin = emu.api_client()
            co = client.CustomObjectsApi(admin)
            doc = yaml.safe_load(PRESET.read_text())
            for ns in watched:
                doc["metadata"] = {"name": "kimi", "namespace": ns}
                co.create_namespaced_custom_object("k3.gpustack.ai", "v1alpha1", ns, "k3deployments", doc)
            for ns in watched:
                st = wait_for(lambda ns=ns: (co.get_namespaced_custom_object(
                    "k3.gpustack.ai", "v1alpha1", ns, "k3deployments", "kimi").get("status") or {}).get("phase"),
                    timeout=30.0, what=f"a phase in {ns}")
                assert st == "Deploying"
                assert client.AppsV1Api(admin).read_namespaced_deployment("kimi", ns)
            assert op.ready() == (True, "ok")
            lease = client.CoordinationV1Api(admin).read_namespaced_lease("gpustack-k3-operator", RELEASE_NS)
            assert lease.spec.holder_identity == op.identity
            # the Roles grant nothing outside the watched namespaces
            user = client.CoreV1Api(emu.api_client(token=token))
            with pytest.raises(client.rest.ApiException) as e:
                user.list_namespaced_pod("default")
            assert e.value.status == 403
        finally:
            op.stop()
