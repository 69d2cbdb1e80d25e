"""The K3Deployment the kind e2e applies (e2e/kind/smollm2-cpu.yaml): it is the CPU preset with only the
kind-specific fields changed, validates, is admitted by the CRD (schema and CEL, evaluated as the API
server would), renders for Kubernetes into objects that pass kubernetes-validate --strict 1.30, and
the rendered pod is what the engine image and a kind node can run. Plus e2e/kind/fits.py, which the
preflight uses to skip where the rendered pod cannot be scheduled."""
from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from ._paths import CHART, KIND_CR, KIND_DIR, REPO

# The only fields the kind resource may change relative to the preset, and why (e2e/kind/smollm2-cpu.yaml).
KIND_OVERRIDES = {("engine", "image"), ("serving", "host")}
K8S_VERSION = "1.30"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpustack_k3", *args], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO)


def _cr() -> dict:
    return yaml.safe_load(KIND_CR.read_text())


def _diff(a, b, path=()) -> set[tuple[str, ...]]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: set[tuple[str, ...]] = set()
        for k in set(a) | set(b):
            out |= _diff(a.get(k), b.get(k), (*path, k))
        return out
    return set() if a == b else {path}


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    res = _cli("render", str(KIND_CR), "--target", "kubernetes")
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def test_is_the_cpu_preset_with_only_the_kind_overrides():
    res = _cli("presets", "--show", "vllm-cpu-smollm2")
    assert res.returncode == 0, res.stderr
    preset, cr = yaml.safe_load(res.stdout), _cr()
    assert cr["metadata"]["name"] == preset["metadata"]["name"]
    assert _diff(preset["spec"], cr["spec"]) == KIND_OVERRIDES
    assert cr["spec"]["serving"]["host"] == "0.0.0.0"
    assert cr["spec"]["engine"]["image"].startswith("localhost:")   # the cluster-local registry of run.sh


def test_validates_without_errors():
    res = _cli("validate", str(KIND_CR))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ERROR" not in res.stdout + res.stderr


def test_admitted_by_the_crd_schema_and_cel():
    import celpy  # noqa: F401 - a test dependency: missing means failed
    import jsonschema

    from tests.support import celeval
    crds = [d for p in sorted((CHART / "crds").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
    (crd,) = [d for d in crds if d["spec"]["names"]["kind"] == "K3Deployment"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    cr = _cr()
    # OpenAPI v3.0 schemas use draft-4 keywords (boolean exclusiveMinimum)
    errors = list(jsonschema.Draft4Validator(schema["properties"]["spec"]).iter_errors(cr["spec"]))
    assert errors == [], [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors]
    failing = celeval.evaluate(crd, cr)
    assert failing == [], [(r.path, r.message, r.error) for r in failing]
    # the same evaluation refuses a broken variant: the check above can fail
    bad = copy.deepcopy(cr)
    bad["spec"]["parallel"]["dcp"] = 2   # DCP 2 does not divide TP 1 (on a CPU build TP 2 is two CPU workers: allowed)
    assert celeval.evaluate(crd, bad)


def test_rendering_passes_kubernetes_validate_strict(rendered):
    import kubernetes_validate as kv
    assert {o["kind"] for o in rendered} >= {"Service", "Deployment"}
    for o in rendered:
        try:
            kv.validate(o, K8S_VERSION, strict=True)
        except kv.ValidationError as exc:
            pytest.fail(f"{o['kind']}/{o['metadata']['name']}: {'.'.join(map(str, exc.path))}: {exc.message}")


def test_rendered_pod_runs_on_kind(rendered):
    cr = _cr()
    (wl,) = [o for o in rendered if o["kind"] in ("Deployment", "StatefulSet")]
    assert wl["kind"] == "Deployment"                  # no per-pod claim: nothing a kind node lacks
    pod = wl["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == cr["spec"]["engine"]["image"]
    args = c["args"]
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert args[args.index("--model") + 1] == cr["spec"]["model"]["path"]
    port = next(p["containerPort"] for p in c["ports"] if p["name"] == "http")
    assert port == 8000 and c["startupProbe"]["httpGet"]["port"] == "http"
    reqs = set((c.get("resources") or {}).get("requests") or {}) | set((c.get("resources") or {}).get("limits") or {})
    assert reqs <= {"cpu", "memory"}, f"a kind node has no extended resources: {reqs}"
    assert not pod.get("nodeSelector") and not pod.get("tolerations")
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    # run.sh stages the image's /models onto the node for this hostPath
    assert vols["model"]["hostPath"]["path"] == "/models" and mounts["model"] == "/models"
    assert cr["spec"]["model"]["path"].startswith(mounts["model"] + "/")
    assert "emptyDir" in vols["compile-cache"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HOME"].startswith(mounts["scratch"])   # the read-only root filesystem stays untouched


def _fits(cr_path, ncpu: int, mem: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(KIND_DIR / "fits.py"), str(cr_path)], input=f"{ncpu} {mem}\n",
                          capture_output=True, text=True, timeout=120, check=False, cwd=REPO)


def test_fits_reports_why_the_pod_does_not_fit(rendered):
    (wl,) = [o for o in rendered if o["kind"] == "Deployment"]
    req = wl["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    from kubernetes.utils import parse_quantity

    cpu, mem = float(parse_quantity(req["cpu"])), int(parse_quantity(req["memory"]))
    small = _fits(KIND_CR, int(cpu), mem)              # the control plane needs its share too
    assert small.returncode == 1
    assert f"requests {cpu:g} CPU / {mem / (1 << 30):.0f} GiB" in small.stdout
    big = _fits(KIND_CR, int(cpu) + 2, mem + (2 << 30))
    assert big.returncode == 0, big.stdout + big.stderr


def test_fits_refuses_bad_input(tmp_path):
    assert _fits(KIND_CR, 0, 0).returncode in (1,)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: k3.gpustack.ai/v1alpha1\nkind: K3Deployment\nmetadata: {name: x}\nspec: {engine: {name: nope}}\n")
    res = _fits(bad, 64, 1 << 40)
    assert res.returncode == 2 and "cannot render" in res.stdout and "Traceback" not in res.stdout + res.stderr
    res = subprocess.run([sys.executable, str(KIND_DIR / "fits.py"), str(KIND_CR)], input="garbage",
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and "NCPU" in res.stdout
