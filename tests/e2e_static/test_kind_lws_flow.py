"""The control flow of e2e/kind/lws.sh, run here with stand-ins for kind, kubectl and docker (written below):
the preflight's skip path, the LWS manifests applied server-side before anything else, the wait for the
controller, one server dry run per rendered file (3 topology presets x 2 forms, each file the product's render)
into the namespaces they name, the retry while the webhooks are not serving yet, a refusal named with its file,
and the teardown. What the real API server and LWS say is only checked on a kind machine
(e2e/kind/test_kind_lws.py); the same objects are checked offline against the CRD files by
tools/check_lws_crds.py (tests/tooling/test_check_lws_crds.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ._paths import LWS_SH, REPO

PREFLIGHT_MISSING = 3
FAKE = """
import json, os, sys, yaml
from pathlib import Path
tool, args = os.environ["FAKE_TOOL"], sys.argv[1:]
state = Path(os.environ["FAKE_STATE"])
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps([tool, *args]) + "\\n")
if tool == "kind" and args[:2] == ["create", "cluster"]:
    Path(args[args.index("--kubeconfig") + 1]).write_text("apiVersion: v1\\nkind: Config\\n")
if tool == "kubectl" and args[:1] == ["apply"] and "--dry-run=server" in args:
    n = state / "dry-runs"
    k = int(n.read_text()) + 1 if n.exists() else 1
    n.write_text(str(k))
    if k <= int(os.environ.get("FAKE_WEBHOOK_DOWN", "0")):
        print('Error from server (InternalError): failed calling webhook "vleaderworkerset.kb.io"', file=sys.stderr)
        sys.exit(1)
    for o in yaml.safe_load_all(open(args[args.index("-f") + 1])):
        group = o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else ""
        res = o["kind"].lower() + (f".{group}" if group else "")
        if f'{o["kind"]}/{o["metadata"]["name"]}' == os.environ.get("FAKE_REFUSE"):
            print(f'The {o["kind"]} "{o["metadata"]["name"]}" is invalid: spec.x: Unsupported value', file=sys.stderr)
            sys.exit(1)
        print(f'{res}/{o["metadata"]["name"]} serverside-applied (server dry run)')
"""


def _run(tmp_path: Path, *args: str, **extra_env: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bindir, state = tmp_path / "bin", tmp_path / "state"
    bindir.mkdir()
    state.mkdir()
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE)
    for tool in ("kind", "kubectl", "docker"):
        exe = bindir / tool
        exe.write_text(f'#!/bin/sh\nFAKE_TOOL={tool} exec "{sys.executable}" "{fake}" "$@"\n')
        exe.chmod(0o755)
    manifests = tmp_path / "manifests.yaml"
    manifests.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: lws-system}\n")
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "FAKE_LOG": str(log),
           "FAKE_STATE": str(state), "PYTHON": sys.executable, "TMPDIR": str(tmp_path),
           "GPUSTACK_K3_LWS_MANIFESTS": str(manifests), "PYTHONPATH": str(REPO), **extra_env}
    env.pop("GPUSTACK_K3_KIND_KEEP", None)
    res = subprocess.run(["bash", str(LWS_SH), *args], capture_output=True, text=True, timeout=300, check=False,
                         env=env, cwd=REPO)
    calls = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    return res, calls


def test_the_flow_installs_lws_then_dry_runs_every_rendered_file(tmp_path):
    res, calls = _run(tmp_path, FAKE_WEBHOOK_DOWN="2")
    assert res.returncode == 0 and res.stdout.strip() == "LWS E2E OK", res.stderr
    kubectl = [c[1:] for c in calls if c[0] == "kubectl"]
    install = kubectl[0]
    assert install[:2] == ["apply", "--server-side"] and install[-1].endswith("lws-manifests.yaml")
    assert ["-n", "lws-system", "rollout", "status", "deploy/lws-controller-manager", "--timeout=300s"] in kubectl
    assert ["create", "namespace", "kimi-k3"] in kubectl
    upstream = next(c for c in kubectl if c[:2] == ["apply", "--server-side"] and "--dry-run=server" not in c
                    and any(a.endswith("resource.nvidia.com_computedomains.yaml") for a in c))
    assert any(a.endswith("inference.networking.k8s.io_inferencepools.yaml") for a in upstream), upstream
    assert kubectl.index(upstream) < min(i for i, c in enumerate(kubectl) if "--dry-run=server" in c)
    dry = [c for c in kubectl if "--dry-run=server" in c]
    files = [Path(c[-1]).name for c in dry]
    from gpustack_k3.catalog import load_catalog

    topology = [n for n, pr in load_catalog().presets.items() if pr.document["spec"].get("roles")]
    assert len(topology) >= 5 and len(dry) == 2 * len(topology) + 2, files   # two retries while the webhooks were not serving
    assert sorted(set(files)) == sorted(f"{p}--{f}.yaml" for p in topology for f in ("leaderworkerset", "disaggregatedset"))
    assert all(c[:3] == ["apply", "--server-side", "--dry-run=server"] for c in dry)
    assert calls[-1][:3] == ["kind", "delete", "cluster"]
    assert "disaggregatedset.disaggregatedset.x-k8s.io/kimi-k3-1p1d serverside-applied" in res.stderr


def test_the_dry_run_files_are_the_products_render(tmp_path):
    out = tmp_path / "rendered"
    r = subprocess.run([sys.executable, str(REPO / "tools" / "check_lws_crds.py"), "--write-rendered", str(out)],
                       capture_output=True, text=True, check=False, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.render.targets import render_topology_targets

    doc = DeploymentDocument.model_validate(load_catalog().presets["kimi-k3-b300-1p1d"].document)
    files, _, _ = render_topology_targets(doc, ("kubernetes",), namespace=doc.metadata.namespace,
                                          form="disaggregatedset")
    assert (out / "kimi-k3-b300-1p1d--disaggregatedset.yaml").read_text() == files["kubernetes"]["kubernetes.yaml"]
    kinds = [o["kind"] for o in yaml.safe_load_all((out / "kimi-k3-b300-1p1d--leaderworkerset.yaml").read_text())]
    assert kinds.count("LeaderWorkerSet") == 2


def test_a_refused_object_fails_naming_its_file(tmp_path):
    res, calls = _run(tmp_path, FAKE_REFUSE="DisaggregatedSet/dsv41-flash-7p1d")
    assert res.returncode == 1
    assert "FAIL: dsv41-flash-gb300-7p1d--disaggregatedset.yaml was refused by the API server" in res.stderr
    assert 'The DisaggregatedSet "dsv41-flash-7p1d" is invalid' in res.stderr
    assert calls[-1][:3] == ["kind", "delete", "cluster"]


def test_preflight_skips_with_a_reason_and_refuses_bad_usage(tmp_path):
    missing = tmp_path / "nowhere.yaml"
    res, _ = _run(tmp_path, "--preflight", GPUSTACK_K3_LWS_MANIFESTS=str(missing))
    assert res.returncode == PREFLIGHT_MISSING and f"PREFLIGHT: LWS manifests file {missing} does not exist" in res.stderr
    res = subprocess.run(["bash", str(LWS_SH), "--bogus"], capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 2 and "usage:" in res.stderr
