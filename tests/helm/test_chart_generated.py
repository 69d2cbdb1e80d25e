"""Chart files that need no helm: generated files up to date, values.yaml = the values model's
defaults, the values schema's deployment spec = the CRD's, the dashboard's metrics exist."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from tools.chart import (
    CHART_DIR,
    CRD_FILE,
    REPO_ROOT,
    ChartValues,
    HelmError,
    chart_drift,
    chart_generated_files,
    dashboard,
    default_values,
    find_helm,
    values_schema,
)


def test_generated_chart_files_are_current():
    assert chart_drift() == [], "stale generated chart files: run `python3 tools/generate.py`"


def test_generated_files_say_how_to_regenerate():
    files = chart_generated_files()
    assert files[CRD_FILE].startswith("# GENERATED FILE") and "python3 tools/generate.py" in files[CRD_FILE][:300]
    assert "python3 tools/generate.py" in json.loads(files["values.schema.json"])["$comment"]
    assert "python3 tools/generate.py" in json.loads(files["dashboards/gpustack-k3.json"])["description"]


def test_drift_is_detected(tmp_path):
    import shutil

    chart = tmp_path / "chart"
    shutil.copytree(CHART_DIR, chart)
    assert chart_drift(chart) == []
    p = chart / CRD_FILE
    p.write_text(p.read_text().replace("k3dep", "k3d"), encoding="utf-8")
    assert chart_drift(chart) == [CRD_FILE]


def test_values_yaml_equals_the_model_defaults():
    on_disk = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert on_disk == default_values()
    ChartValues.model_validate(on_disk)


def test_values_schema_accepts_defaults_and_fixtures_and_refuses_unknown_keys():
    schema = values_schema()
    v = jsonschema.Draft7Validator(schema)
    v.validate(default_values())
    for f in (CHART_DIR / "ci").glob("*-values.yaml"):
        data = yaml.safe_load(f.read_text())
        v.validate(data)
        ChartValues.model_validate(data)
    assert list(v.iter_errors({"imagee": {}}))
    assert list(v.iter_errors({"image": {"repo": "x"}}))
    assert list(v.iter_errors({"deployments": [{"name": "a", "spec": {"engine": {"name": "vllm"}, "bogus": 1}}]}))


def test_values_schema_uses_the_crd_spec_schema():
    from gpustack_k3.crd.manifest import spec_jsonschema

    spec = values_schema()["properties"]["deployments"]["items"]["properties"]["spec"]
    expected = spec_jsonschema(closed=True)
    spec = {k: v for k, v in spec.items() if k != "description"}
    expected = {k: v for k, v in expected.items() if k != "description"}
    assert spec == expected


def test_values_schema_has_no_refs():
    text = json.dumps(values_schema())
    assert "$ref" not in text and "$defs" not in text


def test_dashboard_queries_only_metrics_the_operator_exports():
    from prometheus_client import CollectorRegistry

    from gpustack_k3 import metrics
    from gpustack_k3.operator import health
    exported = set()
    om = health.OperatorMetrics()
    reg = CollectorRegistry()
    metrics.ColdStartMetrics(registry=reg)

    class _EmptyStore:   # the controller registers this collector over its informer cache
        def list_keys(self):
            return []

    reg.register(health.ResourcesByPhase(_EmptyStore()))
    for r in (om.registry, reg):
        for fam in r.collect():
            for s in fam.samples:
                exported.add(s.name)
            exported.add(fam.name)
            if fam.type == "histogram":
                exported |= {f"{fam.name}_bucket", f"{fam.name}_sum", f"{fam.name}_count"}
            if fam.type == "counter":
                exported.add(f"{fam.name}_total")
    used = set()
    for panel in dashboard()["panels"]:
        for t in panel["targets"]:
            used |= {m for m in re.findall(r"\b(gpustack_k3_[a-z0-9_]+)", t["expr"])}
    assert used and used <= exported, sorted(used - exported)


def test_find_helm_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUSTACK_K3_HELM", str(tmp_path / "nope"))
    with pytest.raises(HelmError, match="GPUSTACK_K3_HELM"):
        find_helm()
    monkeypatch.delenv("GPUSTACK_K3_HELM")
    monkeypatch.setenv("GPUSTACK_K3_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HelmError, match="setup_helm.sh"):
        find_helm()


def test_generate_check_without_helm_exits_2_saying_helm_is_needed(tmp_path):
    """`tools/generate.py --check` cannot check manifests/install.yaml without helm: it must not report
    "up to date" (exit 0) after a partial check, nor write anything."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GPUSTACK_K3_HELM"}
    env.update(GPUSTACK_K3_CACHE=str(tmp_path), PATH=str(tmp_path), PYTHONPATH=str(REPO_ROOT))
    before = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"], capture_output=True, text=True)
    res = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "generate.py"), "--check"], capture_output=True,
                         text=True, env=env, timeout=300, check=False)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "helm not found" in res.stderr and "install.yaml cannot be generated or checked without helm" in res.stderr
    assert ".ci/setup_helm.sh" in res.stderr and "up to date" not in res.stdout + res.stderr
    after = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"], capture_output=True, text=True)
    assert after.stdout == before.stdout


def test_setup_helm_script_is_valid_bash():
    script = REPO_ROOT / ".ci" / "setup_helm.sh"
    assert script.stat().st_mode & 0o111, "setup_helm.sh must be executable"
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_chart_metadata():
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "gpustack-k3"
    from gpustack_k3.crd.manifest import crd_manifest

    assert yaml.safe_load(chart_generated_files()[CRD_FILE]) == crd_manifest()
    assert Path(CHART_DIR / "templates" / "NOTES.txt").is_file()
