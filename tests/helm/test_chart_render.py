"""The chart with the real helm v3.17.3: lint --strict, template with the default and fixture
values, every object through kubernetes-validate --strict (K3Deployments through the CRD's own
schema, CEL and the Python rules), the operator flags against the operator CLI, least-privilege
RBAC, bad values refused by values.schema.json, and manifests/install.yaml drift."""
from __future__ import annotations

import copy

import jsonschema
import pytest
import yaml
from helm_helpers import CI_VALUES, by_kind, write_values

from gpustack_k3.catalog import load_catalog
from tools.chart import CHART_DIR, MANIFESTS_DIR, render_install_yaml

pytestmark = pytest.mark.helm

K8S_VERSION = "1.30"
CRD_KINDS = {"K3Deployment", "ServiceMonitor"}   # not built-in: validated below by other means


def _presets_values(tmp_path):
    cat = load_catalog()
    deployments = [{"name": p.document["metadata"]["name"], "namespace": "llm",
                    "labels": {"preset": name}, "spec": copy.deepcopy(p.document["spec"])}
                   for name, p in cat.presets.items()]
    return write_values(tmp_path, {"deployments": deployments}, "deployments-values.yaml")


def test_ci_fixture_values_exist():
    assert {p.name for p in CI_VALUES} >= {"namespace-scope-values.yaml", "monitoring-values.yaml"}


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["default", *[p.stem for p in CI_VALUES]])
def test_helm_lint_strict(helm_run, values):
    argv = ["lint", "--strict", str(CHART_DIR), "--kube-version", "1.30.0"]
    if values:
        argv += ["--values", str(values)]
    res = helm_run(argv)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 chart(s) failed" in res.stdout


def test_helm_lint_strict_with_deployments(helm_run, tmp_path):
    res = helm_run(["lint", "--strict", str(CHART_DIR), "--values", str(_presets_values(tmp_path))])
    assert res.returncode == 0, res.stdout + res.stderr


def _validate_all(objs, crd):
    import kubernetes_validate as kv

    from gpustack_k3.crd.schema import to_jsonschema
    from tests.support.celeval import evaluate

    schema = to_jsonschema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], closed=False)
    for obj in objs:
        if obj["kind"] == "K3Deployment":
            jsonschema.Draft7Validator(schema).validate(obj)
            assert evaluate(crd, obj) == [], obj["metadata"]["name"]
        elif obj["kind"] == "ServiceMonitor":
            # No schema for the Prometheus Operator CRD ships in any package here: check its contract.
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            assert obj["spec"]["endpoints"][0]["port"] == "metrics" and obj["spec"]["selector"]["matchLabels"]
        else:
            kv.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["default", *[p.stem for p in CI_VALUES]])
def test_template_output_is_valid_kubernetes(render, values, crd_manifest):
    objs = render(values_files=[values] if values else [])
    kinds = {o["kind"] for o in objs}
    assert {"CustomResourceDefinition", "Deployment", "ServiceAccount", "Service"} <= kinds
    _validate_all(objs, crd_manifest)
    (crd,) = by_kind(objs, "CustomResourceDefinition")
    assert crd == crd_manifest, "crds/ in the chart differs from the generated CRD"


def test_deployments_list_creates_valid_resources(render, tmp_path, crd_manifest):
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.rules import validate

    objs = render(values_files=[_presets_values(tmp_path)])
    crs = by_kind(objs, "K3Deployment")
    cat = load_catalog()
    assert len(crs) == len(cat.presets)
    _validate_all(crs, crd_manifest)
    for cr in crs:
        assert cr["metadata"]["namespace"] == "llm"
        preset = cat.presets[cr["metadata"]["labels"]["preset"]]
        assert cr["spec"] == preset.document["spec"]
        doc = DeploymentDocument.model_validate(cr)
        assert not [f for f in validate(doc) if f.severity == "error"]


def test_monitoring_objects(render):
    objs = render(values_files=[CHART_DIR / "ci" / "monitoring-values.yaml"])
    (sm,) = by_kind(objs, "ServiceMonitor")
    (svc,) = by_kind(objs, "Service")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert all(svc["metadata"]["labels"][k] == v for k, v in sm["spec"]["selector"]["matchLabels"].items())
    (cm,) = by_kind(objs, "ConfigMap")
    assert cm["metadata"]["namespace"] == "monitoring" and cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    import json

    from tools.chart import dashboard

    assert json.loads(cm["data"]["gpustack-k3.json"]) == dashboard()
    default = render()
    assert not by_kind(default, "ServiceMonitor") and not by_kind(default, "ConfigMap")


def _operator_container(objs):
    (dep,) = by_kind(objs, "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return dep, c


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["default", *[p.stem for p in CI_VALUES]])
def test_operator_args_parse_with_the_operator_cli(render, values):
    """The Deployment's command line is accepted by `gpustack-k3 operator run` itself."""
    from gpustack_k3.cli import operator_cmd as op_cli
    vals = yaml.safe_load(values.read_text()) if values else {}
    dep, c = _operator_container(render(values_files=[values] if values else []))
    assert c["command"] == ["gpustack-k3"] and c["args"][:2] == ["operator", "run"]
    run_cmd = op_cli.operator.commands["run"]
    ctx = run_cmd.make_context("run", list(c["args"][2:]))
    p = ctx.params
    op = vals.get("operator", {})
    assert p["metrics_port"] == op.get("metricsPort", 8080)
    assert p["resync_s"] == float(op.get("resyncSeconds", 300))
    assert p["leader_elect"] is op.get("leaderElect", False)
    assert list(p["namespaces"]) == op.get("watchNamespaces", [])
    assert p["log_level"] == op.get("logLevel", "info")
    port = c["ports"][0]
    assert port["containerPort"] == p["metrics_port"] and c["livenessProbe"]["httpGet"]["port"] == port["name"]
    env = {e["name"] for e in c["env"]}
    assert {"POD_NAME", "POD_NAMESPACE"} <= env   # leader identity and lease namespace (operator/controller.py)
    assert dep["spec"]["replicas"] == vals.get("replicas", 1)
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]


def _expected_rbac():
    """What the operator needs: derived from the kinds it owns (operator/controller.py) plus its
    own resource, pods (readiness, logs) and events."""
    from gpustack_k3.operator.kinds import CHILD_KINDS
    from gpustack_k3.operator import kube
    lifecycle = {"get", "list", "watch", "create", "patch", "delete"}
    want: dict[tuple[str, str], set[str]] = {}
    for api_version, kind in (k.key for k in CHILD_KINDS):
        group = api_version.split("/")[0] if "/" in api_version else ""
        plural, _ = kube.KNOWN[(api_version, kind)]
        want[(group, plural)] = set(lifecycle)
    want[("k3.gpustack.ai", "k3deployments")] = {"get", "list", "watch", "patch"}
    want[("k3.gpustack.ai", "k3deployments/status")] = {"get", "patch", "update"}
    want[("k3.gpustack.ai", "k3deployments/finalizers")] = {"update"}
    want[("", "pods")] = {"get", "list", "watch"}
    want[("", "pods/log")] = {"get"}
    want[("", "events")] = {"create", "patch"}
    return want


def _grants(rules):
    got: dict[tuple[str, str], set[str]] = {}
    for r in rules:
        for verb_list in (r["verbs"], r["resources"], r["apiGroups"]):
            assert "*" not in verb_list, f"wildcard in {r}"
        for g in r["apiGroups"]:
            for res in r["resources"]:
                got.setdefault((g, res), set()).update(r["verbs"])
    return got


def test_rbac_cluster_scope_is_least_privilege(render):
    objs = render()
    (role,) = by_kind(objs, "ClusterRole")
    assert _grants(role["rules"]) == _expected_rbac()
    (binding,) = by_kind(objs, "ClusterRoleBinding")
    (sa,) = by_kind(objs, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]
    assert not by_kind(objs, "Role"), "no lease Role without leader election"


def test_rbac_namespace_scope_and_leases(render):
    objs = render(values_files=[CHART_DIR / "ci" / "namespace-scope-values.yaml"])
    assert not by_kind(objs, "ClusterRole") and not by_kind(objs, "ClusterRoleBinding")
    roles = by_kind(objs, "Role")
    work = [r for r in roles if not r["metadata"]["name"].endswith("-leader-election")]
    assert sorted(r["metadata"]["namespace"] for r in work) == ["llm-a", "llm-b"]
    for r in work:
        assert _grants(r["rules"]) == _expected_rbac()
    (lease,) = [r for r in roles if r["metadata"]["name"].endswith("-leader-election")]
    assert lease["metadata"]["namespace"] == "gpustack-k3"
    assert _grants(lease["rules"]) == {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
    bindings = by_kind(objs, "RoleBinding")
    assert len(bindings) == 3 and all(b["roleRef"]["kind"] == "Role" for b in bindings)


BAD_VALUES = [
    ("unknown top-level key", ["--set", "operatorr.workers=2"], "operatorr"),
    ("unknown nested key", ["--set", "operator.metricPort=9090"], "metricPort"),
    ("wrong type", ["--set", "replicas=two"], "replicas"),
    ("out of range", ["--set", "operator.metricsPort=70000"], "metricsPort"),
    ("enum", ["--set", "rbac.scope=everything"], "scope"),
    ("namespace not a DNS label", ["--set", "operator.watchNamespaces[0]=LLM_A"], "watchNamespaces"),
    ("digest malformed", ["--set", "image.digest=latest"], "digest"),
]


@pytest.mark.parametrize("label,argv,needle", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_bad_values_refused_by_schema(helm_run, label, argv, needle):
    res = helm_run(["template", "x", str(CHART_DIR), *argv])
    assert res.returncode != 0, f"{label}: accepted"
    assert "values don't meet the specifications of the schema" in res.stderr and needle in res.stderr, res.stderr


BAD_DEPLOYMENTS = [
    ("spec tp 0", {"parallel": {"tp": 0}}, "tp"),
    ("spec unknown field", {"parallel": {"tensorParallel": 8}}, "tensorParallel"),
    ("spec engine missing", {"engine": None}, "engine"),
    ("spec engine unknown", {"engine": {"name": "tgi"}}, "name"),
    # a method name is any string up to 128 characters (each release's list is rule spec-method-unsupported)
    ("spec method too long", {"speculative": {"method": "m" * 129}}, "method"),
]


@pytest.mark.parametrize("label,patch,needle", BAD_DEPLOYMENTS, ids=[b[0] for b in BAD_DEPLOYMENTS])
def test_invalid_deployment_entry_refused_by_schema(helm_run, tmp_path, label, patch, needle):
    spec = copy.deepcopy(load_catalog().presets["vllm-fixed"].document["spec"])
    for k, v in patch.items():
        if v is None:
            spec.pop(k)
        else:
            spec[k] = {**spec.get(k, {}), **v}
    values = write_values(tmp_path, {"deployments": [{"name": "kimi", "spec": spec}]})
    res = helm_run(["template", "x", str(CHART_DIR), "--values", str(values)])
    assert res.returncode != 0, f"{label}: accepted"
    assert "deployments.0.spec" in res.stderr and needle in res.stderr, res.stderr


def test_bad_deployment_name_refused(helm_run, tmp_path):
    spec = load_catalog().presets["vllm-fixed"].document["spec"]
    values = write_values(tmp_path, {"deployments": [{"name": "Kimi_K3", "spec": spec}]})
    res = helm_run(["template", "x", str(CHART_DIR), "--values", str(values)])
    assert res.returncode != 0 and "deployments.0.name" in res.stderr, res.stderr


def test_replicas_without_leader_election_refused(helm_run):
    res = helm_run(["template", "x", str(CHART_DIR), "--set", "replicas=2"])
    assert res.returncode != 0 and "operator.leaderElect" in res.stderr, res.stderr


def test_install_yaml_is_rendered_from_the_chart(helm_bin):
    path = MANIFESTS_DIR / "install.yaml"
    assert path.is_file(), "manifests/install.yaml missing: run `python3 tools/generate.py`"
    fresh = render_install_yaml()
    assert path.read_text(encoding="utf-8") == fresh, "manifests/install.yaml is stale: run `python3 tools/generate.py`"
    assert fresh == render_install_yaml(), "rendering is not deterministic"
    objs = [d for d in yaml.safe_load_all(fresh) if d]
    kinds = [o["kind"] for o in objs]
    assert kinds[0] == "CustomResourceDefinition" and "Namespace" in kinds and "ClusterRole" in kinds
    for o in objs:
        if o["kind"] not in ("CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert o["metadata"]["namespace"] == "gpustack-k3", o["kind"]
