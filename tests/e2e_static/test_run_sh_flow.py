"""The control flow of e2e/kind/run.sh --engine, run here with stand-ins for kind/kubectl/helm/docker
(tests/e2e_static/_fake_tools.py): the order of the steps, the arguments that matter (cluster config
with the registry patch, operator image side-loaded and pinned with pullPolicy Never, engine image pushed
to the cluster-local registry and named in the applied resource, model staged on the node, teardown of
cluster and registry), the verdict on status.coldStart (e2e/kind/k3status.py, fed with the status the
operator writes for a real recorded start-up) and the refusal path. What the real tools do is only
checked on a kind machine (e2e/kind/test_kind_engine.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ._paths import REPO, RUN_SH
from .test_kind_status_check import _status_from_log

FAKE = Path(__file__).resolve().parent / "_fake_tools.py"


def _run(tmp_path: Path, cr: dict, args: tuple[str, ...] = ("--engine",),
         **extra_env: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bindir, state, out = tmp_path / "bin", tmp_path / "state", tmp_path / "out"
    for d in (bindir, state, out):
        d.mkdir()
    for tool in ("kind", "kubectl", "helm", "docker"):
        exe = bindir / tool
        exe.write_text(f'#!/bin/sh\nFAKE_TOOL={tool} exec "{sys.executable}" "{FAKE}" "$@"\n')
        exe.chmod(0o755)
    crfile = tmp_path / "cr.json"
    crfile.write_text(json.dumps(cr))
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "FAKE_LOG": str(log),
           "FAKE_STATE": str(state), "FAKE_CR": str(crfile), "GPUSTACK_K3_HELM": str(bindir / "helm"),
           "GPUSTACK_K3_E2E_OUT": str(out), "PYTHON": sys.executable, "TMPDIR": str(tmp_path),
           "GPUSTACK_K3_E2E_POLL_S": "0.1", "GPUSTACK_K3_E2E_STATUS_TRIES": "2", **extra_env}
    res = subprocess.run(["bash", str(RUN_SH), *args], capture_output=True, text=True, timeout=120,
                         check=False, env=env, cwd=REPO)
    calls = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    return res, calls


def _index(calls, pred) -> int:
    for i, c in enumerate(calls):
        if pred(c):
            return i
    raise AssertionError("no such call; calls were:\n" + "\n".join(" ".join(c) for c in calls))


@pytest.fixture(scope="module")
def ready_cr() -> dict:
    cr = _status_from_log("vllm-0.32.0-cpu-eager.log", "Ready")
    cr.update(apiVersion="k3.gpustack.ai/v1alpha1", kind="K3Deployment")
    return cr


def test_engine_flow_reaches_e2e_ok(tmp_path, ready_cr):
    res, calls = _run(tmp_path, ready_cr)
    assert res.returncode == 0 and res.stdout.strip().endswith("E2E OK"), res.stderr[-4000:]
    builds = [c for c in calls if c[:2] == ["docker", "build"]]
    assert [b[3] for b in builds] == ["gpustack-k3:e2e", "local/vllm-cpu:0.32.0"]
    assert all("BASE_IMAGE=python:3.11-slim" in b for b in builds)
    create = _index(calls, lambda c: c[:3] == ["kind", "create", "cluster"])
    load = _index(calls, lambda c: c[:3] == ["kind", "load", "docker-image"] and "gpustack-k3:e2e" in c)
    helm = _index(calls, lambda c: c[:2] == ["helm", "install"])
    assert max(i for i, c in enumerate(calls) if c[:2] == ["docker", "build"]) < create < load < helm
    h = calls[helm]
    assert {"image.repository=gpustack-k3", "image.tag=e2e", "image.pullPolicy=Never"} <= set(h)
    reg = _index(calls, lambda c: c[:2] == ["docker", "run"] and "gpustack-k3-e2e-registry" in c)
    assert calls[reg][calls[reg].index("--network") + 1] == "kind"
    assert "127.0.0.1:5001:5000" in calls[reg] and "registry:2" in calls[reg]
    hosts = _index(calls, lambda c: c[0] == "docker" and any("certs.d/localhost:5001/hosts.toml" in a for a in c))
    push = _index(calls, lambda c: c[:2] == ["docker", "push"])
    assert calls[push][2] == "localhost:5001/gpustack-k3/vllm-cpu:0.32.0"
    stage = _index(calls, lambda c: c[:2] == ["docker", "cp"] and c[2] == "cid0123:/models")
    untar = _index(calls, lambda c: c[:3] == ["docker", "exec", "-i"] and c[-3:] == ["-x", "-C", "/"])
    apply = _index(calls, lambda c: c[:1] == ["kubectl"] and "apply" in c and "k3-e2e-engine" in c)
    assert reg < hosts < push < apply
    assert push < min(stage, untar) and max(stage, untar) < apply    # the two ends of one pipe
    applied = yaml.safe_load((tmp_path / "state" / "applied-engine.yaml").read_text())
    assert applied["spec"]["engine"]["image"] == calls[push][2]
    assert applied["metadata"]["name"] == "smollm2-cpu"
    ex = _index(calls, lambda c: c[:2] == ["kubectl", "exec"])
    assert apply < ex
    after = calls[ex + 1:]
    assert ["kind", "delete", "cluster", "--name", "gpustack-k3-e2e"] in after
    assert ["docker", "rm", "-f", "gpustack-k3-e2e-registry"] in after
    out = tmp_path / "out"
    assert json.loads((out / "smollm2-cpu.json").read_text()) == ready_cr
    assert json.loads((out / "completion.json").read_text())["choices"][0]["text"] == " Paris."


def test_engine_flow_fails_on_a_status_without_coldstart_phases(tmp_path, ready_cr):
    cr = json.loads(json.dumps(ready_cr))
    cr["status"]["coldStart"]["phases"] = [p for p in cr["status"]["coldStart"]["phases"] if p["name"] != "kv_cache"]
    res, calls = _run(tmp_path, cr)
    assert res.returncode == 1 and "E2E OK" not in res.stdout
    assert "status.coldStart.phases has no 'kv_cache'" in res.stderr
    assert "status.coldStart of smollm2-cpu is not what a served cold start reports" in res.stderr
    assert not any(c[:2] == ["kubectl", "exec"] for c in calls)
    assert any(c[:3] == ["kind", "delete", "cluster"] for c in calls)          # torn down anyway
    assert (tmp_path / "out" / "operator.log").exists()                      # diagnostics collected


def test_chart_flow_without_engine_is_unchanged(tmp_path, ready_cr):
    """Issue 4's e2e (no --engine): presets applied, the invalid example refused, nothing built or pushed."""
    res, calls = _run(tmp_path, ready_cr, ())
    assert res.returncode == 0 and res.stdout.strip().endswith("E2E OK"), res.stderr[-4000:]
    assert not any(c[:2] in (["docker", "build"], ["docker", "push"], ["docker", "run"]) for c in calls)
    assert not any(c[:2] == ["kubectl", "exec"] for c in calls)
    applied = int((tmp_path / "state" / "applied").read_text())
    from gpustack_k3.catalog import load_catalog

    assert applied == len(load_catalog().presets)          # run.sh applies every preset as a K3Deployment
    assert any(c[:2] == ["kubectl", "apply"] and any("/invalid-" in a for a in c) for c in calls)
    assert calls[-1][:3] == ["kind", "delete", "cluster"]


def test_preflight_engine_passes_with_the_tools_present(tmp_path, ready_cr):
    res, calls = _run(tmp_path, ready_cr, ("--preflight", "--engine"))
    assert res.returncode == 0 and "preflight ok (engine)" in res.stderr, res.stderr
    assert not any(c[:2] == ["kind", "create"] for c in calls)
    assert ["docker", "image", "inspect", "registry:2"] in calls


def test_preflight_engine_skips_on_a_small_host(tmp_path, ready_cr):
    res, _calls = _run(tmp_path, ready_cr, ("--preflight", "--engine"), FAKE_DOCKER_INFO="2 4294967296")
    assert res.returncode == 3, res.stderr
    assert re.search(r"PREFLIGHT: the engine pod rendered for smollm2-cpu.yaml requests [0-9.]+ CPU / \d+ GiB",
                     res.stderr), res.stderr
    assert "this docker host has 2 CPU / 4.0 GiB" in res.stderr
