"""checkov (offline) over the chart's rendered output, with no check skipped on the command line: every
check passes except the ones the chart itself skips (``checkov.io/skipN`` annotations on the operator's
Deployment, templates/deployment.yaml), each with its written reason, and only where it applies.
checkov lives in its own venv (.ci/setup_checkov.sh)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from tests.support import tiers
from tools.chart import CHART_DIR, default_values, helm_template

pytestmark = [pytest.mark.helm, pytest.mark.tools]

NAMESPACE = "k3"   # not the chart's default namespace: checkov has no say on it either way


def expected_skips(values: dict) -> set[str]:
    """The checks the chart skips for these values (the reason is in the chart, next to the skip)."""
    image = {**default_values()["image"], **(values.get("image") or {})}
    out = {"CKV_K8S_38"}                     # the operator needs its service-account token
    if not image["digest"]:
        out.add("CKV_K8S_43")                # no digest before the image is published
        if image["pullPolicy"] != "Always":
            out.add("CKV_K8S_15")            # IfNotPresent for an unmoved release tag
    return out


def run_checkov(tmp_path, text: str) -> list[dict]:
    (tmp_path / "chart.yaml").write_text(text, encoding="utf-8")
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    res = subprocess.run([tiers.checkov(), "-d", str(tmp_path), "--framework", "kubernetes", "--skip-download",
                          "--compact", "-o", "json"], capture_output=True, text=True, timeout=300, env=env, check=False)
    assert res.stdout.strip(), res.stderr[-2000:]
    report = json.loads(res.stdout)
    return report if isinstance(report, list) else [report]


@pytest.mark.parametrize("values", [None, "namespace-scope-values.yaml", "monitoring-values.yaml",
                                    "pull-always"])
def test_checkov_passes_with_the_charts_written_skips(helm_bin, tmp_path, values):
    if values == "pull-always":
        vf, sets, vals = [], ["image.pullPolicy=Always"], {"image": {"pullPolicy": "Always"}}
    else:
        vf = [CHART_DIR / "ci" / values] if values else []
        sets, vals = [], (yaml.safe_load(vf[0].read_text()) if vf else {})
    text = helm_template(CHART_DIR, values_files=vf, set_values=sets, namespace=NAMESPACE, include_crds=False)
    reports = run_checkov(tmp_path, text)
    results = [r.get("results", {}) for r in reports]
    failed = [(c["check_id"], c["check_name"], c["resource"]) for r in results for c in r.get("failed_checks", [])]
    assert not failed, failed
    skipped = [c for r in results for c in r.get("skipped_checks", [])]
    assert {c["check_id"] for c in skipped} == expected_skips(vals)
    for c in skipped:
        assert c["resource"].startswith(f"Deployment.{NAMESPACE}."), c["resource"]
        assert len(c["check_result"]["suppress_comment"]) > 80, (c["check_id"], c["check_result"])
    passed = sum(r.get("summary", {}).get("passed", 0) for r in reports)
    assert passed > 50, "checkov checked (almost) nothing"


def test_the_skips_are_needed(helm_bin, tmp_path):
    """Without the chart's annotations exactly those checks fail: each skip hides a real finding, not a
    check that would pass anyway."""
    text = helm_template(CHART_DIR, namespace=NAMESPACE, include_crds=False)
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        ann = (d.get("metadata") or {}).get("annotations") or {}
        for k in [k for k in ann if k.startswith("checkov.io/skip")]:
            del ann[k]
    reports = run_checkov(tmp_path, yaml.safe_dump_all(docs, sort_keys=False))
    failed = {c["check_id"] for r in reports for c in r.get("results", {}).get("failed_checks", [])}
    assert failed == expected_skips({})
